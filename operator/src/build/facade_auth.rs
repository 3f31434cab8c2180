//! The facade's credentials from the ToolProfile's `auth`: each static-token
//! Secret and each JWT issuer's JWKS ConfigMap becomes a volume mounted into
//! the facade container only (never the server's), holding only the keys the
//! profile names. The compiled policy refers to these files by path
//! (`crate::compile`), so no token value is ever copied into the policy
//! ConfigMap; the facade hashes a token when it reads its file and re-reads
//! the files when the kubelet updates them (rotation needs no restart).
//!
//! ```text
//! auth.staticTokens[] {secretName, key} ─▶ volume tokens-<n> (Secret, optional) ─▶ /etc/mcp-warden/tokens/<secretName>/<key>
//! auth.jwt[i] ─▶ volume issuer-<i> (`<name>-issuers` key `<i>.json`, optional) ─▶ /etc/mcp-warden/issuers/<i>/jwks.json
//!   the operator writes that key: a copy of `jwks.configMap {name, key}`, or the keys it fetched
//! ```
//!
//! The facade never mounts the profile's JWKS ConfigMap itself: the kubelet
//! would hand it an edit at once, while the approval binds that content
//! (a key added signs tokens for any subject). The operator's copy is
//! rewritten only when the change is in force.
//!
//! The volumes are optional: a missing Secret or ConfigMap must not keep the
//! pod (and every other caller) out; until it exists, its tokens are refused
//! and the server's status says which Secret is missing.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, KeyToPath, SecretVolumeSource, Volume, VolumeMount,
};

use mcp_warden_crds::toolprofile::ProfileAuth;

use super::BuildInput;
use crate::names::{self, ISSUERS_DIR, JWKS_KEY, TOKENS_DIR};

/// Secret name → the keys the profile names, in a stable order.
fn token_secrets(auth: &ProfileAuth) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut secrets: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for t in &auth.static_tokens {
        secrets
            .entry(t.secret_name.as_str())
            .or_default()
            .insert(t.key.as_str());
    }
    secrets
}

/// The volumes: one per static-token Secret, one per JWT issuer.
pub fn volumes(input: BuildInput<'_>) -> Vec<Volume> {
    auth_volumes(input.auth, &names::issuers_config_map(input.server), true)
}

