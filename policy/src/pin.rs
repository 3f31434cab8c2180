//! Definition pinning: canonical JSON and the tool definition hash.
//!
//! Flow: upstream `tools/list` entry --[`definition_hash`]--> `sha256:<hex>`,
//! compared with the profile's `pin` and with the hash first seen in the
//! sidecar's life (drift). The operator publishes the same hashes in
//! MCPServer status, so both sides must produce byte-identical output.
//!
//! Canonical form (RFC 8785 / JCS style): object keys sorted by UTF-16 code
//! units, no whitespace, strings with only `"`, `\` and control characters
//! escaped (`\b \f \n \r \t`, others `\u00xx`), floats in ECMAScript
//! `Number.prototype.toString` form. One deliberate deviation: integers that
//! serde_json holds as `i64`/`u64` are written exactly, even beyond 2^53.
//!
//! The hashed object holds `name`, `description`, `inputSchema`,
//! `outputSchema` and `annotations`; a field that is absent **or null** is
//! omitted (so a server flipping between the two does not look like drift).
//! `title`, `_meta` and unknown fields are not part of the pin.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of every pin and definition hash.
pub const PIN_PREFIX: &str = "sha256:";

/// The fields of a tool definition that the pin covers, in canonical order.
const PINNED_FIELDS: [&str; 5] = [
    "annotations",
    "description",
    "inputSchema",
    "name",
    "outputSchema",
];

/// `sha256:<64 lowercase hex>` over the canonical JSON of the pinned fields.
pub fn definition_hash(tool: &Value) -> String {
    // Canonical bytes go to one buffer, hashed once: many tiny hasher
    // updates cost more than the copy.
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    buf.push(b'{');
    let mut first = true;
    for key in PINNED_FIELDS {
        match tool.get(key) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                if !first {
                    buf.push(b',');
                }
                first = false;
                write_str(&mut buf, key);
                buf.push(b':');
                write_value(&mut buf, v);
            }
        }
    }
    buf.push(b'}');
    let mut out = String::with_capacity(PIN_PREFIX.len() + 64);
    out.push_str(PIN_PREFIX);
    out.push_str(&hex::encode(Sha256::digest(&buf)));
    out
}

/// The canonical JSON text of any value.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value);
    // Only valid UTF-8 is ever written.
    String::from_utf8(out).unwrap_or_default()
}

/// Whether `s` is a well-formed pin: `sha256:` and 64 hex digits (lowercase).
pub fn is_pin(s: &str) -> bool {
    s.strip_prefix(PIN_PREFIX)
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

/// Where canonical bytes go.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}
impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

fn write_value(out: &mut impl Sink, v: &Value) {
    match v {
        Value::Null => out.put(b"null"),
        Value::Bool(true) => out.put(b"true"),
        Value::Bool(false) => out.put(b"false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_value(out, item);
            }
            out.put(b"]");
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_by(|a, b| {
                if a.is_ascii() && b.is_ascii() {
                    a.cmp(b)
                } else {
                    a.encode_utf16().cmp(b.encode_utf16())
                }
            });
            out.put(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                write_str(out, k);
                out.put(b":");
                write_value(out, &map[k.as_str()]);
            }
            out.put(b"}");
        }
    }
}

fn write_str(out: &mut impl Sink, s: &str) {
    out.put(b"\"");
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => {
                out.put(&bytes[start..i]);
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[(b >> 4) as usize],
                    HEX[(b & 0xf) as usize],
                ]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.put(&bytes[start..i]);
        out.put(esc);
        start = i + 1;
    }
    out.put(&bytes[start..]);
    out.put(b"\"");
}

fn write_number(out: &mut impl Sink, n: &serde_json::Number) {
    if let Some(i) = n.as_i64() {
        out.put(i.to_string().as_bytes());
    } else if let Some(u) = n.as_u64() {
        out.put(u.to_string().as_bytes());
    } else if let Some(f) = n.as_f64() {
        out.put(es_number(f).as_bytes());
    }
}

