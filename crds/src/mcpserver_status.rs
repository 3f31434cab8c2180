//! `MCPServer.status`: what the operator observed and did, written only by
//! the operator (its conditions, the capabilities asked for and approved,
//! the workload an approval binds, the image it pins, what the facades
//! report).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// What the operator observed and did. Written only by the operator.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MCPServerStatus {
    /// `Ready`, `PolicyCompiled`, `CapabilitiesApproved` and `Degraded`,
    /// each with a reason and a message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` these conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The URL agents connect to: `https://<first expose.hosts>/mcp` when
    /// the server is exposed, else the in-cluster one, e.g.
    /// `http://git.team-a.svc.cluster.local:8080/mcp` (`https://` with
    /// `expose.tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Every capability above the baseline the server asks for, by stable
    /// name (`network.egress:<cidr>:<port>`, `network.dns`,
    /// `workspace.write`, `remote.write`, `serviceaccount.token`,
    /// `tool:<name>`), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub requested_capabilities: Vec<String>,
    /// `sha256:<hex>` over `requestedCapabilities` (each name followed by a
    /// newline) and then the hashes of `workload` (each `workload.<part>=<hash>`
    /// followed by a newline): the value a cluster admin puts in the
    /// `mcpwarden.dev/approve` annotation. It binds what runs as well as
    /// what it may do, so a changed image, command, env, volume, profile or
    /// referenced Secret or ConfigMap content makes a new digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_digest: Option<String>,
    /// The digest whose approval is in force, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_digest: Option<String>,
    /// The capabilities in force (approved and still requested), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub approved_capabilities: Vec<String>,
    /// What decides what runs with the capabilities, by part (`image`,
    /// `command`, `args`, `env`, `secretEnv`, `workspace`, `podTemplate`,
    /// `serviceAccount`, `transport`, `remote`, `toolProfile`,
    /// `sandboxProfile`): a `sha256:` hash of each, with the content of the
    /// Secrets and ConfigMaps it references (hashed, never copied).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub workload: std::collections::BTreeMap<String, String>,
    /// `workload` as it was when `approvedDigest` was approved: a part that
    /// differs is a change waiting for approval, while the last approved
    /// workload keeps running.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub approved_workload: std::collections::BTreeMap<String, String>,
    /// `sha256:` of the policy the operator last wrote under an approval
    /// (the approved one, or a tightening of it): a profile change that
    /// only takes away from it applies at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_policy: Option<String>,
    /// The image the approval in force runs, by digest: the digest the
    /// server's pods reported for `spec.image` when the approval first ran
    /// (the runtime's `imageID`), so the Deployment asks for
    /// `<spec.image>@<digest>` and a tag moved in the registry never runs
    /// with the approved capabilities. Set only while capabilities above the
    /// baseline are in force, for an image the spec names by tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_image: Option<PinnedImage>,
    /// The upstream tools the facades observed (from each pod's
    /// `:9090/tools`), by name: definition hash, state and risk. A
    /// quarantined tool's new hash is what to pin in the ToolProfile.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub tools: Vec<ObservedTool>,
    /// The upstream server as the facades found it when they started: the
    /// `serverInfo` of its `server/discover` or `initialize` answer, and the
    /// MCP era it speaks. For a remote server, the remote's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ObservedServer>,
}

/// The upstream server's identity, as its own answer gives it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObservedServer {
    /// `serverInfo.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `serverInfo.title`, if it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// `serverInfo.version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `legacy` (sessions, `initialize`) or `modern` (stateless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub era: Option<String>,
}

/// One upstream tool as the facades see it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObservedTool {
    /// The upstream name.
    pub name: String,
    /// The name agents see (alias), if exposed under another name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exposed_as: Option<String>,
    /// The definition hash now (`sha256:…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// `exposed`, `hidden` or `quarantined` (the worst any replica reports).
    pub state: String,
    /// Why it is hidden or quarantined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The risk the facade assigned (`low` … `critical`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<String>,
}

/// An image as the spec names it and the digest the runtime resolved it to.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PinnedImage {
    /// `spec.image` as written (a tag, e.g. `node:22-slim`).
    pub image: String,
    /// `sha256:<hex>`: the manifest digest the pods reported for it.
    pub digest: String,
}
