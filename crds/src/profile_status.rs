//! The status both profile kinds share: is the profile usable, and which
//! MCPServers reference it. The operator writes it (a profile without
//! servers still gets one), so `kubectl get tp,sbp` answers "is this valid,
//! and who would a change affect?" before anything is changed.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// What the operator found about a profile. Written only by the operator.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ProfileStatus {
    /// `Valid`: whether servers referencing the profile can be built with it
    /// (a reason and a message when not).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    /// The `metadata.generation` the conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The MCPServers in the namespace that reference the profile, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub used_by: Vec<String>,
}
