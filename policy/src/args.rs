//! Argument rules (seed 001): `path`, `command` and `string` values judged
//! `pass`, `check` (a person approves) or `deny`.
//!
//! Flow: `ArgumentRule`s --[compile, via `CompiledPolicy::compile`]-->
//! [`ArgRules`] --[`ArgRules::evaluate`] over the call's `arguments`-->
//! [`ArgVerdict`].
//!
//! Precedence, per value: **deny beats check beats allow**; a value no
//! pattern matches gets the rule's `otherwise` (default deny). Over several
//! values (array elements, several rules, several commands in one line,
//! several readings of one path) the worst verdict wins. Structural problems
//! (a NUL byte in a path, `$(…)` in a command) are deny whatever the patterns.
//!
//! Where the value is: `name` is a top-level property, or a JSON pointer when
//! it starts with `/`. Absent and `null` values are not judged (the schema
//! decides whether they are required). Arrays are judged element by element,
//! nested arrays too. Any other non-string value is denied
//! (`unsupported_value_type`).
//!
//! Patterns per kind:
//! - `path`: globs (`*` stops at `/`, `**` crosses it, `{a,b}`, `[ab]`);
//!   with `root`, every pattern not starting with `/` is taken under the
//!   root (`**` means everything under it). `deny` and `check` patterns
//!   ignore case (a case-insensitive filesystem opens `.ENV` for `.env`);
//!   `allow` patterns do not. In `deny` and `check`, a pattern for a
//!   directory's contents (`secrets/**`, `secrets/*`, `secrets/`) also
//!   matches the directory itself, so `secrets`, `secrets/.` and `x/.git`
//!   are denied like what is in them (an `allow` of `D/**` does not allow
//!   `D`). A pattern ending in `/` means the directory's contents.
//!   See [`crate::path`] for normalization (`file://` URIs, encodings).
//! - `command`: exact argv, or argv prefixes when the pattern ends in `*`
//!   (allow); a prefix plus options anywhere (deny, check); see
//!   [`crate::command`].
//! - `string`: regexes that must match the **whole** value, as if written
//!   `^(?s:PATTERN)$` (`.` also matches newlines); write `.*x.*` for "contains".
//!
//! Verdicts carry the rule's `name` and a stable reason, never the value,
//! so they can go into audit lines and metrics.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use mcp_warden_crds::policy::{ApprovalChannel, ArgumentKind, ArgumentOutcome, ArgumentRule};
use regex::RegexSet;
use serde_json::Value;

use crate::command::CommandMatcher;
use crate::error::ConfigError;
use crate::path;

/// The verdict over all of a call's argument rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgVerdict<'r> {
    /// Every judged value passed (or no rule applied).
    Pass,
    /// A person must approve first (MCP elicitation or out of band, else
    /// APPROVAL_REQUIRED).
    Check {
        /// The rule's `name`.
        rule: &'r str,
        /// Stable snake_case reason, e.g. `command_needs_approval`.
        reason: &'static str,
        /// Who approves.
        channel: ApprovalChannel,
    },
    /// Refused (POLICY_BLOCKED).
    Deny {
        /// The rule's `name`.
        rule: &'r str,
        /// Stable snake_case reason, e.g. `path_denied`, `nul_byte`.
        reason: &'static str,
    },
}

/// One judged value's outcome (internal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub action: ArgumentOutcome,
    pub reason: &'static str,
}

/// Reasons for the `otherwise` outcome of one kind.
pub(crate) struct Reasons {
    not_allowed: &'static str,
    unlisted: &'static str,
}

impl Reasons {
    pub(crate) const PATH: Reasons = Reasons {
        not_allowed: "path_not_allowed",
        unlisted: "path_unlisted",
    };
    pub(crate) const COMMAND: Reasons = Reasons {
        not_allowed: "command_not_allowed",
        unlisted: "command_unlisted",
    };
    pub(crate) const STRING: Reasons = Reasons {
        not_allowed: "value_not_allowed",
        unlisted: "value_unlisted",
    };
}

fn rank(a: ArgumentOutcome) -> u8 {
    match a {
        ArgumentOutcome::Pass => 0,
        ArgumentOutcome::Check => 1,
        ArgumentOutcome::Deny => 2,
    }
}

impl Outcome {
    pub(crate) const PASS: Outcome = Outcome {
        action: ArgumentOutcome::Pass,
        reason: "pass",
    };

