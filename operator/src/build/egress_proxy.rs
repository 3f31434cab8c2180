//! The egress proxy engine (pure): approved egress by host name where the
//! cluster has no Cilium or Calico, through one `mcp-warden-sidecar egress`
//! per namespace. Built only when the engine in force is
//! [`NamedEgress::Proxy`] and a (non-remote) server has approved
//! `network.egress.host:…`; the capability and its approval are the same
//! whichever engine enforces it.
//!
//! ```text
//! per server (BuildInput)                       per namespace (ProxyInput, assembled in apply)
//!   <name> policy ConfigMap annotation: its       mcp-warden-egress          Deployment (replicas: config)
//!     approved entry (a held change leaves the    mcp-warden-egress          Service :3128
//!     ConfigMap, so the entry, as it was)         mcp-warden-egress-clients  ConfigMap clients.json
//!   <name>-egress-proxy Secret: token, url (made                             (sha256 of the tokens only)
//!     once, never rewritten)
//!   server env HTTPS_PROXY… (secretKeyRef url)    mcp-warden-egress          NetworkPolicy: in from the listed
//!   NetworkPolicy: egress to the proxy :3128        servers' pods; out only on approved ports (public
//!                                                   addresses; a CIDR rule's block as approved)
//! ```
//! The shared objects carry an owner reference to every server they serve,
//! so the garbage collector removes them with the last one; apply also
//! deletes them when no server needs them any more. The Service's owners
//! are every server holding a credential: its cluster IP is in their URLs,
//! so it stays while any of them exists. The clients file holds only
//! hashes, so it is a ConfigMap: the operator never rewrites or deletes a
//! Secret.

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
    config::{BuildConfig, NamedEgress},
    egress_scope, names,
};

/// The proxy's Deployment, Service and NetworkPolicy.
pub const PROXY_NAME: &str = "mcp-warden-egress";
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

/// The server's proxy credential Secret.
pub fn token_secret_name(server: &MCPServer) -> String {
    format!("{}-egress-proxy", names::object_name(server))
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
pub fn desired_token_secret(server: &MCPServer, token: &str, service_ip: &str) -> Secret {
    let mut metadata = names::metadata(server, token_secret_name(server));
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
                name: token_secret_name(input.server),
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

/// The proxy pods' labels.
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

fn proxy_selector() -> BTreeMap<String, String> {
    BTreeMap::from([("app.kubernetes.io/name".into(), PROXY_NAME.into())])
}

/// The server NetworkPolicy's rule: to the proxy pods on its port.
pub fn server_egress_rule(input: BuildInput<'_>) -> Option<NetworkPolicyEgressRule> {
    uses_proxy(input).then(|| NetworkPolicyEgressRule {
        ports: Some(vec![tcp(PROXY_PORT)]),
        to: Some(vec![NetworkPolicyPeer {
            pod_selector: labels(&proxy_selector()),
            ..NetworkPolicyPeer::default()
        }]),
    })
}

/// Everything the namespace's shared objects are built from.
#[derive(Clone, Copy, Debug)]
pub struct ProxyInput<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// Every server served, sorted by name.
    pub clients: &'a [ProxyClient],
    /// An owner reference to each of them (not a controller).
    pub owners: &'a [OwnerReference],
    /// The Service's owners: every server holding a credential.
    pub service_owners: &'a [OwnerReference],
    /// Operator settings.
    pub config: &'a BuildConfig,
}

/// The namespace's shared objects.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxyObjects {
    /// The proxy.
    pub deployment: Deployment,
    /// Its address.
    pub service: Service,
    /// The clients file.
    pub clients_config_map: ConfigMap,
    /// Who may reach it, and where it may go.
    pub network_policy: NetworkPolicy,
}

fn metadata(input: ProxyInput<'_>, name: &str) -> ObjectMeta {
    owned_by(input, name, input.owners)
}

fn owned_by(input: ProxyInput<'_>, name: &str, owners: &[OwnerReference]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(input.namespace.into()),
        labels: Some(proxy_labels()),
        owner_references: (!owners.is_empty()).then(|| owners.to_vec()),
        ..ObjectMeta::default()
    }
}

/// The clients file (sorted by name, so the same servers make the same bytes).
pub fn clients_file(clients: &[ProxyClient]) -> String {
    let mut sorted = clients.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    serde_json::to_string_pretty(&serde_json::json!({"version": 1, "clients": sorted}))
        .expect("the clients file serializes")
}

