//! Secret redaction in tool results: text and every string in a JSON value.
//!
//! Flow: the policy's `redaction` --[`Redactor::new`]--> [`Redactor`]
//! --[`Redactor::redact`] / [`Redactor::redact_json`] on each result-->
//! redacted output plus [`RedactionCounts`] per kind (the bounded label set
//! of `mcpwarden_redactions_total{kind}`: [`BUILTIN_KINDS`] plus the
//! policy's own pattern names).
//!
//! Speed: one `RegexSet` pass decides whether anything matches at all; only
//! then do the matching detectors run to find spans. Patterns use ASCII word
//! boundaries so the lazy DFA never falls back on non-ASCII text. Clean text
//! is returned borrowed, without copying.
//!
//! Each match is replaced by `[REDACTED:<kind>]`. Detectors with a capture
//! group (bearer tokens, `api_key=…` assignments, AWS secret keys, Azure
//! account keys) replace only the secret, keeping the context readable.
//! Card numbers are redacted only when 13–19 digits pass the Luhn check and
//! start like a card (2–6). Object keys are not redacted. A custom pattern
//! replaces its whole match, or its first capture group when it has one.

use std::borrow::Cow;

use mcp_warden_crds::policy::Redaction;
use regex::{Regex, RegexSet};
use serde_json::Value;

use crate::error::{is_snake_case, ConfigError};

/// Built-in detector names, in matching priority order.
pub const BUILTIN_KINDS: &[&str] = &[
    "private_key",
    "jwt",
    "aws_access_key_id",
    "aws_secret_access_key",
    "gcp_api_key",
    "azure_storage_key",
    "github_token",
    "gitlab_token",
    "slack_token",
    "slack_webhook",
    "stripe_key",
    "bearer_token",
    "generic_secret",
    "credit_card",
];

fn builtin_pattern(kind: &str) -> &'static str {
    match kind {
        "private_key" => {
            r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]{0,30}PRIVATE KEY-----|\z)"
        }
        "jwt" => r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        "aws_access_key_id" => r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?-u:\b)",
        "aws_secret_access_key" => {
            r#"(?i:aws)[A-Za-z0-9_. -]{0,20}(?i:secret)[A-Za-z0-9_. -]{0,20}['"]?\s*[:=]\s*['"]?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)"#
        }
        "gcp_api_key" => r"(?-u:\b)AIza[0-9A-Za-z_-]{35}",
        "azure_storage_key" => r"(?i:AccountKey)=([A-Za-z0-9+/]{86}==)",
        "github_token" => r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,})",
        "gitlab_token" => r"(?-u:\b)glpat-[A-Za-z0-9_-]{20,}",
        "slack_token" => r"(?-u:\b)xox[abposr]-[A-Za-z0-9-]{10,}",
        "slack_webhook" => r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
        "stripe_key" => r"(?-u:\b)[rs]k_live_[A-Za-z0-9]{20,}",
        "bearer_token" => r"(?i:bearer)\s+([A-Za-z0-9._~+/-]{20,}=*)",
        "generic_secret" => {
            r#"(?i:api[_-]?key|secret[_-]?key|client[_-]?secret|access[_-]?token|auth[_-]?token|password|passwd)['"]?\s*[:=]\s*['"]?([^\s'"&,;]{8,})"#
        }
        "credit_card" => r"(?-u:\b)[2-6](?:[ -]?[0-9]){12,18}(?-u:\b)",
        _ => "",
    }
}

#[derive(Debug, Clone)]
struct Detector {
    kind: String,
    regex: Regex,
    /// Capture group to replace (0: whole match).
    group: usize,
    luhn: bool,
}

/// Compiled redaction detectors.
#[derive(Debug, Clone)]
pub struct Redactor {
    set: RegexSet,
    detectors: Vec<Detector>,
}

/// How many secrets of each kind were redacted.
#[derive(Debug, Clone)]
pub struct RedactionCounts<'r> {
    redactor: &'r Redactor,
    n: Vec<u32>,
}

