//! Resource and prompt rules: which resources a caller may list, read and
//! subscribe to, and which prompts it may list and get.
//!
//! Flow: `ResourcePolicy` / `PromptPolicy` --[compile, via
//! `CompiledPolicy::compile`]--> [`ResourceRules`] / [`PromptRules`] -->
//! `CompiledPolicy::decide_resource` / `decide_template` / `decide_prompt`,
//! used alike by list filtering and by the requests that name one.
//!
//! Precedence (written once, for both): a matching `deny` rule hides the
//! item; else every matching `allow` rule contributes and the highest
//! `requiredRole` among them is needed (a join, as for argument rules: the
//! order rules are written in never loosens what one of them asks, and a
//! later, narrower rule cannot be shadowed by an earlier, broader one);
//! else `defaultAction` (an `allow` default needs the `viewer` role). Deny patterns ignore case: a case-insensitive filesystem
//! opens `.ENV` for `.env`.
//!
//! URIs are judged under every reading a server might take (as written,
//! percent-decoded, NFKC-folded, dot segments removed); the worst verdict
//! over the readings wins, as for `kind: path` argument rules. `file://`
//! URIs are matched by their normalized path against path patterns
//! (`file:///srv/**`, or patterns without a scheme such as `**/.env`); any
//! other URI by its whole text against patterns with that scheme.
//!
//! A file URI wrapped in another scheme (`files+file:///srv/a`: how a
//! gateway names backend `files`'s `file:///srv/a`, or `git+file://…`) is a
//! file URI too to whoever unwraps it: its text is judged as any URI's
//! (with the `file` part normalized, so `files+file://localhost/srv/a` and
//! `files+file:////srv/a` are `files+file:///srv/a`), and its path is
//! judged by the path patterns as well, where a deny hides it and an allow
//! rule's `requiredRole` is needed, but no allow is required of the path (a
//! gateway's rules written with the prefix still admit it).

use std::collections::HashMap;

use globset::{GlobBuilder, GlobMatcher};
use mcp_warden_crds::policy::{DefaultAction, PromptPolicy, ResourcePolicy, Role, RuleAction};

use crate::error::ConfigError;
use crate::path;

/// Why a resource or prompt is not available (stable reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hidden {
    /// No allow rule and a deny default, or a deny rule.
    NotAllowed,
    /// The URI cannot be judged safely (NUL byte, control character, …);
    /// the reason names what.
    Refused(&'static str),
}

/// The compiled resource rules.
#[derive(Debug, Clone, Default)]
pub struct ResourceRules {
    default_allow: bool,
    rules: Vec<UriRule>,
}

#[derive(Debug, Clone)]
struct UriRule {
    pattern: UriPattern,
    action: RuleAction,
    role: Role,
}

#[derive(Debug, Clone)]
enum UriPattern {
    /// Matches the normalized path of `file://` URIs.
    File(GlobMatcher),
    /// Matches the whole text of URIs of other schemes.
    Uri(GlobMatcher),
}

impl UriPattern {
    fn matches(&self, reading: &Reading) -> bool {
        match (self, reading) {
            (UriPattern::File(g), Reading::File(p)) | (UriPattern::Uri(g), Reading::Uri(p)) => {
                g.is_match(p)
            }
            _ => false,
        }
    }
}

/// One reading of a URI.
#[derive(Debug, PartialEq, Eq)]
enum Reading {
    File(String),
    Uri(String),
}

