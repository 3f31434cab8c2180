//! `spec.remote` through the pure pipeline (validate → compile → build): the
//! pod holds the facade alone, Secrets reach the facade only as files the
//! compiled `upstreamAuth` names, and the NetworkPolicy opens egress to the
//! remote (and its token endpoints) only once the capabilities are approved.

mod common;

use k8s_openapi::api::{apps::v1::Deployment, networking::v1::NetworkPolicy};
use mcp_warden_crds::{MCPServer, SandboxProfileSpec, ToolProfileSpec};
use mcp_warden_operator::{config::BuildConfig, plan};
use serde_json::{json, Value};

fn server(remote: &str) -> MCPServer {
    serde_yaml_ng::from_str(&format!(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: tracker, namespace: team-a, uid: u-1}}\n\
         spec: {{toolProfileRef: {{name: tp}}, remote: {remote}}}\n"
    ))
    .unwrap()
}

/// Plan the server as is, then with the digest it asks for approved.
fn plans(server: &MCPServer) -> (plan::Plan, plan::Plan) {
    // One tool: a profile that allows nothing is refused (the facade would not start).
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: echo}]}").unwrap();
    let sandbox = SandboxProfileSpec::default();
    let inputs = common::inputs(server, Some(&tools), Some(&sandbox));
    let config = BuildConfig::default();
    let pending = plan::plan(&inputs, &config).expect("a valid remote server");
    let mut approved_server = server.clone();
    approved_server.metadata.annotations = Some(
        [(
            "mcpwarden.dev/approve".to_string(),
            pending.capabilities.digest.clone(),
        )]
        .into(),
    );
    let approved = plan::plan(
        &plan::Inputs {
            server: &approved_server,
            ..inputs
        },
        &config,
    )
    .unwrap();
    (pending, approved)
}

fn pod(deployment: &Deployment) -> Value {
    serde_json::to_value(&deployment.spec.as_ref().unwrap().template.spec).unwrap()
}

fn egress(np: &NetworkPolicy) -> Value {
    serde_json::to_value(np).unwrap()["spec"]["egress"].clone()
}

fn facade_args(pod: &Value) -> Vec<String> {
    serde_json::from_value(pod["containers"][0]["args"].clone()).unwrap()
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    let at = args.iter().position(|a| a == flag)?;
    args.get(at + 1).map(String::as_str)
}

const FULL: &str = "{url: 'https://mcp.tracker.example.com/mcp', \
    tls: {caConfigMap: {name: tracker-ca, key: ca.pem}}, privateCidrs: [10.20.0.0/16], \
    auth: {header: X-Api-Key, \
      facade: {clientCredentials: {tokenUrl: 'https://idp.example.com:8443/token', clientId: warden, \
        clientSecretRef: {name: tracker-oauth, key: client-secret}, scopes: ['issues:read']}}, \
      rules: [{roles: [admin], tokenSecretRef: {name: tracker-tokens, key: admin}}, \
              {subjects: [alice], useFacade: true}, \
              {tokenExchange: {tokenUrl: 'https://idp.example.com:8443/token', clientId: warden, \
                clientSecretRef: {name: tracker-oauth, key: client-secret}, audience: tracker}}]}}";