impl RedactionCounts<'_> {
    /// Non-zero counts as `(kind, count)`, in detector order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        self.redactor
            .detectors
            .iter()
            .zip(&self.n)
            .filter(|(_, n)| **n > 0)
            .map(|(d, n)| (d.kind.as_str(), *n))
    }
    /// Total redactions.
    pub fn total(&self) -> u32 {
        self.n.iter().sum()
    }
    /// The count of one kind.
    pub fn get(&self, kind: &str) -> u32 {
        self.iter().find(|(k, _)| *k == kind).map_or(0, |(_, n)| n)
    }
}

impl Redactor {
    /// Compile the policy's redaction settings.
    pub fn new(cfg: &Redaction) -> Result<Redactor, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut detectors = Vec::new();
        if cfg.enabled {
            for (i, k) in cfg.kinds.iter().enumerate() {
                if !BUILTIN_KINDS.contains(&k.as_str()) {
                    errors.push(ConfigError::invalid(
                        format!("redaction.kinds[{i}]"),
                        format!("unknown kind {k:?}; known: {}", BUILTIN_KINDS.join(", ")),
                    ));
                }
            }
            for kind in BUILTIN_KINDS {
                if cfg.kinds.is_empty() || cfg.kinds.iter().any(|k| k == kind) {
                    // Built-in patterns are tested below; they always compile.
                    let regex =
                        Regex::new(builtin_pattern(kind)).expect("built-in redaction pattern");
                    let group = usize::from(regex.captures_len() > 1);
                    detectors.push(Detector {
                        kind: kind.to_string(),
                        regex,
                        group,
                        luhn: *kind == "credit_card",
                    });
                }
            }
            for (i, p) in cfg.patterns.iter().enumerate() {
                let at = format!("redaction.patterns[{i}]");
                if !is_snake_case(&p.name) {
                    errors.push(ConfigError::invalid(
                        format!("{at}.name"),
                        format!("{:?} must be snake_case (it is a metric label)", p.name),
                    ));
                } else if BUILTIN_KINDS.contains(&p.name.as_str())
                    || cfg.patterns[..i].iter().any(|q| q.name == p.name)
                {
                    errors.push(ConfigError::NameCollision {
                        at: format!("{at}.name"),
                        name: p.name.clone(),
                        other: "another redaction kind".into(),
                    });
                }
                match Regex::new(&p.regex) {
                    Ok(regex) if regex.is_match("") => errors.push(ConfigError::invalid(
                        format!("{at}.regex"),
                        "must not match the empty string",
                    )),
                    Ok(regex) => {
                        let group = usize::from(regex.captures_len() > 1);
                        detectors.push(Detector {
                            kind: p.name.clone(),
                            regex,
                            group,
                            luhn: false,
                        });
                    }
                    Err(e) => errors.push(ConfigError::pattern(format!("{at}.regex"), &p.regex, e)),
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let set = RegexSet::new(detectors.iter().map(|d| d.regex.as_str()))
            .map_err(|e| vec![ConfigError::invalid("redaction", e.to_string())])?;
        Ok(Redactor { set, detectors })
    }

    /// A redactor that does nothing.
    pub fn disabled() -> Redactor {
        Redactor {
            set: RegexSet::empty(),
            detectors: Vec::new(),
        }
    }

    /// Whether any detector is active.
    pub fn is_enabled(&self) -> bool {
        !self.detectors.is_empty()
    }

    /// The kinds this redactor can report (the metric's label values).
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.detectors.iter().map(|d| d.kind.as_str())
    }

    /// Fresh zero counts.
    pub fn counts(&self) -> RedactionCounts<'_> {
        RedactionCounts {
            redactor: self,
            n: vec![0; self.detectors.len()],
        }
    }

