//! The content detectors on lines of JSON, for measurements outside the
//! test suite (`make bench-detectors` scores them beside other scanners).
//!
//! Flow: one JSON object per stdin line --[`poison::scan`] and
//! [`CompiledPolicy::assess`] (mode `scan`) or [`Redactor::redact`] (mode
//! `redact`)--> one JSON object per stdout line, with the time taken.
//!
//! `scan`: in `{"tool": {...}, "others": ["sibling", ...]}`, out
//! `{"verdict": "quarantine"|"warn"|"clean", "reasons": ["kind/detail at
//! /json/pointer", ...], "micros": 12.5}`: what the facade would do with
//! the definition under a policy that quarantines on the scan (the
//! default), and why.
//! `redact`: in `{"text": "..."}`, out `{"text": "...", "micros": 3.1}`.

#![forbid(unsafe_code)]

use std::io::{BufRead, Write};
use std::time::Instant;

use mcp_warden_policy::spec::{FacadePolicy, Redaction};
use mcp_warden_policy::{poison, CompiledPolicy, ObservedTool, Redactor};
use serde_json::{json, Value};

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let policy = CompiledPolicy::compile(
        &FacadePolicy::from_yaml_str("defaultAction: allow", "detectors").expect("policy"),
    )
    .expect("compile");
    let redactor = Redactor::new(&Redaction::default()).expect("redactor");
    // The rule sets compile on first use; that once-per-process cost is not
    // a definition's.
    poison::scan(&json!({"name": "warm", "description": "up"}), &[]);
    redactor.redact("warm up", &mut redactor.counts());
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let line = line.expect("stdin");
        if line.trim().is_empty() {
            continue;
        }
        let row: Value = serde_json::from_str(&line).expect("a JSON object per line");
        let answer = match mode.as_str() {
            "scan" => scan(&policy, &row),
            "redact" => redact(&redactor, &row),
            _ => {
                eprintln!("usage: detectors scan|redact < lines.jsonl");
                std::process::exit(2);
            }
        };
        writeln!(out, "{answer}").expect("stdout");
    }
}

fn scan(policy: &CompiledPolicy, row: &Value) -> Value {
    let tool = &row["tool"];
    let others: Vec<&str> = row["others"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let start = Instant::now();
    let findings = poison::scan(tool, &others);
    let verdict = match ObservedTool::new(tool.clone()) {
        Some(observed) => match policy.assess(&observed, None, &findings) {
            Some(_) => "quarantine",
            None if findings.is_empty() => "clean",
            None => "warn",
        },
        // A definition the facade cannot read is never listed.
        None => "quarantine",
    };
    let micros = start.elapsed().as_secs_f64() * 1e6;
    let reasons: Vec<String> = findings
        .iter()
        .map(|f| format!("{} at {}", f.reason(), f.location))
        .collect();
    json!({"verdict": verdict, "reasons": reasons, "micros": micros})
}

fn redact(redactor: &Redactor, row: &Value) -> Value {
    let text = row["text"].as_str().unwrap_or_default();
    let start = Instant::now();
    let mut counts = redactor.counts();
    let out = redactor.redact(text, &mut counts);
    let micros = start.elapsed().as_secs_f64() * 1e6;
    json!({"text": out, "micros": micros})
}
