//! The egress policy by host name (`<name>-egress`): what a NetworkPolicy
//! cannot say. Built only when `network.egress.host:…` is in force and the
//! cluster has an engine that matches names ([`NamedEgress`], found by API
//! discovery); it adds allows to the NetworkPolicy's default deny (both
//! engines take the union of every policy that selects a pod).
//!
//! ```text
//! Cilium  CiliumNetworkPolicy  DNS to kube-dns, only for the approved names (the DNS proxy
//!                              learns their addresses) + toFQDNs matchName → TCP ports
//! Calico  projectcalico.org/v3 NetworkPolicy  DNS to kube-dns + destination.domains → TCP ports
//! none    nothing: a NetworkPolicy can only allow "DNS and the port to anywhere", which is
//!         not what was approved; status says the hosts are not enforced
//! ```

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde_json::{json, Value};

use super::BuildInput;
use crate::{config::NamedEgress, names};

/// The Cilium or Calico policy allowing the approved hosts, if any.
pub fn desired_named_egress_policy(input: BuildInput<'_>) -> Option<DynamicObject> {
    let hosts = &input.approved.hosts;
    let api = input.config.named_egress.api_resource()?;
    if hosts.is_empty() {
        return None;
    }
    // Hosts by port, so each port is one rule (sorted: BTree*).
    let mut by_port: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
    for (host, port) in hosts {
        by_port.entry(*port).or_default().push(host);
    }
    let mut names_sorted: Vec<&str> = hosts.iter().map(|(h, _)| h.as_str()).collect();
    names_sorted.dedup();
    let server = input.server;
    let spec = match input.config.named_egress {
        NamedEgress::None | NamedEgress::Proxy => return None,
        NamedEgress::Cilium => cilium_spec(server, &names_sorted, &by_port),
        NamedEgress::Calico => calico_spec(server, &by_port),
    };
    let metadata = names::metadata(server, names::egress_policy(server));
    let object = json!({
        "apiVersion": api.api_version,
        "kind": api.kind,
        "metadata": metadata,
        "spec": spec,
    });
    Some(serde_json::from_value(object).expect("a policy object deserializes"))
}

fn cilium_spec(
    server: &mcp_warden_crds::MCPServer,
    names_sorted: &[&str],
    by_port: &BTreeMap<i32, Vec<&str>>,
) -> Value {
    let dns_names: Vec<Value> = names_sorted
        .iter()
        .map(|n| json!({"matchName": n}))
        .collect();
    let mut egress = vec![json!({
        "toEndpoints": [{"matchLabels": {
            "k8s:io.kubernetes.pod.namespace": "kube-system",
            "k8s:k8s-app": "kube-dns",
        }}],
        "toPorts": [{
            "ports": [{"port": "53", "protocol": "ANY"}],
            "rules": {"dns": dns_names},
        }],
    })];
    for (port, hosts) in by_port {
        egress.push(json!({
            "toFQDNs": hosts.iter().map(|h| json!({"matchName": h})).collect::<Vec<_>>(),
            "toPorts": [{"ports": [{"port": port.to_string(), "protocol": "TCP"}]}],
        }));
    }
    json!({
        "endpointSelector": {"matchLabels": names::selector(server)},
        "egress": egress,
    })
}

