//! Schema helpers shared by the three CRDs.
//!
//! The API server estimates the cost of every CEL rule from the largest value
//! the schema allows; an unbounded string or list makes that estimate explode
//! and the CRD is refused (`estimated rule cost exceeds budget`). The API
//! server also warns about every `format` it does not know, and schemars
//! writes `uint64`/`uint32` for unsigned Rust integers.
//!
//! [`crd_bounds`] fixes both for a whole spec, as a schemars transform, so the
//! shared `FacadePolicy` building blocks (`crate::policy`) stay plain Rust
//! types: fields added there later get the same bounds without a thought.
//! [`set_at`] gives one field a tighter bound (or a better description) from
//! the CRD that embeds it, where the shared type cannot know the right value.

use schemars::Schema;
use serde_json::{Map, Value};

/// `maxLength` given to strings that set none (descriptions, patterns, paths).
pub const DEFAULT_MAX_STRING: u64 = 4096;
/// `maxItems` given to lists that set none.
pub const DEFAULT_MAX_ITEMS: u64 = 256;
/// Integer formats the API server knows; any other (`uint64`, `uint32`…) is
/// dropped, keeping the `minimum: 0` schemars writes next to it.
const KNOWN_INTEGER_FORMATS: [&str; 2] = ["int32", "int64"];

/// A schemars transform for a CRD spec: every string without a `maxLength`
/// gets [`DEFAULT_MAX_STRING`], every list without a `maxItems` gets
/// [`DEFAULT_MAX_ITEMS`], and integer formats the API server does not know
/// are removed. Used as `#[schemars(transform = crd_bounds)]` on specs.
pub fn crd_bounds(schema: &mut Schema) {
    with_value(schema, bound);
}

/// Set `keys` on the subschema at JSON `pointer` (e.g.
/// `/items/properties/name`) of `schema`.
///
/// # Panics
/// When nothing is at `pointer`: the type the bound was written for has
/// changed shape, and the generated CRD would silently lose the bound.
pub fn set_at(schema: &mut Schema, pointer: &str, keys: &[(&str, Value)]) {
    with_value(schema, |v| {
        let target = v
            .pointer_mut(pointer)
            .and_then(Value::as_object_mut)
            .unwrap_or_else(|| panic!("no subschema at {pointer}"));
        for (key, value) in keys {
            target.insert((*key).to_string(), value.clone());
        }
    });
}

fn with_value(schema: &mut Schema, f: impl FnOnce(&mut Value)) {
    if let Some(obj) = schema.as_object_mut() {
        let mut value = Value::Object(std::mem::take(obj));
        f(&mut value);
        if let Value::Object(map) = value {
            *obj = map;
        }
    }
}

/// Whether a schema's `type` is `ty`, or a list holding it (schemars writes
/// `["string", "null"]` for an `Option<String>` before kube turns it into
/// `nullable: true`).
fn has_type(map: &Map<String, Value>, ty: &str) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == ty,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == ty),
        _ => false,
    }
}

fn bound_string(map: &mut Map<String, Value>) {
    let constrained =
        map.contains_key("enum") || map.contains_key("format") || map.contains_key("maxLength");
    if has_type(map, "string") && !constrained {
        map.insert("maxLength".into(), DEFAULT_MAX_STRING.into());
    }
}

fn bound(value: &mut Value) {
    walk(value, &mut |map| {
        bound_string(map);
        if has_type(map, "array") && !map.contains_key("maxItems") {
            map.insert("maxItems".into(), DEFAULT_MAX_ITEMS.into());
        }
        if has_type(map, "integer") {
            let known = map
                .get("format")
                .and_then(Value::as_str)
                .is_none_or(|f| KNOWN_INTEGER_FORMATS.contains(&f));
            if !known {
                map.remove("format");
            }
        }
    });
}

/// Call `f` on every subschema object below (and including) `value`.
fn walk(value: &mut Value, f: &mut impl FnMut(&mut Map<String, Value>)) {
    let Value::Object(map) = value else { return };
    f(map);
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            children.values_mut().for_each(|c| walk(c, f));
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key) {
            walk(child, f);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            children.iter_mut().for_each(|c| walk(c, f));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn bounds_nested_strings_but_not_enums_or_bounded_ones() {
        let mut s = schema(json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "string", "maxLength": 5},
                "c": {"type": "string", "enum": ["x"]},
                "d": {"type": "array", "items": {"type": "object", "properties": {"e": {"type": "string"}}}},
                "f": {"type": ["string", "null"]}
            }
        }));
        crd_bounds(&mut s);
        let v = s.to_value();
        assert_eq!(v["properties"]["a"]["maxLength"], 4096);
        assert_eq!(v["properties"]["b"]["maxLength"], 5);
        assert!(v["properties"]["c"].get("maxLength").is_none());
        assert_eq!(
            v["properties"]["d"]["items"]["properties"]["e"]["maxLength"],
            4096
        );
        assert_eq!(v["properties"]["f"]["maxLength"], 4096, "Option<String>");
    }

    #[test]
    fn crd_bounds_bounds_lists_and_drops_unknown_integer_formats() {
        let mut s = schema(json!({
            "type": "object",
            "properties": {
                "list": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                "short": {"type": ["array", "null"], "maxItems": 3, "items": {"type": "string"}},
                "u": {"type": ["integer", "null"], "format": "uint64", "minimum": 0},
                "i32": {"type": "integer", "format": "int32"},
                "i64": {"type": "integer", "format": "int64"},
                "when": {"type": "string", "format": "date-time"}
            }
        }));
        crd_bounds(&mut s);
        let v = s.to_value();
        let p = &v["properties"];
        assert_eq!(p["list"]["maxItems"], 256);
        assert_eq!(p["list"]["items"]["maxItems"], 256, "nested lists too");
        assert_eq!(p["list"]["items"]["items"]["maxLength"], 4096);
        assert_eq!(p["short"]["maxItems"], 3);
        assert!(p["u"].get("format").is_none(), "{}", p["u"]);
        assert_eq!(p["u"]["minimum"], 0, "the bound stays");
        assert_eq!(p["i32"]["format"], "int32");
        assert_eq!(p["i64"]["format"], "int64");
        assert_eq!(p["when"]["format"], "date-time", "string formats stay");
        assert!(p["when"].get("maxLength").is_none());
    }

    #[test]
    fn set_at_sets_and_panics_on_a_missing_path() {
        let mut s =
            schema(json!({"type": "array", "items": {"properties": {"n": {"type": "string"}}}}));
        set_at(&mut s, "/items/properties/n", &[("maxLength", json!(7))]);
        assert_eq!(s.as_value()["items"]["properties"]["n"]["maxLength"], 7);
        let missing = std::panic::catch_unwind(move || {
            let mut s = s;
            set_at(&mut s, "/items/properties/gone", &[("maxLength", json!(1))])
        });
        assert!(missing.is_err());
    }
}