#[test]
fn the_pod_holds_the_facade_alone_with_the_credentials_as_files() {
    let (pending, approved) = plans(&server(FULL));
    for plan in [&pending, &approved] {
        let pod = pod(&plan.objects.deployment);
        let containers = pod["containers"].as_array().unwrap();
        assert_eq!(containers.len(), 1, "{pod:#}");
        assert_eq!(containers[0]["name"], "facade");
        assert_eq!(pod.get("initContainers"), None);
        let args = facade_args(&pod);
        assert_eq!(
            flag(&args, "--upstream-url"),
            Some("https://mcp.tracker.example.com/mcp")
        );
        assert_eq!(
            flag(&args, "--upstream-ca-file"),
            Some("/etc/mcp-warden/upstream-ca/ca.pem")
        );
        assert!(!args.iter().any(|a| a == "--upstream-socket"));
        // One volume per Secret (each key once, read-only), the CA bundle,
        // and none of a server container's (tmp, bridge, socket).
        let volumes: Vec<&str> = pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            volumes,
            [
                "policy",
                "jwks",
                "peer-key",
                "admin-token",
                "peers",
                "upstream-ca",
                "upstream-0",
                "upstream-1"
            ]
        );
        let volume = |name: &str| {
            pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["name"] == name)
                .unwrap()
                .clone()
        };
        assert_eq!(
            volume("upstream-0")["secret"],
            json!({"secretName": "tracker-oauth", "defaultMode": 0o440, "optional": false,
                   "items": [{"key": "client-secret", "path": "client-secret"}]})
        );
        assert_eq!(
            volume("upstream-1")["secret"]["items"],
            json!([{"key": "admin", "path": "admin"}])
        );
        let mounts: Vec<(String, String, bool)> = containers[0]["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["mountPath"].as_str().unwrap().to_string(),
                    m["readOnly"] == true,
                )
            })
            .filter(|(n, _, _)| n.starts_with("upstream"))
            .collect();
        assert_eq!(
            mounts,
            [
                (
                    "upstream-ca".into(),
                    "/etc/mcp-warden/upstream-ca".into(),
                    true
                ),
                (
                    "upstream-0".into(),
                    "/etc/mcp-warden/upstream/tracker-oauth".into(),
                    true
                ),
                (
                    "upstream-1".into(),
                    "/etc/mcp-warden/upstream/tracker-tokens".into(),
                    true
                ),
            ]
        );
    }
    // The policy names the mounted files, never a secret value.
    let auth = serde_json::to_value(pending.policy.upstream_auth.as_ref().unwrap()).unwrap();
    assert_eq!(auth["header"], "X-Api-Key");
    assert_eq!(
        auth["rules"][0],
        json!({"roles": ["admin"], "tokenFile": "/etc/mcp-warden/upstream/tracker-tokens/admin"})
    );
    assert_eq!(
        auth["rules"][1],
        json!({"subjects": ["alice"], "useFacade": true})
    );
    assert_eq!(
        auth["rules"][2]["tokenExchange"],
        json!({"tokenUrl": "https://idp.example.com:8443/token", "clientId": "warden",
               "clientSecretFile": "/etc/mcp-warden/upstream/tracker-oauth/client-secret",
               "audience": "tracker"})
    );
    assert_eq!(
        auth["facade"]["clientCredentials"]["clientSecretFile"],
        "/etc/mcp-warden/upstream/tracker-oauth/client-secret"
    );
}

