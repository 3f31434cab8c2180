//! Role bindings and authentication settings: validation and lookup.
//!
//! Flow: the policy's `roles` and `auth` --[`RoleIndex::compile`]-->
//! [`RoleIndex`]; the sidecar authenticates a caller (issuer, subject,
//! groups, service account) and asks [`RoleIndex::role_for`] for its role.
//! No match is `None`: authenticated but unmapped, which gets nothing.
//!
//! Identity is issuer-qualified: `alice` of one issuer is not `alice` of
//! another, and a group claimed in one issuer's token counts only for
//! bindings on that issuer. The issuers are the configured JWT issuers (by
//! `issuer`), the service-account issuer, and `static` for static tokens. A
//! binding names its issuer; it may leave it out only when the policy
//! accepts exactly one, which it then means. `serviceAccounts` always
//! belong to the service-account issuer.
//!
//! Rules checked: every binding names at least one subject, group or
//! service account; no empty names; a binding's issuer is one the policy
//! accepts (and is named when there are several); service accounts are
//! `namespace/name`; one subject, group or service account is not bound to
//! two different roles (ambiguity is an error, not "highest wins"); static
//! token hashes are 64 hex digits, unique, with a subject; JWT issuers are
//! unique, not `static`, have at least one audience, a JWKS file and a
//! clock skew of at most 300 s; service-account tokens have an issuer and
//! a JWKS file. A caller matching bindings through *different* names (its
//! subject and a group) gets the highest of those roles.

use std::collections::HashMap;

use mcp_warden_crds::policy::{AuthConfig, Role, RoleBinding, STATIC_ISSUER};

use crate::error::ConfigError;

/// Who gets which role, indexed by issuer, then name (looked up per call
/// without allocating).
#[derive(Debug, Clone, Default)]
pub struct RoleIndex {
    anonymous: Option<Role>,
    subjects: HashMap<String, HashMap<String, Role>>,
    groups: HashMap<String, HashMap<String, Role>>,
    service_accounts: HashMap<String, Role>,
}

/// The issuers a policy accepts tokens from, in a stable order.
pub fn issuers(auth: &AuthConfig) -> Vec<&str> {
    let mut out = Vec::new();
    if auth.static_tokens.is_some() {
        out.push(STATIC_ISSUER);
    }
    out.extend(auth.jwt.iter().map(|j| j.issuer.as_str()));
    if let Some(sa) = &auth.service_account_tokens {
        out.push(sa.issuer.as_str());
    }
    // Callers a trusted gateway vouches for keep their own issuer.
    for g in &auth.gateways {
        for issuer in &g.caller_issuers {
            if !out.contains(&issuer.as_str()) {
                out.push(issuer.as_str());
            }
        }
    }
    out
}

impl RoleIndex {
    /// Validate and index `roles` and `auth`.
    pub(crate) fn compile(
        roles: &[RoleBinding],
        auth: &AuthConfig,
        errors: &mut Vec<ConfigError>,
    ) -> RoleIndex {
        let mut idx = RoleIndex {
            anonymous: auth.anonymous.as_ref().map(|a| a.role),
            ..Default::default()
        };
        let accepted = issuers(auth);
        for (i, b) in roles.iter().enumerate() {
            let at = format!("roles[{i}]");
            if b.subjects.is_empty() && b.groups.is_empty() && b.service_accounts.is_empty() {
                errors.push(ConfigError::invalid(
                    &at,
                    "binds nobody: give subjects, groups or serviceAccounts",
                ));
            }
            let named = !b.subjects.is_empty() || !b.groups.is_empty();
            let issuer = match (&b.issuer, accepted.as_slice()) {
                (Some(issuer), _) if accepted.contains(&issuer.as_str()) => issuer.clone(),
                // A trusted gateway's own issuer names the gateway itself:
                // bound only where a binding says so.
                (Some(issuer), _) if auth.gateways.iter().any(|g| &g.issuer == issuer) => {
                    issuer.clone()
                }
                (Some(issuer), _) => {
                    errors.push(ConfigError::invalid(
                        format!("{at}.issuer"),
                        format!(
                            "{issuer:?} is not an issuer this policy accepts ({})",
                            list_or_none(&accepted)
                        ),
                    ));
                    continue;
                }
                (None, [only]) => only.to_string(),
                (None, many) if named && many.len() > 1 => {
                    errors.push(ConfigError::invalid(
                        format!("{at}.issuer"),
                        format!(
                            "name the issuer of these subjects and groups: this policy accepts tokens from {}",
                            list_or_none(many)
                        ),
                    ));
                    continue;
                }
                // No issuer to bind to: the names can never match a caller.
                (None, _) => String::new(),
            };
            for (field, names) in [
                ("subjects", &b.subjects),
                ("groups", &b.groups),
                ("serviceAccounts", &b.service_accounts),
            ] {
                for (j, name) in names.iter().enumerate() {
                    let at = format!("{at}.{field}[{j}]");
                    if name.trim().is_empty() {
                        errors.push(ConfigError::invalid(at, "must not be empty"));
                        continue;
                    }
                    if field == "serviceAccounts" && !is_namespaced(name) {
                        errors.push(ConfigError::invalid(
                            at,
                            format!("{name:?} must be namespace/name"),
                        ));
                        continue;
                    }
                    let map = match field {
                        "subjects" => idx.subjects.entry(issuer.clone()).or_default(),
                        "groups" => idx.groups.entry(issuer.clone()).or_default(),
                        _ => &mut idx.service_accounts,
                    };
                    match map.get(name) {
                        Some(r) if *r != b.role => errors.push(ConfigError::invalid(
                            at,
                            format!("{name:?} is bound to two different roles"),
                        )),
                        _ => {
                            map.insert(name.clone(), b.role);
                        }
                    }
                }
            }
        }
        check_auth(auth, errors);
        idx
    }

