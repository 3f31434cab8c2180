//! Role bindings and authentication settings: validation and lookup.
//!
//! Flow: the policy's `roles` and `auth` --[`RoleIndex::compile`]-->
//! [`RoleIndex`]; the sidecar authenticates a caller (subject, groups,
//! service account) and asks [`RoleIndex::role_for`] for its role. No match
//! is `None`: authenticated but unmapped, which sees no tool at all.
//!
//! Rules checked: every binding names at least one subject, group or
//! service account; no empty names; service accounts are `namespace/name`;
//! one subject, group or service account is not bound to two different
//! roles (ambiguity is an error, not "highest wins"); static token hashes
//! are 64 hex digits, unique, with a subject; JWT issuers have an issuer,
//! at least one audience, a JWKS file and a clock skew of at most 300 s;
//! service-account tokens have an issuer and a JWKS file. A caller matching
//! bindings through *different* names (its subject and a group) gets the
//! highest of those roles.

use std::collections::HashMap;

use mcp_warden_crds::policy::{AuthConfig, Role, RoleBinding};

use crate::error::ConfigError;

/// Who gets which role, indexed.
#[derive(Debug, Clone, Default)]
pub struct RoleIndex {
    anonymous: Option<Role>,
    subjects: HashMap<String, Role>,
    groups: HashMap<String, Role>,
    service_accounts: HashMap<String, Role>,
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
        for (i, b) in roles.iter().enumerate() {
            let at = format!("roles[{i}]");
            if b.subjects.is_empty() && b.groups.is_empty() && b.service_accounts.is_empty() {
                errors.push(ConfigError::invalid(
                    &at,
                    "binds nobody: give subjects, groups or serviceAccounts",
                ));
            }
            for (field, names, map) in [
                ("subjects", &b.subjects, &mut idx.subjects),
                ("groups", &b.groups, &mut idx.groups),
                (
                    "serviceAccounts",
                    &b.service_accounts,
                    &mut idx.service_accounts,
                ),
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
    /// subject, any of its groups, or its service account (`namespace/name`).
    pub fn role_for<'g>(
        &self,
        subject: &str,
        groups: impl IntoIterator<Item = &'g str>,
        service_account: Option<&str>,
    ) -> Option<Role> {
        let mut best = self.subjects.get(subject).copied();
        for g in groups {
            best = best.max(self.groups.get(g).copied());
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
    for (i, j) in auth.jwt.iter().enumerate() {
        let at = format!("auth.jwt[{i}]");
        if j.issuer.trim().is_empty() {
            errors.push(ConfigError::invalid(
                format!("{at}.issuer"),
                "must not be empty",
            ));
        }
        if j.audiences.is_empty() || j.audiences.iter().any(|a| a.trim().is_empty()) {
            errors.push(ConfigError::invalid(
                format!("{at}.audiences"),
                "needs at least one non-empty audience",
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
    use mcp_warden_crds::policy::{JwtIssuer, StaticToken, StaticTokens};

    fn bind(role: Role, subjects: &[&str], groups: &[&str], sas: &[&str]) -> RoleBinding {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        RoleBinding {
            role,
            subjects: s(subjects),
            groups: s(groups),
            service_accounts: s(sas),
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
            &AuthConfig::default(),
            &mut errs,
        );
        assert!(errs.is_empty(), "{errs:?}");
        assert_eq!(idx.role_for("alice", [], None), Some(Role::Viewer));
        assert_eq!(idx.role_for("alice", ["ops"], None), Some(Role::Admin));
        assert_eq!(idx.role_for("bob", ["devs"], None), Some(Role::Viewer));
        assert_eq!(idx.role_for("x", [], Some("ns/bot")), Some(Role::Admin));
        assert_eq!(idx.role_for("mallory", ["nobody"], Some("ns/other")), None);
        assert_eq!(idx.anonymous(), None);
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
            }),
            jwt: vec![JwtIssuer {
                issuer: "i".into(),
                audiences: vec![],
                jwks_file: "f".into(),
                clock_skew_seconds: Some(301),
                groups_claim: None,
            }],
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
                "auth.jwt[0].audiences",
                "auth.jwt[0].clockSkewSeconds",
            ]
        );
    }
}
