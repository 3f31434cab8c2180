//! `MCPServer` (short name `mcps`): one MCP server the operator runs behind
//! the tool facade.
//!
//! The operator turns it, with its ToolProfile and SandboxProfile, into a
//! ServiceAccount, a ConfigMap (the compiled FacadePolicy), a Deployment, a
//! Service and a NetworkPolicy, and reports in `status` whether that worked
//! and where agents connect.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

pub use crate::mcpserver_status::{MCPServerStatus, ObservedServer, ObservedTool, PinnedImage};

/// An MCP server run behind the mcp-warden tool facade.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "mcpwarden.dev",
    version = "v1alpha1",
    kind = "MCPServer",
    plural = "mcpservers",
    namespaced,
    shortname = "mcps",
    category = "mcp",
    category = "mcp-warden",
    status = "MCPServerStatus",
    derive = "PartialEq",
    validation = kube::core::Rule::new("size(self.metadata.name) <= 57 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')").message("the name becomes Service names (<name> and <name>-peers): at most 57 lowercase letters, digits or '-', starting with a letter"),
    doc = "MCPServer: an MCP server run in a hardened pod behind the mcp-warden tool facade.",
    printcolumn(name = "Ready", type_ = "string", description = "The Ready condition", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Approved", type_ = "string", description = "The CapabilitiesApproved condition", json_path = ".status.conditions[?(@.type==\"CapabilitiesApproved\")].status"),
    printcolumn(name = "Endpoint", type_ = "string", description = "Where agents connect", json_path = ".status.endpoint"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::crd_bounds)]
#[x_kube(validation = kube::core::Rule::new("self.transport != 'streamable-http' || has(self.port)").message("port is required when transport is streamable-http").field_path(".port"))]
#[x_kube(validation = kube::core::Rule::new("self.transport != 'stdio' || !has(self.port)").message("port is only used with transport streamable-http").field_path(".port"))]
#[x_kube(validation = kube::core::Rule::new("has(self.remote) || self.transport != 'stdio' || size(self.command) > 0").message("command is required when transport is stdio: the bridge has to know what to start").field_path(".command"))]
#[x_kube(validation = kube::core::Rule::new("has(self.remote) != has(self.image)").message("set exactly one of image (a server container in the pod) or remote (a server reached over HTTPS)"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.onlyThroughGateway) || !has(self.expose) || (!has(self.expose.ingress) && !has(self.expose.httpRoute))").message("a server reachable only through its gateway gets no Ingress or HTTPRoute of its own: expose the gateway instead").field_path(".onlyThroughGateway"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.remote) || ((!has(self.command) || size(self.command) == 0) && (!has(self.args) || size(self.args) == 0) && (!has(self.env) || size(self.env) == 0) && (!has(self.secretEnv) || size(self.secretEnv) == 0) && !has(self.port) && !has(self.workspace))").message("a remote server has no container: command, args, env, secretEnv, port and workspace do not apply").field_path(".remote"))]
pub struct MCPServerSpec {
    /// Container image of the MCP server, e.g. `ghcr.io/acme/mcp-git:1.2.0`.
    /// Required unless `remote` is set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// When the kubelet pulls `image`: `Always`, `IfNotPresent` or `Never`.
    /// Unset, Kubernetes' own rule, written out on the container by the
    /// operator: `Always` for an untagged or `:latest` image, else
    /// `IfNotPresent`. Part of what an approval binds (a pull can change
    /// what runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<ImagePullPolicy>,
    /// A server that runs elsewhere, reached over HTTPS: the pod holds the
    /// facade alone, and egress to the remote host is a capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<crate::remote::RemoteServer>,
    /// The server's executable and leading arguments (the container's
    /// entrypoint). Required for `stdio`, where the bridge starts it once per
    /// facade session; optional for `streamable-http`.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub command: Vec<String>,
    /// Further arguments appended to `command`.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub args: Vec<String>,
    /// Plain environment variables of the `server` container.
    #[serde(default)]
    #[schemars(length(max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub env: Vec<EnvVar>,
    /// Environment variables taken from Secrets. They reach the `server`
    /// container only, never the facade, the policy or an agent.
    #[serde(default)]
    #[schemars(length(max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub secret_env: Vec<SecretEnvVar>,
    /// How the facade talks to the server: `stdio` (default; through the
    /// bridge, one process per session) or `streamable-http` (the server
    /// listens on `port` on loopback).
    #[serde(default)]
    pub transport: Transport,
    /// Which revision of MCP the server speaks: `auto` (default) asks it
    /// with `server/discover` when the facade starts (a server that does not
    /// answer is legacy); `modern` (2026-07-28) serves every caller from one
    /// server process or upstream connection; `legacy` (2025-11-25 and
    /// earlier) gives each client session its own. Clients of either
    /// revision are served either way.
    #[serde(default, skip_serializing_if = "ProtocolEra::is_auto")]
    pub protocol_era: ProtocolEra,
    /// The loopback port the server listens on; required for
    /// `streamable-http`. 8080 and 9090 belong to the facade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    #[x_kube(validation = kube::core::Rule::new("self != 8080 && self != 9090").message("8080 and 9090 are the facade's ports"))]
    pub port: Option<i32>,
    /// The HTTP path of the server's MCP endpoint for `streamable-http`
    /// (default `/mcp`).
    #[serde(default = "default_path")]
    #[schemars(length(min = 1, max = 256), regex(pattern = r"^/[A-Za-z0-9._~/-]*$"))]
    pub path: String,
    /// The ToolProfile (same namespace) that says which tools are exposed.
    pub tool_profile_ref: ProfileRef,
    /// The SandboxProfile (same namespace); without one, the baseline
    /// sandbox applies (no egress, read-only workspace, no token).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_profile_ref: Option<ProfileRef>,
    /// Pod replicas: 1 (default), up to 10, or 0 to pause. With more than
    /// one, the facades route each session to the replica that owns it (a
    /// shared peer key signs session ids), a headless Service lets them find
    /// each other, and a PodDisruptionBudget keeps all but one available.
    #[serde(default = "default_replicas")]
    #[schemars(range(min = 0, max = 10))]
    pub replicas: i32,
    /// A volume the server works in, mounted at `mountPath`; read-only unless
    /// the SandboxProfile asks for `readWrite` and an admin approved it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Pod settings the cluster needs (pull secrets, placement, mesh or
    /// monitoring labels and annotations), merged under the operator's
    /// hardening: the hardening always wins, and a field that would weaken
    /// it is refused. Isolation (user, resources, runtime class, egress) is
    /// the SandboxProfile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplate>,
    /// Settings of the server's ServiceAccount, e.g. workload-identity
    /// annotations (`eks.amazonaws.com/role-arn`,
    /// `iam.gke.io/gcp-service-account`, `azure.workload.identity/client-id`).
    /// The token still reaches the server only with the approved
    /// `serviceaccount.token` capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ServiceAccountSettings>,
    /// How agents outside the cluster reach the server: the host names the
    /// facade accepts besides the Service's own. Without it, only in-cluster
    /// callers (and port-forwards sending the Service's host name) get in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expose: Option<Expose>,
    /// Make the server reachable only through this MCPGateway (its name, in
    /// this namespace): the server's NetworkPolicy admits the facade port
    /// (8080) only from that gateway's pods (the metrics port is unchanged),
    /// and the facade accepts only that gateway's assertions — none of its
    /// profile's own callers (static tokens, JWT issuers, service-account
    /// tokens, anonymous) — so it holds where NetworkPolicy is not enforced.
    /// Until that gateway selects this server and its key exists, nobody
    /// gets in. Set here, on the server, rather than on the gateway: the
    /// server's owner closes it, and deleting or changing a gateway never
    /// opens it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub only_through_gateway: Option<String>,
}

/// Exposure beyond the in-cluster Service.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("(!has(self.ingress) && !has(self.httpRoute)) || (has(self.hosts) && size(self.hosts) > 0)").message("an Ingress or HTTPRoute needs expose.hosts: the names it routes"))]
pub struct Expose {
    /// Host names agents use through an Ingress, a Gateway or a load
    /// balancer (`git.mcp.example.com`). The facade refuses every other
    /// `Host` (against DNS rebinding), so a host missing here gets HTTP 403.
    /// The first one is the URL in `status.endpoint`
    /// (`https://<host>/mcp`: whatever sits in front is expected to
    /// terminate TLS, as bearer tokens must not cross a network in clear).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(inner(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    ))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub hosts: Vec<String>,
    /// Serve the facade's port 8080 over TLS with the certificate of a
    /// `kubernetes.io/tls` Secret (`tls.crt`, `tls.key`; e.g. a
    /// cert-manager Certificate's). The facade picks up a renewed
    /// certificate without a restart; until the Secret exists the pod
    /// waits. Clients then use `https://` (in the cluster too: give the
    /// certificate the Service's names), and whatever proxies to the pod
    /// must speak TLS to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ExposeTls>,
    /// Generate an Ingress (`<name>`) routing `hosts`, path `/mcp`, to the
    /// Service's port 8080.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<ExposeIngress>,
    /// Generate a Gateway API HTTPRoute (`<name>`) routing `hosts`, path
    /// `/mcp`, to the Service's port 8080, attached to these Gateways.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_route: Option<ExposeHttpRoute>,
}

/// The generated Ingress.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ExposeIngress {
    /// The IngressClass (default: the cluster's default class).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub class_name: Option<String>,
    /// Annotations of the Ingress, e.g. cert-manager's
    /// `cert-manager.io/cluster-issuer`, or the controller's backend
    /// protocol (`nginx.ingress.kubernetes.io/backend-protocol: HTTPS`)
    /// when the facade serves TLS.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 32))]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// The `kubernetes.io/tls` Secret the Ingress controller terminates TLS
    /// with for `hosts` (cert-manager's ingress-shim fills it from the
    /// annotation above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub tls_secret_name: Option<String>,
}

