//! Resolve (reads only): fetch what an MCPServer references — its
//! ToolProfile, its SandboxProfile and the Secrets of `secretEnv`,
//! `remote.auth`, `expose.tls` and the profile's static tokens — and hash the
//! content the approval covers (`crate::workload`): the keys `secretEnv`
//! names and the profile's JWKS ConfigMaps. Only the hash leaves this step;
//! a value is never logged, copied or kept. A missing object is an answer,
//! not an error; only API failures are errors. It also reads the server's
//! pods for their addresses (the peers ConfigMap).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::{api::ListParams, Api, Client};
use mcp_warden_crds::{MCPServer, SandboxProfile, ToolProfile};

use crate::{
    names,
    workload::{self, Content},
};

/// What the references point at.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// The ToolProfile, if it exists.
    pub tool_profile: Option<ToolProfile>,
    /// The SandboxProfile, if one is referenced and it exists.
    pub sandbox_profile: Option<SandboxProfile>,
    /// Names of `secretEnv` and static-token Secrets that do not exist (sorted).
    pub missing_secrets: Vec<String>,
    /// Content hashes of what the workload references (absent keys absent).
    pub content: Content,
    /// The text of the referenced ConfigMap keys (the profile's JWKS), by
    /// the same key as `content`: the operator copies the approved keys into
    /// its own `<name>-issuers`, so an edit of the user's ConfigMap reaches
    /// the facade only once approved.
    pub config_map_text: std::collections::BTreeMap<String, String>,
    /// The Secret and ConfigMap keys whose content the approval covers
    /// (recorded for the watches that re-reconcile on their edits).
    pub referenced: workload::Referenced,
    /// The server's pods (label `mcpwarden.dev/server=<name>`), read once
    /// for the peers ConfigMap and for what the facades report.
    pub pods: Vec<Pod>,
    /// Every replica's peer address (`<pod IP>:8080`, sorted).
    pub peers: Vec<String>,
    /// The digest the pods running `spec.image` by tag report (`crate::pin`).
    pub reported_image: crate::pin::Reported,
}

/// A read failed (transient: the reconcile backs off and retries).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {what}: {source}")]
pub struct ResolveError {
    /// The object, e.g. `ToolProfile team-a/git`.
    pub what: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// Read every referenced object.
pub async fn resolve(client: &Client, server: &MCPServer) -> Result<Resolved, ResolveError> {
    let ns = names::namespace(server);
    let spec = &server.spec;
    let err = |what: String| move |source| ResolveError { what, source };

    let tool_profiles: Api<ToolProfile> = Api::namespaced(client.clone(), &ns);
    let name = &spec.tool_profile_ref.name;
    let tool_profile = tool_profiles
        .get_opt(name)
        .await
        .map_err(err(format!("ToolProfile {ns}/{name}")))?;

    let sandbox_profile = match &spec.sandbox_profile_ref {
        Some(r) => {
            let api: Api<SandboxProfile> = Api::namespaced(client.clone(), &ns);
            api.get_opt(&r.name)
                .await
                .map_err(err(format!("SandboxProfile {ns}/{}", r.name)))?
        }
        None => None,
    };

    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut missing_secrets = Vec::new();
    // `secretEnv`'s Secrets, those of a remote server's credentials, the
    // listener's certificate and the profile's static tokens.
    let remote = names::remote_secrets(server);
    let mut wanted: BTreeSet<String> = spec
        .secret_env
        .iter()
        .map(|e| e.secret_name.clone())
        .collect();
    wanted.extend(remote.keys().cloned());
    wanted.extend(names::tls_secret(server).map(str::to_string));
    if let Some(profile) = &tool_profile {
        wanted.extend(crate::build::facade_auth::secret_names(&profile.spec.auth));
    }
    // The content an approval covers: hashed here, the values dropped.
    let referenced = workload::referenced(server, tool_profile.as_ref().map(|p| &p.spec));
    let mut content = Content::new();
    let env_secrets: BTreeSet<&String> = referenced.secrets.iter().map(|(n, _)| n).collect();
    for name in env_secrets {
        let found = secrets
            .get_opt(name)
            .await
            .map_err(err(format!("Secret {ns}/{name}")))?;
        for (secret, key) in referenced.secrets.iter().filter(|(n, _)| n == name) {
            let bytes = found.as_ref().and_then(|s| {
                let data = s
                    .data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|b| b.0.clone());
                data.or_else(|| {
                    let text = s.string_data.as_ref()?.get(key)?;
                    Some(text.as_bytes().to_vec())
                })
            });
            if let Some(bytes) = bytes {
                content.insert(
                    workload::secret_key(secret, key),
                    workload::hash_bytes(&bytes),
                );
            }
        }
    }
    let mut config_map_text = std::collections::BTreeMap::new();
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let cm_names: BTreeSet<&String> = referenced.config_maps.iter().map(|(n, _)| n).collect();
    for name in cm_names {
        let found = config_maps
            .get_opt(name)
            .await
            .map_err(err(format!("ConfigMap {ns}/{name}")))?;
        for (cm, key) in referenced.config_maps.iter().filter(|(n, _)| n == name) {
            let bytes = found.as_ref().and_then(|c| {
                let text = c
                    .data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .map(|t| t.as_bytes().to_vec());
                text.or_else(|| Some(c.binary_data.as_ref()?.get(key)?.0.clone()))
            });
            if let Some(bytes) = bytes {
                content.insert(
                    workload::config_map_key(cm, key),
                    workload::hash_bytes(&bytes),
                );
                if let Ok(text) = String::from_utf8(bytes) {
                    config_map_text.insert(workload::config_map_key(cm, key), text);
                }
            }
        }
    }
    for secret in wanted {
        // Metadata only: existence is all this loop needs.
        let found = secrets
            .get_metadata_opt(&secret)
            .await
            .map_err(err(format!("Secret {ns}/{secret}")))?;
        if found.is_none() {
            missing_secrets.push(secret);
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let selector = format!("{}={}", names::SERVER_LABEL, names::object_name(server));
    let pods = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(err(format!(
            "the pods of {ns}/{}",
            names::object_name(server)
        )))?;
    let peers = peer_addresses(&pods.items);
    let reported_image = reported_image(&pods.items, &spec.image);
    let pods = pods.items;
    Ok(Resolved {
        tool_profile,
        sandbox_profile,
        missing_secrets,
        content,
        config_map_text,
        referenced,
        pods,
        peers,
        reported_image,
    })
}

/// A replica of the server's Deployment that runs and is not going away:
/// controlled by a ReplicaSet (a pod someone made by hand with the same
/// labels is no replica), not being deleted, phase `Running`.
pub fn is_running_replica(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.kind == "ReplicaSet")
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// The peer addresses of the server's replicas: every pod its ReplicaSet
/// controls that runs and has an address, ready or not (a facade answers
/// its peers before its server is ready), and is not being deleted (its
/// identities move now, not when it is gone). A pod that only carries the
/// label is not a replica: the ReplicaSet would adopt or remove it.
pub fn peer_addresses(pods: &[Pod]) -> Vec<String> {
    let mut peers: Vec<String> = pods
        .iter()
        .filter(|p| is_running_replica(p))
        .filter_map(|p| p.status.as_ref()?.pod_ip.as_deref())
        .map(|ip| match ip.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V6(_)) => format!("[{ip}]:{}", names::FACADE_PORT),
            _ => format!("{ip}:{}", names::FACADE_PORT),
        })
        .collect();
    peers.sort();
    peers.dedup();
    peers
}

