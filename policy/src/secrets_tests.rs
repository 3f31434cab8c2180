//! Tests of the built-in detectors' patterns and checks (secrets.rs).

use super::*;

#[test]
fn every_pattern_compiles() {
    for b in BUILTINS {
        regex::Regex::new(b.pattern).unwrap_or_else(|e| panic!("{}: {e}", b.kind));
    }
}

#[test]
fn checks() {
    assert!(luhn("4111111111111111"));
    assert!(luhn("378282246310005"));
    assert!(!luhn("4111111111111112"));
    assert!(!luhn("411111111111"));
    for p in [
        "<your-token>",
        "${API_KEY}",
        "{{ token }}",
        "xxxxxxxxxxxxxxxx",
        "********",
        "changeme123",
        "your_api_key_here",
        "REDACTED",
    ] {
        assert!(placeholder(p), "{p}");
    }
    assert!(passes(Check::Random, "token=", "q8Zr2LmT7vWx9Kp3Nd5F"));
    for v in [
        "aaaaaaaaaaaaaaaaaaaa",
        "some_identifier_name",
        "/usr/local/bin/tool",
        "https://x.example/y",
    ] {
        assert!(!passes(Check::Random, "token=", v), "{v}");
    }
    assert!(!passes(
        Check::Random,
        "nextPageToken: ",
        "CAEQAhgBIhAKC2Zvbw"
    ));
    assert!(passes(Check::Password, "", "hunter2hunter2"));
    assert!(passes(Check::Password, "", "correcthorse"));
    assert!(passes(Check::Password, "", "password123"));
    assert!(!passes(Check::Password, "", "required"));
    assert!(!passes(Check::Password, "", "hunter2"));
    assert!(!passes(Check::Password, "PWD=", "/home/alice/projects"));
}