/// The volumes of `auth` (also a gateway's): a JWT issuer's keys come from
/// `issuers_config_map`, key `<i>.json` — always for an MCPServer, whose
/// operator copies a named JWKS ConfigMap there (`copied`: the approval
/// binds that content); a gateway, which no approval binds, mounts a named
/// ConfigMap as it is and reads only fetched keys from there.
pub fn auth_volumes(auth: &ProfileAuth, issuers_config_map: &str, copied: bool) -> Vec<Volume> {
    let key = |key: &str, path: &str| KeyToPath {
        key: key.into(),
        path: path.into(),
        mode: None,
    };
    let mut volumes: Vec<Volume> = token_secrets(auth)
        .into_iter()
        .enumerate()
        .map(|(n, (secret, keys))| Volume {
            name: format!("tokens-{n}"),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.into()),
                items: Some(keys.into_iter().map(|k| key(k, k)).collect()),
                default_mode: Some(0o440),
                optional: Some(true),
            }),
            ..Volume::default()
        })
        .collect();
    volumes.extend(auth.jwt.iter().enumerate().map(|(i, issuer)| {
        // The operator's copy of the profile's keys or the keys it fetched;
        // a gateway's named ConfigMap as it is.
        let (name, source_key) = match &issuer.jwks {
            Some(source) if !copied => (
                source.config_map.name.clone(),
                source.config_map.key.clone(),
            ),
            _ => (issuers_config_map.to_string(), format!("{i}.json")),
        };
        Volume {
            name: format!("issuer-{i}"),
            config_map: Some(ConfigMapVolumeSource {
                name,
                items: Some(vec![key(&source_key, JWKS_KEY)]),
                optional: Some(true),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }
    }));
    volumes
}

/// The facade's mounts of [`volumes`], read-only.
pub fn mounts(input: BuildInput<'_>) -> Vec<VolumeMount> {
    auth_mounts(input.auth)
}

/// The mounts of [`auth_volumes`], read-only.
pub fn auth_mounts(auth: &ProfileAuth) -> Vec<VolumeMount> {
    let mount = |name: String, path: String| VolumeMount {
        name,
        mount_path: path,
        read_only: Some(true),
        ..VolumeMount::default()
    };
    let mut mounts: Vec<VolumeMount> = token_secrets(auth)
        .into_keys()
        .enumerate()
        .map(|(n, secret)| mount(format!("tokens-{n}"), format!("{TOKENS_DIR}/{secret}")))
        .collect();
    mounts.extend(
        (0..auth.jwt.len()).map(|i| mount(format!("issuer-{i}"), format!("{ISSUERS_DIR}/{i}"))),
    );
    debug_assert!(auth
        .static_tokens
        .iter()
        .all(|t| names::token_file(&t.secret_name, &t.key)
            .starts_with(&format!("{TOKENS_DIR}/{}/", t.secret_name))));
    mounts
}

/// Names of the Secrets the profile's static tokens live in.
pub fn secret_names(auth: &mcp_warden_crds::toolprofile::ProfileAuth) -> BTreeSet<String> {
    auth.static_tokens
        .iter()
        .map(|t| t.secret_name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use mcp_warden_crds::{MCPServer, ToolProfileSpec};

    use crate::{config::BuildConfig, plan};

    #[test]
    fn every_issuers_keys_are_published_by_the_operator_and_mounted() {
        let server: MCPServer = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: team-a}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}}\n",
        )
        .unwrap();
        let tools: ToolProfileSpec = serde_yaml_ng::from_str(
            "tools: [{name: a}]\n\
             auth: {jwt: [{issuer: 'https://a.example.com', audiences: [m], jwks: {configMap: {name: a-keys, key: k}}},\n\
                          {issuer: 'https://b.example.com', audiences: [m]}]}\n",
        )
        .unwrap();
        let keys = BTreeMap::from([
            (
                "https://a.example.com".to_string(),
                r#"{"keys":["copied"]}"#.to_string(),
            ),
            (
                "https://b.example.com".to_string(),
                r#"{"keys":[]}"#.to_string(),
            ),
        ]);
        let build = |fetched: Option<&BTreeMap<String, String>>| {
            plan::plan(
                &plan::Inputs {
                    server: &server,
                    tool_profile: Some(&tools),
                    sandbox_profile: None,
                    jwks: None,
                    issuer_jwks: fetched,
                    content: None,
                    revoke: false,
                    peers: &[],
                    reported_image: &crate::pin::Reported::Nothing,
                },
                &BuildConfig::default(),
            )
            .unwrap()
        };
        let plan = build(Some(&keys));
        let cm = plan.objects.issuers_config_map.expect("the keys");
        assert_eq!(cm.metadata.name.as_deref(), Some("git-issuers"));
        assert_eq!(
            cm.data.unwrap(),
            BTreeMap::from([
                ("0.json".to_string(), r#"{"keys":["copied"]}"#.to_string()),
                ("1.json".to_string(), r#"{"keys":[]}"#.to_string())
            ])
        );
        let pod = plan.objects.deployment.spec.unwrap().template.spec.unwrap();
        let volume = |name: &str| {
            let v = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == name)
                .unwrap();
            let cm = v.config_map.clone().unwrap();
            let item = cm.items.unwrap()[0].clone();
            (cm.name, item.key, item.path)
        };
        // Never the profile's own ConfigMap, which the kubelet would hand
        // the facade as soon as anyone edits it.
        assert_eq!(
            volume("issuer-0"),
            ("git-issuers".into(), "0.json".into(), "jwks.json".into())
        );
        assert_eq!(
            volume("issuer-1"),
            ("git-issuers".into(), "1.json".into(), "jwks.json".into())
        );
        assert_eq!(
            plan.policy.auth.jwt[1].jwks_file,
            "/etc/mcp-warden/issuers/1/jwks.json"
        );
        // Not fetched (render, or the issuer unreachable): no ConfigMap, the mount waits.
        assert!(build(None).objects.issuers_config_map.is_none());
    }
}
