//! The `server` scope: a server's own proxy, whole, and what keeps two
//! servers' proxies (and the namespace's) apart.

use super::*;
use crate::{build::typed_value, compile::Approved, config::BuildConfig};
use mcp_warden_crds::{MCPServer, SandboxProfileSpec};
use serde_json::{json, Value};

fn server(name: &str, uid: &str) -> MCPServer {
    serde_yaml_ng::from_str(&format!(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}, namespace: team-a, uid: {uid}}}\nspec: {{image: i, command: [x], toolProfileRef: {{name: p}}}}\n"
    ))
    .unwrap()
}

fn approved() -> Approved {
    Approved {
        hosts: [("pypi.org".to_string(), 443)].into(),
        egress: [("10.20.0.0/16".to_string(), 5432)].into(),
        ..Approved::default()
    }
}

fn config(scope: EgressProxyScope) -> BuildConfig {
    BuildConfig {
        named_egress: NamedEgress::Proxy,
        egress_proxy_scope: scope,
        ..BuildConfig::default()
    }
}

fn with_input<T>(
    scope: EgressProxyScope,
    server: &MCPServer,
    f: impl FnOnce(BuildInput<'_>) -> T,
) -> T {
    let config = config(scope);
    let sandbox = SandboxProfileSpec::default();
    let approved = approved();
    f(BuildInput {
        server,
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
}

/// The proxy `server` would get under the `server` scope, built as apply does.
fn own_proxy(server: &MCPServer, token: &str) -> ProxyObjects {
    let name = server.metadata.name.as_deref().unwrap();
    let clients = [ProxyClient {
        name: format!("team-a/{name}"),
        token_sha256: token_sha256(token),
        entry: client_entry(&approved()),
    }];
    let owners: Vec<_> = names::owner_reference(server).into_iter().collect();
    desired_proxy_objects(ProxyInput {
        namespace: "team-a",
        of: ProxyOf::Server(name),
        clients: &clients,
        owners: &owners,
        service_owners: &owners,
        config: &config(EgressProxyScope::Server),
    })
}

fn matches(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn a_servers_own_proxy_whole() {
    let fetch = server("fetch", "u-1");
    let objects = own_proxy(&fetch, "fetch-token");
    let labels = json!({
        "app.kubernetes.io/component": "egress-proxy",
        "app.kubernetes.io/instance": "fetch",
        "app.kubernetes.io/managed-by": "mcp-warden-operator",
        "app.kubernetes.io/name": "mcp-warden-server-egress",
        "app.kubernetes.io/part-of": "mcp-warden",
    });
    let selector = json!({"app.kubernetes.io/instance": "fetch", "app.kubernetes.io/name": "mcp-warden-server-egress"});
    let owner = json!([{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "name": "fetch",
                        "uid": "u-1", "controller": true}]);
    let meta = |name: &str| json!({"name": name, "namespace": "team-a", "labels": labels, "ownerReferences": owner});
    let deployment = typed_value(&objects.deployment);
    assert_eq!(deployment["metadata"], meta("fetch-egress-proxy"));
    assert_eq!(
        deployment["spec"]["selector"],
        json!({"matchLabels": selector})
    );
    assert_eq!(
        deployment["spec"]["template"]["metadata"],
        json!({"labels": labels})
    );
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([{"name": "clients", "configMap": {"name": "fetch-egress-proxy-clients"}}])
    );
    // The rest of the pod is the namespace proxy's, unchanged.
    let shared = desired_proxy_objects(ProxyInput {
        namespace: "team-a",
        of: ProxyOf::Namespace,
        clients: &[],
        owners: &[],
        service_owners: &[],
        config: &config(EgressProxyScope::Namespace),
    });
    assert_eq!(
        pod["containers"],
        typed_value(&shared.deployment)["spec"]["template"]["spec"]["containers"]
    );
    assert_eq!(
        typed_value(&objects.service),
        json!({
            "apiVersion": "v1", "kind": "Service", "metadata": meta("fetch-egress-proxy"),
            "spec": {"selector": selector,
                     "ports": [{"name": "proxy", "port": 3128, "targetPort": 3128, "protocol": "TCP"}]},
        })
    );
    // Its clients file: this server's hash and nothing else.
    let cm = typed_value(&objects.clients_config_map);
    assert_eq!(cm["metadata"], meta("fetch-egress-proxy-clients"));
    let file: Value = serde_json::from_str(cm["data"][CLIENTS_KEY].as_str().unwrap()).unwrap();
    assert_eq!(
        file,
        json!({"version": 1, "clients": [
            {"name": "team-a/fetch", "tokenSha256": token_sha256("fetch-token"),
             "hosts": [{"host": "pypi.org", "port": 443}], "cidrs": [{"cidr": "10.20.0.0/16", "port": 5432}],
             "plainHttpHosts": []}]})
    );
    // In from this server's pods only; out only on its approved ports.
    let np = typed_value(&objects.network_policy);
    assert_eq!(np["metadata"], meta("fetch-egress-proxy"));
    let spec = &np["spec"];
    assert_eq!(spec["podSelector"], json!({"matchLabels": selector}));
    assert_eq!(
        spec["ingress"][0],
        json!({"ports": [{"port": 3128, "protocol": "TCP"}],
               "from": [{"podSelector": {"matchExpressions": [
                   {"key": "mcpwarden.dev/server", "operator": "In", "values": ["fetch"]}]}}]})
    );
    let egress = spec["egress"].as_array().unwrap();
    assert_eq!(egress.len(), 3, "{egress:?}");
    assert_eq!(egress[0], serde_json::to_value(dns_rule()).unwrap());
    assert_eq!(
        egress[1]["ports"],
        json!([{"port": 443, "protocol": "TCP"}])
    );
    assert_eq!(egress[1]["to"][0]["ipBlock"]["cidr"], "0.0.0.0/0");
    assert_eq!(
        egress[2],
        json!({"ports": [{"port": 5432, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]})
    );
}

#[test]
fn two_servers_proxies_and_the_namespaces_never_select_each_others_pods() {
    let fetch = own_proxy(&server("fetch", "u-1"), "a");
    let git = own_proxy(&server("git", "u-2"), "b");
    let shared = desired_proxy_objects(ProxyInput {
        namespace: "team-a",
        of: ProxyOf::Namespace,
        clients: &[],
        owners: &[],
        service_owners: &[],
        config: &config(EgressProxyScope::Namespace),
    });
    let pods = |o: &ProxyObjects| {
        typed_value(&o.deployment)["spec"]["template"]["metadata"]["labels"].clone()
    };
    let service = |o: &ProxyObjects| typed_value(&o.service)["spec"]["selector"].clone();
    let policy = |o: &ProxyObjects| {
        typed_value(&o.network_policy)["spec"]["podSelector"]["matchLabels"].clone()
    };
    let all = [&fetch, &git, &shared];
    for (i, a) in all.iter().enumerate() {
        for (j, b) in all.iter().enumerate() {
            let same = i == j;
            assert_eq!(
                matches(&service(a), &pods(b)),
                same,
                "Service {i} → pods {j}"
            );
            assert_eq!(matches(&policy(a), &pods(b)), same, "policy {i} → pods {j}");
        }
        // A proxy pod is no server pod: the servers' Services and
        // NetworkPolicies select by this label.
        assert!(pods(a).get(names::SERVER_LABEL).is_none());
    }
    // And no server pod is a proxy pod.
    let fetch_pods = serde_json::to_value(names::labels(&server("fetch", "u-1"))).unwrap();
    for proxy in all {
        assert!(!matches(&service(proxy), &fetch_pods));
    }
}

#[test]
fn under_the_server_scope_the_server_reaches_its_own_proxy_with_its_own_credential() {
    let fetch = server("fetch", "u-1");
    let rule = with_input(EgressProxyScope::Server, &fetch, server_egress_rule).unwrap();
    assert_eq!(
        serde_json::to_value(rule).unwrap(),
        json!({"ports": [{"port": 3128, "protocol": "TCP"}],
               "to": [{"podSelector": {"matchLabels": {
                   "app.kubernetes.io/instance": "fetch", "app.kubernetes.io/name": "mcp-warden-server-egress"}}}]})
    );
    let env = with_input(EgressProxyScope::Server, &fetch, server_env);
    let refs: Vec<_> = env
        .iter()
        .filter_map(|e| e.value_from.as_ref()?.secret_key_ref.as_ref())
        .map(|r| (r.name.as_str(), r.key.as_str()))
        .collect();
    assert_eq!(refs, vec![("fetch-egress-proxy-credential", "url"); 4]);
    // The namespace scope keeps its Secret: a switch changes the pod
    // template, so the pods roll onto the other proxy.
    let env = with_input(EgressProxyScope::Namespace, &fetch, server_env);
    assert_eq!(
        env[0]
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap()
            .name,
        "fetch-egress-proxy"
    );
    let token = "cd".repeat(32);
    let secret = desired_token_secret(&fetch, EgressProxyScope::Server, &token, "10.96.8.1");
    let value = typed_value(&secret);
    assert_eq!(value["metadata"]["name"], "fetch-egress-proxy-credential");
    assert_eq!(value["metadata"]["ownerReferences"][0]["uid"], "u-1");
    assert_eq!(value["immutable"], true);
    let url = String::from_utf8(secret.data.as_ref().unwrap()[URL_KEY].0.clone()).unwrap();
    assert_eq!(url, format!("http://team-a%2Ffetch:{token}@10.96.8.1:3128"));
}