#[test]
fn egress_to_the_remote_only_after_approval() {
    let (pending, approved) = plans(&server(FULL));
    assert_eq!(
        pending.capabilities.requested.iter().collect::<Vec<_>>(),
        [
            "network.dns",
            "network.egress.host:idp.example.com:8443",
            "network.egress.host:mcp.tracker.example.com:443",
            "network.egress:10.20.0.0/16:443",
            "network.egress:10.20.0.0/16:8443",
        ]
    );
    // Pending: no egress at all, and the guard is not told to allow the block.
    assert_eq!(egress(&pending.objects.network_policy), json!([]));
    let args = facade_args(&pod(&pending.objects.deployment));
    assert_eq!(flag(&args, "--upstream-allow-cidr"), None);

    // Approved: DNS, the private block on the remote's ports, and public
    // addresses (every non-public block excepted) on those ports.
    let egress = egress(&approved.objects.network_policy);
    let rules = egress.as_array().unwrap();
    assert_eq!(rules.len(), 3, "{egress:#}");
    assert!(
        rules[0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["port"] == 53),
        "DNS first: {egress:#}"
    );
    assert_eq!(
        rules[1],
        json!({"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}],
               "ports": [{"port": 443, "protocol": "TCP"}, {"port": 8443, "protocol": "TCP"}]})
    );
    assert_eq!(
        rules[2]["ports"],
        json!([{"port": 443, "protocol": "TCP"}, {"port": 8443, "protocol": "TCP"}])
    );
    let to = &rules[2]["to"];
    assert_eq!(to[0]["ipBlock"]["cidr"], "0.0.0.0/0");
    assert_eq!(to[1]["ipBlock"]["cidr"], "::/0");
    let except: Vec<&str> = to[0]["ipBlock"]["except"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    for private in [
        "10.0.0.0/8",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
    ] {
        assert!(
            except.contains(&private),
            "{private} not excepted: {except:?}"
        );
    }
    let args = facade_args(&pod(&approved.objects.deployment));
    assert_eq!(flag(&args, "--upstream-allow-cidr"), Some("10.20.0.0/16"));
}

#[test]
fn a_remote_given_by_address_gets_a_cidr_rule_and_no_dns() {
    let (pending, approved) = plans(&server("{url: 'https://10.40.1.7:9443/mcp'}"));
    assert_eq!(
        pending.capabilities.requested.iter().collect::<Vec<_>>(),
        ["network.egress:10.40.1.7/32:9443"]
    );
    assert_eq!(
        egress(&approved.objects.network_policy),
        json!([{"to": [{"ipBlock": {"cidr": "10.40.1.7/32"}}], "ports": [{"port": 9443, "protocol": "TCP"}]}])
    );
    // A private address: the facade's guard may connect to it only once approved.
    let args = |p: &plan::Plan| facade_args(&pod(&p.objects.deployment));
    assert_eq!(flag(&args(&pending), "--upstream-allow-cidr"), None);
    assert_eq!(
        flag(&args(&approved), "--upstream-allow-cidr"),
        Some("10.40.1.7/32")
    );
}

#[test]
fn a_remote_without_auth_carries_no_credentials() {
    let (pending, _) = plans(&server("{url: 'https://mcp.example.com/mcp'}"));
    assert_eq!(pending.policy.upstream_auth, None);
    let pod = pod(&pending.objects.deployment);
    assert!(!pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"].as_str().unwrap().starts_with("upstream")));
}

#[test]
fn with_a_named_egress_engine_the_hosts_go_to_its_policy_not_to_public_addresses() {
    let server = server(FULL);
    // One tool: a profile that allows nothing is refused (the facade would not start).
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: echo}]}").unwrap();
    let sandbox = SandboxProfileSpec::default();
    let config = BuildConfig {
        named_egress: mcp_warden_operator::config::NamedEgress::Cilium,
        ..BuildConfig::default()
    };
    let mut approved = server.clone();
    let inputs = common::inputs(&server, Some(&tools), Some(&sandbox));
    let digest = plan::plan(&inputs, &config).unwrap().capabilities.digest;
    approved.metadata.annotations = Some([("mcpwarden.dev/approve".to_string(), digest)].into());
    let plan = plan::plan(
        &plan::Inputs {
            server: &approved,
            ..inputs
        },
        &config,
    )
    .unwrap();
    // The NetworkPolicy: the private block only (DNS goes with the names).
    let egress = egress(&plan.objects.network_policy);
    assert!(
        !egress.to_string().contains("0.0.0.0/0"),
        "no public-address rule: {egress:#}"
    );
    let cilium = serde_json::to_value(plan.objects.named_egress.as_ref().unwrap()).unwrap();
    assert_eq!(cilium["kind"], "CiliumNetworkPolicy");
    let fqdns: Vec<Value> = cilium["spec"]["egress"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r.get("toFQDNs").cloned())
        .collect();
    assert_eq!(
        fqdns,
        [
            json!([{"matchName": "mcp.tracker.example.com"}]),
            json!([{"matchName": "idp.example.com"}])
        ]
    );
}
