//! The workload an approval binds (pure): everything that decides what runs
//! with the approved capabilities, as one `sha256:` hash per part. The
//! capability digest (`crate::capabilities`) covers these hashes beside the
//! capability names, so an approval is not portable between workloads and a
//! changed image, command or profile needs a new approval.
//!
//! ```text
//! MCPServer spec ─┬─ image, command, args, env, workspace, podTemplate,
//!                 │  serviceAccount, transport (+port, path, era), remote ─▶ one hash each
//!                 └─ secretEnv refs + the content hash of each referenced Secret key
//! ToolProfile spec + the content of the JWKS ConfigMaps it names ─▶ toolProfile
//! SandboxProfile spec (or the defaults) ─▶ sandboxProfile
//! ```
//!
//! Content of a Secret or ConfigMap enters as a hash the resolve step made
//! (`Content`); no value is ever copied into status. What a part does not
//! cover, on purpose: `replicas` and `expose` (how many, and who may reach
//! it, not what runs), the static-token Secrets and remote credentials
//! (rotation must not wait for an admin; they are the facade's, never the
//! server's).
//!
//! Hashes are over canonical JSON (object keys sorted at every depth), so
//! the order a client wrote a map in never makes a new digest.

use std::collections::BTreeMap;

use mcp_warden_crds::{MCPServer, SandboxProfileSpec, ToolProfileSpec};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Content hashes of referenced objects, keyed `Secret/<name>/<key>` or
/// `ConfigMap/<name>/<key>`; an absent key is absent (hashed as missing).
pub type Content = BTreeMap<String, String>;

/// The workload's parts, by name (see the module header), each `sha256:<hex>`.
pub type Parts = BTreeMap<String, String>;

/// The key of a Secret's key in [`Content`].
pub fn secret_key(name: &str, key: &str) -> String {
    format!("Secret/{name}/{key}")
}

/// The key of a ConfigMap's key in [`Content`].
pub fn config_map_key(name: &str, key: &str) -> String {
    format!("ConfigMap/{name}/{key}")
}

/// `sha256:<hex>` of bytes.
pub fn hash_bytes(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Every part of the workload of `server` with these profiles.
pub fn parts(
    server: &MCPServer,
    tools: &ToolProfileSpec,
    sandbox: &SandboxProfileSpec,
    content: &Content,
) -> Parts {
    let spec = &server.spec;
    let mut parts = Parts::new();
    let mut put = |name: &str, value: Value| {
        parts.insert(name.to_string(), hash_value(&value));
    };
    // The pull policy only where set, so the digests of servers that never
    // set it stay what they were approved as.
    match spec.image_pull_policy {
        None => put("image", to_value(&spec.image)),
        Some(p) => put(
            "image",
            serde_json::json!({"image": spec.image, "pullPolicy": p.as_str()}),
        ),
    }
    put("command", to_value(&spec.command));
    put("args", to_value(&spec.args));
    put("env", to_value(&spec.env));
    let secret_env: Vec<Value> = spec
        .secret_env
        .iter()
        .map(|e| {
            let got = content.get(&secret_key(&e.secret_name, &e.key));
            serde_json::json!({"ref": to_value(e), "content": got})
        })
        .collect();
    put("secretEnv", Value::Array(secret_env));
    put("workspace", to_value(&spec.workspace));
    put("podTemplate", to_value(&spec.pod_template));
    put("serviceAccount", to_value(&spec.service_account));
    put(
        "transport",
        serde_json::json!({
            "transport": to_value(&spec.transport),
            "port": spec.port,
            "path": spec.path,
            "protocolEra": to_value(&spec.protocol_era),
        }),
    );
    put("remote", to_value(&spec.remote));
    let jwks: Vec<Value> = tools
        .auth
        .jwt
        .iter()
        .filter_map(|j| j.jwks.as_ref())
        .map(|s| {
            let key = config_map_key(&s.config_map.name, &s.config_map.key);
            serde_json::json!({"ref": key, "content": content.get(&key)})
        })
        .collect();
    put(
        "toolProfile",
        serde_json::json!({"spec": to_value(tools), "jwks": jwks}),
    );
    put("sandboxProfile", to_value(sandbox));
    parts
}

/// The parts whose hash differs between `approved` and `current`, sorted
/// (a part only one side has counts as changed).
pub fn changed(approved: &Parts, current: &Parts) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> = approved
        .keys()
        .chain(current.keys())
        .filter(|k| approved.get(*k) != current.get(*k))
        .collect();
    names.into_iter().cloned().collect()
}

/// The Secret keys `secretEnv` names and the ConfigMap keys of the
/// profile's JWKS: what the resolve step hashes into [`Content`].
pub fn referenced(server: &MCPServer, tools: Option<&ToolProfileSpec>) -> Referenced {
    let secrets = server
        .spec
        .secret_env
        .iter()
        .map(|e| (e.secret_name.clone(), e.key.clone()))
        .collect();
    let config_maps = tools
        .into_iter()
        .flat_map(|t| &t.auth.jwt)
        .filter_map(|j| j.jwks.as_ref())
        .map(|s| (s.config_map.name.clone(), s.config_map.key.clone()))
        .collect();
    Referenced {
        secrets,
        config_maps,
    }
}