impl ResourceRules {
    pub(crate) fn compile(p: &ResourcePolicy, errors: &mut Vec<ConfigError>) -> ResourceRules {
        let mut rules = Vec::new();
        for (i, r) in p.rules.iter().enumerate() {
            let at = format!("resources.rules[{i}].uri");
            if r.uri.trim().is_empty() {
                errors.push(ConfigError::invalid(at, "must not be empty"));
                continue;
            }
            // Deny patterns ignore case; allow patterns do not.
            let fold = r.action == RuleAction::Deny;
            let pattern = match r.uri.split_once("://") {
                Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => {
                    match file_path(rest) {
                        Some(path) => glob(&path, fold).map(UriPattern::File),
                        None => Err(
                            "a file:// pattern names a path on this host: file:///dir/**".into(),
                        ),
                    }
                }
                Some(_) => glob(&r.uri, fold).map(UriPattern::Uri),
                None if r.uri.starts_with('/') || r.uri.starts_with("**") => {
                    glob(&r.uri, fold).map(UriPattern::File)
                }
                None => Err(format!(
                    "{:?} has no scheme: write scheme://… for a URI, or a path starting with / or ** for file:// URIs",
                    r.uri
                )),
            };
            match pattern {
                Ok(pattern) => rules.push(UriRule {
                    pattern,
                    action: r.action,
                    role: r.required_role,
                }),
                Err(why) => errors.push(ConfigError::invalid(at, why)),
            }
        }
        ResourceRules {
            default_allow: p.default_action == DefaultAction::Allow,
            rules,
        }
    }

    /// The role a caller needs to read `uri`, or why nobody may.
    pub fn required_role(&self, uri: &str) -> Result<Role, Hidden> {
        let readings = readings(uri).map_err(Hidden::Refused)?;
        let unwrapped = wrapped_file_paths(uri).map_err(Hidden::Refused)?;
        let needed = self.judge(&readings)?;
        Ok(needed.max(self.judge_unwrapped(&unwrapped)?))
    }

    /// The paths of a wrapped file URI: hidden by a matching deny, and
    /// needing the role of every matching allow, but needing no allow.
    fn judge_unwrapped(&self, paths: &[Reading]) -> Result<Role, Hidden> {
        let mut needed = Role::Viewer;
        for rule in &self.rules {
            if !paths.iter().any(|p| rule.pattern.matches(p)) {
                continue;
            }
            match rule.action {
                RuleAction::Deny => return Err(Hidden::NotAllowed),
                RuleAction::Allow => needed = needed.max(rule.role),
            }
        }
        Ok(needed)
    }

    /// The role a caller needs to see a resource template, matched by its
    /// `uriTemplate` text (no normalization: it is not a URI yet).
    pub fn template_role(&self, uri_template: &str) -> Result<Role, Hidden> {
        let reading = match uri_template.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("file") => {
                Reading::File(file_path(rest).ok_or(Hidden::NotAllowed)?)
            }
            _ => Reading::Uri(uri_template.to_string()),
        };
        let unwrapped: Vec<Reading> = wrapped_file(uri_template)
            .map(|(_, path)| Reading::File(path))
            .into_iter()
            .collect();
        let needed = self.judge(&[reading])?;
        Ok(needed.max(self.judge_unwrapped(&unwrapped)?))
    }

    /// Deny wins over every reading; otherwise each reading needs an allow
    /// (or the default), and the highest role any matching allow rule of
    /// any reading needs is the answer.
    fn judge(&self, readings: &[Reading]) -> Result<Role, Hidden> {
        let denied = self.rules.iter().any(|r| {
            r.action == RuleAction::Deny && readings.iter().any(|rd| r.pattern.matches(rd))
        });
        if denied {
            return Err(Hidden::NotAllowed);
        }
        let mut needed = Role::Viewer;
        for reading in readings {
            let strictest_allow = self
                .rules
                .iter()
                .filter(|r| r.action == RuleAction::Allow && r.pattern.matches(reading))
                .map(|r| r.role)
                .max();
            match strictest_allow {
                Some(role) => needed = needed.max(role),
                None if self.default_allow => {}
                None => return Err(Hidden::NotAllowed),
            }
        }
        Ok(needed)
    }
}

/// The compiled prompt rules.
#[derive(Debug, Clone, Default)]
pub struct PromptRules {
    default_allow: bool,
    rules: HashMap<String, (RuleAction, Role)>,
}

impl PromptRules {
    pub(crate) fn compile(p: &PromptPolicy, errors: &mut Vec<ConfigError>) -> PromptRules {
        let mut rules = HashMap::new();
        for (i, r) in p.rules.iter().enumerate() {
            let at = format!("prompts.rules[{i}].name");
            if r.name.trim().is_empty() {
                errors.push(ConfigError::invalid(at, "must not be empty"));
            } else if rules
                .insert(r.name.clone(), (r.action, r.required_role))
                .is_some()
            {
                errors.push(ConfigError::invalid(
                    at,
                    format!("prompt {:?} has two rules", r.name),
                ));
            }
        }
        PromptRules {
            default_allow: p.default_action == DefaultAction::Allow,
            rules,
        }
    }

