//! `MCPGateway` (short name `mcpgw`): one MCP endpoint in front of several
//! MCPServers of its namespace.
//!
//! The operator runs the facade in gateway mode (`run --backend NAME=URL …`)
//! in a pod of its own, in front of each backend's own facade: every backend
//! keeps its policy, the gateway adds its own (the optional ToolProfile) and
//! never replaces one. The gateway signs, per backend, an assertion of the
//! caller it authenticated; the operator makes the signing key once, keeps it
//! in a Secret only the gateway's pod mounts, and gives the public half only
//! to the backends this gateway selects (their compiled `auth.gateways`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::mcpserver::{Expose, ProfileRef};

/// The `prefix` that means "no prefix".
pub const PREFIX_NONE: &str = "none";

/// One endpoint for several MCPServers, run behind the mcp-warden gateway.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "mcpwarden.dev",
    version = "v1alpha1",
    kind = "MCPGateway",
    plural = "mcpgateways",
    namespaced,
    shortname = "mcpgw",
    category = "mcp",
    category = "mcp-warden",
    status = "MCPGatewayStatus",
    derive = "PartialEq",
    validation = kube::core::Rule::new("size(self.metadata.name) <= 49 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message("the name becomes object names (<name>, <name>-gateway-key, <name>-peers): at most 49 lowercase letters, digits or '-', starting with a letter"),
    doc = "MCPGateway: one MCP endpoint in front of several MCPServers, each keeping its own facade and policy.",
    printcolumn(name = "Ready", type_ = "string", description = "The Ready condition", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Backends", type_ = "string", description = "Backends ready / selected", json_path = ".status.backendsReady"),
    printcolumn(name = "Conflicts", type_ = "string", description = "Whether the gateway withholds names (the Conflicts condition)", json_path = ".status.conditions[?(@.type==\"Conflicts\")].status"),
    printcolumn(name = "Endpoint", type_ = "string", description = "Where agents connect", json_path = ".status.endpoint"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::crd_bounds)]
pub struct MCPGatewaySpec {
    /// The MCPServers (of this namespace) behind the gateway: each entry
    /// names one server, or selects servers by label (a server that starts
    /// matching later is picked up). A server matched twice is one backend,
    /// with the prefix of the entry that names it.
    #[schemars(length(min = 1, max = 32))]
    pub backends: Vec<GatewayBackend>,
    /// The gateway's own ToolProfile (same namespace): who may call the
    /// gateway (`auth`, `roles`) and which of the names it serves are
    /// exposed (`tools` name the prefixed names, e.g. `git__git_status`),
    /// added to each backend's own policy. Without one, the gateway accepts
    /// the cluster's service-account tokens and passes every name the
    /// backends allow the caller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_profile_ref: Option<ProfileRef>,
    /// Gateway pod replicas: 1 (default), up to 10, or 0 to pause.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0, max = 10))]
    pub replicas: i32,
    /// How agents outside the cluster reach the gateway, as for an
    /// MCPServer: the host names it accepts besides the Service's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose: Option<Expose>,
    /// Explicit conflict mapping: a name the gateway withholds because two
    /// backends serve it (a collision) or because backends spell it
    /// confusably is served by the backend named here; every other
    /// backend's copy or look-alike stays withheld. `name` is the name
    /// clients see (after prefixing). A tool quarantined for shadowing
    /// (its definition steers the model to another backend's tool) is
    /// never lifted by a mapping. A mapping to a server that is not a
    /// backend of the gateway is inert.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = kube::core::Rule::new("self.all(r, self.exists_one(s, s.name == r.name))").message("each name is mapped once"))]
    pub resolve: Vec<GatewayResolve>,
}

/// One name the gateway serves from one backend despite a conflict.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayResolve {
    /// The name as clients see it (a tool, prompt or resource template,
    /// e.g. `search` or `docs__search`).
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// The MCPServer (a backend of this gateway) that serves it.
    #[schemars(
        length(min = 1, max = 57),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub backend: String,
}