    pub(crate) fn deny(reason: &'static str) -> Self {
        Outcome {
            action: ArgumentOutcome::Deny,
            reason,
        }
    }
    pub(crate) fn check(reason: &'static str) -> Self {
        Outcome {
            action: ArgumentOutcome::Check,
            reason,
        }
    }
    pub(crate) fn otherwise(action: ArgumentOutcome, r: Reasons) -> Self {
        match action {
            ArgumentOutcome::Pass => Outcome::PASS,
            ArgumentOutcome::Check => Outcome::check(r.unlisted),
            ArgumentOutcome::Deny => Outcome::deny(r.not_allowed),
        }
    }
    /// The worse of two outcomes (the first on a tie).
    pub(crate) fn worse(self, other: Outcome) -> Outcome {
        if rank(other.action) > rank(self.action) {
            other
        } else {
            self
        }
    }
}

/// The compiled argument rules of one tool.
#[derive(Debug, Clone, Default)]
pub struct ArgRules {
    rules: Vec<ArgRule>,
}

#[derive(Debug, Clone)]
struct ArgRule {
    name: String,
    pointer: bool,
    otherwise: ArgumentOutcome,
    approval: ApprovalChannel,
    matcher: Matcher,
}

#[derive(Debug, Clone)]
enum Matcher {
    Path {
        root: Option<String>,
        allow: GlobSet,
        check: GlobSet,
        deny: GlobSet,
    },
    Command(CommandMatcher),
    Str {
        allow: RegexSet,
        check: RegexSet,
        deny: RegexSet,
    },
}

impl ArgRules {
    /// No rules (tools without a rule under `defaultAction: allow`).
    pub(crate) const EMPTY: ArgRules = ArgRules { rules: Vec::new() };

    /// Compile `rules` (found at field path `at`), adding problems to `errors`.
    pub(crate) fn compile(
        rules: &[ArgumentRule],
        at: &str,
        errors: &mut Vec<ConfigError>,
    ) -> ArgRules {
        let mut out = Vec::with_capacity(rules.len());
        for (i, r) in rules.iter().enumerate() {
            let at = format!("{at}.arguments[{i}]");
            let pointer = r.name.starts_with('/');
            if r.name.is_empty() || (pointer && !valid_pointer(&r.name)) {
                errors.push(ConfigError::invalid(format!("{at}.name"), "must be a property name or a JSON pointer like /a/0/b (~0 and ~1 the only escapes)"));
            }
            if r.root.is_some() && r.kind != ArgumentKind::Path {
                errors.push(ConfigError::invalid(
                    format!("{at}.root"),
                    "only path rules have a root",
                ));
            }
            let matcher = match r.kind {
                ArgumentKind::Path => {
                    let root = match r.root.as_deref() {
                        None => None,
                        Some(root) => match path::normalize_root(root) {
                            Some(n) => Some(n),
                            None => {
                                errors.push(ConfigError::invalid(
                                    format!("{at}.root"),
                                    "must be an absolute path",
                                ));
                                None
                            }
                        },
                    };
                    let globs = |list: &[String],
                                 field: &str,
                                 keep_out: bool,
                                 errors: &mut Vec<ConfigError>| {
                        glob_set(
                            list,
                            root.as_deref(),
                            keep_out,
                            &format!("{at}.{field}"),
                            errors,
                        )
                    };
                    Matcher::Path {
                        allow: globs(&r.allow, "allow", false, errors),
                        check: globs(&r.check, "check", true, errors),
                        deny: globs(&r.deny, "deny", true, errors),
                        root,
                    }
                }
                ArgumentKind::Command => {
                    let mut problems = Vec::new();
                    let m = CommandMatcher::compile(&r.allow, &r.check, &r.deny, &mut problems);
                    for (field, j, message) in problems {
                        let list = match field {
                            "allow" => &r.allow,
                            "check" => &r.check,
                            _ => &r.deny,
                        };
                        errors.push(ConfigError::pattern(
                            format!("{at}.{field}[{j}]"),
                            &list[j],
                            message,
                        ));
                    }
                    Matcher::Command(m)
                }
                ArgumentKind::String => Matcher::Str {
                    allow: regex_set(&r.allow, &format!("{at}.allow"), errors),
                    check: regex_set(&r.check, &format!("{at}.check"), errors),
                    deny: regex_set(&r.deny, &format!("{at}.deny"), errors),
                },
            };
            out.push(ArgRule {
                name: r.name.clone(),
                pointer,
                otherwise: r.otherwise,
                approval: r.approval,
                matcher,
            });
        }
        ArgRules { rules: out }
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Judge a call's `arguments` object. Deny beats check beats pass.
    pub fn evaluate(&self, args: &Value) -> ArgVerdict<'_> {
        let mut worst = Outcome::PASS;
        let mut worst_rule = "";
        let mut channel = ApprovalChannel::default();
        for rule in &self.rules {
            let value = if rule.pointer {
                args.pointer(&rule.name)
            } else {
                args.get(&rule.name)
            };
            let Some(value) = value else { continue };
            let o = rule.judge(value);
            if rank(o.action) > rank(worst.action) {
                worst = o;
                worst_rule = &rule.name;
                channel = rule.approval;
                if o.action == ArgumentOutcome::Deny {
                    break;
                }
            }
        }
        match worst.action {
            ArgumentOutcome::Pass => ArgVerdict::Pass,
            ArgumentOutcome::Check => ArgVerdict::Check {
                rule: worst_rule,
                reason: worst.reason,
                channel,
            },
            ArgumentOutcome::Deny => ArgVerdict::Deny {
                rule: worst_rule,
                reason: worst.reason,
            },
        }
    }
}

