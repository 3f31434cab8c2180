//! `SandboxProfile` (short name `sbp`): the box an MCP server runs in — user,
//! resources, `/tmp` size, root filesystem, network egress, workspace access
//! and service-account token.
//!
//! Every default is the capability baseline (no egress, read-only
//! workspace, no token). Anything above the baseline is a capability that
//! needs a cluster admin's approval; until then the operator records the
//! request and applies the baseline.
//!
//! Egress comes in two shapes: CIDR blocks (`rules`, enforced by any
//! NetworkPolicy) and host names (`hosts` and the `presets` that expand to
//! them, enforced only where the cluster has a policy engine that matches
//! names: Cilium's `toFQDNs` or Calico's `domains`). A plain NetworkPolicy
//! cannot name a host, so there named egress is not applied at all.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The sandbox an MCP server's pod runs in. Referenced by
/// `MCPServer.spec.sandboxProfileRef`; without one, the defaults apply.
// Several printer columns are strings: clippy reads the repeated
// `type_ = "string"` of separate `printcolumn(…)` entries as one attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "mcpwarden.dev",
    version = "v1alpha1",
    kind = "SandboxProfile",
    namespaced,
    shortname = "sbp",
    category = "mcp",
    category = "mcp-warden",
    derive = "PartialEq",
    derive = "Default",
    doc = "SandboxProfile: the user, resources, filesystem, network egress and workspace access of an MCP server's pod.",
    status = "crate::profile_status::ProfileStatus",
    printcolumn(name = "User", type_ = "integer", json_path = ".spec.runAsUser"),
    printcolumn(
        name = "Workspace",
        type_ = "string",
        json_path = ".spec.workspaceAccess"
    ),
    printcolumn(
        name = "Valid",
        type_ = "string",
        description = "The Valid condition",
        json_path = ".status.conditions[?(@.type==\"Valid\")].status"
    ),
    printcolumn(
        name = "Used-By",
        type_ = "string",
        description = "MCPServers referencing it",
        json_path = ".status.usedBy"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::crd_bounds)]
pub struct SandboxProfileSpec {
    /// The non-root user id every container runs as (default 65532). Also the
    /// group and the fsGroup.
    #[serde(default = "default_user")]
    #[schemars(range(min = 1, max = 2147483647))]
    pub run_as_user: i64,
    /// CPU and memory of the `server` container. Defaults: requests 50m CPU /
    /// 64Mi memory, limits 1 CPU / 512Mi memory.
    #[serde(default)]
    pub resources: SandboxResources,
    /// Size limit of the writable `/tmp` emptyDir (default `64Mi`).
    #[serde(default = "default_tmp")]
    pub tmp_size_limit: Quantity,
    /// Size limit of the server's writable home, an emptyDir at
    /// `/home/mcp` (default `512Mi`). `HOME` points there, and so do the
    /// caches package runners write at start (`XDG_CACHE_HOME`,
    /// `npm_config_cache`, `UV_CACHE_DIR`, `PIP_CACHE_DIR`): `npx -y` and
    /// `uvx` download the server into it.
    #[serde(default = "default_home")]
    pub home_size_limit: Quantity,
    /// The RuntimeClass of the pod, e.g. `gvisor` or `kata` for servers you
    /// do not trust (default: the cluster's default runtime). A stricter
    /// runtime, never a looser one: it is not a capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub runtime_class_name: Option<String>,
    /// Mount the root filesystem read-only (default true). Turn off only for
    /// servers that cannot live with a writable `/tmp` alone.
    #[serde(default = "default_true")]
    pub read_only_root_filesystem: bool,
    /// Network access of the pod. Default: no egress at all.
    #[serde(default)]
    pub network: SandboxNetwork,
    /// Access to the MCPServer's workspace: `readOnly` (default) or
    /// `readWrite` (a capability that needs approval).
    #[serde(default)]
    pub workspace_access: WorkspaceAccess,
    /// Mount a service-account token into the server (default false; a
    /// capability that needs approval).
    #[serde(default)]
    pub automount_service_account_token: bool,
}

impl Default for SandboxProfileSpec {
    /// The same as an empty spec: the baseline.
    fn default() -> Self {
        SandboxProfileSpec {
            run_as_user: default_user(),
            resources: SandboxResources::default(),
            tmp_size_limit: default_tmp(),
            home_size_limit: default_home(),
            runtime_class_name: None,
            read_only_root_filesystem: true,
            network: SandboxNetwork::default(),
            workspace_access: WorkspaceAccess::ReadOnly,
            automount_service_account_token: false,
        }
    }
}

/// Requests and limits of the `server` container, by resource name (`cpu`,
/// `memory`, `ephemeral-storage`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SandboxResources {
    /// What the scheduler reserves (default `cpu: 50m`, `memory: 64Mi`).
    #[serde(default = "default_requests")]
    pub requests: BTreeMap<String, Quantity>,
    /// The most the container may use (default `cpu: "1"`, `memory: 512Mi`).
    #[serde(default = "default_limits")]
    #[x_kube(validation = kube::core::Rule::new("'memory' in self").message("a memory limit is required"))]
    pub limits: BTreeMap<String, Quantity>,
}

impl Default for SandboxResources {
    fn default() -> Self {
        SandboxResources {
            requests: default_requests(),
            limits: default_limits(),
        }
    }
}

/// Network access.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SandboxNetwork {
    /// Outbound traffic the server asks for. Empty (the default) means none;
    /// each entry is a capability that needs approval.
    #[serde(default)]
    pub egress: SandboxEgress,
}

