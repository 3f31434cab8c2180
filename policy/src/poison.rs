//! Tool-poisoning scan of tool definitions.
//!
//! Flow: upstream definition --[`scan`] (with the other tools' names)-->
//! [`Finding`]s --[`crate::CompiledPolicy::assess`]--> quarantine or warning
//! per the policy's `poisoningScan`.
//!
//! Scanned: **every string and object key** in the definition — name,
//! title, description, annotations, `_meta`, every property's name,
//! description, enum and default values, nested schemas, the output schema
//! (hidden instructions are put wherever a model reads). Each string is
//! first checked for hidden characters, then normalized and matched:
//! 1. invisible characters are dropped (so `ig\u{200B}nore` is `ignore`),
//!    Unicode tag characters are read as the ASCII they smuggle;
//! 2. NFKC folds fullwidth and mathematical letters (`ｉｇｎｏｒｅ`, `𝐢𝐠𝐧𝐨𝐫𝐞`);
//! 3. every other non-ASCII letter whose Unicode TR39 confusable skeleton
//!    (the `unicode-security` crate) is ASCII becomes that ASCII letter, so
//!    Cyrillic `іgnоrе` reads `ignore`; ASCII is left as written;
//! 4. HTML character references (`&lt;`, `&#60;`) are decoded;
//! 5. a base64 run that decodes to readable text is scanned as text too.
//!
//! Kinds (stable: the admin endpoint and logs show them) and details:
//! - `model_instruction`: `ignore_previous_instructions`, `instruction_tag`
//!   (`<IMPORTANT>`, `<system>`, `[INST]`, `### SYSTEM`), `hidden_comment`
//!   (`<!-- … -->`, `[//]: # (…)`), `directive_to_model` (`IMPORTANT:` and
//!   the like followed by orders to the model, or a note addressed to the
//!   AI), `conceal_from_user`, `system_prompt`, `instruction_ordering` (line
//!   jumping: "before using any tool…", "call this tool first", "after every
//!   response"), `role_override`, `safety_bypass`, `preapproval_claim` ("the
//!   user has already approved…", "no need to ask"), `tool_hijack`
//!   ("instead of X always use this", "do not use other tools"),
//!   `parameter_tampering` ("always set the recipient to…, regardless…"),
//!   `output_hijack` ("in your reply to the user…"), `dangerous_command`
//!   (`curl … | sh`, `nc -e`, `chmod 777`).
//! - `exfiltration`: `send_to_url`, `content_smuggling`,
//!   `credential_request` (credentials, tokens, keys, environment variables
//!   into an argument), `conversation_request` (the conversation, system
//!   prompt, earlier messages or results into an argument).
//! - `sensitive_path`: `sensitive_file` (`~/.ssh`, `id_rsa`, `.env`,
//!   `.aws/credentials`, `/etc/shadow`, `mcp.json`, shell history, browser
//!   credential stores…).
//! - `hidden_unicode`: `zero_width`, `bidi_control`, `tag_character`,
//!   `control_character` (ANSI escapes and other C0/C1 controls).
//! - `obfuscation`: `confusable_letters` (a word mixing ASCII letters with
//!   look-alikes from another script), `styled_letters` (fullwidth or
//!   mathematical letters), `encoded_text` (base64 that decodes to text),
//!   `whitespace_padding` (100 spaces or 12 blank lines pushing text out of
//!   a UI's view), `confusable_name` (the tool's name has the same TR39
//!   skeleton as a sibling's: `send_emaiI` next to `send_email`).
//!
//! Names and keys are also read as words (`ignore_previous_instructions`
//! as "ignore previous instructions"), and "ignore previous instructions"
//! is recognized in a few other languages.
//! - `tool_reference`: `tool_name`: another tool's distinctive name (one
//!   with `_`, `-` or a camel hump, or 8+ characters) as a whole word. Only
//!   a warning: servers say "use read_text_file instead" all the time.
//!
//! Later classes: `authoritative_output` (the tool's output declared to
//! be instructions), `authority_claim` (the vendor, an override, the
//! system prompt), `conditional_trigger` (a date, phrase or count turning
//! on a hidden call), `tool_redirection` (a sibling's use routed through
//! this tool), `personal_data` and `credential_url` (exfiltration).
//! Other languages: `poison_lexicon.rs` reports the same details.
//!
//! Tiers: `directive_to_model`, `instruction_ordering`, `system_prompt`,
//! `sensitive_file_mention` and `tool_name` only warn alone (real servers
//! write "IMPORTANT: use absolute paths", "call list_tables first"); two
//! different weak details in one string add `directive_with_action`, which
//! quarantines ([`Finding::quarantines`]).
//!
//! A rule about sharing data (credentials, the conversation, sending) does
//! not fire when the words right before it negate it ("do not include API
//! keys in your query"), unless they say "do not forget".

