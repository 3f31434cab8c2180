//! The committed CRD schemas, as the API server would apply them: every
//! sample in `examples/invalid/` is rejected — by the OpenAPI schema
//! (jsonschema) or by a CEL rule (kube-cel) — with the message its
//! `# expect:` line names, and every CR in `examples/*.yaml` is accepted.
//!
//! The `# expect:` lines are in the real API server's words (tests/apiserver
//! checks them against one), so schema errors are worded here the way the
//! API server words them ([`api_server_words`]).

use std::{collections::BTreeMap, path::PathBuf};

use serde::Deserialize;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kind` → openAPIV3Schema, from the committed `crds/*.yaml`.
fn schemas() -> BTreeMap<String, Value> {
    ["mcpserver", "toolprofile", "sandboxprofile"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(root().join(format!("crds/{name}.yaml"))).unwrap();
            let crd: Value = serde_yaml_ng::from_str(&text).unwrap();
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            (
                kind,
                crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone(),
            )
        })
        .collect()
}

/// Every error the API server would report for `object`.
fn errors(schemas: &BTreeMap<String, Value>, object: &Value) -> Vec<String> {
    let kind = object["kind"].as_str().unwrap();
    let schema = &schemas[kind];
    let mut out: Vec<String> = jsonschema::validator_for(schema)
        .expect("the CRD schema compiles")
        .iter_errors(object)
        .map(|e| api_server_words(&e))
        .collect();
    if let Err(cel) = kube::core::cel::Validator::new().validate(schema, object, None) {
        out.extend(
            cel.into_vec()
                .into_iter()
                .map(|e| format!("CEL {:?} at {}: {}", e.kind, e.field_path, e.message)),
        );
    }
    out
}

/// A schema error as kube-apiserver reports it (its OpenAPI validation,
/// k8s.io/kube-openapi): `spec.replicas in body should be less than or equal
/// to 10`, `spec.transport: Unsupported value: "sse": supported values: …`,
/// `spec.image: Required value`, `… in body should match '<pattern>'`.
/// Other kinds keep jsonschema's message.
fn api_server_words(e: &jsonschema::ValidationError<'_>) -> String {
    use jsonschema::error::ValidationErrorKind as K;
    let path = field_path(e.instance_path().as_str());
    let at = |child: &str| {
        if path.is_empty() {
            child.to_string()
        } else {
            format!("{path}.{child}")
        }
    };
    let number = |v: &Value| match v.as_f64() {
        Some(f) if f.fract() == 0.0 => format!("{}", f as i64),
        _ => v.to_string(),
    };
    let value = e.instance();
    match e.kind() {
        K::Minimum { limit } => format!(
            "{path}: Invalid value: {value}: {path} in body should be greater than or equal to {}",
            number(limit)
        ),
        K::Maximum { limit } => format!(
            "{path}: Invalid value: {value}: {path} in body should be less than or equal to {}",
            number(limit)
        ),
        K::Enum { options } => {
            let supported: Vec<String> = options
                .as_array()
                .into_iter()
                .flatten()
                .map(|o| o.to_string())
                .collect();
            format!(
                "{path}: Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            )
        }
        K::Pattern { pattern } => {
            format!("{path}: Invalid value: {value}: {path} in body should match '{pattern}'")
        }
        K::Required { property } => {
            format!(
                "{}: Required value",
                at(property.as_str().unwrap_or_default())
            )
        }
        _ => format!("{} at {}: {e}", e.schema_path(), e.instance_path()),
    }
}

/// `/spec/tools/0/requiredRole` → `spec.tools[0].requiredRole`.
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if segment.parse::<usize>().is_ok() {
            out.push_str(&format!("[{segment}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&segment);
        }
    }
    out
}

#[test]
fn schema_errors_read_like_the_api_servers() {
    assert_eq!(
        field_path("/spec/tools/0/requiredRole"),
        "spec.tools[0].requiredRole"
    );
    assert_eq!(field_path(""), "");
    let schema = serde_json::json!({"type": "object", "required": ["image"], "properties": {
        "replicas": {"type": "integer", "minimum": 0.0, "maximum": 10},
        "transport": {"type": "string", "enum": ["stdio", "streamable-http"]}}});
    let validator = jsonschema::validator_for(&schema).unwrap();
    let words = |v: Value| -> Vec<String> {
        validator
            .iter_errors(&v)
            .map(|e| api_server_words(&e))
            .collect()
    };
    assert_eq!(
        words(serde_json::json!({"image": "i", "replicas": -1})),
        ["replicas: Invalid value: -1: replicas in body should be greater than or equal to 0"]
    );
    assert_eq!(
        words(serde_json::json!({"image": "i", "transport": "sse"})),
        [r#"transport: Unsupported value: "sse": supported values: "stdio", "streamable-http""#]
    );
    assert_eq!(words(serde_json::json!({})), ["image: Required value"]);
}

fn documents(path: &PathBuf) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| {
            v["apiVersion"]
                .as_str()
                .is_some_and(|a| a.starts_with("mcpwarden.dev/"))
        })
        .collect()
}

fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

#[test]
fn invalid_samples_are_rejected_for_the_stated_reason() {
    let schemas = schemas();
    let files = yaml_files("examples/invalid");
    assert!(
        files.len() >= 10,
        "expected the invalid samples, found {files:?}"
    );
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", path.display()));
        let docs = documents(&path);
        assert_eq!(docs.len(), 1, "{}: one object per sample", path.display());
        let found = errors(&schemas, &docs[0]);
        assert!(
            found.iter().any(|e| e.contains(expect)),
            "{}: expected an error containing {expect:?}, got {found:#?}",
            path.display()
        );
        assert!(
            found
                .iter()
                .all(|e| !e.contains("CompilationFailure") && !e.contains("InvalidRule")),
            "{}: a CEL rule does not compile: {found:#?}",
            path.display()
        );
    }
}

#[test]
fn examples_are_accepted() {
    let schemas = schemas();
    let mut seen = 0;
    for path in yaml_files("examples") {
        for doc in documents(&path) {
            let found = errors(&schemas, &doc);
            assert!(
                found.is_empty(),
                "{} {}: {found:#?}",
                path.display(),
                doc["metadata"]["name"]
            );
            seen += 1;
        }
    }
    assert!(seen >= 10, "only {seen} example objects");
}
