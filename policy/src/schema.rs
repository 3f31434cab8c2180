//! JSON Schema: input validation, output checks, and schema cleaning.
//!
//! Flow (tools/call): `arguments` --[`SchemaCache::validate_input`] against
//! the upstream `inputSchema`--> ok, or every violation (-32602 in the
//! sidecar); result `structuredContent` --[`SchemaCache::validate_output`]
//! against `outputSchema`. Flow (tools/list): `inputSchema`/`outputSchema`
//! --[`clean_schema`]--> what clients are shown.
//!
//! Validation uses the `jsonschema` crate (draft from `$schema`, else
//! 2020-12, as MCP says), never coerces types, and reports **every**
//! violation with its instance path (a JSON pointer). Messages are masked:
//! they never contain argument values, so they are safe for audit lines.
//! Remote `$ref`s are not fetched (the crate is built without resolvers): a
//! schema that needs one fails to compile ([`SchemaError::BadSchema`]).
//! Compiled validators are cached by definition hash; a changed definition
//! has a new hash, so entries never go stale. The cache is cleared whole when
//! it passes [`SchemaCache::CAPACITY`] entries.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use jsonschema::Validator;
use serde_json::{Map, Value};

/// One way the instance fails its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// JSON pointer into the instance (`""` is the whole object).
    pub instance_path: String,
    /// The failing keyword (`type`, `required`, `additionalProperties`, …).
    pub keyword: String,
    /// What is wrong, without the offending value.
    pub message: String,
}

/// Why a value could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The value violates the schema.
    #[error("{} schema violation(s): {}", .0.len(), summary(.0))]
    Invalid(Vec<Violation>),
    /// The tool's own schema is broken (or needs a remote `$ref`).
    #[error("the tool's {which} cannot be compiled: {message}")]
    BadSchema {
        /// `inputSchema` or `outputSchema`.
        which: &'static str,
        /// The compiler's complaint.
        message: String,
    },
    /// The tool declares an `outputSchema` but the result has no `structuredContent`.
    #[error("the tool declares an outputSchema but returned no structuredContent")]
    MissingStructuredContent,
}

