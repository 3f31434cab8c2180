//! The egress proxy engine (pure): approved egress by host name where the
//! cluster has no Cilium or Calico, through `mcp-warden-sidecar egress`:
//! one per namespace, or one per server (`egressProxyScope`). Built only
//! when the engine in force is [`NamedEgress::Proxy`] and a (non-remote)
//! server has approved `network.egress.host:…`; the capability and its
//! approval are the same whichever engine and scope enforce it.
//!
//! ```text
//! per server (BuildInput)                       per proxy (ProxyInput, assembled in apply; objects.rs)
//!   <name> policy ConfigMap annotation: its       namespace scope            server scope
//!     approved entry (a held change leaves the    mcp-warden-egress          <name>-egress-proxy   Deployment, Service :3128,
//!     ConfigMap, so the entry, as it was)                                                          NetworkPolicy
//!   credential Secret (token, url; made once,    mcp-warden-egress-clients  <name>-egress-proxy-clients  ConfigMap clients.json
//!     never rewritten): <name>-egress-proxy,                                 (sha256 of the tokens only)
//!     <name>-egress-proxy-credential (server scope)
//!   server env HTTPS_PROXY… (secretKeyRef url)    NetworkPolicy: in from the servers served; out only on
//!   NetworkPolicy: egress to its proxy :3128       their approved ports (public addresses; a CIDR rule's block)
//! ```
//! The namespace's proxy carries an owner reference to every server it
//! serves, so the garbage collector removes it with the last one; apply also
//! deletes it when no server needs it any more. The Service's owners are
//! every server holding a credential: its cluster IP is in their URLs, so
//! it stays while any of them exists. A server's own proxy is controlled by
//! that server alone, and its pods carry labels no other proxy selects. The
//! clients file holds only hashes, so it is a ConfigMap: the operator never
//! rewrites or deletes a Secret.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec},
        core::v1::{
            ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, EnvVarSource,
            PodSecurityContext, PodSpec, PodTemplateSpec, Probe, SeccompProfile, Secret,
            SecretKeySelector, Service, ServicePort, ServiceSpec, TCPSocketAction, Volume,
        },
        networking::v1::{
            IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule,
            NetworkPolicyPeer, NetworkPolicySpec,
        },
    },
    apimachinery::pkg::{
        apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference},
        util::intstr::IntOrString,
    },
    ByteString,
};
use mcp_warden_crds::MCPServer;
use serde::{Deserialize, Serialize};

use super::{
    deployment::{container_security_context, mount},
    network_policy::{dns_rule, labels, tcp, NOT_PUBLIC_V4, NOT_PUBLIC_V6},
    BuildInput,
};
use crate::{
    compile::Approved,
    config::{BuildConfig, EgressProxyScope, NamedEgress},
    egress_scope, names,
};

#[path = "egress_proxy_objects.rs"]
mod objects;
pub use objects::{clients_file, desired_proxy_objects, ProxyInput, ProxyObjects};

/// The namespace proxy's Deployment, Service and NetworkPolicy (and its
/// pods' `app.kubernetes.io/name`).
pub const PROXY_NAME: &str = "mcp-warden-egress";
/// A server's own proxy pods' `app.kubernetes.io/name` (never the
/// namespace proxy's: neither selects the other's pods).
pub const SERVER_PROXY_APP: &str = "mcp-warden-server-egress";
/// The ConfigMap with the clients file.
pub const CLIENTS_CONFIG_MAP: &str = "mcp-warden-egress-clients";
/// Its key, and where the proxy reads it.
pub const CLIENTS_KEY: &str = "clients.json";
/// The directory the clients file is mounted at.
pub const CLIENTS_DIR: &str = "/etc/mcp-warden-egress";
/// The proxy's port.
pub const PROXY_PORT: i32 = 3128;
/// The proxy's metrics port.
pub const METRICS_PORT: i32 = 9090;
/// The policy ConfigMap's annotation with the server's approved entry
/// (present under the proxy engine; empty when the server has no host
/// egress): apply writes that ConfigMap only with an approved policy, so a
/// held change keeps the old entry.
pub const ENTRY_ANNOTATION: &str = "mcpwarden.dev/egress-proxy-client";
/// The per-server Secret's keys.
pub const TOKEN_KEY: &str = "token";
/// The proxy URL with the credential, for `HTTPS_PROXY` and its siblings.
pub const URL_KEY: &str = "url";
/// The label that marks a per-server token Secret (watched: a server that
/// goes takes its entry out of the clients file).
pub const TOKEN_LABEL: &str = "mcpwarden.dev/egress-proxy-token";

/// The server's credential Secret for the namespace's proxy.
pub fn token_secret_name(server: &MCPServer) -> String {
    format!("{}-egress-proxy", names::object_name(server))
}