use std::borrow::Cow;
use std::sync::OnceLock;

use base64::Engine;
use regex::{Regex, RegexSet};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::path::is_invisible;

/// What kind of poisoning a finding suggests (bounded set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// Instructions aimed at the model rather than describing the tool.
    ModelInstruction,
    /// Invisible, bidirectional, tag or control characters.
    HiddenUnicode,
    /// Mentions another tool by name (shadowing).
    ToolReference,
    /// Asks for data to be sent somewhere or put into an argument.
    Exfiltration,
    /// Points at credentials or key files.
    SensitivePath,
    /// Text disguised from a reader: look-alike or styled letters, encodings.
    Obfuscation,
}

impl FindingKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::ModelInstruction => "model_instruction",
            FindingKind::HiddenUnicode => "hidden_unicode",
            FindingKind::ToolReference => "tool_reference",
            FindingKind::Exfiltration => "exfiltration",
            FindingKind::SensitivePath => "sensitive_path",
            FindingKind::Obfuscation => "obfuscation",
        }
    }
}

/// One suspicious spot in a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The kind.
    pub kind: FindingKind,
    /// What matched, a stable snake_case name (see the module docs).
    pub detail: &'static str,
    /// Where: a JSON pointer into the definition (`/description`,
    /// `/inputSchema/properties/path/description`).
    pub location: String,
}

/// Details that only warn alone: wording real servers use for ordinary
/// guidance ("IMPORTANT: the path must be absolute", "call list_tables
/// first", a `system_prompt` parameter, "paths like ~/.ssh are refused").
const WEAK: &[&str] = &[
    "directive_to_model",
    "instruction_ordering",
    "system_prompt",
    "sensitive_file_mention",
];

impl Finding {
    /// Whether this finding quarantines the tool (the policy's scan is
    /// `quarantine`) or only warns: a sibling's name and the weak details
    /// warn; everything else, and two weak details in one string
    /// (`directive_with_action`), quarantines.
    pub fn quarantines(&self) -> bool {
        self.kind != FindingKind::ToolReference && !WEAK.contains(&self.detail)
    }

    /// `kind/detail`, e.g. `model_instruction/hidden_comment`: why, in one word.
    pub fn reason(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.detail)
    }
}

#[path = "poison_lexicon.rs"]
mod lexicon;
#[path = "poison_normalize.rs"]
mod normalize;
use normalize::normalize;
#[path = "poison_rules.rs"]
mod rule_table;
use rule_table::{rule_table, Guard};

struct Rules {
    set: RegexSet,
    regexes: Vec<Regex>,
    table: Vec<(FindingKind, &'static str, Guard)>,
    condition: Regex,
    negation: Regex,
    base64: Regex,
}

fn rules() -> &'static Rules {
    static R: OnceLock<Rules> = OnceLock::new();
    R.get_or_init(|| {
        // The text is normalized to ASCII look-alikes first, so ASCII word
        // classes suffice; Unicode-aware `\b` `\w` `\s` make the automaton
        // of a set this size several times slower.
        let t: Vec<_> = rule_table()
            .into_iter()
            .map(|(k, d, p, n)| (k, d, ascii_classes(&p), n))
            .collect();
        Rules {
            // The lazy DFA of a set this size needs more cache than the
            // default, or it gives up and falls back to a much slower engine.
            set: regex::RegexSetBuilder::new(t.iter().map(|r| &r.2))
                .dfa_size_limit(64 << 20)
                .size_limit(64 << 20)
                .build()
                .expect("poisoning rules compile"),
            regexes: t
                .iter()
                .map(|r| Regex::new(&r.2).expect("poisoning rule compiles"))
                .collect(),
            table: t.into_iter().map(|(k, d, _, n)| (k, d, n)).collect(),
            negation: Regex::new(
                r"(?i)\b(?:not|never|don't|dont|avoid|without|no|nor|cannot|can't|mustn't|shouldn't)\b",
            )
            .expect("negation pattern"),
            base64: Regex::new(r"[A-Za-z0-9+/]{40,}={0,2}").expect("base64 pattern"),
            condition: Regex::new(r"(?i)\b(?:until|unless|if|once|after|before|when|whenever|only)\b")
                .expect("condition pattern"),
        }
    })
}

