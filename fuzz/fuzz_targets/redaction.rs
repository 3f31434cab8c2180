//! Secret redaction (`mcp_warden_policy::Redactor`, built-in detectors plus a
//! custom one) on arbitrary text and JSON: it runs on every tool result.
//!
//! Checks: no panic (byte offsets, overlapping matches, the Luhn check); the
//! number of `[REDACTED:` markers added equals the count reported (for text
//! without `[`, so no marker was there before); JSON redaction of a string
//! equals text redaction, counts included.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mcp_warden_crds::policy::{Redaction, RedactionPattern};
use mcp_warden_policy::Redactor;
use serde_json::Value;

fn redactor() -> &'static Redactor {
    static R: OnceLock<Redactor> = OnceLock::new();
    R.get_or_init(|| {
        let cfg = Redaction {
            patterns: vec![RedactionPattern {
                name: "internal_ticket".into(),
                regex: r"TICKET-[0-9]{4,8}".into(),
            }],
            ..Redaction::default()
        };
        Redactor::new(&cfg).expect("redaction compiles")
    })
}

fuzz_target!(|data: &[u8]| {
    let r = redactor();
    if data.first() == Some(&b'{') || data.first() == Some(&b'[') {
        if let Ok(mut v) = serde_json::from_slice::<Value>(data) {
            let mut counts = r.counts();
            r.redact_json(&mut v, &mut counts);
            let _ = counts.total();
        }
    }
    let text = String::from_utf8_lossy(data);
    let mut counts = r.counts();
    let out = r.redact(&text, &mut counts);
    if !text.contains('[') {
        assert_eq!(
            out.matches("[REDACTED:").count() as u32,
            counts.total(),
            "markers vs counts for {text:?} -> {out:?}"
        );
    }
    let mut v = Value::String(text.to_string());
    let mut counts2 = r.counts();
    r.redact_json(&mut v, &mut counts2);
    assert_eq!(v.as_str(), Some(&*out));
    assert_eq!(counts.total(), counts2.total());
    let _ = counts.iter().count();
});
