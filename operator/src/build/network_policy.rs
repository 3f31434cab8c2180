//! The pod's NetworkPolicy.
//!
//! ```text
//! ingress  :8080 from anywhere (agents; Service)            always, unless
//!          :8080 from the named gateway's pods only             `onlyThroughGateway`
//!          :9090 from the monitoring namespace + the operator's pods (/metrics, /tools)
//!          :8080 from the same MCPServer's pods (relay)     replicas > 1
//! egress   :8080 to the same MCPServer's pods (relay)       replicas > 1
//!          cluster DNS (UDP+TCP 53)                         `network.dns` approved with some CIDR egress
//!          CIDR → ports                                     `network.egress:<cidr>:<port>` or
//!                                                           `network.egress.cluster:<cidr>:<port>` approved
//!          broad CIDR except the cluster's ranges → ports   `network.egress.internet:<cidr>:<port>` approved
//!          public addresses → ports                         `network.egress.host:<name>:<port>` approved,
//!                                                           remote server, no named-egress engine
//!          CIDR → ports, DNS for host names                 the platform's collector / audit store
//!          nothing else
//! ```
//!
//! Host names (`network.egress.host:…`) are not here: a NetworkPolicy
//! matches IP blocks and pods only, so it could allow "DNS and the port to
//! anywhere" or nothing. It allows nothing; the Cilium or Calico policy of
//! `named_egress.rs` adds the hosts (and their DNS lookups) where the
//! cluster has one. DNS alone is never opened: it is a way out (tunnelling
//! through lookups), and without any egress there is nothing to look up.
//!
//! A broad block (`crate::egress_scope`: `0.0.0.0/0`, `::/0`, …) excepts
//! the cluster's pod, service and node ranges and link-local: an admin who
//! approved "the internet" did not approve the kubelets, the API server or
//! the other pods. Reaching those is its own capability,
//! `network.egress.cluster:…`, rendered as a rule of its own (rules add up).
//!
//! One exception: a remote server (`spec.remote`) on a cluster without such
//! an engine. Its pod holds the facade alone, which connects to the URL's
//! host and the token endpoints' only and refuses private, loopback and
//! link-local addresses whatever a name resolves to; so its approved hosts'
//! ports are opened to public addresses (those ranges excepted), with DNS.
//! A server container, which could connect anywhere, never gets this.

use k8s_openapi::{
    api::networking::v1::{
        IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule,
        NetworkPolicyPeer, NetworkPolicyPort, NetworkPolicySpec,
    },
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
};

use super::BuildInput;
use crate::{
    egress_scope,
    names::{self, ADMIN_PORT, FACADE_PORT},
};

/// IPv4 blocks that are not public (the facade's SSRF guard refuses them too).
pub(crate) const NOT_PUBLIC_V4: &[&str] = &[
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
];
/// IPv6 blocks that are not public.
pub(crate) const NOT_PUBLIC_V6: &[&str] = &["::1/128", "fc00::/7", "fe80::/10", "ff00::/8"];

pub(crate) fn tcp(port: i32) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..NetworkPolicyPort::default()
    }
}

pub(crate) fn labels(l: &std::collections::BTreeMap<String, String>) -> Option<LabelSelector> {
    Some(LabelSelector {
        match_labels: Some(l.clone()),
        ..LabelSelector::default()
    })
}

/// Lookups to the cluster DNS (UDP and TCP 53).
pub(crate) fn dns_rule() -> NetworkPolicyEgressRule {
    let port = |protocol: &str| NetworkPolicyPort {
        port: Some(IntOrString::Int(53)),
        protocol: Some(protocol.into()),
        ..NetworkPolicyPort::default()
    };
    NetworkPolicyEgressRule {
        ports: Some(vec![port("UDP"), port("TCP")]),
        to: Some(vec![NetworkPolicyPeer {
            namespace_selector: labels(
                &[(
                    "kubernetes.io/metadata.name".to_string(),
                    "kube-system".to_string(),
                )]
                .into(),
            ),
            pod_selector: labels(&[("k8s-app".to_string(), "kube-dns".to_string())].into()),
            ..NetworkPolicyPeer::default()
        }]),
    }
}