/// The generated HTTPRoute.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ExposeHttpRoute {
    /// The Gateways (listeners) the route attaches to.
    #[schemars(length(min = 1, max = 8))]
    pub parent_refs: Vec<GatewayRef>,
}

/// A Gateway, as an HTTPRoute's `parentRefs` name it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRef {
    /// The Gateway's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Its namespace (default: the MCPServer's); the Gateway's listener
    /// must allow routes from this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
    /// The listener (`sectionName`), e.g. the HTTPS one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub section_name: Option<String>,
}

/// The facade listener's certificate.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ExposeTls {
    /// A `kubernetes.io/tls` Secret in the MCPServer's namespace.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
    )]
    pub secret_name: String,
}

/// The keys `podTemplate.spec` may set; the rest of the pod is the operator's.
pub const POD_TEMPLATE_SPEC_KEYS: [&str; 7] = [
    "affinity",
    "imagePullSecrets",
    "nodeSelector",
    "priorityClassName",
    "schedulerName",
    "tolerations",
    "topologySpreadConstraints",
];

/// A pod template merged under the operator's hardening.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
// CEL where it is cheap (a field lookup each): the fields that would break
// the hardening outright are declared in the schema (see free_form_object) so
// rules can name them. Every other key outside POD_TEMPLATE_SPEC_KEYS is
// refused by the operator's validation (condition + Event).
#[x_kube(validation = kube::core::Rule::new("!has(self.spec) || !((has(self.spec.hostNetwork) && self.spec.hostNetwork) || (has(self.spec.hostPID) && self.spec.hostPID) || (has(self.spec.hostIPC) && self.spec.hostIPC))").message("podTemplate.spec: the pod never shares the host's network, PID or IPC namespace (Pod Security restricted)").field_path(".spec"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.spec) || !has(self.spec.securityContext)").message("podTemplate.spec.securityContext is the operator's (non-root, seccomp RuntimeDefault); the user is the SandboxProfile's runAsUser").field_path(".spec"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.spec) || !(has(self.spec.containers) || has(self.spec.initContainers) || has(self.spec.ephemeralContainers))").message("podTemplate.spec: the containers are the operator's (no privileged or extra containers); the server's image and command are spec.image and spec.command").field_path(".spec"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.spec) || !has(self.spec.volumes)").message("podTemplate.spec: the volumes are the operator's; the server's own volume is spec.workspace").field_path(".spec"))]
pub struct PodTemplate {
    /// Labels and annotations added to the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<PodTemplateMetadata>,
    /// Pod fields, as in a PodSpec: `affinity`, `imagePullSecrets`,
    /// `nodeSelector`, `priorityClassName`, `schedulerName`, `tolerations`,
    /// `topologySpreadConstraints`. Anything else is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub spec: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Labels and annotations of the pods.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateMetadata {
    /// Labels added to the pods (not `app.kubernetes.io/*` or
    /// `mcpwarden.dev/*`: those are the operator's).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = kube::core::Rule::new("self.all(k, !k.startsWith('app.kubernetes.io/') && !k.startsWith('mcpwarden.dev/'))").message("app.kubernetes.io/* and mcpwarden.dev/* labels are the operator's"))]
    pub labels: std::collections::BTreeMap<String, String>,
    /// Annotations added to the pods (e.g. a service mesh's or a
    /// scraper's; not `kubectl.kubernetes.io/default-container`, nor one
    /// that sets a container's AppArmor or seccomp profile: the hardening
    /// decides those).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    #[x_kube(validation = kube::core::Rule::new("!('kubectl.kubernetes.io/default-container' in self)").message("kubectl.kubernetes.io/default-container is the operator's"))]
    #[x_kube(validation = kube::core::Rule::new("self.all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') && !k.startsWith('seccomp.security.alpha.kubernetes.io/') && !k.startsWith('container.seccomp.security.alpha.kubernetes.io/'))").message("AppArmor and seccomp profiles are the hardening's"))]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// Settings of the server's ServiceAccount.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountSettings {
    /// Annotations of the ServiceAccount (workload identity).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 64))]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// PodSpec fields, kept as written (the API server preserves fields it does
/// not know). The fields that would break the hardening are declared, only
/// so that the CEL rules on `PodTemplate` can refuse them by name.
fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let refused = |what: &str| format!("Refused: {what}");
    let list = |what: &str| {
        serde_json::json!({
            "type": "array", "maxItems": 16, "description": refused(what),
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        })
    };
    let host = serde_json::json!({"type": "boolean", "description": refused("the pod never shares the host's namespaces.")});
    schemars::json_schema!({
        "type": "object",
        "maxProperties": 16,
        "x-kubernetes-preserve-unknown-fields": true,
        "properties": {
            "hostNetwork": host, "hostPID": host, "hostIPC": host,
            "securityContext": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "description": refused("the pod's security context is the operator's.")
            },
            "containers": list("the containers are the operator's."),
            "initContainers": list("the containers are the operator's."),
            "ephemeralContainers": list("the containers are the operator's."),
            "volumes": list("the volumes are the operator's.")
        }
    })
}