/// Every shared object.
pub fn desired_proxy_objects(input: ProxyInput<'_>) -> ProxyObjects {
    ProxyObjects {
        deployment: desired_deployment(input),
        service: Service {
            metadata: owned_by(input, PROXY_NAME, input.service_owners),
            spec: Some(ServiceSpec {
                selector: Some(proxy_selector()),
                ports: Some(vec![ServicePort {
                    name: Some("proxy".into()),
                    port: PROXY_PORT,
                    target_port: Some(IntOrString::Int(PROXY_PORT)),
                    protocol: Some("TCP".into()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        },
        clients_config_map: ConfigMap {
            metadata: metadata(input, CLIENTS_CONFIG_MAP),
            data: Some(BTreeMap::from([(
                CLIENTS_KEY.into(),
                clients_file(input.clients),
            )])),
            ..ConfigMap::default()
        },
        network_policy: desired_network_policy(input),
    }
}

fn desired_deployment(input: ProxyInput<'_>) -> Deployment {
    let args = [
        "egress",
        "--listen",
        "0.0.0.0:3128",
        "--clients-file",
        "/etc/mcp-warden-egress/clients.json",
        "--metrics-listen",
        "0.0.0.0:9090",
    ];
    let container = Container {
        name: "egress".into(),
        image: Some(input.config.sidecar_image.clone()),
        command: Some(vec![names::SIDECAR_BIN.into()]),
        args: Some(args.iter().map(|a| a.to_string()).collect()),
        ports: Some(vec![
            ContainerPort {
                name: Some("proxy".into()),
                container_port: PROXY_PORT,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some("metrics".into()),
                container_port: METRICS_PORT,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
        ]),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(PROXY_PORT),
                host: None,
            }),
            period_seconds: Some(5),
            ..Probe::default()
        }),
        security_context: Some(container_security_context(true)),
        volume_mounts: Some(vec![mount("clients", CLIENTS_DIR, true)]),
        ..Container::default()
    };
    let pod = PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            run_as_group: Some(65532),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![container],
        volumes: Some(vec![Volume {
            name: "clients".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: CLIENTS_CONFIG_MAP.into(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    Deployment {
        metadata: metadata(input, PROXY_NAME),
        spec: Some(DeploymentSpec {
            replicas: Some(input.config.egress_proxy_replicas),
            selector: LabelSelector {
                match_labels: Some(proxy_selector()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(proxy_labels()),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn desired_network_policy(input: ProxyInput<'_>) -> NetworkPolicy {
    let cfg = input.config;
    let servers: BTreeSet<String> = input.clients.iter().map(|c| c.server().into()).collect();
    let from_servers = NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: names::SERVER_LABEL.into(),
                operator: "In".into(),
                values: Some(servers.into_iter().collect()),
            }]),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    let metrics_from = NetworkPolicyPeer {
        namespace_selector: labels(&cfg.metrics_namespace_labels),
        ..NetworkPolicyPeer::default()
    };
    let ingress = vec![
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(PROXY_PORT)]),
            from: Some(vec![from_servers]),
        },
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(METRICS_PORT)]),
            from: Some(vec![metrics_from]),
        },
    ];
    // The proxy resolves names itself.
    let mut egress = vec![dns_rule()];
    let host_ports: BTreeSet<i32> = input
        .clients
        .iter()
        .flat_map(|c| c.entry.hosts.iter().map(|h| h.port))
        .collect();
    if !host_ports.is_empty() {
        let public = |cidr: &str, not_public: &[&str]| {
            let mut except: Vec<String> = not_public.iter().map(|s| s.to_string()).collect();
            except.extend(egress_scope::except_for(cidr, &cfg.cluster_ranges));
            except.sort();
            except.dedup();
            NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.into(),
                    except: Some(except),
                }),
                ..NetworkPolicyPeer::default()
            }
        };
        egress.push(NetworkPolicyEgressRule {
            ports: Some(host_ports.into_iter().map(tcp).collect()),
            to: Some(vec![
                public("0.0.0.0/0", NOT_PUBLIC_V4),
                public("::/0", NOT_PUBLIC_V6),
            ]),
        });
    }
    // A CIDR rule's block, as approved for some server (its own ports).
    let mut by_cidr: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for c in input.clients.iter().flat_map(|c| &c.entry.cidrs) {
        by_cidr.entry(&c.cidr).or_default().insert(c.port);
    }
    for (cidr, ports) in by_cidr {
        egress.push(NetworkPolicyEgressRule {
            ports: Some(ports.into_iter().map(tcp).collect()),
            to: Some(vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.into(),
                    except: None,
                }),
                ..NetworkPolicyPeer::default()
            }]),
        });
    }
    NetworkPolicy {
        metadata: metadata(input, PROXY_NAME),
        spec: Some(NetworkPolicySpec {
            pod_selector: labels(&proxy_selector()),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(ingress),
            egress: Some(egress),
        }),
    }
}

#[cfg(test)]
#[path = "egress_proxy_tests.rs"]
mod tests;
