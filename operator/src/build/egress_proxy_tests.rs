//! The egress proxy's objects, whole.

use super::*;
use crate::{build::typed_value, compile::Approved, config::BuildConfig};
use mcp_warden_crds::{MCPServer, SandboxProfileSpec};
use serde_json::{json, Value};

fn server(remote: bool) -> MCPServer {
    let spec = if remote {
        "spec: {remote: {url: 'https://mcp.example.com/mcp'}, toolProfileRef: {name: p}}"
    } else {
        "spec: {image: i, command: [x], toolProfileRef: {name: p}}"
    };
    serde_yaml_ng::from_str(&format!(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: fetch, namespace: team-a, uid: u-1}}\n{spec}\n"
    ))
    .unwrap()
}

fn approved(sa_token: bool) -> Approved {
    Approved {
        hosts: [
            ("pypi.org".to_string(), 443),
            ("example.org".to_string(), 80),
        ]
        .into(),
        egress: [("10.96.0.0/12".to_string(), 443)].into(),
        service_account_token: sa_token,
        ..Approved::default()
    }
}

fn with_input<T>(
    engine: NamedEgress,
    server: &MCPServer,
    approved: &Approved,
    f: impl FnOnce(BuildInput<'_>) -> T,
) -> T {
    let config = BuildConfig {
        named_egress: engine,
        ..BuildConfig::default()
    };
    let sandbox = SandboxProfileSpec::default();
    f(BuildInput {
        server,
        sandbox: &sandbox,
        policy_yaml: "",
        auth: &Default::default(),
        jwks: None,
        issuer_jwks: &Default::default(),
        approved,
        peers: &[],
        pinned_image: None,
        config: &config,
    })
}

#[test]
fn only_the_proxy_engine_with_approved_hosts_of_a_local_server_uses_the_proxy() {
    let local = server(false);
    let a = approved(false);
    assert!(with_input(NamedEgress::Proxy, &local, &a, uses_proxy));
    for engine in [NamedEgress::None, NamedEgress::Cilium, NamedEgress::Calico] {
        assert!(!with_input(engine, &local, &a, uses_proxy), "{engine:?}");
        assert!(with_input(engine, &local, &a, server_env).is_empty());
        assert!(with_input(engine, &local, &a, server_egress_rule).is_none());
    }
    assert!(
        !with_input(NamedEgress::Proxy, &server(true), &a, uses_proxy),
        "remote"
    );
    let none = Approved::default();
    assert!(
        !with_input(NamedEgress::Proxy, &local, &none, uses_proxy),
        "no hosts"
    );
}

#[test]
fn the_server_gets_the_proxy_from_its_secret_and_bypasses_it_for_cidrs_and_the_api_server() {
    let local = server(false);
    let env = with_input(NamedEgress::Proxy, &local, &approved(true), server_env);
    let from_secret = |name: &str| json!({"name": name, "valueFrom": {"secretKeyRef": {"name": "fetch-egress-proxy", "key": "url", "optional": false}}});
    let no_proxy = "localhost,127.0.0.1,::1,kubernetes.default.svc,kubernetes.default.svc.cluster.local,$(KUBERNETES_SERVICE_HOST),10.96.0.0/12";
    assert_eq!(
        serde_json::to_value(&env).unwrap(),
        json!([
            from_secret("HTTPS_PROXY"),
            from_secret("HTTP_PROXY"),
            from_secret("https_proxy"),
            from_secret("http_proxy"),
            {"name": "NODE_USE_ENV_PROXY", "value": "1"},
            {"name": "NO_PROXY", "value": no_proxy},
            {"name": "no_proxy", "value": no_proxy},
        ])
    );
    let env = with_input(NamedEgress::Proxy, &local, &approved(false), server_env);
    assert_eq!(
        env[5].value.as_deref(),
        Some("localhost,127.0.0.1,::1,10.96.0.0/12"),
        "no token, no API server"
    );
    // No value holds a token: the Deployment carries none in clear.
    assert!(env
        .iter()
        .all(|e| e.value.as_deref().is_none_or(|v| !v.contains('@'))));
}

#[test]
fn the_server_may_reach_the_proxy_pods_on_the_proxy_port() {
    let local = server(false);
    let rule = with_input(
        NamedEgress::Proxy,
        &local,
        &approved(false),
        server_egress_rule,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(rule).unwrap(),
        json!({"ports": [{"port": 3128, "protocol": "TCP"}],
               "to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-egress"}}}]})
    );
}

