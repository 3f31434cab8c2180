//! JSON read for a policy decision: like `serde_json::Value`, but an object
//! with the same key twice is an error.
//!
//! Where it sits: the tools/call pipeline reads the request with this before
//! deciding. Parsers disagree on duplicate keys (most keep the last, some the
//! first), and the facade forwards the client's bytes unchanged, so a
//! request whose meaning depends on the parser must not pass the policy.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Parse `bytes`, refusing duplicate object keys at any depth.
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(bytes).map(|s| s.0)
}

struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    key.escape_debug()
                )));
            }
            let Strict(value) = map.next_value()?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_serde_json_reads() {
        let text = br#"{"a":[1,-2,3.5,"x",null,true,{"b":{}}],"c":"\u00e9"}"#;
        assert_eq!(
            from_slice(text).unwrap(),
            serde_json::from_slice::<Value>(text).unwrap()
        );
    }

    #[test]
    fn refuses_duplicate_keys_at_any_depth() {
        for text in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"params":{"arguments":{"mode":"ok","mode":"root"}}}"#,
            r#"[{"x":1},{"y":1,"y":2}]"#,
            r#"{"k":1,"\u006b":2}"#,
        ] {
            let err = from_slice(text.as_bytes()).unwrap_err();
            assert!(err.to_string().contains("duplicate key"), "{text}: {err}");
        }
        assert!(from_slice(br#"{"a":{"x":1},"b":{"x":1}}"#).is_ok());
    }

    #[test]
    fn keeps_serde_json_limits() {
        assert!(from_slice(b"1e400").is_err(), "out of f64 range");
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(
            from_slice(deep.as_bytes()).is_err(),
            "the recursion limit holds"
        );
    }
}