/// When the kubelet pulls an image (the container field of the same name).
#[derive(schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImagePullPolicy {
    /// On every container start.
    Always,
    /// Only when the node does not have the image.
    IfNotPresent,
    /// Never: the image must be on the node.
    Never,
}

impl ImagePullPolicy {
    /// The policy for `image`: `explicit`, else Kubernetes' default for it
    /// (`Always` for an untagged or `:latest` image without a digest).
    pub fn for_image(image: &str, explicit: Option<ImagePullPolicy>) -> ImagePullPolicy {
        if let Some(p) = explicit {
            return p;
        }
        if image.contains('@') {
            return ImagePullPolicy::IfNotPresent;
        }
        let last = image.rsplit('/').next().unwrap_or(image);
        match last.split_once(':') {
            Some((_, "latest")) | None => ImagePullPolicy::Always,
            Some(_) => ImagePullPolicy::IfNotPresent,
        }
    }

    /// The container field's value.
    pub fn as_str(self) -> &'static str {
        match self {
            ImagePullPolicy::Always => "Always",
            ImagePullPolicy::IfNotPresent => "IfNotPresent",
            ImagePullPolicy::Never => "Never",
        }
    }
}

/// How the facade reaches the server.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
pub enum Transport {
    /// The server speaks MCP on stdin/stdout (the default).
    #[default]
    #[serde(rename = "stdio")]
    Stdio,
    /// The server speaks MCP Streamable HTTP on `port` (loopback).
    #[serde(rename = "streamable-http")]
    StreamableHttp,
}