#[test]
fn the_entry_and_the_credential_secret() {
    let entry = client_entry(&approved(false));
    assert_eq!(
        serde_json::to_value(&entry).unwrap(),
        json!({"hosts": [{"host": "example.org", "port": 80}, {"host": "pypi.org", "port": 443}],
               "cidrs": [{"cidr": "10.96.0.0/12", "port": 443}],
               "plainHttpHosts": [{"host": "example.org", "port": 80}]})
    );
    let token = "ab".repeat(32);
    let secret = desired_token_secret(
        &server(false),
        EgressProxyScope::Namespace,
        &token,
        "10.96.7.9",
    );
    let value = typed_value(&secret);
    assert_eq!(value["metadata"]["name"], "fetch-egress-proxy");
    assert_eq!(value["metadata"]["labels"][TOKEN_LABEL], "true");
    assert_eq!(value["metadata"]["ownerReferences"][0]["uid"], "u-1");
    assert_eq!(value["immutable"], true);
    let url = String::from_utf8(secret.data.as_ref().unwrap()["url"].0.clone()).unwrap();
    assert_eq!(url, format!("http://team-a%2Ffetch:{token}@10.96.7.9:3128"));
    assert_eq!(read_token(&secret), Some(token.clone()));
    assert_eq!(
        proxy_url(&server(false), "t", "fd00::5"),
        "http://team-a%2Ffetch:t@[fd00::5]:3128"
    );
    let mut short = secret.clone();
    short
        .data
        .as_mut()
        .unwrap()
        .insert(TOKEN_KEY.into(), ByteString(b"short".to_vec()));
    assert_eq!(read_token(&short), None, "a short token is not usable");
}

#[test]
fn the_policy_config_map_carries_the_entry_under_the_proxy_engine_only() {
    let local = server(false);
    let cm = |engine, a: &Approved| {
        with_input(
            engine,
            &local,
            a,
            crate::build::config_map::desired_config_map,
        )
    };
    let with_hosts = cm(NamedEgress::Proxy, &approved(false));
    assert_eq!(
        read_entry(&with_hosts),
        Some(client_entry(&approved(false)))
    );
    // Revoked: an empty entry replaces the old one (and counts as none).
    let without = cm(NamedEgress::Proxy, &Approved::default());
    assert_eq!(
        without.metadata.annotations.as_ref().unwrap()[ENTRY_ANNOTATION],
        r#"{"hosts":[],"cidrs":[],"plainHttpHosts":[]}"#
    );
    assert_eq!(read_entry(&without), None);
    assert_eq!(
        cm(NamedEgress::Cilium, &approved(false))
            .metadata
            .annotations,
        None
    );
    assert_eq!(
        cm(NamedEgress::None, &approved(false)).metadata.annotations,
        None
    );
}

fn client(name: &str, hosts: &[(&str, i32)], cidrs: &[(&str, i32)]) -> ProxyClient {
    ProxyClient {
        name: format!("team-a/{name}"),
        token_sha256: token_sha256(name),
        entry: ClientEntry {
            hosts: hosts
                .iter()
                .map(|(h, p)| HostPort {
                    host: h.to_string(),
                    port: *p,
                })
                .collect(),
            cidrs: cidrs
                .iter()
                .map(|(c, p)| CidrPort {
                    cidr: c.to_string(),
                    port: *p,
                })
                .collect(),
            plain_http_hosts: vec![],
        },
    }
}

fn shared() -> (ProxyObjects, Vec<ProxyClient>) {
    let clients = vec![
        client("fetch", &[("pypi.org", 443)], &[("10.20.0.0/16", 5432)]),
        client("git", &[("github.com", 443), ("example.org", 80)], &[]),
    ];
    let owners = vec![OwnerReference {
        api_version: "mcpwarden.dev/v1alpha1".into(),
        kind: "MCPServer".into(),
        name: "fetch".into(),
        uid: "u-1".into(),
        ..OwnerReference::default()
    }];
    let config = BuildConfig {
        cluster_ranges: crate::egress_scope::ClusterRanges {
            services: vec!["10.96.0.0/12".into()],
            nodes: vec!["203.0.113.0/24".into()],
            ..Default::default()
        },
        egress_proxy_replicas: 2,
        ..BuildConfig::default()
    };
    let objects = desired_proxy_objects(ProxyInput {
        namespace: "team-a",
        of: ProxyOf::Namespace,
        clients: &clients,
        owners: &owners,
        service_owners: &owners[..0],
        config: &config,
    });
    (objects, clients)
}