/// The repository digests the server's replicas (as in [`peer_addresses`])
/// report for `image`: only pods whose server container asks for exactly
/// `image` (the tag, not a pinned reference) count.
pub fn reported_image(pods: &[Pod], image: &str) -> crate::pin::Reported {
    use crate::pin::{repository_digest, Reported};
    let mut digests: Vec<String> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.spec
                .iter()
                .flat_map(|s| &s.containers)
                .any(|c| c.name == names::SERVER_CONTAINER && c.image.as_deref() == Some(image))
        })
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| s.container_statuses.iter().flatten())
        .filter(|c| c.name == names::SERVER_CONTAINER)
        .filter_map(|c| repository_digest(&c.image_id).map(str::to_string))
        .collect();
    digests.sort();
    digests.dedup();
    match digests.len() {
        0 => Reported::Nothing,
        1 => Reported::One(digests.remove(0)),
        _ => Reported::Several(digests),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ip: &str, phase: &str, owner: Option<&str>, deleting: bool) -> Pod {
        let mut meta = json!({"name": format!("p-{ip}")});
        if let Some(kind) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
                "name": "memory-5d9f", "uid": "u1", "controller": true}]);
        }
        if deleting {
            meta["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "status": {"phase": phase, "podIP": ip}}))
            .unwrap()
    }

    fn running(image: &str, image_id: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "server", "image": image}, {"name": "facade", "image": "f"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "server", "image": "docker.io/library/node:22-slim", "imageID": image_id,
                 "ready": true, "restartCount": 0},
                {"name": "facade", "image": "f", "imageID": format!("f@{D2}"), "ready": true, "restartCount": 0}]}
        }))
        .unwrap()
    }

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn the_server_containers_of_the_tag_report_its_digest() {
        use crate::pin::Reported;
        let one = running("node:22-slim", &format!("docker.io/library/node@{D1}"));
        assert_eq!(
            reported_image(std::slice::from_ref(&one), "node:22-slim"),
            Reported::One(D1.into())
        );
        // A pod of the pinned template, or of another image, does not count.
        let pinned = running(
            &format!("node:22-slim@{D1}"),
            &format!("docker.io/library/node@{D2}"),
        );
        assert_eq!(reported_image(&[pinned], "node:22-slim"), Reported::Nothing);
        // An image id alone cannot be pinned.
        assert_eq!(
            reported_image(&[running("node:22-slim", D1)], "node:22-slim"),
            Reported::Nothing
        );
        let moved = running("node:22-slim", &format!("docker.io/library/node@{D2}"));
        assert_eq!(
            reported_image(&[one, moved], "node:22-slim"),
            Reported::Several(vec![D1.into(), D2.into()])
        );
    }

    #[test]
    fn peers_are_the_running_replicas_of_the_replica_set() {
        let pods = [
            pod("10.0.0.9", "Running", Some("ReplicaSet"), false),
            pod("10.0.0.2", "Running", Some("ReplicaSet"), false),
            pod("10.0.0.3", "Pending", Some("ReplicaSet"), false),
            pod("10.0.0.4", "Running", Some("ReplicaSet"), true),
            pod("10.0.0.5", "Running", None, false),
            pod("10.0.0.6", "Running", Some("Job"), false),
            pod("fd00::7", "Running", Some("ReplicaSet"), false),
        ];
        assert_eq!(
            peer_addresses(&pods),
            ["10.0.0.2:8080", "10.0.0.9:8080", "[fd00::7]:8080"].map(String::from)
        );
    }
}