impl ArgRule {
    fn judge(&self, value: &Value) -> Outcome {
        match value {
            Value::Null => Outcome::PASS,
            Value::String(s) => self.judge_str(s),
            Value::Array(items) => {
                let mut worst = Outcome::PASS;
                for item in items {
                    worst = worst.worse(self.judge(item));
                    if worst.action == ArgumentOutcome::Deny {
                        break;
                    }
                }
                worst
            }
            _ => Outcome::deny("unsupported_value_type"),
        }
    }

    fn judge_str(&self, s: &str) -> Outcome {
        match &self.matcher {
            Matcher::Path {
                root,
                allow,
                check,
                deny,
            } => {
                let readings = match path::interpretations(s, root.as_deref()) {
                    Ok(r) => r,
                    Err(reason) => return Outcome::deny(reason),
                };
                let mut worst = Outcome::PASS;
                for p in &readings {
                    let o = if deny.is_match(p) {
                        Outcome::deny("path_denied")
                    } else if check.is_match(p) {
                        Outcome::check("path_needs_approval")
                    } else if allow.is_match(p) {
                        Outcome::PASS
                    } else {
                        Outcome::otherwise(self.otherwise, Reasons::PATH)
                    };
                    worst = worst.worse(o);
                }
                worst
            }
            Matcher::Command(m) => m.evaluate(s, self.otherwise),
            Matcher::Str { allow, check, deny } => {
                if deny.is_match(s) {
                    Outcome::deny("value_denied")
                } else if check.is_match(s) {
                    Outcome::check("value_needs_approval")
                } else if allow.is_match(s) {
                    Outcome::PASS
                } else {
                    Outcome::otherwise(self.otherwise, Reasons::STRING)
                }
            }
        }
    }
}

fn valid_pointer(p: &str) -> bool {
    let b = p.as_bytes();
    b.iter()
        .enumerate()
        .all(|(i, &c)| c != b'~' || matches!(b.get(i + 1), Some(b'0') | Some(b'1')))
}

/// Compile path globs (relative ones under `root`). A pattern ending in
/// `/` stands for the directory's contents (`D/` is `D/**`). With
/// `keep_out` (deny and check), case is ignored and a pattern for a
/// directory's contents (`D/**`, `D/*`, `D/`) also matches `D` itself.
fn glob_set(
    list: &[String],
    root: Option<&str>,
    keep_out: bool,
    at: &str,
    errors: &mut Vec<ConfigError>,
) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for (j, p) in list.iter().enumerate() {
        let full = match root {
            Some(r) if !p.starts_with('/') => format!("{}/{p}", r.trim_end_matches('/')),
            _ => p.clone(),
        };
        let dir = ["/**", "/*", "/"]
            .iter()
            .find_map(|s| full.strip_suffix(s))
            .filter(|d| keep_out && !d.is_empty() && !d.ends_with("**"));
        let with_contents = full.ends_with('/').then(|| format!("{full}**"));
        for glob in std::iter::once(with_contents.as_deref().unwrap_or(&full)).chain(dir) {
            match GlobBuilder::new(glob)
                .literal_separator(true)
                .backslash_escape(true)
                .case_insensitive(keep_out)
                .build()
            {
                Ok(g) => {
                    b.add(g);
                }
                Err(e) => {
                    errors.push(ConfigError::pattern(format!("{at}[{j}]"), p, e.kind()));
                    break;
                }
            }
        }
    }
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