/// `\b` `\w` `\s` `\S` written as their ASCII forms.
fn ascii_classes(p: &str) -> String {
    p.replace(r"\b", r"(?-u:\b)")
        .replace(r"\w", "[A-Za-z0-9_]")
        .replace(r"\s", r"[\t\n\x0B\x0C\r ]")
        .replace(r"\S", r"[^\t\n\x0B\x0C\r ]")
}

/// Scan one tool definition. `other_tools` are the names of the server's
/// other tools (the tool's own name is ignored if present).
pub fn scan(tool: &Value, other_tools: &[&str]) -> Vec<Finding> {
    let own = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let names: Vec<&str> = other_tools
        .iter()
        .copied()
        .filter(|n| *n != own && distinctive(n))
        .collect();
    let mut out = Vec::new();
    let mut at = String::new();
    walk(tool, &mut at, &mut |s: &str, at: &str, is_name: bool| {
        scan_text(s, at, if is_name { &[] } else { &names }, is_name, &mut out)
    });
    // A name that looks like a sibling's (`send_emaiI` next to `send_email`)
    // is there to be picked instead of it.
    let own_skeleton = skeleton(own);
    if other_tools
        .iter()
        .any(|n| *n != own && skeleton(n) == own_skeleton)
    {
        out.push(Finding {
            kind: FindingKind::Obfuscation,
            detail: "confusable_name",
            location: "/name".to_string(),
        });
    }
    out
}

/// The TR39 skeleton of a tool name, remembered per thread: a list of n
/// tools compares each name with n others.
fn skeleton(name: &str) -> std::rc::Rc<str> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static CACHE: RefCell<HashMap<String, std::rc::Rc<str>>> = RefCell::new(HashMap::new());
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(s) = c.get(name) {
            return s.clone();
        }
        if c.len() >= 4096 {
            c.clear();
        }
        let s: std::rc::Rc<str> = unicode_security::skeleton(name).collect::<String>().into();
        c.insert(name.to_string(), s.clone());
        s
    })
}

/// Text pushed out of view: a long run of spaces or of blank lines (a UI
/// shows the start of a description; the model reads all of it).
fn padded(s: &str) -> bool {
    let mut spaces = 0;
    let mut newlines = 0;
    for c in s.chars() {
        match c {
            ' ' | '\t' | '\u{A0}' | '\u{3000}' => spaces += 1,
            '\n' | '\r' => {
                newlines += usize::from(c == '\n');
                spaces = 0;
            }
            _ => {
                spaces = 0;
                newlines = 0;
            }
        }
        if spaces >= 100 || newlines >= 12 {
            return true;
        }
    }
    false
}