/// Outbound traffic the server asks for.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SandboxEgress {
    /// Destinations, as CIDR blocks and ports.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub rules: Vec<EgressRule>,
    /// Destinations by host name and port, e.g. `api.github.com` on 443.
    /// Each host and port is a capability (`network.egress.host:<name>:<port>`)
    /// and brings DNS lookups with it. Enforced only with Cilium
    /// (`CiliumNetworkPolicy` `toFQDNs`) or Calico Enterprise (`domains`);
    /// with a plain NetworkPolicy nothing is opened (it cannot match host
    /// names) and status says so.
    #[serde(default)]
    #[schemars(length(max = 32))]
    pub hosts: Vec<EgressHost>,
    /// Named sets of hosts a server commonly needs at start: `npm`
    /// (registry.npmjs.org), `pypi` (pypi.org, files.pythonhosted.org),
    /// `github` (github.com, api.github.com, codeload.github.com), all on
    /// 443. They expand to `hosts`, so the capabilities list the hosts.
    #[serde(default)]
    #[schemars(length(max = 8))]
    pub presets: Vec<EgressPreset>,
    /// Allow DNS lookups (UDP and TCP 53) to the cluster DNS (default false).
    /// Only applied together with some approved egress: DNS alone is a way
    /// out, not a need.
    #[serde(default)]
    pub dns: bool,
}

/// One allowed destination by host name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EgressHost {
    /// A fully qualified host name, lowercase, without a trailing dot, e.g.
    /// `registry.npmjs.org`. No wildcards: an approver sees every host.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")
    )]
    pub name: String,
    /// TCP ports; at least one.
    #[schemars(length(min = 1, max = 16))]
    #[schemars(inner(range(min = 1, max = 65535)))]
    pub ports: Vec<i32>,
}

/// A named set of hosts (all TCP 443).
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord,
)]
#[serde(rename_all = "lowercase")]
pub enum EgressPreset {
    /// The npm registry (`npx -y`, `npm install`).
    Npm,
    /// PyPI: the index and the files (`uvx`, `pip install`).
    Pypi,
    /// GitHub: the web host (git over HTTPS), the REST API and archives.
    Github,
}

impl EgressPreset {
    /// The host names the preset stands for (each on TCP 443).
    pub fn hosts(self) -> &'static [&'static str] {
        match self {
            EgressPreset::Npm => &["registry.npmjs.org"],
            EgressPreset::Pypi => &["files.pythonhosted.org", "pypi.org"],
            EgressPreset::Github => &["api.github.com", "codeload.github.com", "github.com"],
        }
    }
}

impl SandboxEgress {
    /// Every (host, port) asked for: `hosts` and the presets' hosts, sorted
    /// and without duplicates.
    pub fn named(&self) -> std::collections::BTreeSet<(String, i32)> {
        let mut out = std::collections::BTreeSet::new();
        for host in &self.hosts {
            for port in &host.ports {
                out.insert((host.name.clone(), *port));
            }
        }
        for preset in &self.presets {
            for host in preset.hosts() {
                out.insert((host.to_string(), 443));
            }
        }
        out
    }
}

/// One allowed destination.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EgressRule {
    /// Destination block, e.g. `10.0.0.0/8` or `203.0.113.7/32`.
    #[schemars(length(max = 64))]
    #[x_kube(validation = kube::core::Rule::new("isCIDR(self)").message("must be a CIDR block such as 10.0.0.0/8"))]
    pub cidr: String,
    /// TCP ports; at least one.
    #[schemars(length(min = 1, max = 16))]
    #[schemars(inner(range(min = 1, max = 65535)))]
    pub ports: Vec<i32>,
}

/// Workspace access.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
#[serde(rename_all = "camelCase")]
pub enum WorkspaceAccess {
    /// Mounted read-only (the default).
    #[default]
    ReadOnly,
    /// Mounted writable; needs approval.
    ReadWrite,
}

fn default_user() -> i64 {
    65532
}
fn default_true() -> bool {
    true
}
fn default_tmp() -> Quantity {
    Quantity("64Mi".into())
}
fn default_home() -> Quantity {
    Quantity("512Mi".into())
}
fn default_requests() -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".into(), Quantity("50m".into())),
        ("memory".into(), Quantity("64Mi".into())),
    ])
}
fn default_limits() -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".into(), Quantity("1".into())),
        ("memory".into(), Quantity("512Mi".into())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_spec_is_the_baseline() {
        let spec: SandboxProfileSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec, SandboxProfileSpec::default());
        assert!(spec.network.egress.rules.is_empty());
        assert!(!spec.automount_service_account_token);
        assert_eq!(spec.workspace_access, WorkspaceAccess::ReadOnly);
        assert!(spec.network.egress.named().is_empty());
    }

    #[test]
    fn presets_expand_to_sorted_hosts_on_443() {
        let egress: SandboxEgress = serde_json::from_value(serde_json::json!({
            "presets": ["pypi", "npm"],
            "hosts": [{"name": "pypi.org", "ports": [443, 8443]}]
        }))
        .unwrap();
        let named: Vec<_> = egress.named().into_iter().collect();
        assert_eq!(
            named,
            [
                ("files.pythonhosted.org".to_string(), 443),
                ("pypi.org".to_string(), 443),
                ("pypi.org".to_string(), 8443),
                ("registry.npmjs.org".to_string(), 443),
            ]
        );
    }
}
