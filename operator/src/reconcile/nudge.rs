//! Apply: after a mounted ConfigMap changed, each running pod that reads
//! it gets the data's hash as an annotation. The kubelet refreshes a
//! mounted ConfigMap only on its periodic sync (about a minute), but syncs a
//! pod at once when the pod object changes. Two lists are told this way:
//!
//! - a server's `<name>-peers`, to its replicas: until a facade reads the
//!   new list, an identity owned by a pod that is gone is refused
//!   (`identity_budget_unavailable`), so after a rollout the window is
//!   seconds, not a minute;
//! - the namespace's egress proxy clients file, to the proxy's pods: until
//!   the proxy reads it, a server approved a moment ago is refused with 407
//!   (its credential is not known yet), so its pod's first package fetch
//!   fails and it starts up to a minute late.
//!
//! ```text
//! <name>-peers data           ─ sha256 ─▶ pods whose mcpwarden.dev/peers differs          ─ merge patch ─▶ kubelet syncs them
//! mcp-warden-egress-clients   ─ sha256 ─▶ proxy pods whose mcpwarden.dev/egress-clients differs ─┘
//! ```

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::{
    api::{Patch, PatchParams},
    Api, Client, ResourceExt,
};
use sha2::{Digest, Sha256};

use super::apply::ApplyError;
use crate::names;

/// The annotation holding the hash of the peers list a pod was told about.
pub const PEERS_ANNOTATION: &str = "mcpwarden.dev/peers";
/// The annotation holding the hash of the clients file a proxy pod was told about.
pub const EGRESS_CLIENTS_ANNOTATION: &str = "mcpwarden.dev/egress-clients";

/// `sha256:<hex>` of one key of a ConfigMap's data (empty when absent).
pub fn data_hash(config_map: &ConfigMap, key: &str) -> String {
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(String::as_str)
        .unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// `sha256:<hex>` of the peers ConfigMap's data.
pub fn list_hash(config_map: &ConfigMap) -> String {
    data_hash(config_map, names::PEERS_KEY)
}

/// The running replicas (pods a ReplicaSet controls) whose `annotation` is
/// not `hash`: a pod outside a Deployment is never patched.
pub fn behind<'a>(pods: &'a [Pod], annotation: &str, hash: &str) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| super::resolve::is_running_replica(p))
        .filter(|p| p.annotations().get(annotation).map(String::as_str) != Some(hash))
        .collect()
}

/// Tell a server's replicas of its peers list; the names of the pods written.
pub async fn nudge(
    client: &Client,
    namespace: &str,
    pods: &[Pod],
    config_map: &ConfigMap,
) -> Result<Vec<String>, ApplyError> {
    let hash = list_hash(config_map);
    annotate(
        client,
        namespace,
        behind(pods, PEERS_ANNOTATION, &hash),
        PEERS_ANNOTATION,
        &hash,
    )
    .await
}

/// The proxy pods (a ReplicaSet's, not being deleted, running or still
/// starting: a starting pod may have mounted the file before it changed)
/// whose `mcpwarden.dev/egress-clients` is not `hash`.
pub fn proxy_pods_behind<'a>(pods: &'a [Pod], hash: &str) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.kind == "ReplicaSet")
        })
        .filter(|p| {
            matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Pending" | "Running")
            )
        })
        .filter(|p| {
            p.annotations()
                .get(EGRESS_CLIENTS_ANNOTATION)
                .map(String::as_str)
                != Some(hash)
        })
        .collect()
}

/// Set `annotation` to `hash` on each of `pods`; the names of those written.
pub async fn annotate(
    client: &Client,
    namespace: &str,
    pods: Vec<&Pod>,
    annotation: &str,
    hash: &str,
) -> Result<Vec<String>, ApplyError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut written = Vec::new();
    for pod in pods {
        let name = pod.name_any();
        let patch = serde_json::json!({"metadata": {"annotations": {annotation: hash}}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => written.push(format!("Pod/{name}")),
            // Gone since resolve read it: nothing to tell.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(ApplyError {
                    kind: "Pod",
                    name,
                    source,
                })
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(phase: &str, annotation: Option<&str>) -> Pod {
        let mut meta = json!({"name": "p", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "m-1", "uid": "u", "controller": true}]});
        if let Some(a) = annotation {
            meta["annotations"] = json!({PEERS_ANNOTATION: a});
        }
        serde_json::from_value(json!({"metadata": meta, "status": {"phase": phase}})).unwrap()
    }

    #[test]
    fn only_running_pods_told_of_another_list_are_behind() {
        let cm: ConfigMap = serde_json::from_value(
            json!({"metadata": {"name": "m-peers"}, "data": {"peers": "10.0.0.1:8080\n"}}),
        )
        .unwrap();
        let hash = list_hash(&cm);
        assert!(hash.starts_with("sha256:") && hash.len() == 71);
        let pods = [
            pod("Running", None),
            pod("Running", Some("sha256:old")),
            pod("Running", Some(&hash)),
            pod("Pending", None),
        ];
        assert_eq!(behind(&pods, PEERS_ANNOTATION, &hash).len(), 2);
        // Another list's annotation is not this one's.
        assert_eq!(behind(&pods, EGRESS_CLIENTS_ANNOTATION, &hash).len(), 3);
        // A pod with the server's labels that no ReplicaSet controls is no
        // replica: the operator does not patch it.
        let mut stray = pod("Running", None);
        stray.metadata.owner_references = None;
        assert!(behind(&[stray], PEERS_ANNOTATION, &hash).is_empty());
    }

    #[test]
    fn proxy_pods_still_starting_are_told_too() {
        let with = |phase: &str, annotation: Option<&str>| {
            let mut p = pod(phase, None);
            if let Some(a) = annotation {
                p.metadata.annotations =
                    Some([(EGRESS_CLIENTS_ANNOTATION.to_string(), a.to_string())].into());
            }
            p
        };
        let pods = [
            with("Running", None),
            with("Pending", Some("sha256:old")),
            with("Running", Some("sha256:new")),
            with("Succeeded", None),
        ];
        assert_eq!(proxy_pods_behind(&pods, "sha256:new").len(), 2);
        let mut going = with("Running", None);
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        assert!(proxy_pods_behind(&[going], "sha256:new").is_empty());
    }
}
