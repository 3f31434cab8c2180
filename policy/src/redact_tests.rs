use super::*;
use mcp_warden_crds::policy::RedactionPattern;
use serde_json::json;

/// Compiled once: compiling every detector takes a while in a debug build.
fn all() -> &'static Redactor {
    static R: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    R.get_or_init(|| Redactor::new(&Redaction::default()).unwrap())
}

fn red(text: &str) -> (String, Vec<(String, u32)>) {
    let r = all();
    let mut c = r.counts();
    let out = r.redact(text, &mut c).into_owned();
    let counts = c.iter().map(|(k, n)| (k.to_string(), n)).collect();
    (out, counts)
}

#[test]
fn builtin_kinds_are_the_kinds_of_the_table_in_order() {
    let mut kinds: Vec<&str> = Vec::new();
    for b in BUILTINS {
        if !kinds.contains(&b.kind) {
            kinds.push(b.kind);
        }
    }
    assert_eq!(kinds, BUILTIN_KINDS);
}

#[test]
fn each_original_kind_is_found() {
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
        ("{\"api_key\": \"s3cr3tv4lue99aaZZ\"}", "generic_secret"),
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
fn the_whole_token_goes_not_a_prefix() {
    // A token longer than its format's usual length loses its tail too.
    let long = format!("ghp_{}", "A1b2C3d4E5".repeat(6));
    let (out, _) = red(&format!("t={long} end"));
    assert_eq!(out, "t=[REDACTED:github_token] end");
    let npm = format!("npm_{}", "Zz09".repeat(12));
    assert_eq!(red(&npm).0, "[REDACTED:npm_token]");
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
    assert_eq!(
        red("postgres://app:S3cr3t-pass@db.internal:5432/app").0,
        "postgres://app:[REDACTED:database_url]@db.internal:5432/app"
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
        "password: required",            // a word, not a password
        "api_key: ${OPENAI_API_KEY}",    // a placeholder
        "nextPageToken: CAEQAhgBIhAKC2Zvb2Jhcg", // a page handle
        "compass: north-northwest-by-west",
        "ghp_short",
        "AKIAIOSFODNN7EXAMPL", // 19 chars
        "the eyJ prefix alone",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl user@host",
        "https://user@example.com/path",
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
fn a_secret_split_over_two_text_items_is_cut_from_both() {
    let r = all();
    let token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
    for cut in [5, 12, 30, token.len() - 3] {
        let (a, b) = token.split_at(cut);
        let mut v = json!({"content": [
            {"type": "text", "text": format!("here it is: {a}")},
            {"type": "text", "text": format!("{b} and more")},
        ]});
        let mut c = r.counts();
        r.redact_json(&mut v, &mut c);
        let s = v.to_string();
        assert!(!s.contains(b), "{cut}: {s}");
        assert_eq!(
            v["content"][0]["text"],
            "here it is: [REDACTED:github_token]"
        );
        assert_eq!(v["content"][1]["text"], " and more");
        assert_eq!(c.total(), 1, "{cut}");
    }
    // Plain strings in an array too; and a password split after its key.
    let mut v = json!(["export DB_PASSWORD=", "Xk9#mP2$vL7qR4wz\nnext"]);
    let mut c = r.counts();
    r.redact_json(&mut v, &mut c);
    assert_eq!(
        v,
        json!(["export DB_PASSWORD=", "[REDACTED:generic_secret]\nnext"])
    );
}

/// Results whose raw bytes a byte scan finds clean while the decoded text
/// the client reads holds a secret: the JSON pass finds each one, and the
/// former fast path's test never lets such a result skip it.
#[test]
fn decoded_values_are_what_is_redacted() {
    let r = Redactor::new(&Redaction::default()).unwrap();
    let ghp = format!("ghp_{}", "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5");
    let akia = "AKIAQ7ZXBN4HJW2KLM5R";
    let sk = format!("sk_live_{}", "4eC39HqLyjWDarjtT1zdp7dc9Xk2");
    let xoxb = "xoxb-2748-1234567890-Zq8Wm3Xn5Lp7Rt9Vb";
    let cases = [
        (format!("token:\t{ghp}"), ghp.clone()),
        (format!("keys\n{akia}\n"), akia.to_string()),
        (format!("stripe\n{sk}"), sk.clone()),
        (format!("slack\t{xoxb}"), xoxb.to_string()),
        (
            "+DB_PASSWORD=\"hunter2 with spaces\"".to_string(),
            "hunter2 with spaces".to_string(),
        ),
        (
            "{\"db_password\": \"Tr0ub4dor&3;x,yz\"}".to_string(),
            "Tr0ub4dor&3;x,yz".to_string(),
        ),
        (
            "_authToken=ba03fc6f-ecc2-3398-4e3e-52d639302a90".to_string(),
            "ba03fc6f-ecc2-3398-4e3e-52d639302a90".to_string(),
        ),
    ];
    for (text, secret) in &cases {
        let result = json!({"content": [{"type": "text", "text": text}]});
        let raw = serde_json::to_vec(&result).unwrap();
        let mut counts = r.counts();
        let mut decoded: Value = serde_json::from_slice(&raw).unwrap();
        r.redact_json(&mut decoded, &mut counts);
        let out = decoded["content"][0]["text"].as_str().unwrap();
        assert!(!out.contains(secret.as_str()), "{text:?} -> {out:?}");
        assert!(counts.total() >= 1, "{text:?}");
        // The raw bytes alone cannot be trusted to show it.
        let mut raw_counts = r.counts();
        let raw_clean = {
            let _ = r.redact(&String::from_utf8_lossy(&raw), &mut raw_counts);
            raw_counts.total() == 0
        };
        assert!(
            !raw_clean || Redactor::needs_json_pass(&raw),
            "the fast path would skip {text:?}"
        );
    }
}

#[test]
fn base64_is_opened_only_when_asked() {
    let inner = "config: aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n";
    let b64 = base64::engine::general_purpose::STANDARD.encode(inner);
    let text = format!("blob {b64} end");
    assert_eq!(red(&text).0, text, "off by default");
    let r = Redactor::new(&Redaction {
        decode_base64: true,
        ..Redaction::default()
    })
    .unwrap();
    let mut c = r.counts();
    assert_eq!(
        r.redact(&text, &mut c),
        "blob [REDACTED:aws_secret_access_key] end"
    );
    // Binary (an image) and plain identifiers decode to nothing readable.
    let png = base64::engine::general_purpose::STANDARD.encode([
        0x89u8, b'P', b'N', b'G', 13, 10, 26, 10, 0, 0, 0, 13, b'I', b'H', b'D', b'R', 0, 0, 1, 0,
        0, 0, 1, 0, 8, 6,
    ]);
    for t in [
        png.as_str(),
        "some_long_identifier_name_in_code",
        "0123456789abcdef0123456789abcdef",
    ] {
        let mut c = r.counts();
        assert_eq!(r.redact(t, &mut c), t);
    }
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
        decode_base64: false,
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
        decode_base64: false,
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
fn secrets_without_a_key_value_form_and_newer_provider_formats() {
    let tail = "Zq8Xw2Lr5Tn1Vb7Mc4Kp9Hd3Gs6Jf0Ya2Ue8Io5Pl1Qk7Rm3";
    for (text, secret) in [
        (
            "machine api.example.com login me password s3cr3t-Pa55".to_string(),
            "s3cr3t-Pa55".to_string(),
        ),
        (
            r#"<add key="StripeApiSecret" value="Xk29&dLq!mZ8pw" />"#.to_string(),
            "Xk29&dLq!mZ8pw".to_string(),
        ),
        (
            "mysql -u root -pHq72kLmZ9x app".to_string(),
            "Hq72kLmZ9x".to_string(),
        ),
        (format!("notion ntn_{tail}"), format!("ntn_{tail}")),
        (
            format!("DOPPLER=dp.st.dev.{tail}"),
            format!("dp.st.dev.{tail}"),
        ),
        (format!("figma figd_{tail}"), format!("figd_{tail}")),
        (
            format!("deepseek sk-{}", &tail[..36]),
            format!("sk-{}", &tail[..36]),
        ),
        (
            format!("shippo_live_{}", "ab12".repeat(10)),
            format!("shippo_live_{}", "ab12".repeat(10)),
        ),
    ] {
        let (out, _) = red(&text);
        assert!(
            !out.contains(&secret[secret.len() - 8..]),
            "{text} -> {out}"
        );
    }
    for benign in [
        "machine learning models need a password manager",
        "notion page secret_sauce_recipes",
        "mysql -u root -p app (asks for the password)",
    ] {
        assert_eq!(red(benign).0, benign);
    }
}
