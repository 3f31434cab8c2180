//! Argument rules (pass / check / deny per value): `path`, `command` and `string` values judged
//! `pass`, `check` (a person approves) or `deny`.
//!
//! Flow: `ArgumentRule`s --[compile, via `CompiledPolicy::compile`]-->
//! [`ArgRules`] --[`ArgRules::evaluate`] over the call's `arguments`-->
//! [`ArgVerdict`].
//!
//! Precedence, per value: **deny beats check beats allow**; a value no
//! pattern matches gets the rule's `otherwise` (default deny). Structural
//! problems (a NUL byte in a path, `$(…)` in a command) are deny whatever
//! the patterns.
//!
//! Composition: every value judged contributes, and the verdict is the
//! **join** of their outcomes, never the first one found. Outcomes are
//! ordered
//!
//! ```text
//!   pass  <  check(elicitation)  <  check(outOfBand)  <  deny
//! ```
//!
//! and the join of two is the higher one; two of the same rank merge what
//! they name. So over several values (several readings of one path, array
//! elements, commands in one line and the bodies nested in them, several
//! rules of one call):
//! - the outcome is the strictest any value reached;
//! - a check goes through the strongest channel any checking rule names
//!   (an out-of-band approval is never traded for an elicitation because
//!   another argument also asked);
//! - the verdict names every rule (and every reason) that reached that
//!   outcome, in policy order, so the person approving sees all of it.
//!
//! Hence adding a rule never weakens a verdict: the outcome and channel
//! never go down, and at the same outcome the named rules only grow (a
//! property test in args_tests.rs states it over generated rule sets).
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

/// One argument rule's part in a verdict: which rule, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleHit<'r> {
    /// The rule's `name` (argument name or pointer).
    pub rule: &'r str,
    /// Stable snake_case reason, e.g. `command_needs_approval`, `path_denied`.
    pub reason: &'static str,
}

/// The verdict over all of a call's argument rules: the join of every
/// judged value's outcome (order in the module header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgVerdict<'r> {
    /// Every judged value passed (or no rule applied).
    Pass,
    /// A person must approve first (MCP elicitation or out of band, else
    /// APPROVAL_REQUIRED).
    Check {
        /// Every rule that asked, with each reason, in policy order (never empty).
        rules: Vec<RuleHit<'r>>,
        /// Who approves: the strongest channel any of `rules` names.
        channel: ApprovalChannel,
    },
    /// Refused (POLICY_BLOCKED).
    Deny {
        /// Every rule that refused, with each reason, in policy order (never empty).
        rules: Vec<RuleHit<'r>>,
    },
}

/// The order of approval channels: a check through a stronger one cannot be
/// answered by the agent's own client.
pub fn channel_strength(c: ApprovalChannel) -> u8 {
    match c {
        ApprovalChannel::Elicitation => 0,
        ApprovalChannel::OutOfBand => 1,
    }
}

/// One judged value's outcome (internal): the action and every distinct
/// reason that reached it, in the order met (none for pass).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub action: ArgumentOutcome,
    pub reasons: Vec<&'static str>,
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
        reasons: Vec::new(),
    };

    pub(crate) fn deny(reason: &'static str) -> Self {
        Outcome {
            action: ArgumentOutcome::Deny,
            reasons: vec![reason],
        }
    }
    pub(crate) fn check(reason: &'static str) -> Self {
        Outcome {
            action: ArgumentOutcome::Check,
            reasons: vec![reason],
        }
    }
    pub(crate) fn otherwise(action: ArgumentOutcome, r: Reasons) -> Self {
        match action {
            ArgumentOutcome::Pass => Outcome::PASS,
            ArgumentOutcome::Check => Outcome::check(r.unlisted),
            ArgumentOutcome::Deny => Outcome::deny(r.not_allowed),
        }
    }
    /// The join of two outcomes: the stricter one; at the same rank, the
    /// reasons of both.
    pub(crate) fn join(mut self, other: Outcome) -> Outcome {
        match rank(other.action).cmp(&rank(self.action)) {
            std::cmp::Ordering::Greater => other,
            std::cmp::Ordering::Less => self,
            std::cmp::Ordering::Equal => {
                for r in other.reasons {
                    if !self.reasons.contains(&r) {
                        self.reasons.push(r);
                    }
                }
                self
            }
        }
    }
    /// The first reason (tests read one-reason outcomes through it).
    #[cfg(test)]
    pub(crate) fn reason(&self) -> &'static str {
        self.reasons.first().copied().unwrap_or("pass")
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

    /// Judge a call's `arguments` object: the join of every rule's outcome
    /// (module header).
    pub fn evaluate(&self, args: &Value) -> ArgVerdict<'_> {
        let mut action = ArgumentOutcome::Pass;
        let mut hits: Vec<RuleHit<'_>> = Vec::new();
        let mut channel = ApprovalChannel::Elicitation;
        for rule in &self.rules {
            let value = if rule.pointer {
                args.pointer(&rule.name)
            } else {
                args.get(&rule.name)
            };
            let Some(value) = value else { continue };
            let o = rule.judge(value);
            if o.action == ArgumentOutcome::Pass || rank(o.action) < rank(action) {
                continue;
            }
            if rank(o.action) > rank(action) {
                action = o.action;
                hits.clear();
                channel = rule.approval;
            } else if channel_strength(rule.approval) > channel_strength(channel) {
                channel = rule.approval;
            }
            for reason in o.reasons {
                let hit = RuleHit {
                    rule: &rule.name,
                    reason,
                };
                if !hits.contains(&hit) {
                    hits.push(hit);
                }
            }
        }
        match action {
            ArgumentOutcome::Pass => ArgVerdict::Pass,
            ArgumentOutcome::Check => ArgVerdict::Check {
                rules: hits,
                channel,
            },
            ArgumentOutcome::Deny => ArgVerdict::Deny { rules: hits },
        }
    }
}

impl ArgRule {
    fn judge(&self, value: &Value) -> Outcome {
        match value {
            Value::Null => Outcome::PASS,
            Value::String(s) => self.judge_str(s),
            Value::Array(items) => items
                .iter()
                .fold(Outcome::PASS, |acc, item| acc.join(self.judge(item))),
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
                    worst = worst.join(o);
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
#[path = "args_tests.rs"]
mod tests;
