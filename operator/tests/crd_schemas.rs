//! The committed CRD schemas, as the API server would apply them: every
//! sample in `examples/invalid/` is rejected — by the OpenAPI schema
//! (jsonschema) or by a CEL rule (kube-cel) — with the message its
//! `# expect:` line names, and every CR in `examples/*.yaml` is accepted.
//!
//! The `# expect:` lines are in the real API server's words (tests/apiserver
//! checks them against one), so schema errors are worded the way the API
//! server words them (`mcp_warden_operator::check::api_server_words`, which
//! `mcp-warden-operator validate` uses too; `tests/validate_cli.rs` runs it).

use std::{collections::BTreeMap, path::PathBuf};

use mcp_warden_operator::check;
use serde::Deserialize;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `kind` → openAPIV3Schema, from the committed `crds/*.yaml`.
fn schemas() -> BTreeMap<String, Value> {
    let committed: BTreeMap<String, Value> =
        ["mcpserver", "mcpgateway", "toolprofile", "sandboxprofile"]
            .iter()
            .map(|name| {
                let text =
                    std::fs::read_to_string(root().join(format!("crds/{name}.yaml"))).unwrap();
                let crd: Value = serde_yaml_ng::from_str(&text).unwrap();
                let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
                (
                    kind,
                    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone(),
                )
            })
            .collect();
    assert_eq!(
        committed,
        check::schemas(),
        "`validate` checks against the schemas the types generate: the committed ones (make generate)"
    );
    committed
}

/// Every error the API server would report for `object` (the code
/// `mcp-warden-operator validate` runs).
fn errors(schemas: &BTreeMap<String, Value>, object: &Value) -> Vec<String> {
    check::schema_errors(schemas, object)
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

#[test]
fn an_issuer_bound_to_the_server_needs_no_audiences() {
    // The shape "Agents log in" documents: the samples above refuse its
    // two mistakes (audiences beside resourceAudience, neither given).
    let doc: Value = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: ToolProfile\nmetadata: {name: p, namespace: team-a}\n\
         spec:\n  tools: [{name: t}]\n  auth:\n    jwt:\n    - issuer: https://login.example.com/realms/team-a\n      \
         login: true\n      resourceAudience: true\n      requiredScopes: [mcp]\n",
    )
    .unwrap();
    assert_eq!(errors(&schemas(), &doc), Vec::<String>::new());
}