    /// Redact secrets in `text`, adding to `counts`.
    pub fn redact<'t>(&self, text: &'t str, counts: &mut RedactionCounts<'_>) -> Cow<'t, str> {
        if self.detectors.is_empty() || !self.set.is_match(text) {
            return Cow::Borrowed(text);
        }
        let mut spans: Vec<(usize, usize, usize)> = Vec::new();
        for i in self.set.matches(text).iter() {
            let d = &self.detectors[i];
            for caps in d.regex.captures_iter(text) {
                let Some(m) = caps.get(d.group) else { continue };
                if d.luhn && !card_like(m.as_str()) {
                    continue;
                }
                spans.push((m.start(), m.end(), i));
            }
        }
        if spans.is_empty() {
            return Cow::Borrowed(text);
        }
        // Earliest first; on the same start the longer, then the higher-priority detector.
        spans.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
        let mut out = String::with_capacity(text.len());
        let mut pos = 0;
        for (start, end, i) in spans {
            if start < pos {
                continue;
            }
            out.push_str(&text[pos..start]);
            out.push_str("[REDACTED:");
            out.push_str(&self.detectors[i].kind);
            out.push(']');
            if let Some(n) = counts.n.get_mut(i) {
                *n += 1;
            }
            pos = end;
        }
        out.push_str(&text[pos..]);
        Cow::Owned(out)
    }

    /// Redact every string inside `value` in place (object keys excepted).
    pub fn redact_json(&self, value: &mut Value, counts: &mut RedactionCounts<'_>) {
        if self.detectors.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                if let Cow::Owned(r) = self.redact(s, counts) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v, counts)),
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_json(v, counts)),
            _ => {}
        }
    }
}