fn walk(v: &Value, at: &mut String, text: &mut impl FnMut(&str, &str, bool)) {
    match v {
        Value::String(s) => text(s, at, at == "/name"),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                walk(item, at, text);
                at.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                text(k, at, true);
                walk(item, at, text);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

fn scan_text(s: &str, at: &str, names: &[&str], identifier: bool, out: &mut Vec<Finding>) {
    let first = out.len();
    let mut push = |kind, detail| {
        let f = Finding {
            kind,
            detail,
            location: at.to_string(),
        };
        if !out[first..].contains(&f) {
            out.push(f);
        }
    };
    let clean = s.is_ascii()
        && !s
            .bytes()
            .any(|b| b.is_ascii_control() && !matches!(b, b'\n' | b'\r' | b'\t'));
    let normalized = if clean {
        Cow::Borrowed(s)
    } else {
        let n = normalize(s);
        for d in n.hidden {
            push(FindingKind::HiddenUnicode, d);
        }
        if n.confusable_word {
            push(FindingKind::Obfuscation, "confusable_letters");
        }
        if n.styled >= 4 {
            push(FindingKind::Obfuscation, "styled_letters");
        }
        Cow::Owned(n.text)
    };
    if padded(&normalized) {
        push(FindingKind::Obfuscation, "whitespace_padding");
    }
    let text = decode_entities(&normalized);
    // An identifier (a name or key) reads as words: `ignore_previous_…`.
    let text = if identifier && text.contains(['_', '-']) {
        Cow::Owned(text.replace(['_', '-'], " "))
    } else {
        text
    };
    match_rules(&text, &mut push);
    // Other languages, read before the look-alike folding (which would turn
    // a Cyrillic word into mixed letters).
    if s.is_ascii() {
        lexicon::scan(s, &mut push);
    } else {
        let folded: String = s.chars().filter(|c| !is_invisible(*c)).nfkc().collect();
        lexicon::scan(&folded, &mut push);
    }
    for m in rules().base64.find_iter(&text) {
        if let Some(decoded) = readable_base64(m.as_str()) {
            push(FindingKind::Obfuscation, "encoded_text");
            match_rules(&decoded, &mut push);
        }
    }
    for name in names {
        if contains_word(s, name) {
            push(FindingKind::ToolReference, "tool_name");
        }
    }
    // Two different weak signals in one string (an order to the model and
    // a call-first rule, a credential file, the system prompt) are an
    // instruction with an action: that quarantines.
    let mut weak = out[first..]
        .iter()
        .filter(|f| f.kind == FindingKind::ModelInstruction || f.kind == FindingKind::SensitivePath)
        .filter(|f| !f.quarantines())
        .map(|f| f.detail);
    if let Some(one) = weak.next() {
        if weak.any(|d| d != one) {
            out.push(Finding {
                kind: FindingKind::ModelInstruction,
                detail: "directive_with_action",
                location: at.to_string(),
            });
        }
    }
}

fn match_rules(text: &str, push: &mut impl FnMut(FindingKind, &'static str)) {
    let r = rules();
    for i in r.set.matches(text).iter() {
        let (kind, detail, guard) = r.table[i];
        let hit = guard == Guard::None
            || r.regexes[i].find_iter(text).any(|m| {
                let before = &text[..m.start()];
                !(negated(before) || (guard == Guard::NegationOrCondition && conditioned(before)))
            });
        if hit {
            push(kind, detail);
        }
    }
}

/// Whether the few words before a match negate it ("do not include…"),
/// except "do not forget to…".
fn negated(before: &str) -> bool {
    let clause = before
        .rsplit(['.', '\n', ';', ':', '!', '?'])
        .next()
        .unwrap_or("");
    let words: Vec<&str> = clause.split_whitespace().rev().take(4).collect();
    let tail = words.into_iter().rev().collect::<Vec<_>>().join(" ");
    let lower = tail.to_ascii_lowercase();
    rules().negation.is_match(&tail) && !lower.contains("forget") && !lower.contains("fail")
}

/// Whether the clause before a match puts it under a condition ("until
/// the user has approved").
fn conditioned(before: &str) -> bool {
    let clause = before
        .rsplit(['.', '\n', ';', ':', '!', '?'])
        .next()
        .unwrap_or("");
    rules().condition.is_match(clause)
}

/// `&lt;` `&gt;` `&amp;` `&quot;` `&#39;` `&#NN;` `&#xHH;` decoded.
fn decode_entities(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest[..rest.len().min(12)].find(';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => name.strip_prefix('#').and_then(|n| {
                    let v = match n.strip_prefix(['x', 'X']) {
                        Some(h) => u32::from_str_radix(h, 16).ok(),
                        None => n.parse().ok(),
                    };
                    v.and_then(char::from_u32)
                }),
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The text a base64 run decodes to, when it is readable prose.
fn readable_base64(run: &str) -> Option<String> {
    let body = run.trim_end_matches('=');
    let usable = body.len() - usize::from(body.len() % 4 == 1);
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&body[..usable])
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let printable = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    (printable && text.split_whitespace().count() >= 3).then_some(text)
}

/// Names specific enough that their mention is a reference, not prose.
fn distinctive(name: &str) -> bool {
    let hump = name
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    name.contains('_') || name.contains('-') || hump || name.chars().count() >= 8
}

fn contains_word(hay: &str, needle: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

#[cfg(test)]
#[path = "poison_tests.rs"]
mod tests;