/// The server's credential Secret for the proxy of `scope`. Each scope has
/// its own: the URL names that proxy's Service and the Secret is never
/// rewritten, so a switch of scope changes the Secret the pods read (and
/// so rolls them onto the other proxy).
pub fn token_secret_name_for(server: &MCPServer, scope: EgressProxyScope) -> String {
    match scope {
        EgressProxyScope::Namespace => token_secret_name(server),
        EgressProxyScope::Server => {
            format!("{}-egress-proxy-credential", names::object_name(server))
        }
    }
}

/// Whose proxy: the namespace's shared one or one server's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProxyOf<'a> {
    /// `mcp-warden-egress`, serving every server of the namespace.
    Namespace,
    /// `<name>-egress-proxy`, serving the server of that name only.
    Server(&'a str),
}

impl ProxyOf<'_> {
    /// The proxy's Deployment, Service and NetworkPolicy.
    pub fn proxy_name(self) -> String {
        match self {
            ProxyOf::Namespace => PROXY_NAME.into(),
            ProxyOf::Server(s) => format!("{s}-egress-proxy"),
        }
    }

    /// Its clients file's ConfigMap.
    pub fn clients_config_map(self) -> String {
        match self {
            ProxyOf::Namespace => CLIENTS_CONFIG_MAP.into(),
            ProxyOf::Server(s) => format!("{s}-egress-proxy-clients"),
        }
    }

    /// Its objects' and pods' labels. A server's proxy carries no
    /// `mcpwarden.dev/server` label: the server's own NetworkPolicy and
    /// Service select by it.
    pub fn labels(self) -> BTreeMap<String, String> {
        let mut labels = proxy_labels();
        if let ProxyOf::Server(s) = self {
            labels.insert("app.kubernetes.io/name".into(), SERVER_PROXY_APP.into());
            labels.insert("app.kubernetes.io/instance".into(), s.into());
        }
        labels
    }

    /// Its pods' selector (Deployment, Service, who may reach it).
    pub fn selector(self) -> BTreeMap<String, String> {
        let mut labels = self.labels();
        labels.retain(|k, _| k == "app.kubernetes.io/name" || k == "app.kubernetes.io/instance");
        labels
    }
}

/// The proxy the server's host egress goes through, by the scope in force.
pub fn proxy_of(input: BuildInput<'_>) -> ProxyOf<'_> {
    match input.config.egress_proxy_scope {
        EgressProxyScope::Namespace => ProxyOf::Namespace,
        EgressProxyScope::Server => {
            ProxyOf::Server(input.server.metadata.name.as_deref().unwrap_or_default())
        }
    }
}

/// A `host:port` of the clients file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct HostPort {
    /// Host name.
    pub host: String,
    /// TCP port.
    pub port: i32,
}

/// A `cidr:port` of the clients file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CidrPort {
    /// Address block.
    pub cidr: String,
    /// TCP port.
    pub port: i32,
}

/// What one server may reach through the proxy (its approved egress).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientEntry {
    /// Approved host egress.
    pub hosts: Vec<HostPort>,
    /// Approved CIDR egress (a name resolving to a non-global address is
    /// allowed only inside these).
    pub cidrs: Vec<CidrPort>,
    /// Approved host egress on port 80 (plain HTTP).
    pub plain_http_hosts: Vec<HostPort>,
}

/// One line of the clients file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyClient {
    /// `namespace/MCPServer`.
    pub name: String,
    /// Hex sha256 of the server's token.
    pub token_sha256: String,
    /// Its approved egress.
    #[serde(flatten)]
    pub entry: ClientEntry,
}

impl ProxyClient {
    /// The MCPServer's name (the part after the namespace).
    pub fn server(&self) -> &str {
        self.name.rsplit_once('/').map_or(&self.name, |(_, n)| n)
    }
}

/// Whether the server's host egress goes through the proxy. A remote
/// server's facade is its only container and enforces its hosts itself.
pub fn uses_proxy(input: BuildInput<'_>) -> bool {
    input.config.named_egress == NamedEgress::Proxy
        && input.server.spec.remote.is_none()
        && !input.approved.hosts.is_empty()
}

/// The server's entry, from what is approved.
pub fn client_entry(approved: &Approved) -> ClientEntry {
    let hp = |(host, port): &(String, i32)| HostPort {
        host: host.clone(),
        port: *port,
    };
    ClientEntry {
        hosts: approved.hosts.iter().map(hp).collect(),
        cidrs: approved
            .egress
            .iter()
            .map(|(cidr, port)| CidrPort {
                cidr: cidr.clone(),
                port: *port,
            })
            .collect(),
        plain_http_hosts: approved
            .hosts
            .iter()
            .filter(|(_, p)| *p == 80)
            .map(hp)
            .collect(),
    }
}

/// The server's entry, if it uses the proxy.
pub fn desired_entry(input: BuildInput<'_>) -> Option<ClientEntry> {
    uses_proxy(input).then(|| client_entry(input.approved))
}

