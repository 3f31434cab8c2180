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
//! auth.jwt[i].jwks.configMap {name, key} ─▶ volume issuer-<i> (ConfigMap, optional) ─▶ /etc/mcp-warden/issuers/<i>/jwks.json
//! ```
//!
//! The volumes are optional: a missing Secret or ConfigMap must not keep the
//! pod (and every other caller) out; until it exists, its tokens are refused
//! and the server's status says which Secret is missing.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, KeyToPath, SecretVolumeSource, Volume, VolumeMount,
};

use super::BuildInput;
use crate::names::{self, ISSUERS_DIR, JWKS_KEY, TOKENS_DIR};

/// Secret name → the keys the profile names, in a stable order.
fn token_secrets(input: BuildInput<'_>) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut secrets: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for t in &input.auth.static_tokens {
        secrets
            .entry(t.secret_name.as_str())
            .or_default()
            .insert(t.key.as_str());
    }
    secrets
}

/// The volumes: one per static-token Secret, one per JWT issuer.
pub fn volumes(input: BuildInput<'_>) -> Vec<Volume> {
    let key = |key: &str, path: &str| KeyToPath {
        key: key.into(),
        path: path.into(),
        mode: None,
    };
    let mut volumes: Vec<Volume> = token_secrets(input)
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
    volumes.extend(input.auth.jwt.iter().enumerate().map(|(i, issuer)| {
        let cm = &issuer.jwks.config_map;
        Volume {
            name: format!("issuer-{i}"),
            config_map: Some(ConfigMapVolumeSource {
                name: cm.name.clone(),
                items: Some(vec![key(&cm.key, JWKS_KEY)]),
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
    let mount = |name: String, path: String| VolumeMount {
        name,
        mount_path: path,
        read_only: Some(true),
        ..VolumeMount::default()
    };
    let mut mounts: Vec<VolumeMount> = token_secrets(input)
        .into_keys()
        .enumerate()
        .map(|(n, secret)| mount(format!("tokens-{n}"), format!("{TOKENS_DIR}/{secret}")))
        .collect();
    mounts.extend(
        (0..input.auth.jwt.len())
            .map(|i| mount(format!("issuer-{i}"), format!("{ISSUERS_DIR}/{i}"))),
    );
    debug_assert!(input.auth.static_tokens.iter().all(|t| names::token_file(
        &t.secret_name,
        &t.key
    )
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
