//! Secret redaction in tool results: text and every string in a JSON value.
//!
//! Flow: the policy's `redaction` --[`Redactor::new`]--> [`Redactor`]
//! (the detectors of [`crate::secrets`] it selects, plus the policy's own
//! patterns) --[`Redactor::redact`] / [`Redactor::redact_json`] on each
//! result--> redacted output plus [`RedactionCounts`] per kind (the bounded
//! label set of `mcpwarden_redactions_total{kind}`: [`BUILTIN_KINDS`] plus
//! the policy's pattern names).
//!
//! Redaction reads values as the client reads them: [`Redactor::redact_json`]
//! walks the decoded JSON and scans each decoded string (escapes resolved),
//! never the raw bytes of the message.
//!
//! Each secret is replaced by `[REDACTED:<kind>]`; overlapping matches are
//! merged into one redaction, so no tail of a longer match survives. Object
//! keys are not redacted. A custom pattern replaces its whole match, or its
//! first capture group when it has one.
//!
//! Across items: a secret split over two consecutive text content items
//! (array elements that are strings, or objects with a string `text`, as
//! MCP `content` is) is found by scanning the seam — the last
//! [`SEAM_BYTES`] of one and the first of the next — and both pieces are
//! cut (the marker stands where the secret starts); so is a value whose
//! key (`password=`) ends the previous item.
//!
//! Inside base64 (`redaction.decodeBase64`): a run of at least
//! [`MIN_BASE64`] base64 characters that decodes to text holding a secret
//! is redacted whole, under the inner secret's kind.
//!
//! Speed: one `RegexSet` pass decides whether anything matches at all; only
//! then do the matching detectors run to find spans. Clean text is returned
//! borrowed, without copying.

use std::borrow::Cow;
use std::sync::OnceLock;

use base64::Engine;
use mcp_warden_crds::policy::Redaction;
use regex::{Regex, RegexSet};
use serde_json::Value;

use crate::error::{is_snake_case, ConfigError};
use crate::secrets::{passes, Check, BUILTINS};

/// Built-in detector kinds, in matching priority order (the names
/// `redaction.kinds` may list).
pub const BUILTIN_KINDS: &[&str] = &[
    "private_key",
    "jwt",
    "aws_access_key_id",
    "aws_secret_access_key",
    "gcp_api_key",
    "google_oauth",
    "azure_storage_key",
    "azure_client_secret",
    "digitalocean_token",
    "alibaba_access_key",
    "hashicorp_token",
    "cloud_platform_token",
    "observability_token",
    "github_token",
    "gitlab_token",
    "atlassian_token",
    "slack_token",
    "slack_webhook",
    "discord_token",
    "discord_webhook",
    "telegram_bot_token",
    "teams_webhook",
    "messaging_api_key",
    "stripe_key",
    "payment_token",
    "facebook_token",
    "anthropic_key",
    "openai_key",
    "huggingface_token",
    "ai_api_key",
    "npm_token",
    "pypi_token",
    "rubygems_key",
    "nuget_key",
    "dockerhub_token",
    "package_registry_token",
    "database_url",
    "url_password",
    "bearer_token",
    "basic_auth",
    "generic_secret",
    "credit_card",
];

/// How far either side of a seam between two text items is scanned.
pub const SEAM_BYTES: usize = 4096;
/// The shortest base64 run decoded when `decodeBase64` is on.
pub const MIN_BASE64: usize = 24;

#[derive(Debug, Clone)]
struct Detector {
    /// Index into `Redactor::kinds`.
    kind: usize,
    regex: Regex,
    /// Capture group to replace (0: whole match).
    group: usize,
    check: Check,
}

/// The built-in patterns, compiled once per process (a policy reload, and
/// every policy a test compiles, reuses them; a `Regex` clone is cheap).
fn builtin_regexes() -> &'static [Regex] {
    static R: OnceLock<Vec<Regex>> = OnceLock::new();
    R.get_or_init(|| {
        BUILTINS
            .iter()
            .map(|b| Regex::new(b.pattern).expect("built-in redaction pattern"))
            .collect()
    })
}

/// The set of every built-in pattern in [`BUILTIN_KINDS`] order: the
/// default configuration's.
fn default_set() -> &'static RegexSet {
    static S: OnceLock<RegexSet> = OnceLock::new();
    S.get_or_init(|| {
        let patterns = BUILTIN_KINDS
            .iter()
            .flat_map(|k| BUILTINS.iter().filter(move |b| b.kind == *k))
            .map(|b| b.pattern);
        RegexSet::new(patterns).expect("built-in redaction patterns")
    })
}

/// Compiled redaction detectors.
#[derive(Debug, Clone)]
pub struct Redactor {
    set: RegexSet,
    detectors: Vec<Detector>,
    kinds: Vec<String>,
    base64: Option<Regex>,
}

/// How many secrets of each kind were redacted.
#[derive(Debug, Clone)]
pub struct RedactionCounts<'r> {
    redactor: &'r Redactor,
    n: Vec<u32>,
}

impl RedactionCounts<'_> {
    /// Non-zero counts as `(kind, count)`, in kind order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        self.redactor
            .kinds
            .iter()
            .zip(&self.n)
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.as_str(), *n))
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