/// The NetworkPolicy around the server's pods.
pub fn desired_network_policy(input: BuildInput<'_>) -> NetworkPolicy {
    let cfg = input.config;
    let metrics_from = NetworkPolicyPeer {
        namespace_selector: labels(&cfg.metrics_namespace_labels),
        ..NetworkPolicyPeer::default()
    };
    let operator_from = NetworkPolicyPeer {
        namespace_selector: labels(
            &[(
                "kubernetes.io/metadata.name".to_string(),
                cfg.operator_namespace.clone(),
            )]
            .into(),
        ),
        pod_selector: labels(&cfg.operator_pod_labels),
        ..NetworkPolicyPeer::default()
    };
    let same_server = NetworkPolicyPeer {
        pod_selector: labels(&names::selector(input.server)),
        ..NetworkPolicyPeer::default()
    };
    // Agents reach the facade from anywhere, unless the server is reachable
    // only through one gateway: then from that gateway's pods alone (its
    // facade refuses everyone else as well, see `crate::compile`).
    let agents_from = input.server.spec.only_through_gateway.as_ref().map(|gw| {
        vec![NetworkPolicyPeer {
            pod_selector: labels(
                &[(crate::gateway::names::GATEWAY_LABEL.to_string(), gw.clone())].into(),
            ),
            ..NetworkPolicyPeer::default()
        }]
    });
    let mut ingress = vec![
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(FACADE_PORT)]),
            // `[]` (from anywhere, as an absent list) rather than absent,
            // so that apply sees the gateway's peer go when the field is
            // removed (an absent field in what apply wants matches any).
            from: Some(agents_from.unwrap_or_default()),
        },
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(ADMIN_PORT)]),
            from: Some(vec![metrics_from, operator_from]),
        },
    ];
    let mut egress = Vec::new();
    if input.server.spec.replicas > 1 {
        // Facade to facade: a replica relays a session's requests to the
        // replica that owns it. Explicit, so it survives a narrower agent rule.
        ingress.push(NetworkPolicyIngressRule {
            ports: Some(vec![tcp(FACADE_PORT)]),
            from: Some(vec![same_server.clone()]),
        });
        egress.push(NetworkPolicyEgressRule {
            ports: Some(vec![tcp(FACADE_PORT)]),
            to: Some(vec![same_server]),
        });
    }
    // A remote server's hosts, where no engine can name them (see above).
    let remote_hosts_by_address = input.server.spec.remote.is_some()
        && input.config.named_egress.api_resource().is_none()
        && !input.approved.hosts.is_empty();
    let some_cidr = !input.approved.egress.is_empty() || !input.approved.broad_egress.is_empty();
    let dns_for_egress = input.approved.dns && (some_cidr || remote_hosts_by_address);
    if dns_for_egress {
        egress.push(dns_rule());
    }
    // One rule per approved CIDR, with its approved ports (sorted: BTreeSet),
    // plus the platform's collector and audit store (chart-level, not a
    // capability of the server: the facade in the pod sends there).
    let mut by_cidr: std::collections::BTreeMap<&str, Vec<NetworkPolicyPort>> = Default::default();
    let telemetry = &cfg.facade_telemetry;
    for (cidr, port) in input.approved.egress.iter().chain(&telemetry.egress) {
        let ports = by_cidr.entry(cidr).or_default();
        if !ports.contains(&tcp(*port)) {
            ports.push(tcp(*port));
        }
    }
    if telemetry.needs_dns() && !dns_for_egress && !telemetry.egress.is_empty() {
        egress.push(dns_rule());
    }
    for (cidr, ports) in by_cidr {
        egress.push(NetworkPolicyEgressRule {
            ports: Some(ports),
            to: Some(vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.into(),
                    except: None,
                }),
                ..NetworkPolicyPeer::default()
            }]),
        });
    }
    // Broad blocks: one rule each, the cluster's ranges excepted.
    let mut broad: std::collections::BTreeMap<&str, Vec<NetworkPolicyPort>> = Default::default();
    for (cidr, port) in &input.approved.broad_egress {
        broad.entry(cidr).or_default().push(tcp(*port));
    }
    for (cidr, ports) in broad {
        let except = egress_scope::except_for(cidr, &cfg.cluster_ranges);
        egress.push(NetworkPolicyEgressRule {
            ports: Some(ports),
            to: Some(vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.into(),
                    except: (!except.is_empty()).then_some(except),
                }),
                ..NetworkPolicyPeer::default()
            }]),
        });
    }
    // Host names through the namespace's egress proxy, and nowhere else.
    egress.extend(super::egress_proxy::server_egress_rule(input));
    if remote_hosts_by_address {
        let host_ports: std::collections::BTreeSet<i32> =
            input.approved.hosts.iter().map(|(_, p)| *p).collect();
        let block = |cidr: &str, except: &[&str]| NetworkPolicyPeer {
            ip_block: Some(IPBlock {
                cidr: cidr.into(),
                except: Some(except.iter().map(|e| e.to_string()).collect()),
            }),
            ..NetworkPolicyPeer::default()
        };
        egress.push(NetworkPolicyEgressRule {
            ports: Some(host_ports.into_iter().map(tcp).collect()),
            to: Some(vec![
                block("0.0.0.0/0", NOT_PUBLIC_V4),
                block("::/0", NOT_PUBLIC_V6),
            ]),
        });
    }
    NetworkPolicy {
        metadata: names::metadata(input.server, names::object_name(input.server)),
        spec: Some(NetworkPolicySpec {
            pod_selector: labels(&names::selector(input.server)),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(ingress),
            // Present (and empty unless something is allowed): deny the rest.
            egress: Some(egress),
        }),
    }
}
