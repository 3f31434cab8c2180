//! The last step of every reconcile pipeline (MCPServer, ToolProfile and
//! SandboxProfile, MCPGateway): the status, written by server-side apply
//! with the operator's field manager, so each status is wholly the
//! operator's and a write replaces what it wrote before. Callers decide
//! what a failure means (a 404 is an object deleted since it was read).

use kube::{
    api::{Patch, PatchParams},
    Api, Resource,
};
use serde::{de::DeserializeOwned, Serialize};

use crate::config::FIELD_MANAGER;

/// Apply `status` as the whole status of `name`.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    status: &impl Serialize,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
}