/// One stretch of text to cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    /// Where the whole match starts (before `start` when only a capture
    /// group is cut: `password=` of `password=…`).
    from: usize,
    start: usize,
    end: usize,
    kind: usize,
    /// Write the marker (and count it); `false` for the tail of a secret
    /// whose marker stands in the previous item.
    marker: bool,
}

impl Redactor {
    /// Compile the policy's redaction settings.
    pub fn new(cfg: &Redaction) -> Result<Redactor, Vec<ConfigError>> {
        let mut errors = Vec::new();
        let mut detectors = Vec::new();
        let mut kinds: Vec<String> = Vec::new();
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
                if !(cfg.kinds.is_empty() || cfg.kinds.iter().any(|k| k == kind)) {
                    continue;
                }
                kinds.push(kind.to_string());
                for (b, regex) in BUILTINS.iter().zip(builtin_regexes()) {
                    if b.kind == *kind {
                        detectors.push(Detector {
                            kind: kinds.len() - 1,
                            group: usize::from(regex.captures_len() > 1),
                            regex: regex.clone(),
                            check: b.check,
                        });
                    }
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
                        kinds.push(p.name.clone());
                        detectors.push(Detector {
                            kind: kinds.len() - 1,
                            group: usize::from(regex.captures_len() > 1),
                            regex,
                            check: Check::None,
                        });
                    }
                    Err(e) => errors.push(ConfigError::pattern(format!("{at}.regex"), &p.regex, e)),
                }
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let set = if cfg.kinds.is_empty() && cfg.patterns.is_empty() {
            default_set().clone()
        } else {
            RegexSet::new(detectors.iter().map(|d| d.regex.as_str()))
                .map_err(|e| vec![ConfigError::invalid("redaction", e.to_string())])?
        };
        let base64 = (cfg.enabled && cfg.decode_base64 && !detectors.is_empty()).then(|| {
            Regex::new(&format!("[A-Za-z0-9+/_-]{{{MIN_BASE64},}}={{0,2}}"))
                .expect("base64 run pattern")
        });
        Ok(Redactor {
            set,
            detectors,
            kinds,
            base64,
        })
    }

    /// A redactor that does nothing.
    pub fn disabled() -> Redactor {
        Redactor {
            set: RegexSet::empty(),
            detectors: Vec::new(),
            kinds: Vec::new(),
            base64: None,
        }
    }

    /// Whether any detector is active.
    pub fn is_enabled(&self) -> bool {
        !self.detectors.is_empty()
    }

    /// The kinds this redactor can report (the metric's label values).
    pub fn kinds(&self) -> impl Iterator<Item = &str> {
        self.kinds.iter().map(String::as_str)
    }

    /// Fresh zero counts.
    pub fn counts(&self) -> RedactionCounts<'_> {
        RedactionCounts {
            redactor: self,
            n: vec![0; self.kinds.len()],
        }
    }

    /// Redact secrets in `text`, adding to `counts`.
    pub fn redact<'t>(&self, text: &'t str, counts: &mut RedactionCounts<'_>) -> Cow<'t, str> {
        let spans = self.spans(text);
        apply(text, spans, counts, &self.kinds)
    }

    /// Whether raw JSON must go through [`Redactor::redact_json`] before it
    /// can be called clean: **always**. A scan of the raw bytes reads text
    /// the client never reads: escapes undecoded (`\n`, `\t`, `\"`, `\u…`
    /// hide a token's start and a value's quotes), values glued to their
    /// neighbours and to the JSON around them (a secret split over two
    /// items, a `^` or `\A` anchored at the message rather than at the
    /// value, a value pattern running into the next member). No byte scan
    /// can vouch for the decoded values, so none may skip the JSON pass;
    /// this stays only so that a caller of the former fast path is sound.
    pub fn needs_json_pass(_raw: &[u8]) -> bool {
        true
    }

    /// Where the secrets in `text` are.
    fn spans(&self, text: &str) -> Vec<Span> {
        let mut spans = Vec::new();
        if self.detectors.is_empty() {
            return spans;
        }
        if self.set.is_match(text) {
            self.find(text, &mut spans);
        }
        if let Some(b64) = &self.base64 {
            for m in b64.find_iter(text) {
                if let Some(kind) = self.inside_base64(m.as_str()) {
                    spans.push(Span {
                        from: m.start(),
                        start: m.start(),
                        end: m.end(),
                        kind,
                        marker: true,
                    });
                }
            }
        }
        spans
    }

    fn find(&self, text: &str, spans: &mut Vec<Span>) {
        for i in self.set.matches(text).iter() {
            let d = &self.detectors[i];
            for caps in d.regex.captures_iter(text) {
                let Some(m) = caps.get(d.group) else { continue };
                let whole = caps.get(0).map_or("", |w| w.as_str());
                if d.check != Check::None && !passes(d.check, whole, m.as_str()) {
                    continue;
                }
                spans.push(Span {
                    from: caps.get(0).map_or(m.start(), |w| w.start()),
                    start: m.start(),
                    end: m.end(),
                    kind: d.kind,
                    marker: true,
                });
            }
        }
    }

    /// The kind of the first secret in the text a base64 run decodes to.
    fn inside_base64(&self, run: &str) -> Option<usize> {
        let body = run.trim_end_matches('=');
        let engine = if body.contains(['-', '_']) {
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
        } else {
            &base64::engine::general_purpose::STANDARD_NO_PAD
        };
        // Decode a short head first: images and archives stop here.
        let head = &body[..body.len().min(64) / 4 * 4];
        let printable = |b: &[u8]| {
            std::str::from_utf8(b).is_ok_and(|s| {
                s.chars()
                    .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'))
            })
        };
        if !engine.decode(head).is_ok_and(|h| printable(&h)) {
            return None;
        }
        // A last group of one character carries no byte.
        let usable = body.len() - usize::from(body.len() % 4 == 1);
        let decoded = engine.decode(&body[..usable]).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let mut inner = Vec::new();
        if self.set.is_match(&text) {
            self.find(&text, &mut inner);
        }
        inner.iter().min_by_key(|s| s.start).map(|s| s.kind)
    }

    /// Redact every string inside `value` in place (object keys excepted),
    /// including secrets split over consecutive text items of an array.
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
            Value::Array(items) => {
                let cuts = self.seams(items);
                for (item, cuts) in items.iter_mut().zip(cuts) {
                    if cuts.is_empty() {
                        self.redact_json(item, counts);
                        continue;
                    }
                    if let Value::Object(map) = item {
                        for (k, v) in map.iter_mut() {
                            if k != "text" {
                                self.redact_json(v, counts);
                            }
                        }
                    }
                    if let Some(s) = text_mut(item) {
                        let mut spans = self.spans(s);
                        spans.extend(cuts);
                        if let Cow::Owned(r) = apply(s, spans, counts, &self.kinds) {
                            *s = r;
                        }
                    }
                }
            }
            Value::Object(map) => map.values_mut().for_each(|v| self.redact_json(v, counts)),
            _ => {}
        }
    }

    /// The cuts each item needs for secrets that cross a seam between two
    /// consecutive text items.
    fn seams(&self, items: &[Value]) -> Vec<Vec<Span>> {
        let mut cuts = vec![Vec::new(); items.len()];
        for i in 1..items.len() {
            let (Some(a), Some(b)) = (text_of(&items[i - 1]), text_of(&items[i])) else {
                continue;
            };
            if a.is_empty() || b.is_empty() {
                continue;
            }
            let tail = &a[floor(a, a.len().saturating_sub(SEAM_BYTES))..];
            let head = &b[..floor(b, b.len().min(SEAM_BYTES))];
            let window = format!("{tail}{head}");
            let seam = tail.len();
            for s in self.spans(&window) {
                // Only matches that need both sides: the others are found
                // in each item alone.
                if !(s.from < seam && s.end > seam) {
                    continue;
                }
                // A match that runs to the window's end may go on.
                let end = if s.end == window.len() {
                    b.len()
                } else {
                    s.end - seam
                };
                if s.start < seam {
                    let start = a.len() - tail.len() + s.start;
                    cuts[i - 1].push(Span {
                        from: start,
                        start,
                        end: a.len(),
                        ..s
                    });
                    cuts[i].push(Span {
                        from: 0,
                        start: 0,
                        end,
                        marker: false,
                        ..s
                    });
                } else {
                    let start = s.start - seam;
                    cuts[i].push(Span {
                        from: start,
                        start,
                        end,
                        ..s
                    });
                }
            }
        }
        cuts
    }
}

