//! The policy crate's detectors measured on the corpora in tests/corpora/
//! (cases of our own, broad): argument rules on path and command cases, redaction on
//! credential formats and secret-looking benign strings, the poisoning scan
//! on poisoned and real benign tool definitions. Each test prints its
//! numbers (`cargo test -p mcp-warden-policy --test corpora -- --nocapture`)
//! and fails below its bar, listing the cases that missed.
//!
//! The corpora are written by tests/corpora/make_*.py and harvest.py; a
//! case carries its expected outcome and a one-line why.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use mcp_warden_policy::spec::{FacadePolicy, Redaction, Role};
use mcp_warden_policy::{poison, CompiledPolicy, Decision, Denial, ObservedTool, Redactor};
use serde_json::{json, Value};

fn corpus(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpora")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
        .collect()
}

/// In the fixed third of a corpus set aside (`"split": "heldout"`, by a
/// hash of the case): the detectors are never tuned on it.
fn held_out(case: &Value) -> bool {
    case["split"] == "heldout"
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        100.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// Judge every case of an argument-rule corpus; expected vs got per case.
fn argument_corpus(name: &str, min_cases: usize) {
    let rows = corpus(name);
    let mut policies: HashMap<String, (CompiledPolicy, ObservedTool)> = HashMap::new();
    for row in rows.iter().filter(|r| r.get("define").is_some()) {
        let id = row["define"].as_str().unwrap().to_string();
        let doc = json!({"tools": [{"name": "t", "writes": false, "arguments": [row["rule"]]}]});
        let p = FacadePolicy::from_yaml_str(&doc.to_string(), name).unwrap();
        let compiled = CompiledPolicy::compile(&p).unwrap_or_else(|e| panic!("{id}: {e:?}"));
        let tool =
            ObservedTool::new(json!({"name": "t", "annotations": {"readOnlyHint": true}})).unwrap();
        policies.insert(id, (compiled, tool));
    }
    let mut totals: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut misses = Vec::new();
    let cases: Vec<&Value> = rows.iter().filter(|r| r.get("value").is_some()).collect();
    for case in &cases {
        let (policy, tool) = &policies[case["rule"].as_str().unwrap()];
        let field = if name.starts_with("path") {
            "path"
        } else {
            "cmd"
        };
        let args = json!({ field: case["value"] });
        let got = match policy.decide_call("t", Some(Role::Admin), false, &args, |_| Some(tool)) {
            Decision::Allow(g) if g.approval.is_some() => "check",
            Decision::Allow(_) => "pass",
            Decision::Deny(Denial::ArgumentDenied { .. }) => "deny",
            Decision::Deny(other) => panic!("unexpected denial {other:?}"),
        };
        let want = case["expect"].as_str().unwrap();
        let t = totals.entry(match want {
            "pass" => "pass",
            "check" => "check",
            _ => "deny",
        });
        let e = t.or_default();
        e.1 += 1;
        if got == want {
            e.0 += 1;
        } else {
            misses.push(format!(
                "  {:?} ({}): expected {want}, got {got} — {}",
                case["value"], case["rule"], case["why"]
            ));
        }
    }
    println!("{name}: {} cases", cases.len());
    for (k, (ok, of)) in &totals {
        println!("  {k} cases judged {k}: {ok}/{of} ({:.1}%)", pct(*ok, *of));
    }
    assert!(
        cases.len() >= min_cases,
        "{name}: only {} cases",
        cases.len()
    );
    assert!(
        misses.is_empty(),
        "{name}: {} cases missed (bar: 100%):\n{}",
        misses.len(),
        misses.join("\n")
    );
}

#[test]
fn argument_rules_on_paths() {
    argument_corpus("paths.jsonl", 150);
}

#[test]
fn argument_rules_on_commands() {
    argument_corpus("commands.jsonl", 150);
}

/// No piece of 8 characters (or the whole, when shorter) of `secret` is
/// left in `out`, markers aside, unless the context around the secret has
/// the same piece (`CLOJARS_PASSWORD=CLOJARS_…`).
fn fully_removed(text: &str, out: &str, secret: &str) -> bool {
    let context = text.replace(secret, " ");
    let mut bare = String::new();
    let mut rest = out;
    while let Some(i) = rest.find("[REDACTED:") {
        bare.push_str(&rest[..i]);
        bare.push(' ');
        rest = rest[i..].split_once(']').map_or("", |(_, r)| r);
    }
    bare.push_str(rest);
    let chars: Vec<char> = secret.chars().collect();
    let w = chars.len().min(8);
    chars.windows(w).all(|piece| {
        let piece: String = piece.iter().collect();
        !bare.contains(&piece) || context.contains(&piece)
    })
}

#[test]
fn redaction_of_secret_formats_and_benign_strings() {
    let r = Redactor::new(&Redaction::default()).unwrap();
    let secrets = corpus("secrets.jsonl");
    let (mut removed, mut split_removed, mut kind_right) = (0, 0, 0);
    let (mut held_removed, held_n) = (0, secrets.iter().filter(|c| held_out(c)).count());
    let mut misses = Vec::new();
    for case in &secrets {
        let (text, secret) = (
            case["text"].as_str().unwrap(),
            case["secret"].as_str().unwrap(),
        );
        let mut counts = r.counts();
        let out = r.redact(text, &mut counts);
        if fully_removed(text, &out, secret) {
            removed += 1;
            held_removed += usize::from(held_out(case));
        } else {
            misses.push(format!("  {}: {out:?} — {}", case["kind"], case["why"]));
        }
        if counts.get(case["kind"].as_str().unwrap()) > 0 {
            kind_right += 1;
        }
        // The same text split in the middle of the secret over two content items.
        let at = text.find(secret).unwrap() + secret.len() / 2;
        let at = (at..).find(|i| text.is_char_boundary(*i)).unwrap();
        let mut v = json!({"content": [{"type": "text", "text": &text[..at]}, {"type": "text", "text": &text[at..]}]});
        let mut counts = r.counts();
        r.redact_json(&mut v, &mut counts);
        let joined = format!(
            "{}{}",
            v["content"][0]["text"].as_str().unwrap(),
            v["content"][1]["text"].as_str().unwrap()
        );
        if fully_removed(text, &joined, secret) {
            split_removed += 1;
        } else {
            misses.push(format!(
                "  split {}: {joined:?} — {}",
                case["kind"], case["why"]
            ));
        }
    }
    // As the client reads it: the text as a tool result's content, through
    // the wire bytes and back (escapes decoded), redacted by redact_json.
    let mut wire_removed = 0;
    for case in &secrets {
        let (text, secret) = (
            case["text"].as_str().unwrap(),
            case["secret"].as_str().unwrap(),
        );
        let raw =
            serde_json::to_vec(&json!({"content": [{"type": "text", "text": text}]})).unwrap();
        let mut v: Value = serde_json::from_slice(&raw).unwrap();
        let mut counts = r.counts();
        r.redact_json(&mut v, &mut counts);
        if fully_removed(text, v["content"][0]["text"].as_str().unwrap(), secret) {
            wire_removed += 1;
        } else {
            misses.push(format!("  wire {}: {}", case["kind"], case["why"]));
        }
    }
    // Inside base64, when the policy asks for it.
    let b64 = Redactor::new(&Redaction {
        decode_base64: true,
        ..Redaction::default()
    })
    .unwrap();
    let mut b64_removed = 0;
    for case in &secrets {
        use base64::Engine;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(case["text"].as_str().unwrap());
        let mut counts = b64.counts();
        let text = format!("payload: {encoded} end");
        let out = b64.redact(&text, &mut counts);
        if !out.contains(&encoded) && out.contains("[REDACTED:") {
            b64_removed += 1;
        } else {
            misses.push(format!("  base64 {} — {}", case["kind"], case["why"]));
        }
    }
    let benign = corpus("secretish_benign.jsonl");
    let mut touched = Vec::new();
    let mut held_touched = 0;
    for (set, label) in [(&r, "default"), (&b64, "decodeBase64")] {
        for case in &benign {
            let text = case["text"].as_str().unwrap();
            let mut counts = set.counts();
            let out = set.redact(text, &mut counts);
            if out != text {
                held_touched += usize::from(held_out(case));
                touched.push(format!("  [{label}] {text:?} -> {out:?} — {}", case["why"]));
            }
        }
    }
    let held_benign_checks = 2 * benign.iter().filter(|c| held_out(c)).count();
    let n = secrets.len();
    println!(
        "redaction: {n} secret formats, {} benign strings",
        benign.len()
    );
    println!("  fully removed: {removed}/{n} ({:.1}%)", pct(removed, n));
    println!(
        "  fully removed, held-out third: {held_removed}/{held_n} ({:.1}%)",
        pct(held_removed, held_n)
    );
    println!(
        "  fully removed when split over two text items: {split_removed}/{n} ({:.1}%)",
        pct(split_removed, n)
    );
    println!(
        "  fully removed from a tool result's decoded JSON: {wire_removed}/{n} ({:.1}%)",
        pct(wire_removed, n)
    );
    println!(
        "  fully removed inside base64 (decodeBase64): {b64_removed}/{n} ({:.1}%)",
        pct(b64_removed, n)
    );
    println!(
        "  reported under the expected kind: {kind_right}/{n} ({:.1}%)",
        pct(kind_right, n)
    );
    let benign_checks = 2 * benign.len();
    println!(
        "  benign strings touched: {}/{benign_checks} ({:.1}%)",
        touched.len(),
        pct(touched.len(), benign_checks)
    );
    println!(
        "  benign strings touched, held-out third: {held_touched}/{held_benign_checks} ({:.1}%)",
        pct(held_touched, held_benign_checks)
    );
    if !misses.is_empty() || !touched.is_empty() {
        println!(
            "misses:\n{}\ntouched:\n{}",
            misses.join("\n"),
            touched.join("\n")
        );
    }
    assert!(n >= 200 && benign.len() >= 300, "corpus too small");
    for (what, got, of) in [("whole", removed, n), ("held-out", held_removed, held_n)] {
        assert!(
            pct(got, of) >= 98.0,
            "{what}: {got}/{of} formats fully removed, bar 98%"
        );
    }
    assert!(
        pct(held_touched, held_benign_checks) <= 1.0,
        "held-out: {held_touched} benign strings touched, bar 1%"
    );
    for (what, got) in [
        ("split", split_removed),
        ("decoded JSON", wire_removed),
        ("base64", b64_removed),
    ] {
        assert!(
            pct(got, n) >= 97.0,
            "{what}: {got}/{n} fully removed, bar 97%"
        );
    }
    assert!(
        pct(touched.len(), benign_checks) <= 1.0,
        "{} benign strings touched, bar 1%",
        touched.len()
    );
}

/// Siblings the poisoned and hand-written definitions are listed beside
/// (the names their payloads mention).
const SIBLINGS: [&str; 10] = [
    "get_weather",
    "add",
    "search_docs",
    "translate_text",
    "create_invoice",
    "list_events",
    "format_code",
    "send_message",
    "read_file",
    "send_email",
];

/// Caught / of, for the whole corpus and for its held-out third.
#[derive(Default)]
struct Tally {
    all: (usize, usize),
    held: (usize, usize),
}

impl Tally {
    fn add(&mut self, case: &Value, hit: bool) {
        self.all.1 += 1;
        self.all.0 += usize::from(hit);
        if held_out(case) {
            self.held.1 += 1;
            self.held.0 += usize::from(hit);
        }
    }
    fn show(&self) -> String {
        format!(
            "{}/{} ({:.1}%), held out {}/{} ({:.1}%)",
            self.all.0,
            self.all.1,
            pct(self.all.0, self.all.1),
            self.held.0,
            self.held.1,
            pct(self.held.0, self.held.1)
        )
    }
}

#[test]
fn poisoning_scan_recall_and_false_quarantines() {
    let policy = CompiledPolicy::compile(
        &FacadePolicy::from_yaml_str("defaultAction: allow", "corpus").unwrap(),
    )
    .unwrap();
    let quarantined = |tool: &Value, others: &[&str]| {
        let findings = poison::scan(tool, others);
        let observed = ObservedTool::new(tool.clone()).unwrap();
        (policy.assess(&observed, None, &findings), findings)
    };
    let why = |findings: &[mcp_warden_policy::Finding]| {
        findings
            .iter()
            .map(|f| format!("{} at {}", f.reason(), f.location))
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Benign: harvested from real servers (beside their own siblings), and
    // hand-written wording that looks like an attack.
    let benign = corpus("poison_benign.jsonl");
    let hard = corpus("poison_hard_benign.jsonl");
    let mut by_source: HashMap<&str, Vec<&str>> = HashMap::new();
    for row in &benign {
        by_source
            .entry(row["source"].as_str().unwrap())
            .or_default()
            .push(row["tool"]["name"].as_str().unwrap());
    }
    let (mut real_fp, mut hard_fp) = (Tally::default(), Tally::default());
    let mut false_quarantine = Vec::new();
    let mut warned = 0;
    for (rows, tally) in [(&benign, &mut real_fp), (&hard, &mut hard_fp)] {
        for row in rows.iter() {
            let others: &[&str] = match row["source"].as_str().and_then(|s| by_source.get(s)) {
                Some(names) => names,
                None => &SIBLINGS,
            };
            let (q, findings) = quarantined(&row["tool"], others);
            tally.add(row, q.is_some());
            if let Some(q) = q {
                false_quarantine.push(format!(
                    "  {} ({}): {} — {}",
                    row["tool"]["name"],
                    row["source"],
                    q.detail().unwrap_or_default(),
                    why(&findings)
                ));
            } else if !findings.is_empty() {
                warned += 1;
            }
        }
    }
    let poisoned = corpus("poison_poisoned.jsonl");
    let mut recall = Tally::default();
    let mut by_class: BTreeMap<String, Tally> = BTreeMap::new();
    let mut missed = Vec::new();
    for row in &poisoned {
        let (q, findings) = quarantined(&row["tool"], &SIBLINGS);
        let class = row["class"].as_str().unwrap().split('+').next().unwrap();
        recall.add(row, q.is_some());
        by_class
            .entry(class.to_string())
            .or_default()
            .add(row, q.is_some());
        if q.is_none() {
            missed.push(format!(
                "  {} {} at {} — {} (found: {})",
                row["id"],
                row["class"],
                row["location"],
                row["why"],
                why(&findings)
            ));
        }
    }
    println!(
        "poisoning scan: {} poisoned, {} benign definitions from real servers, {} hard benign",
        poisoned.len(),
        benign.len(),
        hard.len()
    );
    println!("  poisoned quarantined (recall): {}", recall.show());
    for (class, t) in &by_class {
        println!("    {class}: {}", t.show());
    }
    println!("  real benign quarantined: {}", real_fp.show());
    println!("  hard benign quarantined: {}", hard_fp.show());
    println!("  benign with warnings only: {warned}");
    if !missed.is_empty() || !false_quarantine.is_empty() {
        println!(
            "missed:\n{}\nfalsely quarantined:\n{}",
            missed.join("\n"),
            false_quarantine.join("\n")
        );
    }
    assert!(
        poisoned.len() >= 200 && benign.len() >= 300 && hard.len() >= 30,
        "corpus too small"
    );
    for (what, (got, of)) in [("whole", recall.all), ("held-out", recall.held)] {
        assert!(pct(got, of) >= 95.0, "{what}: recall {got}/{of}, bar 95%");
    }
    // The bar is on benign definitions: those of real servers alone, and
    // with the hand-written hard ones (a set of 43, where one case is 2.3%:
    // it is printed above, and not a bar of its own).
    let all_fp = Tally {
        all: (real_fp.all.0 + hard_fp.all.0, real_fp.all.1 + hard_fp.all.1),
        held: (
            real_fp.held.0 + hard_fp.held.0,
            real_fp.held.1 + hard_fp.held.1,
        ),
    };
    for (what, t) in [("real", &real_fp), ("all", &all_fp)] {
        for (part, (got, of)) in [("whole", t.all), ("held-out", t.held)] {
            assert!(
                pct(got, of) <= 1.0,
                "{what} benign, {part}: {got}/{of} quarantined, bar 1%"
            );
        }
    }
}