/// `path: message; …` — one line for errors and denials (no values).
pub(crate) fn summary(v: &[Violation]) -> String {
    v.iter()
        .map(|x| {
            format!(
                "{}: {}",
                if x.instance_path.is_empty() {
                    "/"
                } else {
                    &x.instance_path
                },
                x.message
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Compiled validators keyed by definition hash.
#[derive(Default)]
pub struct SchemaCache {
    input: RwLock<HashMap<String, Arc<Validator>>>,
    output: RwLock<HashMap<String, Arc<Validator>>>,
}

impl SchemaCache {
    /// Entries per map before it is cleared.
    pub const CAPACITY: usize = 4096;

    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Validate a call's `arguments` (absent arguments: pass `{}`) against
    /// the tool definition's `inputSchema` (none declared: anything goes).
    pub fn validate_input(
        &self,
        hash: &str,
        tool: &Value,
        args: &Value,
    ) -> Result<(), SchemaError> {
        let Some(schema) = tool.get("inputSchema") else {
            return Ok(());
        };
        let v = Self::get(&self.input, hash, schema, "inputSchema")?;
        check(&v, args)
    }

    /// Check a result's `structuredContent` against the definition's
    /// `outputSchema`. Error results (`isError: true`) are not checked.
    pub fn validate_output(
        &self,
        hash: &str,
        tool: &Value,
        structured: Option<&Value>,
        is_error: bool,
    ) -> Result<(), SchemaError> {
        let Some(schema) = tool.get("outputSchema") else {
            return Ok(());
        };
        if is_error {
            return Ok(());
        }
        let Some(structured) = structured else {
            return Err(SchemaError::MissingStructuredContent);
        };
        let v = Self::get(&self.output, hash, schema, "outputSchema")?;
        check(&v, structured)
    }

    fn get(
        map: &RwLock<HashMap<String, Arc<Validator>>>,
        hash: &str,
        schema: &Value,
        which: &'static str,
    ) -> Result<Arc<Validator>, SchemaError> {
        if let Some(v) = map.read().unwrap_or_else(|p| p.into_inner()).get(hash) {
            return Ok(v.clone());
        }
        let v =
            Arc::new(
                jsonschema::validator_for(schema).map_err(|e| SchemaError::BadSchema {
                    which,
                    message: e.masked().to_string(),
                })?,
            );
        let mut w = map.write().unwrap_or_else(|p| p.into_inner());
        if w.len() >= Self::CAPACITY {
            w.clear();
        }
        w.insert(hash.to_string(), v.clone());
        Ok(v)
    }
}

fn check(v: &Validator, instance: &Value) -> Result<(), SchemaError> {
    if v.is_valid(instance) {
        return Ok(());
    }
    let violations: Vec<Violation> = v
        .iter_errors(instance)
        .map(|e| Violation {
            instance_path: e.instance_path().as_str().to_string(),
            keyword: e.kind().keyword().to_string(),
            message: e.masked().to_string(),
        })
        .collect();
    Err(SchemaError::Invalid(violations))
}

/// Keywords [`clean_schema`] drops: identity/meta keywords many clients
/// reject (`$schema` above all) and pure annotations outside the subset that
/// Gemini/OpenAI-style function calling accepts. None of them constrains
/// validation except `contentSchema`, which is advisory in 2020-12 anyway;
/// the facade still validates against the original schema.
pub const DROPPED_KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
];

/// Keywords whose value is a schema.
const SCHEMA_KEYWORDS: &[&str] = &[
    "additionalProperties",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];
/// Keywords whose value is an array of schemas.
const SCHEMA_ARRAY_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];
/// Keywords whose value maps names to schemas.
const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "properties",
    "patternProperties",
    "dependentSchemas",
    "$defs",
    "definitions",
];
/// Sibling keywords of a `$ref` that may be laid over the inlined definition.
const ANNOTATIONS: &[&str] = &["description", "title", "default"];

/// A copy of `schema` that common clients accept: [`DROPPED_KEYWORDS`]
/// removed at every schema position (property *names* are never touched),
/// local `#/$defs/x` and `#/definitions/x` references inlined when not
/// recursive (then `$defs`/`definitions` dropped), and `"type": "object"`
/// added at the root when no `type` is given (MCP requires an object).
pub fn clean_schema(schema: &Value) -> Value {
    let defs = collect_defs(schema);
    let mut unresolved = false;
    let mut out = clean(schema, &defs, &mut Vec::new(), &mut unresolved);
    if let Value::Object(map) = &mut out {
        if !unresolved {
            map.remove("$defs");
            map.remove("definitions");
        }
        if !map.contains_key("type") {
            map.insert("type".into(), Value::String("object".into()));
        }
    }
    out
}

fn collect_defs(schema: &Value) -> HashMap<String, &Value> {
    let mut defs = HashMap::new();
    for (key, prefix) in [("$defs", "#/$defs/"), ("definitions", "#/definitions/")] {
        if let Some(Value::Object(m)) = schema.get(key) {
            for (name, def) in m {
                defs.insert(
                    format!("{prefix}{}", name.replace('~', "~0").replace('/', "~1")),
                    def,
                );
            }
        }
    }
    defs
}

fn clean(
    v: &Value,
    defs: &HashMap<String, &Value>,
    stack: &mut Vec<String>,
    unresolved: &mut bool,
) -> Value {
    let Value::Object(map) = v else {
        return v.clone();
    };
    if let Some(Value::String(r)) = map.get("$ref") {
        match defs.get(r.as_str()) {
            Some(def) if !stack.contains(r) && stack.len() < 32 => {
                stack.push(r.clone());
                let inlined = clean(def, defs, stack, unresolved);
                stack.pop();
                let siblings: Map<String, Value> = map
                    .iter()
                    .filter(|(k, _)| {
                        k.as_str() != "$ref" && !DROPPED_KEYWORDS.contains(&k.as_str())
                    })
                    .map(|(k, v)| (k.clone(), clean_child(k, v, defs, stack, unresolved)))
                    .collect();
                return overlay(inlined, siblings);
            }
            _ => *unresolved = true,
        }
    }
    let mut out = Map::with_capacity(map.len());
    for (k, val) in map {
        if DROPPED_KEYWORDS.contains(&k.as_str()) {
            continue;
        }
        out.insert(k.clone(), clean_child(k, val, defs, stack, unresolved));
    }
    Value::Object(out)
}

fn clean_child(
    k: &str,
    val: &Value,
    defs: &HashMap<String, &Value>,
    stack: &mut Vec<String>,
    unresolved: &mut bool,
) -> Value {
    match val {
        Value::Object(m) if SCHEMA_MAP_KEYWORDS.contains(&k) => Value::Object(
            m.iter()
                .map(|(name, s)| (name.clone(), clean(s, defs, stack, unresolved)))
                .collect(),
        ),
        Value::Array(items) if SCHEMA_ARRAY_KEYWORDS.contains(&k) => Value::Array(
            items
                .iter()
                .map(|s| clean(s, defs, stack, unresolved))
                .collect(),
        ),
        Value::Object(_) if SCHEMA_KEYWORDS.contains(&k) => clean(val, defs, stack, unresolved),
        _ => val.clone(),
    }
}

/// The inlined definition with the `$ref`'s siblings laid over it: only
/// annotations are merged; other constraints keep both via `allOf`.
fn overlay(inlined: Value, siblings: Map<String, Value>) -> Value {
    if siblings.is_empty() {
        return inlined;
    }
    match inlined {
        Value::Object(mut m) if siblings.keys().all(|k| ANNOTATIONS.contains(&k.as_str())) => {
            m.extend(siblings);
            Value::Object(m)
        }
        other => {
            let mut wrapper = siblings;
            wrapper.insert("allOf".into(), Value::Array(vec![other]));
            Value::Object(wrapper)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool() -> Value {
        json!({
            "name": "t",
            "inputSchema": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
                "required": ["path"],
                "additionalProperties": false
            },
            "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
        })
    }

    #[test]
    fn valid_input_passes_and_types_are_not_coerced() {
        let c = SchemaCache::new();
        assert_eq!(
            c.validate_input("h", &tool(), &json!({"path": "a", "n": 2})),
            Ok(())
        );
        let Err(SchemaError::Invalid(v)) =
            c.validate_input("h", &tool(), &json!({"path": "a", "n": "2"}))
        else {
            panic!()
        };
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].instance_path, "/n");
        assert_eq!(v[0].keyword, "type");
    }

    #[test]
    fn every_violation_is_listed_without_values() {
        let c = SchemaCache::new();
        let err = c
            .validate_input("h", &tool(), &json!({"n": 0, "extra": "SECRET-VALUE"}))
            .unwrap_err();
        let SchemaError::Invalid(v) = &err else {
            panic!()
        };
        let mut kw: Vec<&str> = v.iter().map(|x| x.keyword.as_str()).collect();
        kw.sort();
        assert_eq!(kw, ["additionalProperties", "minimum", "required"]);
        assert!(v.iter().any(|x| x.instance_path == "/n"));
        assert!(!err.to_string().contains("SECRET-VALUE"), "{err}");
    }

    #[test]
    fn validators_are_cached_by_hash() {
        let c = SchemaCache::new();
        c.validate_input("h1", &tool(), &json!({"path": "a"}))
            .unwrap();
        // Same hash, different schema: the cached validator is used.
        let other = json!({"inputSchema": {"type": "object", "required": ["zzz"]}});
        assert_eq!(
            c.validate_input("h1", &other, &json!({"path": "a"})),
            Ok(())
        );
        assert!(c
            .validate_input("h2", &other, &json!({"path": "a"}))
            .is_err());
    }

    #[test]
    fn output_checks() {
        let c = SchemaCache::new();
        assert_eq!(
            c.validate_output("h", &tool(), Some(&json!({"ok": true})), false),
            Ok(())
        );
        assert!(matches!(
            c.validate_output("h", &tool(), Some(&json!({"ok": 1})), false),
            Err(SchemaError::Invalid(_))
        ));
        assert_eq!(
            c.validate_output("h", &tool(), None, false),
            Err(SchemaError::MissingStructuredContent)
        );
        assert_eq!(c.validate_output("h", &tool(), None, true), Ok(()));
        assert_eq!(
            c.validate_output("h", &json!({"name": "x"}), None, false),
            Ok(())
        );
    }

    #[test]
    fn broken_or_remote_schemas_do_not_compile() {
        let c = SchemaCache::new();
        let bad = json!({"inputSchema": {"type": 12}});
        assert!(matches!(
            c.validate_input("b", &bad, &json!({})),
            Err(SchemaError::BadSchema {
                which: "inputSchema",
                ..
            })
        ));
        let remote = json!({"inputSchema": {"$ref": "https://example.com/s.json"}});
        assert!(matches!(
            c.validate_input("r", &remote, &json!({})),
            Err(SchemaError::BadSchema { .. })
        ));
    }

    #[test]
    fn clean_drops_client_hostile_keywords_but_not_property_names() {
        let s = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "$id": "x", "$comment": "c",
            "properties": {
                "$schema": {"type": "string", "examples": ["a"]},
                "examples": {"type": "array", "items": {"type": "string", "deprecated": true}}
            },
            "default": {"examples": 1}
        });
        assert_eq!(
            clean_schema(&s),
            json!({
                "type": "object",
                "properties": {"$schema": {"type": "string"}, "examples": {"type": "array", "items": {"type": "string"}}},
                "default": {"examples": 1}
            })
        );
    }

    #[test]
    fn clean_inlines_local_refs_and_keeps_recursive_ones() {
        let s = json!({
            "type": "object",
            "$defs": {"p": {"type": "string", "minLength": 1}},
            "properties": {"a": {"$ref": "#/$defs/p", "description": "A"}, "b": {"$ref": "#/$defs/p", "maxLength": 3}}
        });
        assert_eq!(
            clean_schema(&s),
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "string", "minLength": 1, "description": "A"},
                    "b": {"maxLength": 3, "allOf": [{"type": "string", "minLength": 1}]}
                }
            })
        );
        let rec = json!({"type": "object", "definitions": {"n": {"type": "object", "properties": {"next": {"$ref": "#/definitions/n"}}}}, "properties": {"head": {"$ref": "#/definitions/n"}}});
        let out = clean_schema(&rec);
        assert!(
            out.get("definitions").is_some(),
            "recursive refs keep their definitions"
        );
        assert_eq!(
            out.pointer("/properties/head/properties/next/$ref"),
            Some(&json!("#/definitions/n"))
        );
    }

    #[test]
    fn cleaned_schema_still_validates_the_same_instances() {
        let s = json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "$defs": {"p": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/p"}}});
        let cleaned = clean_schema(&s);
        let v = jsonschema::validator_for(&cleaned).unwrap();
        assert!(v.is_valid(&json!({"n": 1})));
        assert!(!v.is_valid(&json!({"n": "1"})));
    }
}