/// 13–19 digits (spaces and dashes allowed) passing the Luhn check.
fn card_like(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                if d * 2 > 9 {
                    d * 2 - 9
                } else {
                    d * 2
                }
            } else {
                d
            }
        })
        .sum();
    sum % 10 == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::policy::RedactionPattern;
    use serde_json::json;

    fn all() -> Redactor {
        Redactor::new(&Redaction::default()).unwrap()
    }

    fn red(text: &str) -> (String, Vec<(String, u32)>) {
        let r = all();
        let mut c = r.counts();
        let out = r.redact(text, &mut c).into_owned();
        let counts = c.iter().map(|(k, n)| (k.to_string(), n)).collect();
        (out, counts)
    }

    #[test]
    fn each_builtin_kind_is_found() {
        let cases = [
            ("key AKIAIOSFODNN7EXAMPLE here", "aws_access_key_id"),
            ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", "aws_secret_access_key"),
            ("k=AIzaSyA1234567890abcdefghijklmnopqrstuv", "gcp_api_key"),
            (&format!("AccountKey={}==;", "a".repeat(86)), "azure_storage_key"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token"),
            ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_token"),
            ("glpat-abcdefghij0123456789", "gitlab_token"),
            ("xoxb-1234567890-abcdefghij", "slack_token"),
            ("https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXX", "slack_webhook"),
            (&format!("{}_live_{}", "sk", "a1b2c3d4e5f6g7h8i9j0k1"), "stripe_key"),
            ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt"),
            ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "private_key"),
            ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn (truncated", "private_key"),
            ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz.0123", "bearer_token"),
            ("{\"api_key\": \"s3cr3tv4lue99\"}", "generic_secret"),
            ("password=hunter2hunter2&user=x", "generic_secret"),
            ("card 4111 1111 1111 1111 ok", "credit_card"),
            ("card 5500-0000-0000-0004", "credit_card"),
        ];
        for (text, kind) in cases {
            let (out, counts) = red(text);
            assert!(out.contains(&format!("[REDACTED:{kind}]")), "{kind}: {out}");
            assert_eq!(counts, [(kind.to_string(), 1)], "{text}");
        }
    }

    #[test]
    fn context_is_kept_for_group_detectors() {
        assert_eq!(
            red("Authorization: Bearer abcdefghijklmnopqrstuvwxyz").0,
            "Authorization: Bearer [REDACTED:bearer_token]"
        );
        assert_eq!(
            red("password: 'correcthorse'").0,
            "password: '[REDACTED:generic_secret]'"
        );
    }

    #[test]
    fn near_misses_are_left_alone() {
        for text in [
            "card 4111 1111 1111 1112",      // fails Luhn
            "order 1234567890123",           // fails Luhn / prefix
            "Bearer authentication is used", // no token
            "password_policy: strict",       // not an assignment of a secret
            "password: hunter2",             // too short
            "ghp_short",
            "AKIAIOSFODNN7EXAMPL", // 19 chars
            "the eyJ prefix alone",
        ] {
            let (out, counts) = red(text);
            assert_eq!(out, text);
            assert!(counts.is_empty(), "{text}: {counts:?}");
        }
    }

    #[test]
    fn clean_text_is_borrowed() {
        let r = all();
        let mut c = r.counts();
        let text = "nothing to see here, ünïcödé too".repeat(100);
        assert!(matches!(r.redact(&text, &mut c), Cow::Borrowed(_)));
        assert_eq!(c.total(), 0);
    }

    #[test]
    fn json_strings_everywhere_are_redacted_and_counted() {
        let r = all();
        let mut c = r.counts();
        let mut v = json!({
            "content": [{"type": "text", "text": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789"}],
            "structuredContent": {"deep": [{"k": "AKIAIOSFODNN7EXAMPLE"}, 4111111111111111u64, "4111111111111111"]},
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789": 1
        });
        r.redact_json(&mut v, &mut c);
        let s = v.to_string();
        assert!(!s.contains("AKIAIOSFODNN7EXAMPLE") && s.contains("[REDACTED:aws_access_key_id]"));
        assert!(s.contains("token [REDACTED:github_token]"));
        assert_eq!(c.get("github_token"), 1);
        assert_eq!(c.get("credit_card"), 1);
        assert_eq!(c.total(), 3);
    }

    #[test]
    fn kinds_filter_custom_patterns_and_disable() {
        let cfg = Redaction {
            enabled: true,
            kinds: vec!["jwt".into()],
            patterns: vec![RedactionPattern {
                name: "employee_id".into(),
                regex: r"EMP-(\d{6})".into(),
            }],
        };
        let r = Redactor::new(&cfg).unwrap();
        assert_eq!(r.kinds().collect::<Vec<_>>(), ["jwt", "employee_id"]);
        let mut c = r.counts();
        assert_eq!(
            r.redact("id EMP-123456 key AKIAIOSFODNN7EXAMPLE", &mut c),
            "id EMP-[REDACTED:employee_id] key AKIAIOSFODNN7EXAMPLE"
        );
        let off = Redactor::new(&Redaction {
            enabled: false,
            ..Default::default()
        })
        .unwrap();
        assert!(!off.is_enabled());
    }

    #[test]
    fn bad_config_lists_every_problem() {
        let cfg = Redaction {
            enabled: true,
            kinds: vec!["nope".into()],
            patterns: vec![
                RedactionPattern {
                    name: "Bad-Name".into(),
                    regex: "x".into(),
                },
                RedactionPattern {
                    name: "jwt".into(),
                    regex: "(".into(),
                },
                RedactionPattern {
                    name: "empty".into(),
                    regex: "a*".into(),
                },
            ],
        };
        let errs = Redactor::new(&cfg).unwrap_err();
        let reasons: Vec<&str> = errs.iter().map(|e| e.reason()).collect();
        assert_eq!(
            reasons,
            [
                "invalid",
                "invalid",
                "name_collision",
                "bad_pattern",
                "invalid"
            ]
        );
    }

    #[test]
    fn luhn() {
        assert!(card_like("4111111111111111"));
        assert!(card_like("378282246310005"));
        assert!(!card_like("4111111111111112"));
        assert!(!card_like("411111111111"));
    }
}