/// The text of a text item: a string, or an object's string `text`.
fn text_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(m) => m.get("text").and_then(Value::as_str),
        _ => None,
    }
}

fn text_mut(v: &mut Value) -> Option<&mut String> {
    match v {
        Value::String(s) => Some(s),
        Value::Object(m) => match m.get_mut("text") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Write `text` with `spans` cut out; overlapping spans merge into one cut
/// (the first one's marker).
fn apply<'t>(
    text: &'t str,
    mut spans: Vec<Span>,
    counts: &mut RedactionCounts<'_>,
    kinds: &[String],
) -> Cow<'t, str> {
    if spans.is_empty() {
        return Cow::Borrowed(text);
    }
    // Earliest first; on the same start the longer, then the marker, then
    // the higher-priority kind.
    spans.sort_by(|a, b| {
        a.start
            .cmp(&b.start)
            .then(b.end.cmp(&a.end))
            .then(b.marker.cmp(&a.marker))
            .then(a.kind.cmp(&b.kind))
    });
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for s in spans {
        if s.end <= pos {
            continue;
        }
        if s.start < pos {
            pos = s.end; // overlaps the cut just made: extend it
            continue;
        }
        out.push_str(&text[pos..s.start]);
        if s.marker {
            out.push_str("[REDACTED:");
            out.push_str(&kinds[s.kind]);
            out.push(']');
            if let Some(n) = counts.n.get_mut(s.kind) {
                *n += 1;
            }
        }
        pos = s.end;
    }
    out.push_str(&text[pos..]);
    Cow::Owned(out)
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
