//! `validate` (offline): what the API server and the facade would say about
//! the CRs in some files, before anything is applied.
//!
//! ```text
//! file ─▶ documents (mcpwarden.dev/*) ─▶ CRD schema (jsonschema, worded as kube-apiserver words it)
//!                                     ─▶ CEL rules (kube's cel validator)
//!                                     ─▶ ToolProfile: crate::validate::{validate_tools, facade_accepts}
//!                                        (the facade's own policy loader, as InvalidPolicy)
//!                                        SandboxProfile: crate::validate::validate_sandbox_profile
//!                                     ─▶ one Problem per finding
//! ```
//! The schemas are the ones the CRD types generate (`crate::crdgen`, the
//! same YAML that is committed under `crds/` and checked for staleness),
//! so `validate` and the API server apply the same rules. The admission
//! webhook runs the loader step for every profile write.

use std::{collections::BTreeMap, fmt, path::Path};

use kube::CustomResourceExt;
use mcp_warden_crds::{MCPGateway, MCPServer, SandboxProfile, ToolProfile};
use serde::Deserialize;
use serde_json::Value;

use crate::validate::{facade_accepts, validate_sandbox_profile, validate_tools, ValidateError};

/// One finding: where, what object, and the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: String,
    /// `Kind namespace/name` (or `Kind name` without a namespace).
    pub object: String,
    /// The API server's or the loader's message.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line per problem: a multi-line message (a regex error's caret
        // diagram) is folded onto it.
        let message: Vec<&str> = self.message.lines().map(str::trim).collect();
        write!(f, "{}: {}: {}", self.file, self.object, message.join(" "))
    }
}

/// `kind` → openAPIV3Schema, from the CRD types.
pub fn schemas() -> BTreeMap<String, Value> {
    [
        MCPServer::crd(),
        MCPGateway::crd(),
        ToolProfile::crd(),
        SandboxProfile::crd(),
    ]
    .into_iter()
    .map(|crd| {
        let crd = serde_json::to_value(crd).expect("CRDs serialize");
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        (
            kind.to_string(),
            crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone(),
        )
    })
    .collect()
}

/// Every error the API server would report for `object` (schema, then CEL).
pub fn schema_errors(schemas: &BTreeMap<String, Value>, object: &Value) -> Vec<String> {
    let Some(schema) = object["kind"].as_str().and_then(|k| schemas.get(k)) else {
        return vec![format!("unknown kind {}", object["kind"])];
    };
    let mut out: Vec<String> = match jsonschema::validator_for(schema) {
        Ok(validator) => validator
            .iter_errors(object)
            .map(|e| api_server_words(&e))
            .collect(),
        Err(e) => vec![format!("the CRD schema does not compile: {e}")],
    };
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
pub fn api_server_words(e: &jsonschema::ValidationError<'_>) -> String {
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
pub fn field_path(pointer: &str) -> String {
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

/// What the facade's loader (and the profile checks the operator makes
/// before it) say about a profile; `Ok` for other kinds.
pub fn profile_errors(object: &Value) -> Result<(), String> {
    let typed = |e: serde_json::Error| e.to_string();
    let result: Result<(), ValidateError> = match object["kind"].as_str() {
        Some("ToolProfile") => {
            let p: ToolProfile = serde_json::from_value(object.clone()).map_err(typed)?;
            validate_tools(&p.spec).and_then(|()| facade_accepts(&p.spec))
        }
        Some("SandboxProfile") => {
            let p: SandboxProfile = serde_json::from_value(object.clone()).map_err(typed)?;
            validate_sandbox_profile(&p.spec)
        }
        _ => Ok(()),
    };
    result.map_err(|e| format!("{}: {e}", e.reason()))
}

fn name_of(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or("?");
    let name = object["metadata"]["name"].as_str().unwrap_or("?");
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Check every `mcpwarden.dev` document of one file's text.
pub fn check_text(file: &str, text: &str, schemas: &BTreeMap<String, Value>) -> Vec<Problem> {
    let problem = |object: String, message: String| Problem {
        file: file.to_string(),
        object,
        message,
    };
    let mut problems = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let value = match Value::deserialize(doc) {
            Ok(Value::Null) => continue,
            Ok(value) => value,
            Err(e) => {
                problems.push(problem("(document)".into(), format!("not YAML: {e}")));
                break;
            }
        };
        let ours = value["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("mcpwarden.dev/"));
        if !ours {
            continue;
        }
        let object = name_of(&value);
        let found = schema_errors(schemas, &value);
        if !found.is_empty() {
            problems.extend(found.into_iter().map(|m| problem(object.clone(), m)));
            continue;
        }
        if let Err(message) = profile_errors(&value) {
            problems.push(problem(object, message));
        }
    }
    problems
}

/// Check files; an unreadable file is a problem of its own.
pub fn check_files(files: &[impl AsRef<Path>]) -> Vec<Problem> {
    let schemas = schemas();
    let mut problems = Vec::new();
    for path in files {
        let path = path.as_ref();
        let file = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => problems.extend(check_text(&file, &text, &schemas)),
            Err(e) => problems.push(Problem {
                file,
                object: "(file)".into(),
                message: e.to_string(),
            }),
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

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
            [
                r#"transport: Unsupported value: "sse": supported values: "stdio", "streamable-http""#
            ]
        );
        assert_eq!(words(serde_json::json!({})), ["image: Required value"]);
    }

    #[test]
    fn one_problem_per_finding_with_file_and_object() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\n\
            apiVersion: mcpwarden.dev/v1alpha1\nkind: ToolProfile\nmetadata: {name: nothing, namespace: a}\nspec: {}\n";
        let problems = check_text("f.yaml", text, &schemas());
        assert_eq!(problems.len(), 1, "{problems:?}");
        let line = problems[0].to_string();
        assert!(
            line.starts_with("f.yaml: ToolProfile a/nothing: InvalidPolicy: "),
            "{line}"
        );
        assert!(line.contains("the allowlist is empty"), "{line}");
    }
}
