//! Schema helpers shared by the three CRDs.
//!
//! The API server estimates the cost of every CEL rule from the largest value
//! the schema allows; an unbounded string or list makes that estimate explode
//! and the CRD is refused. [`bound_strings`] gives every string without a
//! `maxLength` a generous bound so the rules stay cheap, without touching the
//! shared `FacadePolicy` building blocks.

use schemars::Schema;
use serde_json::Value;

/// `maxLength` given to strings that set none (descriptions, patterns, paths).
pub const DEFAULT_MAX_STRING: u64 = 4096;

/// A schemars transform: add `maxLength` to every string schema below `schema`
/// that has none. Used as `#[schemars(transform = bound_strings)]` on specs.
pub fn bound_strings(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        let mut value = Value::Object(std::mem::take(obj));
        bound(&mut value);
        if let Value::Object(map) = value {
            *obj = map;
        }
    }
}

fn bound(value: &mut Value) {
    let Value::Object(map) = value else { return };
    let is_string = map.get("type").and_then(Value::as_str) == Some("string");
    let constrained =
        map.contains_key("enum") || map.contains_key("format") || map.contains_key("maxLength");
    if is_string && !constrained {
        map.insert("maxLength".into(), DEFAULT_MAX_STRING.into());
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(bound);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            bound(child);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(bound);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_nested_strings_but_not_enums_or_bounded_ones() {
        let mut schema: Schema = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "maxLength": 5},
                "c": {"type": "string", "enum": ["x"]},
                "d": {"type": "array", "items": {"type": "object", "properties": {"e": {"type": "string"}}}}
            }
        }))
        .unwrap();
        bound_strings(&mut schema);
        let v = schema.to_value();
        assert_eq!(v["properties"]["a"]["maxLength"], 4096);
        assert_eq!(v["properties"]["b"]["maxLength"], 5);
        assert!(v["properties"]["c"].get("maxLength").is_none());
        assert_eq!(
            v["properties"]["d"]["items"]["properties"]["e"]["maxLength"],
            4096
        );
    }
}