/// Which revision of MCP an MCPServer's server speaks.
#[derive(
    schemars::JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum ProtocolEra {
    /// Found with `server/discover` when the facade starts.
    #[default]
    Auto,
    /// 2025-11-25 and earlier: `initialize`, a server session per client.
    Legacy,
    /// 2026-07-28: stateless, one server for every caller.
    Modern,
}

impl ProtocolEra {
    pub fn is_auto(&self) -> bool {
        *self == ProtocolEra::Auto
    }

    /// The facade's `--upstream-era` value.
    pub fn as_str(&self) -> &'static str {
        match self {
            ProtocolEra::Auto => "auto",
            ProtocolEra::Legacy => "legacy",
            ProtocolEra::Modern => "modern",
        }
    }
}

/// A reference to an object in the MCPServer's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ProfileRef {
    /// The object's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A plain environment variable.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct EnvVar {
    /// Variable name.
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$")
    )]
    pub name: String,
    /// Value (default empty).
    #[serde(default)]
    pub value: String,
}

/// An environment variable whose value comes from a Secret key.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct SecretEnvVar {
    /// Variable name.
    #[schemars(
        length(min = 1, max = 256),
        regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$")
    )]
    pub name: String,
    /// The Secret, in the MCPServer's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub secret_name: String,
    /// The key in the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// The server's working volume: exactly one of `persistentVolumeClaim` or
