//! Apply, for the replicas: after the peers ConfigMap changed, each running
//! pod gets the list's hash as an annotation. The kubelet refreshes a mounted
//! ConfigMap only on its periodic sync (about a minute), but syncs a pod at
//! once when the pod object changes; until its facade reads the new list, an
//! identity owned by a pod that is gone is refused (`identity_budget_
//! unavailable`), so after a rollout the window is seconds, not a minute.
//!
//! ```text
//! <name>-peers data ─ sha256 ─▶ pods whose mcpwarden.dev/peers differs ─ merge patch ─▶ kubelet syncs them
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

/// `sha256:<hex>` of the peers ConfigMap's data.
pub fn list_hash(config_map: &ConfigMap) -> String {
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(names::PEERS_KEY))
        .map(String::as_str)
        .unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(text.as_bytes())))
}

/// The running replicas (as the peers list counts them) whose annotation is
/// not `hash`: a pod outside the Deployment is never patched.
pub fn behind<'a>(pods: &'a [Pod], hash: &str) -> Vec<&'a Pod> {
    pods.iter()
        .filter(|p| super::resolve::is_running_replica(p))
        .filter(|p| p.annotations().get(PEERS_ANNOTATION).map(String::as_str) != Some(hash))
        .collect()
}

/// Annotate every pod that is behind; the names of those written.
pub async fn nudge(
    client: &Client,
    namespace: &str,
    pods: &[Pod],
    config_map: &ConfigMap,
) -> Result<Vec<String>, ApplyError> {
    let hash = list_hash(config_map);
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut written = Vec::new();
    for pod in behind(pods, &hash) {
        let name = pod.name_any();
        let patch = serde_json::json!({"metadata": {"annotations": {PEERS_ANNOTATION: hash}}});
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
        assert_eq!(behind(&pods, &hash).len(), 2);
        // A pod with the server's labels that no ReplicaSet controls is no
        // replica: the operator does not patch it.
        let mut stray = pod("Running", None);
        stray.metadata.owner_references = None;
        assert!(behind(&[stray], &hash).is_empty());
    }
}