/// ECMAScript `Number.prototype.toString` for a finite double.
fn es_number(f: f64) -> String {
    if f == 0.0 {
        return "0".to_string();
    }
    // Rust's `{:e}` is the shortest round-trip form: `d[.ddd]e[-]x`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let exp: i32 = exp.parse().unwrap_or(0);
    let k = digits.len() as i32;
    let n = exp + 1; // value = 0.digits × 10^n
    let mut s = String::new();
    if f < 0.0 {
        s.push('-');
    }
    if k <= n && n <= 21 {
        s.push_str(&digits);
        s.extend(std::iter::repeat_n('0', (n - k) as usize));
    } else if 0 < n && n <= 21 {
        s.push_str(&digits[..n as usize]);
        s.push('.');
        s.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        s.push_str("0.");
        s.extend(std::iter::repeat_n('0', (-n) as usize));
        s.push_str(&digits);
    } else {
        s.push_str(&digits[..1]);
        if k > 1 {
            s.push('.');
            s.push_str(&digits[1..]);
        }
        s.push('e');
        s.push(if n >= 1 { '+' } else { '-' });
        s.push_str(&(n - 1).abs().to_string());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_whitespace_dropped() {
        let v: Value =
            serde_json::from_str(r#"{ "b": 1, "a": [true, null, "x"], "c": {"z": 1, "y": 2} }"#)
                .unwrap();
        assert_eq!(
            canonical_json(&v),
            r#"{"a":[true,null,"x"],"b":1,"c":{"y":2,"z":1}}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+FF21 (fullwidth A) sorts before U+1F600 by code point, but after
        // it by UTF-16 code unit (U+1F600 is the surrogate pair D83D DE00).
        let v = json!({"\u{1F600}": 1, "\u{FF21}": 2});
        assert_eq!(canonical_json(&v), "{\"\u{1F600}\":1,\"\u{FF21}\":2}");
    }

    #[test]
    fn strings_escape_only_what_jcs_escapes() {
        let v = json!("a\"b\\c\n\u{1}\u{7f}é/");
        assert_eq!(canonical_json(&v), "\"a\\\"b\\\\c\\n\\u0001\u{7f}é/\"");
    }

    #[test]
    fn numbers_follow_ecmascript() {
        let cases = [
            (1.0, "1"),
            (-0.0, "0"),
            (1.5, "1.5"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (123.456e-10, "1.23456e-8"),
            (-2.5e30, "-2.5e+30"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(es_number(f), want, "{f}");
        }
        assert_eq!(
            canonical_json(&json!([1, -3, 18446744073709551615u64, 2.0])),
            "[1,-3,18446744073709551615,2]"
        );
    }

    #[test]
    fn hash_covers_pinned_fields_only() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object"}});
        let b = json!({"inputSchema": {"type": "object"}, "description": "d", "name": "t", "title": "ignored", "outputSchema": null});
        assert_eq!(definition_hash(&a), definition_hash(&b));
        let c = json!({"name": "t", "description": "d2", "inputSchema": {"type": "object"}});
        assert_ne!(definition_hash(&a), definition_hash(&c));
        let d = json!({"name": "t", "description": "d", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}});
        assert_ne!(definition_hash(&a), definition_hash(&d));
        assert!(is_pin(&definition_hash(&a)));
    }

    #[test]
    fn hash_is_sha256_of_canonical_subset() {
        let tool = json!({"name": "echo", "inputSchema": {"type": "object"}, "extra": 1});
        let canon = r#"{"inputSchema":{"type":"object"},"name":"echo"}"#;
        let want = format!("sha256:{}", hex::encode(Sha256::digest(canon.as_bytes())));
        assert_eq!(definition_hash(&tool), want);
    }

    #[test]
    fn pin_shape() {
        assert!(is_pin(&format!("sha256:{}", "a".repeat(64))));
        assert!(!is_pin(&format!("sha256:{}", "A".repeat(64))));
        assert!(!is_pin(&format!("sha256:{}", "a".repeat(63))));
        assert!(!is_pin(&format!("sha1:{}", "a".repeat(64))));
        assert!(!is_pin(&format!("sha256:{}g", "a".repeat(63))));
    }
}