/// The policy ConfigMap's annotation: under the proxy engine always (an
/// empty entry when the server has no host egress, so a revoked approval
/// overwrites the old entry).
pub fn entry_annotation(input: BuildInput<'_>) -> Option<(String, String)> {
    let proxy =
        input.config.named_egress == NamedEgress::Proxy && input.server.spec.remote.is_none();
    proxy.then(|| {
        let entry = desired_entry(input).unwrap_or_default();
        let text = serde_json::to_string(&entry).expect("entries serialize");
        (ENTRY_ANNOTATION.to_string(), text)
    })
}

/// A live policy ConfigMap's entry, if it has one with a host.
pub fn read_entry(config_map: &k8s_openapi::api::core::v1::ConfigMap) -> Option<ClientEntry> {
    let text = config_map
        .metadata
        .annotations
        .as_ref()?
        .get(ENTRY_ANNOTATION)?;
    serde_json::from_str::<ClientEntry>(text)
        .ok()
        .filter(|e| !e.hosts.is_empty())
}

/// The proxy's address as the server's pods reach it (the Service's
/// cluster IP: the pod needs no DNS for it).
pub fn proxy_url(server: &MCPServer, token: &str, service_ip: &str) -> String {
    let user = format!(
        "{}%2F{}",
        names::namespace(server),
        names::object_name(server)
    );
    let host = if service_ip.contains(':') {
        format!("[{service_ip}]")
    } else {
        service_ip.to_string()
    };
    format!("http://{user}:{token}@{host}:{PROXY_PORT}")
}

/// The server's credential Secret (the token is random, made in apply
/// once; never rewritten).
pub fn desired_token_secret(
    server: &MCPServer,
    scope: EgressProxyScope,
    token: &str,
    service_ip: &str,
) -> Secret {
    let mut metadata = names::metadata(server, token_secret_name_for(server, scope));
    metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert(TOKEN_LABEL.into(), "true".into());
    Secret {
        metadata,
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([
            (TOKEN_KEY.into(), ByteString(token.as_bytes().to_vec())),
            (
                URL_KEY.into(),
                ByteString(proxy_url(server, token, service_ip).into_bytes()),
            ),
        ])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// A live token Secret's token, if usable.
pub fn read_token(secret: &Secret) -> Option<String> {
    let token = secret.data.as_ref()?.get(TOKEN_KEY)?;
    let token = std::str::from_utf8(&token.0).ok()?.trim().to_string();
    (token.len() >= 32).then_some(token)
}

/// Hex sha256 of a token, as the clients file names it.
pub fn token_sha256(token: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// The proxy variables of the server container (empty unless it uses the proxy).
pub fn server_env(input: BuildInput<'_>) -> Vec<EnvVar> {
    if !uses_proxy(input) {
        return Vec::new();
    }
    let from_secret = |name: &str| EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: token_secret_name_for(input.server, input.config.egress_proxy_scope),
                key: URL_KEY.into(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    };
    let value = |name: &str, v: &str| EnvVar {
        name: name.into(),
        value: Some(v.into()),
        value_from: None,
    };
    let mut no_proxy = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    if input.approved.service_account_token {
        // The API server, reached directly (its own NetworkPolicy rule).
        no_proxy.extend([
            "kubernetes.default.svc".to_string(),
            format!("kubernetes.default.svc.{}", input.config.cluster_domain),
            "$(KUBERNETES_SERVICE_HOST)".into(),
        ]);
    }
    no_proxy.extend(input.approved.egress.iter().map(|(c, _)| c.clone()));
    no_proxy.dedup();
    let no_proxy = no_proxy.join(",");
    let mut env: Vec<EnvVar> = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"]
        .into_iter()
        .map(from_secret)
        .collect();
    env.push(value("NODE_USE_ENV_PROXY", "1"));
    env.push(value("NO_PROXY", &no_proxy));
    env.push(value("no_proxy", &no_proxy));
    env
}

/// The namespace proxy pods' labels.
pub fn proxy_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), PROXY_NAME.into()),
        ("app.kubernetes.io/component".into(), "egress-proxy".into()),
        ("app.kubernetes.io/part-of".into(), "mcp-warden".into()),
        (
            "app.kubernetes.io/managed-by".into(),
            "mcp-warden-operator".into(),
        ),
    ])
}

/// The server NetworkPolicy's rule: to its proxy's pods on its port.
pub fn server_egress_rule(input: BuildInput<'_>) -> Option<NetworkPolicyEgressRule> {
    uses_proxy(input).then(|| NetworkPolicyEgressRule {
        ports: Some(vec![tcp(PROXY_PORT)]),
        to: Some(vec![NetworkPolicyPeer {
            pod_selector: labels(&proxy_of(input).selector()),
            ..NetworkPolicyPeer::default()
        }]),
    })
}

#[cfg(test)]
#[path = "egress_proxy_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "egress_proxy_scope_tests.rs"]
mod scope_tests;