#[test]
fn the_clients_file_has_exactly_the_entries_and_only_hashes() {
    let (objects, clients) = shared();
    let data = &objects.clients_config_map.data.as_ref().unwrap()[CLIENTS_KEY];
    let file: Value = serde_json::from_str(data).unwrap();
    assert_eq!(
        file,
        json!({"version": 1, "clients": [
            {"name": "team-a/fetch", "tokenSha256": token_sha256("fetch"),
             "hosts": [{"host": "pypi.org", "port": 443}], "cidrs": [{"cidr": "10.20.0.0/16", "port": 5432}],
             "plainHttpHosts": []},
            {"name": "team-a/git", "tokenSha256": token_sha256("git"),
             "hosts": [{"host": "github.com", "port": 443}, {"host": "example.org", "port": 80}], "cidrs": [],
             "plainHttpHosts": []},
        ]})
    );
    assert_eq!(
        clients_file(&[clients[1].clone(), clients[0].clone()]),
        *data
    );
    assert_eq!(
        token_sha256("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn the_proxy_deployment_and_service() {
    let (objects, _) = shared();
    let labels = json!({
        "app.kubernetes.io/component": "egress-proxy",
        "app.kubernetes.io/managed-by": "mcp-warden-operator",
        "app.kubernetes.io/name": "mcp-warden-egress",
        "app.kubernetes.io/part-of": "mcp-warden",
    });
    let meta = json!({
        "name": "mcp-warden-egress", "namespace": "team-a", "labels": labels,
        "ownerReferences": [{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "name": "fetch", "uid": "u-1"}],
    });
    let restricted = json!({
        "allowPrivilegeEscalation": false, "privileged": false, "readOnlyRootFilesystem": true,
        "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    });
    assert_eq!(
        typed_value(&objects.deployment),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-egress"}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "automountServiceAccountToken": false,
                        "enableServiceLinks": false,
                        "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532,
                                            "seccompProfile": {"type": "RuntimeDefault"}},
                        "containers": [{
                            "name": "egress",
                            "image": BuildConfig::default().sidecar_image,
                            "command": ["/usr/local/bin/mcp-warden-sidecar"],
                            "args": ["egress", "--listen", "0.0.0.0:3128", "--clients-file",
                                     "/etc/mcp-warden-egress/clients.json", "--metrics-listen", "0.0.0.0:9090"],
                            "ports": [{"name": "proxy", "containerPort": 3128, "protocol": "TCP"},
                                      {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
                            "readinessProbe": {"tcpSocket": {"port": 3128}, "periodSeconds": 5},
                            "securityContext": restricted,
                            "volumeMounts": [{"name": "clients", "mountPath": "/etc/mcp-warden-egress", "readOnly": true}],
                        }],
                        "volumes": [{"name": "clients", "configMap": {"name": "mcp-warden-egress-clients"}}],
                    },
                },
            },
        })
    );
    let mut service_meta = meta.clone();
    service_meta
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    assert_eq!(
        typed_value(&objects.service),
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": service_meta,
            "spec": {"selector": {"app.kubernetes.io/name": "mcp-warden-egress"},
                     "ports": [{"name": "proxy", "port": 3128, "targetPort": 3128, "protocol": "TCP"}]},
        })
    );
}

#[test]
fn only_listed_servers_reach_the_proxy_and_only_the_proxy_leaves_on_approved_ports() {
    let (objects, _) = shared();
    let spec = typed_value(&objects.network_policy)["spec"].clone();
    let mut v4_except = vec![
        "0.0.0.0/8",
        "10.0.0.0/8",
        "10.96.0.0/12",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ];
    v4_except.sort();
    assert_eq!(
        spec,
        json!({
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-egress"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"ports": [{"port": 3128, "protocol": "TCP"}],
                 "from": [{"podSelector": {"matchExpressions": [
                     {"key": "mcpwarden.dev/server", "operator": "In", "values": ["fetch", "git"]}]}}]},
                {"ports": [{"port": 9090, "protocol": "TCP"}],
                 "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]},
            ],
            "egress": [
                serde_json::to_value(dns_rule()).unwrap(),
                {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}],
                 "to": [
                     {"ipBlock": {"cidr": "0.0.0.0/0", "except": v4_except}},
                     {"ipBlock": {"cidr": "::/0", "except": ["::1/128", "fc00::/7", "fe80::/10", "ff00::/8"]}},
                 ]},
                {"ports": [{"port": 5432, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]},
            ],
        })
    );
}