/// Objects whose content a workload covers, as `(name, key)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Referenced {
    /// Secret keys (of `secretEnv`).
    pub secrets: std::collections::BTreeSet<(String, String)>,
    /// ConfigMap keys (the profile's JWKS).
    pub config_maps: std::collections::BTreeSet<(String, String)>,
}

impl Referenced {
    /// Whether any content is covered.
    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.config_maps.is_empty()
    }
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("API types serialize")
}

/// `sha256:` over the canonical JSON of `value` (the same canonical form as
/// tool definition pins).
pub fn hash_value(value: &Value) -> String {
    hash_bytes(mcp_warden_policy::canonical_json(value).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(spec: &str) -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: s, namespace: n}}\nspec: {spec}\n"
        ))
        .unwrap()
    }

    fn of(spec: &str, content: &Content) -> Parts {
        parts(
            &server(spec),
            &ToolProfileSpec::default(),
            &SandboxProfileSpec::default(),
            content,
        )
    }

    const BASE: &str = "{image: 'node:22', command: [npx, srv], toolProfileRef: {name: p}, \
        secretEnv: [{name: TOKEN, secretName: s, key: k}]}";

    #[test]
    fn each_part_names_what_changed() {
        let none = Content::new();
        let base = of(BASE, &none);
        for (spec, part) in [
            ("{image: 'evil:latest', command: [npx, srv], toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "image"),
            ("{image: 'node:22', command: [node, /evil.js], toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "command"),
            ("{image: 'node:22', command: [npx, srv], args: [-x], toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "args"),
            ("{image: 'node:22', command: [npx, srv], env: [{name: NODE_OPTIONS, value: '--require /x'}], toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "env"),
            ("{image: 'node:22', command: [npx, srv], workspace: {emptyDir: {}}, toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "workspace"),
            ("{image: 'node:22', command: [npx, srv], podTemplate: {spec: {nodeSelector: {a: b}}}, toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "podTemplate"),
            ("{image: 'node:22', imagePullPolicy: Never, command: [npx, srv], toolProfileRef: {name: p}, secretEnv: [{name: TOKEN, secretName: s, key: k}]}", "image"),
        ] {
            assert_eq!(changed(&base, &of(spec, &none)), [part], "{spec}");
        }
        // the content of a referenced Secret, not only the reference
        let edited = Content::from([(secret_key("s", "k"), hash_bytes(b"other"))]);
        assert_eq!(changed(&base, &of(BASE, &edited)), ["secretEnv"]);
        // the reference held steady and the profile ref renamed: not a part
        assert!(changed(&base, &of(BASE, &none)).is_empty());
        // A server that never set a pull policy keeps the image part it was approved with.
        assert_eq!(base["image"], hash_value(&to_value(&"node:22")));
    }

    #[test]
    fn profiles_and_their_config_maps_are_parts() {
        let s = server(BASE);
        let none = Content::new();
        let tools: ToolProfileSpec = serde_yaml_ng::from_str(
            "{auth: {jwt: [{issuer: 'https://idp', audiences: [a], jwks: {configMap: {name: keys, key: jwks.json}}}]}}",
        )
        .unwrap();
        let sandbox = SandboxProfileSpec::default();
        let base = parts(&s, &tools, &sandbox, &none);
        let more: ToolProfileSpec = serde_yaml_ng::from_str(
            "{tools: [{name: x}], auth: {jwt: [{issuer: 'https://idp', audiences: [a], jwks: {configMap: {name: keys, key: jwks.json}}}]}}",
        )
        .unwrap();
        assert_eq!(
            changed(&base, &parts(&s, &more, &sandbox, &none)),
            ["toolProfile"]
        );
        let keys = Content::from([(config_map_key("keys", "jwks.json"), hash_bytes(b"{}"))]);
        assert_eq!(
            changed(&base, &parts(&s, &tools, &sandbox, &keys)),
            ["toolProfile"]
        );
        let writable: SandboxProfileSpec =
            serde_yaml_ng::from_str("{workspaceAccess: readWrite}").unwrap();
        assert_eq!(
            changed(&base, &parts(&s, &tools, &writable, &none)),
            ["sandboxProfile"]
        );
        assert_eq!(
            referenced(&s, Some(&tools)),
            Referenced {
                secrets: [("s".to_string(), "k".to_string())].into(),
                config_maps: [("keys".to_string(), "jwks.json".to_string())].into(),
            }
        );
    }

    #[test]
    fn canonical_json_ignores_key_order() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, {"d": 2, "c": 3}], "x": null}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"x": null, "y": [1, {"c": 3, "d": 2}]}, "b": 1}"#)
                .unwrap();
        assert_eq!(hash_value(&a), hash_value(&b));
        let c: Value =
            serde_json::from_str(r#"{"a": {"x": null, "y": [{"c": 3, "d": 2}, 1]}, "b": 1}"#)
                .unwrap();
        assert_ne!(hash_value(&a), hash_value(&c), "array order counts");
    }
}