/// `emptyDir`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.persistentVolumeClaim) != has(self.emptyDir)").message("set exactly one of persistentVolumeClaim or emptyDir"))]
pub struct Workspace {
    /// Where the server sees it (default `/workspace`).
    #[serde(default = "default_mount")]
    #[schemars(length(min = 2, max = 256), regex(pattern = r"^/[A-Za-z0-9._/-]+$"))]
    #[x_kube(validation = kube::core::Rule::new("!(self in ['/tmp', '/home/mcp', '/etc/mcp-warden', '/run/mcp', '/mcp-warden/bin'])").message("this path is used by mcp-warden"))]
    pub mount_path: String,
    /// An existing PersistentVolumeClaim in the MCPServer's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<ClaimRef>,
    /// A scratch volume that lives as long as the pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub empty_dir: Option<EmptyDirWorkspace>,
}

/// A PersistentVolumeClaim by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRef {
    /// The claim's name.
    #[schemars(length(min = 1, max = 253))]
    pub claim_name: String,
}

/// A scratch workspace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDirWorkspace {
    /// Size limit (default `1Gi`).
    #[serde(default = "default_workspace_size")]
    pub size_limit: k8s_openapi::apimachinery::pkg::api::resource::Quantity,
}

fn default_path() -> String {
    "/mcp".into()
}
fn default_replicas() -> i32 {
    1
}
fn default_mount() -> String {
    "/workspace".into()
}
fn default_workspace_size() -> k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn pull_policy_is_kubernetes_rule_unless_set() {
        use ImagePullPolicy::*;
        for (image, want) in [
            ("mcp/time", Always),
            ("mcp/time:latest", Always),
            ("registry:5000/team/srv", Always),
            ("registry:5000/team/srv:1.2", IfNotPresent),
            ("node:22-slim", IfNotPresent),
            ("ghcr.io/acme/srv@sha256:0123", IfNotPresent),
        ] {
            assert_eq!(ImagePullPolicy::for_image(image, None), want, "{image}");
        }
        assert_eq!(ImagePullPolicy::for_image("mcp/time", Some(Never)), Never);
    }

    #[test]
    fn crd_names_and_subresources() {
        let crd = MCPServer::crd();
        assert_eq!(crd.spec.group, "mcpwarden.dev");
        assert_eq!(crd.spec.names.short_names, Some(vec!["mcps".to_string()]));
        // `kubectl get mcp` / `kubectl get mcp-warden` list all three kinds.
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["mcp".to_string(), "mcp-warden".to_string()])
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["Ready", "Approved", "Endpoint", "Age"]);
    }

    #[test]
    fn minimal_spec_gets_safe_defaults() {
        let spec: MCPServerSpec = serde_json::from_value(serde_json::json!({
            "image": "x", "command": ["srv"], "toolProfileRef": {"name": "p"}
        }))
        .unwrap();
        assert_eq!(spec.transport, Transport::Stdio);
        assert_eq!(spec.replicas, 1);
        assert_eq!(spec.path, "/mcp");
        assert!(spec.workspace.is_none() && spec.sandbox_profile_ref.is_none());
    }
}