fn regex_set(list: &[String], at: &str, errors: &mut Vec<ConfigError>) -> RegexSet {
    let mut ok = Vec::with_capacity(list.len());
    for (j, p) in list.iter().enumerate() {
        let anchored = format!("^(?s:{p})$");
        match regex::Regex::new(&anchored) {
            Ok(_) => ok.push(anchored),
            Err(e) => errors.push(ConfigError::pattern(format!("{at}[{j}]"), p, e)),
        }
    }
    RegexSet::new(&ok).unwrap_or_else(|_| RegexSet::empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: Value) -> ArgRules {
        let parsed: Vec<ArgumentRule> = serde_json::from_value(v).unwrap();
        let mut errs = Vec::new();
        let r = ArgRules::compile(&parsed, "tools[0]", &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        r
    }

    fn path_rules() -> ArgRules {
        rules(json!([{
            "name": "path", "kind": "path", "root": "/workspace",
            "allow": ["**"], "check": ["secrets/**"], "deny": ["**/.git/**", "/etc/**"]
        }]))
    }

    #[test]
    fn path_precedence_deny_check_allow_otherwise() {
        let r = path_rules();
        assert_eq!(
            r.evaluate(&json!({"path": "src/main.rs"})),
            ArgVerdict::Pass
        );
        assert_eq!(
            r.evaluate(&json!({"path": "secrets/k"})),
            ArgVerdict::Check {
                rule: "path",
                reason: "path_needs_approval",
                channel: ApprovalChannel::Elicitation,
            }
        );
        assert_eq!(
            r.evaluate(&json!({"path": "secrets/.git/x"})),
            ArgVerdict::Deny {
                rule: "path",
                reason: "path_denied"
            }
        );
        assert_eq!(
            r.evaluate(&json!({"path": "/etc/passwd"})),
            ArgVerdict::Deny {
                rule: "path",
                reason: "path_denied"
            }
        );
        // `**` relative to the root does not reach outside it.
        assert_eq!(
            r.evaluate(&json!({"path": "/srv/x"})),
            ArgVerdict::Deny {
                rule: "path",
                reason: "path_not_allowed"
            }
        );
    }

    #[test]
    fn deny_and_check_ignore_case_and_cover_the_directory_itself() {
        let r = rules(json!([{
            "name": "path", "kind": "path", "root": "/workspace",
            "allow": ["**"], "check": ["secrets/**"], "deny": ["**/.git/**", "**/.env", "keys/"]
        }]));
        for p in [
            ".ENV",
            "a/.Env",
            ".GIT/config",
            "x/.git",
            "x/.git/.",
            ".git",
            "keys",
            "KEYS/id",
            "x/.GiT",
        ] {
            assert!(
                matches!(
                    r.evaluate(&json!({ "path": p })),
                    ArgVerdict::Deny {
                        reason: "path_denied",
                        ..
                    }
                ),
                "{p}"
            );
        }
        for p in ["secrets", "secrets/.", "SECRETS/x", "Secrets"] {
            assert!(
                matches!(r.evaluate(&json!({ "path": p })), ArgVerdict::Check { .. }),
                "{p}"
            );
        }
        for p in [
            "src/.environment",
            "gitx/a",
            "x/.github/workflows/ci.yml",
            "secretsx",
        ] {
            assert_eq!(r.evaluate(&json!({ "path": p })), ArgVerdict::Pass, "{p}");
        }
        // Allow stays case-sensitive and does not grow to the directory.
        let a = rules(json!([{"name": "path", "kind": "path", "allow": ["/srv/Docs/**"]}]));
        assert_eq!(
            a.evaluate(&json!({"path": "/srv/Docs/a"})),
            ArgVerdict::Pass
        );
        for p in ["/srv/docs/a", "/srv/Docs"] {
            assert!(
                matches!(a.evaluate(&json!({ "path": p })), ArgVerdict::Deny { .. }),
                "{p}"
            );
        }
    }

    #[test]
    fn file_uris_are_judged_as_the_path_they_name() {
        let r = path_rules();
        for p in [
            "file:///etc/passwd",
            "file://localhost/etc/shadow",
            "FILE:/etc/hosts",
            "file://h/x",
        ] {
            assert!(
                matches!(r.evaluate(&json!({ "path": p })), ArgVerdict::Deny { .. }),
                "{p}"
            );
        }
        assert_eq!(
            r.evaluate(&json!({"path": "file:///workspace/src/a.rs"})),
            ArgVerdict::Pass
        );
    }

    #[test]
    fn traversal_tricks_are_denied() {
        let r = path_rules();
        for p in [
            "../../etc/passwd",
            "/workspace/../etc/shadow",
            "/workspace/%2e%2e/%2e%2e/srv",
            "/workspace/%252e%252e/srv",
            "/workspace/\u{FF0E}\u{FF0E}/srv",
            "..\\..\\srv",
            "/workspace/a\0",
            "/workspace/..\u{2215}srv",
        ] {
            assert!(
                matches!(r.evaluate(&json!({ "path": p })), ArgVerdict::Deny { .. }),
                "{p:?}"
            );
        }
        assert_eq!(
            r.evaluate(&json!({"path": "/workspace/a%2Fb"})),
            ArgVerdict::Pass
        );
    }

    #[test]
    fn arrays_pointers_and_types() {
        let r = rules(json!([
            {"name": "paths", "kind": "path", "allow": ["/w/**"]},
            {"name": "/opts/cmd", "kind": "command", "allow": ["ls *"]}
        ]));
        assert_eq!(
            r.evaluate(&json!({"paths": ["/w/a", ["/w/b"]]})),
            ArgVerdict::Pass
        );
        assert_eq!(
            r.evaluate(&json!({"paths": ["/w/a", "/x"]})),
            ArgVerdict::Deny {
                rule: "paths",
                reason: "path_not_allowed"
            }
        );
        assert_eq!(
            r.evaluate(&json!({"paths": 3})),
            ArgVerdict::Deny {
                rule: "paths",
                reason: "unsupported_value_type"
            }
        );
        assert_eq!(
            r.evaluate(&json!({"opts": {"cmd": "ls; id"}})),
            ArgVerdict::Deny {
                rule: "/opts/cmd",
                reason: "command_not_allowed"
            }
        );
        assert_eq!(
            r.evaluate(&json!({"opts": {"cmd": "ls -l"}, "paths": null})),
            ArgVerdict::Pass
        );
        assert_eq!(r.evaluate(&json!({})), ArgVerdict::Pass);
    }

    #[test]
    fn string_rules_are_anchored() {
        let r = rules(
            json!([{"name": "q", "kind": "string", "allow": ["[a-z]+"], "check": ["admin.*"], "deny": [".*drop table.*"], "otherwise": "check"}]),
        );
        assert_eq!(r.evaluate(&json!({"q": "abc"})), ArgVerdict::Pass);
        assert_eq!(
            r.evaluate(&json!({"q": "abc1"})),
            ArgVerdict::Check {
                rule: "q",
                reason: "value_unlisted",
                channel: ApprovalChannel::Elicitation,
            }
        );
        assert_eq!(
            r.evaluate(&json!({"q": "adminx"})),
            ArgVerdict::Check {
                rule: "q",
                reason: "value_needs_approval",
                channel: ApprovalChannel::Elicitation,
            }
        );
        assert_eq!(
            r.evaluate(&json!({"q": "x;\ndrop table y"})),
            ArgVerdict::Deny {
                rule: "q",
                reason: "value_denied"
            }
        );
    }

    #[test]
    fn worst_verdict_over_rules_wins() {
        let r = rules(json!([
            {"name": "a", "kind": "string", "allow": ["x"], "otherwise": "check"},
            {"name": "b", "kind": "string", "allow": ["x"]}
        ]));
        assert_eq!(
            r.evaluate(&json!({"a": "y", "b": "x"})),
            ArgVerdict::Check {
                rule: "a",
                reason: "value_unlisted",
                channel: ApprovalChannel::Elicitation,
            }
        );
        assert_eq!(
            r.evaluate(&json!({"a": "y", "b": "y"})),
            ArgVerdict::Deny {
                rule: "b",
                reason: "value_not_allowed"
            }
        );
    }

    #[test]
    fn bad_patterns_are_reported_with_their_field() {
        let parsed: Vec<ArgumentRule> = serde_json::from_value(json!([
            {"name": "p", "kind": "path", "allow": ["a[", "ok/**"], "root": "rel"},
            {"name": "s", "kind": "string", "deny": ["("]},
            {"name": "c", "kind": "command", "allow": ["ls; rm"]},
            {"name": "/bad~2", "kind": "string"}
        ]))
        .unwrap();
        let mut errs = Vec::new();
        ArgRules::compile(&parsed, "tools[3]", &mut errs);
        let ats: Vec<String> = errs
            .iter()
            .map(|e| e.to_string().split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(
            ats,
            [
                "tools[3].arguments[0].root",
                "tools[3].arguments[0].allow[0]",
                "tools[3].arguments[1].deny[0]",
                "tools[3].arguments[2].allow[0]",
                "tools[3].arguments[3].name"
            ]
        );
    }

    #[test]
    fn verdicts_never_carry_the_value() {
        let r = path_rules();
        let v = r.evaluate(&json!({"path": "/etc/very-secret-name"}));
        assert!(!format!("{v:?}").contains("very-secret-name"));
    }
}
