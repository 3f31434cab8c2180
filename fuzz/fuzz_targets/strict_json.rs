//! The duplicate-key-refusing JSON reader the tools/call pipeline decides on
//! (`mcp_warden_sidecar::strict_json`), against serde_json on the same bytes.
//!
//! It must read exactly what serde_json reads, except that it refuses an
//! object with a key twice: whatever it accepts, serde_json accepts with the
//! same value; whatever serde_json accepts and it refuses has a duplicate key
//! (checked independently, on serde_json's own reading of the text).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_warden_sidecar::strict_json;
use serde_json::value::RawValue;
use serde_json::Value;

/// Whether the JSON text holds an object with the same key twice, read with
/// serde_json alone (maps of raw values keep every key as written).
fn has_duplicate_key(text: &str) -> bool {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        let Ok(pairs) = serde_json::from_str::<Vec<(String, Box<RawValue>)>>(&format!(
            "[{}]",
            object_as_pairs(trimmed)
        )) else {
            return false;
        };
        let mut keys = std::collections::HashSet::new();
        return pairs.iter().any(|(k, _)| !keys.insert(k.clone()))
            || pairs.iter().any(|(_, v)| has_duplicate_key(v.get()));
    }
    if trimmed.starts_with('[') {
        if let Ok(items) = serde_json::from_str::<Vec<Box<RawValue>>>(trimmed) {
            return items.iter().any(|v| has_duplicate_key(v.get()));
        }
    }
    false
}

/// `{"a":1,"b":2}` as `["a",1],["b",2]`, using serde_json's own tokenizer
/// (a map into a Vec of raw entries would merge duplicates).
fn object_as_pairs(text: &str) -> String {
    let mut de = serde_json::Deserializer::from_str(text);
    let mut out = Vec::new();
    let visitor = PairsVisitor(&mut out);
    if serde::Deserializer::deserialize_map(&mut de, visitor).is_err() {
        return String::new();
    }
    out.join(",")
}

struct PairsVisitor<'a>(&'a mut Vec<String>);

impl<'de> serde::de::Visitor<'de> for PairsVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
            self.0.push(format!(
                "[{},{}]",
                serde_json::to_string(&k).unwrap(),
                v.get()
            ));
        }
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let strict = strict_json::from_slice(data);
    let loose = serde_json::from_slice::<Value>(data);
    match (strict, loose) {
        (Ok(s), Ok(l)) => assert_eq!(s, l, "the strict reader read something else"),
        (Ok(_), Err(e)) => panic!("the strict reader accepted what serde_json refuses: {e}"),
        (Err(e), Ok(_)) => {
            let text = std::str::from_utf8(data).expect("serde_json read it, so it is UTF-8");
            assert!(
                e.to_string().contains("duplicate key") && has_duplicate_key(text),
                "refused without a duplicate key: {e}"
            );
        }
        (Err(_), Err(_)) => {}
    }
});