    /// The role a caller needs to get prompt `name`, or why nobody may.
    pub fn required_role(&self, name: &str) -> Result<Role, Hidden> {
        match self.rules.get(name) {
            Some((RuleAction::Allow, role)) => Ok(*role),
            Some((RuleAction::Deny, _)) => Err(Hidden::NotAllowed),
            None if self.default_allow => Ok(Role::Viewer),
            None => Err(Hidden::NotAllowed),
        }
    }
}

fn glob(pattern: &str, case_insensitive: bool) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .case_insensitive(case_insensitive)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid glob: {e}"))
}

/// The path of `file://` + `rest`: `/p` for `file:///p` and
/// `file://localhost/p`; `None` for a file on another host.
fn file_path(rest: &str) -> Option<String> {
    if rest.starts_with('/') {
        return Some(rest.to_string());
    }
    let (host, path) = rest.split_once('/')?;
    host.eq_ignore_ascii_case("localhost")
        .then(|| format!("/{path}"))
}

/// The scheme of a file URI wrapped in another (`files+file`), and the
/// path the file URI names on this host.
fn wrapped_file(uri: &str) -> Option<(&str, String)> {
    let (scheme, rest) = uri.split_once("://")?;
    let (_, inner) = scheme.rsplit_once('+')?;
    if !inner.eq_ignore_ascii_case("file") {
        return None;
    }
    Some((scheme, file_path(rest)?))
}

/// Every reading of a wrapped file URI's path (none for any other URI).
fn wrapped_file_paths(uri: &str) -> Result<Vec<Reading>, &'static str> {
    let Some((_, path)) = wrapped_file(uri) else {
        return Ok(Vec::new());
    };
    Ok(path::interpretations(&path, None)?
        .into_iter()
        .map(Reading::File)
        .collect())
}

/// Every reading of `uri` a server might take.
fn readings(uri: &str) -> Result<Vec<Reading>, &'static str> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err("not_a_uri");
    };
    if let Some((wrapper, path)) = wrapped_file(uri) {
        // The text with its file part read as the file URI it is.
        let mut out = Vec::new();
        for p in path::interpretations(&path, None)? {
            let r = Reading::Uri(format!("{wrapper}://{p}"));
            if !out.contains(&r) {
                out.push(r);
            }
        }
        return Ok(out);
    }
    if scheme.eq_ignore_ascii_case("file") {
        // A file on another host is matched like any other URI.
        if let Some(p) = file_path(rest) {
            return Ok(path::interpretations(&p, None)?
                .into_iter()
                .map(Reading::File)
                .collect());
        }
    }
    let mut out: Vec<Reading> = Vec::with_capacity(2);
    for reading in path::readings(uri)? {
        let [a, b] = remove_dot_segments(&reading);
        for text in [reading, a, b] {
            let r = Reading::Uri(text);
            if !out.contains(&r) {
                out.push(r);
            }
        }
    }
    Ok(out)
}

/// Dot segments removed from `scheme://rest` (RFC 3986 §5.2.4), in the two
/// ways a server might read it: with `rest` starting with an authority (the
/// RFC's way, `note://a/../b` → `note://a/b`), and with `rest` a bare path,
/// as many custom schemes treat it (`note://a/../b` → `note://b`).
fn remove_dot_segments(uri: &str) -> [String; 2] {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return [uri.to_string(), uri.to_string()];
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let with_authority = if path.is_empty() {
        uri.to_string()
    } else {
        format!("{scheme}://{authority}/{}", dot_free(path))
    };
    [with_authority, format!("{scheme}://{}", dot_free(rest))]
}