/// A backend entry: exactly one of `name` or `selector`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.name) != has(self.selector)").message("set exactly one of name (one MCPServer) or selector (MCPServers by label)"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.prefix) || has(self.name)").message("a prefix belongs to one backend: give it with name (servers a selector matches are prefixed <server>__)").field_path(".prefix"))]
pub struct GatewayBackend {
    /// An MCPServer of the gateway's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 57),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: Option<String>,
    /// MCPServers of the gateway's namespace by label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// What the names of this backend's tools, prompts and resource
    /// templates start with (default `<server>__`). `none`: no prefix,
    /// allowed only where the operator can show from the backends'
    /// published tool inventories (their `status.tools`) that no name
    /// collides; until it can, the gateway is not built (condition
    /// `Ready=False`, reason `PrefixNoneUnproven`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 32),
        regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    )]
    pub prefix: Option<String>,
}

/// What the operator observed and did. Written only by the operator.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct MCPGatewayStatus {
    /// `Ready` and `Degraded`, each with a reason and a message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The `metadata.generation` these conditions describe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The URL agents connect to (as an MCPServer's `status.endpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// `<ready>/<selected>` backends, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub backends_ready: Option<String>,
    /// Each backend, by server name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub backends: Vec<GatewayBackendStatus>,
    /// The names the gateway withholds (or serves from one backend by
    /// `spec.resolve`), from two sources merged without duplicates: the
    /// operator's own reading of the backends' published tool inventories
    /// and prefixes with the facade's rules (tool collisions and confusable
    /// spellings, known before any gateway pod runs), and the live view of
    /// each Ready gateway pod (`GET /gateway` on its admin port), which also
    /// knows shadowing definitions, prompts and resource templates. Sorted
    /// by kind, catalog and names; at most 32 (the `Conflicts` condition
    /// counts them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub conflicts: Vec<GatewayConflictStatus>,
}

/// One conflict among the backends' names.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayConflictStatus {
    /// The check that decided: `collision` (two backends serve the name),
    /// `confusable` (names equal after case-folding and the Unicode
    /// confusable skeleton) or `shadowing` (a definition that names another
    /// backend's tool with an instruction to the model, found by the
    /// facade's poisoning scan; never lifted by `spec.resolve`).
    pub kind: String,
    /// Which kind of name: `tool`, `prompt` or `resource_template`.
    #[serde(default = "tool_catalog")]
    #[schemars(length(max = 32))]
    pub catalog: String,
    /// The names clients would see.
    #[schemars(length(max = 16))]
    pub names: Vec<String>,
    /// The backends serving them.
    #[schemars(length(max = 32))]
    pub backends: Vec<String>,
    /// What decided it, as the gateway reports it (for `shadowing`: the
    /// poisoning scan's findings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub detail: Option<String>,
    /// The backend `spec.resolve` names to serve it; absent while withheld.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_by: Option<String>,
    /// Whether a running gateway pod reports it (its `/gateway` view);
    /// `false`: computed from the backends' published inventories alone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reported_by_gateway: bool,
}

fn tool_catalog() -> String {
    "tool".into()
}

/// One backend as the operator sees it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayBackendStatus {
    /// The MCPServer's name (the backend's name at the gateway and the
    /// audience of the gateway's assertions for it).
    pub name: String,
    /// The prefix its names get (`none`: none).
    pub prefix: String,
    /// Whether the MCPServer reports `Ready=True`.
    pub ready: bool,
    /// How many of its tools its facades expose (from its `status.tools`),
    /// when it publishes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<i32>,
    /// Why it is not ready, in a word (its own `Ready` reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

fn default_replicas() -> i32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crd_names_and_columns() {
        let crd = MCPGateway::crd();
        assert_eq!(crd.spec.group, "mcpwarden.dev");
        assert_eq!(crd.spec.names.kind, "MCPGateway");
        assert_eq!(crd.spec.names.short_names, Some(vec!["mcpgw".to_string()]));
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            columns,
            ["Ready", "Backends", "Conflicts", "Endpoint", "Age"]
        );
    }

    #[test]
    fn minimal_spec_gets_one_replica_and_no_profile() {
        let spec: MCPGatewaySpec =
            serde_json::from_value(serde_json::json!({"backends": [{"name": "git"}]})).unwrap();
        assert_eq!(spec.replicas, 1);
        assert!(spec.tool_profile_ref.is_none() && spec.expose.is_none());
        assert_eq!(spec.backends[0].name.as_deref(), Some("git"));
    }
}