    /// The role of an authenticated caller: the highest role bound to its
    /// subject or any of its groups on its issuer, or to its service
    /// account (`namespace/name`).
    pub fn role_for<'g>(
        &self,
        issuer: &str,
        subject: &str,
        groups: impl IntoIterator<Item = &'g str>,
        service_account: Option<&str>,
    ) -> Option<Role> {
        let mut best = self
            .subjects
            .get(issuer)
            .and_then(|m| m.get(subject))
            .copied();
        if let Some(bound) = self.groups.get(issuer) {
            for g in groups {
                best = best.max(bound.get(g).copied());
            }
        }
        if let Some(sa) = service_account {
            best = best.max(self.service_accounts.get(sa).copied());
        }
        best
    }

    /// The role of callers without a token, if anonymous access is on.
    pub fn anonymous(&self) -> Option<Role> {
        self.anonymous
    }
}

fn list_or_none(issuers: &[&str]) -> String {
    if issuers.is_empty() {
        "none is configured under auth".to_string()
    } else {
        issuers.join(", ")
    }
}

fn is_namespaced(s: &str) -> bool {
    matches!(s.split_once('/'), Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/'))
}

fn check_auth(auth: &AuthConfig, errors: &mut Vec<ConfigError>) {
    if let Some(st) = &auth.static_tokens {
        if st.file.as_deref().is_some_and(|f| f.trim().is_empty()) {
            errors.push(ConfigError::invalid(
                "auth.staticTokens.file",
                "must not be empty",
            ));
        }
        for (i, t) in st.tokens.iter().enumerate() {
            let at = format!("auth.staticTokens.tokens[{i}]");
            if t.sha256.len() != 64 || !t.sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
                errors.push(ConfigError::invalid(
                    format!("{at}.sha256"),
                    "must be 64 hex digits (the sha256 of the token)",
                ));
            } else if st.tokens[..i]
                .iter()
                .any(|o| o.sha256.eq_ignore_ascii_case(&t.sha256))
            {
                errors.push(ConfigError::invalid(
                    format!("{at}.sha256"),
                    "duplicate token hash",
                ));
            }
            if t.subject.trim().is_empty() {
                errors.push(ConfigError::invalid(
                    format!("{at}.subject"),
                    "must not be empty",
                ));
            }
        }
    }
    for (i, f) in auth
        .static_tokens
        .iter()
        .flat_map(|st| &st.token_files)
        .enumerate()
    {
        let at = format!("auth.staticTokens.tokenFiles[{i}]");
        if f.path.trim().is_empty() {
            errors.push(ConfigError::invalid(
                format!("{at}.path"),
                "must not be empty",
            ));
        }
        if f.subject.trim().is_empty() {
            errors.push(ConfigError::invalid(
                format!("{at}.subject"),
                "must not be empty",
            ));
        }
    }
    for (i, j) in auth.jwt.iter().enumerate() {
        let at = format!("auth.jwt[{i}]");
        if j.issuer.trim().is_empty() {
            errors.push(ConfigError::invalid(
                format!("{at}.issuer"),
                "must not be empty",
            ));
        } else if j.issuer == STATIC_ISSUER
            || auth.jwt[..i].iter().any(|o| o.issuer == j.issuer)
            || auth
                .service_account_tokens
                .as_ref()
                .is_some_and(|sa| sa.issuer == j.issuer)
        {
            errors.push(ConfigError::invalid(
                format!("{at}.issuer"),
                format!(
                    "{:?} names another issuer too (issuers must be distinct, and {STATIC_ISSUER:?} means static tokens)",
                    j.issuer
                ),
            ));
        }
        if j.jwks_file.trim().is_empty() {
            errors.push(ConfigError::invalid(
                format!("{at}.jwksFile"),
                "must not be empty",
            ));
        }
        if j.clock_skew_seconds.is_some_and(|s| s > 300) {
            errors.push(ConfigError::invalid(
                format!("{at}.clockSkewSeconds"),
                "must be at most 300",
            ));
        }
    }
    crate::login::check(auth, errors);
    if let Some(sa) = &auth.service_account_tokens {
        if sa.issuer.trim().is_empty() {
            errors.push(ConfigError::invalid(
                "auth.serviceAccountTokens.issuer",
                "must not be empty",
            ));
        }
        if sa.jwks_file.trim().is_empty() {
            errors.push(ConfigError::invalid(
                "auth.serviceAccountTokens.jwksFile",
                "must not be empty",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::policy::{JwtIssuer, StaticToken, StaticTokenFile, StaticTokens};

    fn bind(role: Role, subjects: &[&str], groups: &[&str], sas: &[&str]) -> RoleBinding {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        RoleBinding {
            role,
            issuer: None,
            subjects: s(subjects),
            groups: s(groups),
            service_accounts: s(sas),
        }
    }

    fn on(issuer: &str, b: RoleBinding) -> RoleBinding {
        RoleBinding {
            issuer: Some(issuer.into()),
            ..b
        }
    }

    fn jwt(issuer: &str) -> JwtIssuer {
        JwtIssuer {
            issuer: issuer.into(),
            audiences: vec!["mcp".into()],
            jwks_file: "jwks.json".into(),
            ..JwtIssuer::default()
        }
    }

    fn static_only() -> AuthConfig {
        AuthConfig {
            static_tokens: Some(StaticTokens::default()),
            ..Default::default()
        }
    }

    #[test]
    fn highest_matching_role_wins() {
        let mut errs = Vec::new();
        let idx = RoleIndex::compile(
            &[
                bind(Role::Viewer, &["alice"], &["devs"], &[]),
                bind(Role::Admin, &[], &["ops"], &["ns/bot"]),
            ],
            &static_only(),
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        let s = STATIC_ISSUER;
        assert_eq!(idx.role_for(s, "alice", [], None), Some(Role::Viewer));
        assert_eq!(idx.role_for(s, "alice", ["ops"], None), Some(Role::Admin));
        assert_eq!(idx.role_for(s, "bob", ["devs"], None), Some(Role::Viewer));
        assert_eq!(idx.role_for(s, "x", [], Some("ns/bot")), Some(Role::Admin));
        assert_eq!(
            idx.role_for(s, "mallory", ["nobody"], Some("ns/other")),
            None
        );
        assert_eq!(idx.anonymous(), None);
    }

    #[test]
    fn subjects_and_groups_belong_to_their_issuer() {
        let auth = AuthConfig {
            jwt: vec![jwt("https://corp"), jwt("https://partner")],
            ..Default::default()
        };
        let mut errs = Vec::new();
        let idx = RoleIndex::compile(
            &[
                on(
                    "https://corp",
                    bind(Role::Admin, &["alice"], &["admins"], &[]),
                ),
                on("https://partner", bind(Role::Viewer, &["alice"], &[], &[])),
            ],
            &auth,
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            idx.role_for("https://corp", "alice", [], None),
            Some(Role::Admin)
        );
        assert_eq!(
            idx.role_for("https://partner", "alice", [], None),
            Some(Role::Viewer)
        );
        assert_eq!(
            idx.role_for("https://partner", "mallory", ["admins"], None),
            None
        );
        assert_eq!(
            idx.role_for("https://corp", "mallory", ["admins"], None),
            Some(Role::Admin)
        );
    }

    #[test]
    fn several_issuers_need_named_bindings() {
        let auth = AuthConfig {
            jwt: vec![jwt("https://corp"), jwt("https://partner")],
            ..Default::default()
        };
        let mut errs = Vec::new();
        RoleIndex::compile(
            &[
                bind(Role::Admin, &["alice"], &[], &[]),
                on("https://elsewhere", bind(Role::User, &["bob"], &[], &[])),
                // Service accounts need no issuer.
                bind(Role::User, &[], &[], &["ns/bot"]),
            ],
            &auth,
            &mut errs,
        );
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 2, "{text:?}");
        assert!(
            text[0].starts_with("roles[0].issuer: name the issuer"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("roles[1].issuer: \"https://elsewhere\" is not"),
            "{text:?}"
        );
    }

    #[test]
    fn issuers_must_be_distinct() {
        let auth = AuthConfig {
            jwt: vec![jwt("https://corp"), jwt("https://corp"), jwt(STATIC_ISSUER)],
            ..Default::default()
        };
        let mut errs = Vec::new();
        RoleIndex::compile(&[], &auth, &mut errs);
        assert_eq!(errs.len(), 2, "{errs:?}");
    }

    #[test]
    fn insane_bindings_and_auth_are_errors() {
        let mut errs = Vec::new();
        let auth = AuthConfig {
            static_tokens: Some(StaticTokens {
                file: None,
                tokens: vec![
                    StaticToken {
                        sha256: "ab".into(),
                        subject: "a".into(),
                        groups: vec![],
                    },
                    StaticToken {
                        sha256: "A".repeat(64),
                        subject: "".into(),
                        groups: vec![],
                    },
                    StaticToken {
                        sha256: "a".repeat(64),
                        subject: "c".into(),
                        groups: vec![],
                    },
                ],
                token_files: vec![StaticTokenFile {
                    path: " ".into(),
                    subject: "d".into(),
                    groups: vec![],
                }],
            }),
            ..Default::default()
        };
        RoleIndex::compile(
            &[
                bind(Role::User, &[], &[], &[]),
                bind(Role::User, &["a", ""], &[], &["bot"]),
                bind(Role::Admin, &["a"], &[], &[]),
            ],
            &auth,
            &mut errs,
        );
        // A second issuer would make the unnamed bindings above ambiguous.
        let mut more = Vec::new();
        check_auth(
            &AuthConfig {
                jwt: vec![JwtIssuer {
                    issuer: "i".into(),
                    audiences: vec![],
                    jwks_file: "f".into(),
                    clock_skew_seconds: Some(301),
                    ..JwtIssuer::default()
                }],
                ..Default::default()
            },
            &mut more,
        );
        errs.extend(more);
        let ats: Vec<String> = errs
            .iter()
            .map(|e| e.to_string().split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            ats,
            [
                "roles[0]",
                "roles[1].subjects[1]",
                "roles[1].serviceAccounts[0]",
                "roles[2].subjects[0]",
                "auth.staticTokens.tokens[0].sha256",
                "auth.staticTokens.tokens[1].subject",
                "auth.staticTokens.tokens[2].sha256",
                "auth.staticTokens.tokenFiles[0].path",
                "auth.jwt[0].clockSkewSeconds",
                "auth.jwt[0].audiences",
            ]
        );
    }

    #[test]
    fn the_gateway_itself_is_bound_only_by_name() {
        use mcp_warden_crds::TrustedGateway;
        let auth = AuthConfig {
            gateways: vec![TrustedGateway {
                issuer: "gw".into(),
                public_key_file: "gw.pub".into(),
                audience: "everything".into(),
                caller_issuers: vec![STATIC_ISSUER.into()],
                clock_skew_seconds: None,
            }],
            ..Default::default()
        };
        let me = "mcpwarden.dev/gateway:gw";
        let mut errs = Vec::new();
        let idx = RoleIndex::compile(
            &[
                on(STATIC_ISSUER, bind(Role::Admin, &[me], &[], &[])),
                on("gw", bind(Role::Viewer, &[me], &[], &[])),
            ],
            &auth,
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(idx.role_for("gw", me, [], None), Some(Role::Viewer));
        // The same subject of the callers' issuer is someone else.
        assert_eq!(idx.role_for(STATIC_ISSUER, me, [], None), Some(Role::Admin));
        // Unnamed, the gateway's issuer is still not the default one: the
        // callers' issuer is the only issuer an unnamed binding means.
        let mut errs = Vec::new();
        let idx = RoleIndex::compile(&[bind(Role::User, &["alice"], &[], &[])], &auth, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(
            idx.role_for(STATIC_ISSUER, "alice", [], None),
            Some(Role::User)
        );
        assert_eq!(idx.role_for("gw", me, [], None), None);
    }
}