fn dot_free(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "." => {}
            ".." => {
                parts.pop();
            }
            seg => parts.push(seg),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::policy::{PromptRule, ResourceRule};

    fn rules(default: DefaultAction, list: &[(&str, RuleAction, Role)]) -> ResourceRules {
        let p = ResourcePolicy {
            default_action: default,
            rules: list
                .iter()
                .map(|(uri, action, role)| ResourceRule {
                    uri: uri.to_string(),
                    action: *action,
                    required_role: *role,
                })
                .collect(),
        };
        let mut errors = Vec::new();
        let r = ResourceRules::compile(&p, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        r
    }

    use RuleAction::{Allow, Deny};

    #[test]
    fn file_uris_are_judged_by_their_normalized_path() {
        let r = rules(
            DefaultAction::Deny,
            &[
                ("file:///srv/docs/**", Allow, Role::Viewer),
                ("**/.env", Deny, Role::Viewer),
            ],
        );
        assert_eq!(r.required_role("file:///srv/docs/a.md"), Ok(Role::Viewer));
        assert_eq!(
            r.required_role("file://localhost/srv/docs/a.md"),
            Ok(Role::Viewer)
        );
        for bad in [
            "file:///srv/docs/.env",
            "file:///srv/docs/sub/../.env",
            "file:///srv/docs/%2eenv",
            "file:///srv/docs/.ENV",
            "file:///srv/docs/../../etc/passwd",
            "file:///srv/other/x",
            "file://evil.example/srv/docs/a.md",
        ] {
            assert_eq!(r.required_role(bad), Err(Hidden::NotAllowed), "{bad}");
        }
        assert_eq!(
            r.required_role("file:///srv/docs/a%00b"),
            Err(Hidden::Refused("nul_byte"))
        );
    }

    #[test]
    fn a_wrapped_file_uri_is_judged_as_the_file_uri_it_wraps_too() {
        // A gateway's rules: its backends' paths denied, one path for admins.
        let paths = rules(
            DefaultAction::Allow,
            &[
                ("file:///srv/secrets/**", Deny, Role::Viewer),
                ("**/.env", Deny, Role::Viewer),
                ("/srv/ops/**", Allow, Role::Admin),
            ],
        );
        for bad in [
            "files+file:///srv/secrets/db.key",
            "files+file://localhost/srv/secrets/db.key",
            "files+file:////srv/secrets/db.key",
            "files+file:///srv/public/../secrets/db.key",
            "files+file:///ws/.ENV",
            "files+FILE:///srv/secrets/x",
        ] {
            assert_eq!(paths.required_role(bad), Err(Hidden::NotAllowed), "{bad}");
        }
        assert_eq!(
            paths.required_role("files+file:///srv/ops/run"),
            Ok(Role::Admin)
        );
        assert_eq!(
            paths.required_role("files+file:///ws/readme"),
            Ok(Role::Viewer)
        );
        assert_eq!(
            paths.template_role("files+file:///srv/secrets/{name}"),
            Err(Hidden::NotAllowed)
        );
        assert_eq!(
            paths.template_role("files+file:///srv/ops/{name}"),
            Ok(Role::Admin)
        );
        // Rules written with the prefix: normalized like a file URI, and
        // no path rule is needed to admit it.
        let prefixed = rules(
            DefaultAction::Deny,
            &[
                ("files+file:///ws/**", Allow, Role::Viewer),
                ("files+file:///ws/private/**", Deny, Role::Viewer),
            ],
        );
        assert_eq!(
            prefixed.required_role("files+file:///ws/a"),
            Ok(Role::Viewer)
        );
        assert_eq!(
            prefixed.required_role("files+file://localhost/ws/a"),
            Ok(Role::Viewer)
        );
        for bad in [
            "files+file:////ws/private/k",
            "files+file://localhost/ws/private/k",
            "files+file:///ws/../etc/passwd",
            "files+file:///etc/passwd",
        ] {
            assert_eq!(
                prefixed.required_role(bad),
                Err(Hidden::NotAllowed),
                "{bad}"
            );
        }
    }

    #[test]
    fn other_uris_match_whole_and_every_reading_must_pass() {
        let r = rules(
            DefaultAction::Deny,
            &[
                ("note://public/**", Allow, Role::Viewer),
                ("note://admin/*", Allow, Role::Admin),
            ],
        );
        assert_eq!(r.required_role("note://public/a"), Ok(Role::Viewer));
        assert_eq!(r.required_role("note://admin/x"), Ok(Role::Admin));
        assert_eq!(
            r.required_role("note://public/../private"),
            Err(Hidden::NotAllowed)
        );
        assert_eq!(
            r.required_role("note://public/%2e%2e/private"),
            Err(Hidden::NotAllowed)
        );
        // A reading that needs more takes the higher role.
        assert_eq!(r.required_role("note://public/../admin/x"), Ok(Role::Admin));
        assert_eq!(
            r.required_role("no scheme"),
            Err(Hidden::Refused("not_a_uri"))
        );
    }

    #[test]
    fn deny_beats_allow_and_the_strictest_allow_decides_the_role() {
        let r = rules(
            DefaultAction::Allow,
            &[
                ("note://team/secret*", Deny, Role::Viewer),
                ("note://team/*", Allow, Role::User),
                ("note://team/readme", Allow, Role::Viewer),
            ],
        );
        assert_eq!(
            r.required_role("note://team/SECRET-plan"),
            Err(Hidden::NotAllowed)
        );
        assert_eq!(r.required_role("note://team/readme"), Ok(Role::User));
        assert_eq!(r.required_role("other://x"), Ok(Role::Viewer));
        // A broad rule written first does not shadow a narrower, stricter one.
        let r = rules(
            DefaultAction::Deny,
            &[
                ("note://team/*", Allow, Role::Viewer),
                ("note://team/payroll", Allow, Role::Admin),
            ],
        );
        assert_eq!(r.required_role("note://team/payroll"), Ok(Role::Admin));
        assert_eq!(r.required_role("note://team/notes"), Ok(Role::Viewer));
    }

    #[test]
    fn templates_match_their_text() {
        let r = rules(
            DefaultAction::Deny,
            &[
                ("demo://static/*", Allow, Role::Viewer),
                ("file:///srv/**", Allow, Role::User),
            ],
        );
        assert_eq!(r.template_role("demo://static/{id}"), Ok(Role::Viewer));
        assert_eq!(
            r.template_role("demo://dynamic/{id}"),
            Err(Hidden::NotAllowed)
        );
        assert_eq!(r.template_role("file:///srv/{name}"), Ok(Role::User));
    }

    #[test]
    fn patterns_need_a_scheme_or_a_path() {
        let mut errors = Vec::new();
        ResourceRules::compile(
            &ResourcePolicy {
                default_action: DefaultAction::Deny,
                rules: vec![
                    ResourceRule {
                        uri: "docs".into(),
                        ..Default::default()
                    },
                    ResourceRule {
                        uri: "file://host/x".into(),
                        ..Default::default()
                    },
                    ResourceRule {
                        uri: "x://[".into(),
                        ..Default::default()
                    },
                    ResourceRule {
                        uri: "".into(),
                        ..Default::default()
                    },
                ],
            },
            &mut errors,
        );
        assert_eq!(errors.len(), 4, "{errors:?}");
    }

    #[test]
    fn prompt_rules() {
        let mut errors = Vec::new();
        let p = PromptRules::compile(
            &PromptPolicy {
                default_action: DefaultAction::Deny,
                rules: vec![
                    PromptRule {
                        name: "greet".into(),
                        action: Allow,
                        required_role: Role::Viewer,
                    },
                    PromptRule {
                        name: "ops".into(),
                        action: Allow,
                        required_role: Role::Admin,
                    },
                    PromptRule {
                        name: "old".into(),
                        action: Deny,
                        required_role: Role::Viewer,
                    },
                ],
            },
            &mut errors,
        );
        assert!(errors.is_empty());
        assert_eq!(p.required_role("greet"), Ok(Role::Viewer));
        assert_eq!(p.required_role("ops"), Ok(Role::Admin));
        assert_eq!(p.required_role("old"), Err(Hidden::NotAllowed));
        assert_eq!(p.required_role("other"), Err(Hidden::NotAllowed));
    }
}