fn calico_spec(server: &mcp_warden_crds::MCPServer, by_port: &BTreeMap<i32, Vec<&str>>) -> Value {
    let dns = |protocol: &str| {
        json!({
            "action": "Allow",
            "protocol": protocol,
            "destination": {
                "namespaceSelector": "projectcalico.org/name == 'kube-system'",
                "selector": "k8s-app == 'kube-dns'",
                "ports": [53],
            },
        })
    };
    let mut egress = vec![dns("UDP"), dns("TCP")];
    for (port, hosts) in by_port {
        egress.push(json!({
            "action": "Allow",
            "protocol": "TCP",
            "destination": {"domains": hosts, "ports": [port]},
        }));
    }
    json!({
        "selector": format!("{} == '{}'", names::SERVER_LABEL, names::object_name(server)),
        "types": ["Egress"],
        "egress": egress,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile::Approved, config::BuildConfig};
    use mcp_warden_crds::{MCPServer, SandboxProfileSpec};

    fn server() -> MCPServer {
        serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: files, namespace: team-a}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}}\n",
        )
        .unwrap()
    }

    fn build(engine: NamedEgress, hosts: &[(&str, i32)]) -> Option<Value> {
        let approved = Approved {
            hosts: hosts.iter().map(|(h, p)| (h.to_string(), *p)).collect(),
            ..Approved::default()
        };
        let config = BuildConfig {
            named_egress: engine,
            ..BuildConfig::default()
        };
        let server = server();
        let sandbox = SandboxProfileSpec::default();
        desired_named_egress_policy(BuildInput {
            server: &server,
            sandbox: &sandbox,
            policy_yaml: "",
            auth: &Default::default(),
            jwks: None,
            issuer_jwks: &Default::default(),
            approved: &approved,
            peers: &[],
            pinned_image: None,
            config: &config,
        })
        .map(|o| serde_json::to_value(o).unwrap())
    }

    const HOSTS: &[(&str, i32)] = &[
        ("registry.npmjs.org", 443),
        ("pypi.org", 443),
        ("pypi.org", 8443),
    ];

    #[test]
    fn cilium_allows_exactly_the_approved_names() {
        let got = build(NamedEgress::Cilium, HOSTS).unwrap();
        let want = json!({
            "apiVersion": "cilium.io/v2",
            "kind": "CiliumNetworkPolicy",
            "metadata": {
                "name": "files-egress",
                "namespace": "team-a",
                "labels": {
                    "app.kubernetes.io/component": "egress",
                    "app.kubernetes.io/instance": "files",
                    "app.kubernetes.io/managed-by": "mcp-warden-operator",
                    "app.kubernetes.io/name": "mcp-server",
                    "app.kubernetes.io/part-of": "mcp-warden",
                    "mcpwarden.dev/server": "files",
                },
            },
            "spec": {
                "endpointSelector": {"matchLabels": {"mcpwarden.dev/server": "files"}},
                "egress": [
                    {
                        "toEndpoints": [{"matchLabels": {
                            "k8s:io.kubernetes.pod.namespace": "kube-system",
                            "k8s:k8s-app": "kube-dns",
                        }}],
                        "toPorts": [{
                            "ports": [{"port": "53", "protocol": "ANY"}],
                            "rules": {"dns": [{"matchName": "pypi.org"}, {"matchName": "registry.npmjs.org"}]},
                        }],
                    },
                    {
                        "toFQDNs": [{"matchName": "pypi.org"}, {"matchName": "registry.npmjs.org"}],
                        "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}],
                    },
                    {
                        "toFQDNs": [{"matchName": "pypi.org"}],
                        "toPorts": [{"ports": [{"port": "8443", "protocol": "TCP"}]}],
                    },
                ],
            },
        });
        assert_eq!(got, want);
    }

    #[test]
    fn calico_uses_domains() {
        let got = build(NamedEgress::Calico, HOSTS).unwrap();
        assert_eq!(got["apiVersion"], "projectcalico.org/v3");
        assert_eq!(got["kind"], "NetworkPolicy");
        assert_eq!(got["metadata"]["name"], "files-egress");
        let dns = |protocol: &str| {
            json!({"action": "Allow", "protocol": protocol, "destination": {
                "namespaceSelector": "projectcalico.org/name == 'kube-system'",
                "selector": "k8s-app == 'kube-dns'", "ports": [53]}})
        };
        assert_eq!(
            got["spec"],
            json!({
                "selector": "mcpwarden.dev/server == 'files'",
                "types": ["Egress"],
                "egress": [
                    dns("UDP"),
                    dns("TCP"),
                    {"action": "Allow", "protocol": "TCP",
                     "destination": {"domains": ["pypi.org", "registry.npmjs.org"], "ports": [443]}},
                    {"action": "Allow", "protocol": "TCP",
                     "destination": {"domains": ["pypi.org"], "ports": [8443]}},
                ],
            })
        );
    }

    #[test]
    fn nothing_without_an_engine_or_without_approved_hosts() {
        assert_eq!(build(NamedEgress::None, HOSTS), None);
        assert_eq!(build(NamedEgress::Cilium, &[]), None);
    }
}
