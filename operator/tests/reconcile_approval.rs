//! Reconcile against a mock API server (tower-test), as `reconcile.rs`:
//! the approval's side of the pipeline. Egress is applied only for the
//! approved digest (and follows it through upgrades), named egress needs an
//! engine the cluster serves, the facade's tool report and the issuers' keys
//! reach status, the policy and the JWKS ConfigMap, and a remote server runs
//! the facade alone with egress once approved.

mod support;

use mcp_warden_crds::mcpserver::{ObservedServer, ObservedTool};
use mcp_warden_operator::reconcile::observe::FacadeReport;
use serde_json::{json, Value};
use support::*;

fn events(calls: &[Call]) -> Vec<(String, String)> {
    calls
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
        .map(|c| {
            (
                c.body["reason"].as_str().unwrap_or_default().to_string(),
                c.body["note"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn np_writes(calls: &[Call]) -> usize {
    calls
        .iter()
        .filter(|c| c.method == "PATCH" && c.path == NP_PATH)
        .count()
}

#[tokio::test]
async fn approval_lifecycle_egress_is_applied_only_for_the_approved_digest() {
    let egress = json!({"rules": [{"cidr": "203.0.113.0/24", "ports": [443]}]});
    // 1. Requested, not approved: no egress rule, digest and command published.
    let (_, calls, pending) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .with_sandbox_egress(egress.clone())
        .reconcile()
        .await;
    assert_eq!(
        pending.objects[NP_PATH]["spec"].get("egress"),
        None,
        "no egress at all"
    );
    let status = pending.server().status.unwrap();
    assert_eq!(
        status.requested_capabilities,
        ["network.egress:203.0.113.0/24:443"]
    );
    let digest = status.capability_digest.clone().unwrap();
    assert!(
        digest.starts_with("sha256:") && digest.len() == 71,
        "{digest}"
    );
    assert_eq!(status.approved_digest, None);
    let cond = condition(&pending.server(), "CapabilitiesApproved").clone();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "PendingApproval")
    );
    let command =
        format!("kubectl annotate mcpserver git -n team-a mcpwarden.dev/approve={digest}");
    assert!(cond.message.contains(&command), "{}", cond.message);
    assert!(events(&calls)
        .iter()
        .any(|(r, n)| r == "CapabilitiesPending" && n.contains(&command)));

    // 2. A wrong digest changes nothing.
    let (_, calls, wrong) = pending
        .with_annotation("mcpwarden.dev/approve", Some("sha256:0000"))
        .reconcile()
        .await;
    assert_eq!(np_writes(&calls), 0);
    assert_eq!(wrong.server().status.unwrap().approved_digest, None);
    assert_eq!(
        condition(&wrong.server(), "CapabilitiesApproved").status,
        "False"
    );

    // 3. The right digest applies exactly the requested rule; the Event names the approver.
    let (_, calls, approved) = wrong
        .with_annotation("mcpwarden.dev/approve", Some(&digest))
        .with_annotation("mcpwarden.dev/approved-by", Some("alice@example.com"))
        .reconcile()
        .await;
    assert_eq!(np_writes(&calls), 1);
    assert_eq!(
        approved.objects[NP_PATH]["spec"]["egress"],
        json!([{"to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}], "ports": [{"port": 443, "protocol": "TCP"}]}])
    );
    let status = approved.server().status.unwrap();
    assert_eq!(status.approved_digest.as_deref(), Some(digest.as_str()));
    assert_eq!(
        status.approved_capabilities,
        ["network.egress:203.0.113.0/24:443"]
    );
    assert_eq!(
        condition(&approved.server(), "CapabilitiesApproved").status,
        "True"
    );
    assert!(
        events(&calls)
            .iter()
            .any(|(r, n)| r == "CapabilitiesApproved"
                && n.contains("alice@example.com")
                && n.contains(&digest)),
        "{:?}",
        events(&calls)
    );

    // 4. The profile asks for more: the approved rule stays, the new digest
    // is pending, and the changed SandboxProfile is not rolled out (held).
    let more = json!({"dns": true, "rules": [{"cidr": "203.0.113.0/24", "ports": [443]}]});
    let (_, calls, grown) = approved.with_sandbox_egress(more).reconcile().await;
    assert_eq!(
        np_writes(&calls),
        0,
        "the approved set stays in force, nothing is added"
    );
    let status = grown.server().status.unwrap();
    assert_eq!(status.approved_digest.as_deref(), Some(digest.as_str()));
    let new_digest = status.capability_digest.clone().unwrap();
    assert_ne!(new_digest, digest);
    assert_eq!(
        status.requested_capabilities,
        ["network.dns", "network.egress:203.0.113.0/24:443"]
    );
    let cond = condition(&grown.server(), "CapabilitiesApproved").clone();
    assert_eq!(cond.reason, "ApprovalPending");
    assert!(
        cond.message.contains(&new_digest)
            && cond.message.contains("network.dns")
            && cond.message.contains("(sandboxProfile)"),
        "{}",
        cond.message
    );
    assert!(events(&calls)
        .iter()
        .any(|(r, _)| r == "CapabilitiesPending"));

    // 5. Removing the annotation revokes: no egress again.
    let (_, calls, revoked) = grown
        .with_annotation("mcpwarden.dev/approve", None)
        .reconcile()
        .await;
    assert_eq!(np_writes(&calls), 1);
    assert_eq!(revoked.objects[NP_PATH]["spec"].get("egress"), None);
    assert_eq!(revoked.server().status.unwrap().approved_digest, None);
    assert!(events(&calls)
        .iter()
        .any(|(r, n)| r == "CapabilitiesRevoked" && n.contains(&digest)));
}

const PROXY_CLIENTS_PATH: &str = "/api/v1/namespaces/team-a/configmaps/mcp-warden-egress-clients";
const PROXY_DEPLOYMENT_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments/mcp-warden-egress";
const CNP_PATH: &str = "/apis/cilium.io/v2/namespaces/team-a/ciliumnetworkpolicies/git-egress";

/// Named egress: where the cluster serves neither Cilium nor Calico, the
/// operator's egress proxy enforces an approved host (the server may reach
/// only the proxy, whose clients file lists exactly the approved host);
/// with Cilium (discovered) the approval writes a CiliumNetworkPolicy with
/// exactly the host, the proxy objects go, and revoking deletes the policy.
#[tokio::test]
async fn named_egress_needs_an_engine_and_follows_the_approval() {
    let egress = json!({"hosts": [{"name": "registry.npmjs.org", "ports": [443]}]});
    let (_, _, pending) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .with_sandbox_egress(egress)
        .reconcile()
        .await;
    let status = pending.server().status.unwrap();
    assert_eq!(
        status.requested_capabilities,
        ["network.egress.host:registry.npmjs.org:443"]
    );
    assert!(
        !pending.objects.contains_key(PROXY_CLIENTS_PATH),
        "nothing approved: no proxy"
    );
    let digest = status.capability_digest.unwrap();
    // Approved, no Cilium or Calico: the proxy engine.
    let (_, calls, proxied) = pending
        .with_annotation("mcpwarden.dev/approve", Some(&digest))
        .reconcile()
        .await;
    assert_eq!(
        proxied.objects[NP_PATH]["spec"]["egress"],
        json!([{"ports": [{"port": 3128, "protocol": "TCP"}],
                "to": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-egress"}}}]}]),
        "the server may reach the proxy, nothing else"
    );
    let host_egress = condition(&proxied.server(), "HostEgress").clone();
    assert_eq!(
        (host_egress.status.as_str(), host_egress.reason.as_str()),
        ("True", "EgressProxy")
    );
    assert_eq!(
        condition(&proxied.server(), "Degraded").reason,
        "AsExpected"
    );
    let created = calls
        .iter()
        .find(|c| c.method == "POST" && c.path.ends_with("/secrets"))
        .expect("the credential Secret is created");
    assert_eq!(created.body["metadata"]["name"], "git-egress-proxy");
    let token = created.body["data"]["token"].as_str().unwrap().to_string();
    let clients: Value = serde_json::from_str(
        proxied.objects[PROXY_CLIENTS_PATH]["data"]["clients.json"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(clients["clients"].as_array().unwrap().len(), 1);
    assert_eq!(clients["clients"][0]["name"], "team-a/git");
    assert_eq!(
        clients["clients"][0]["hosts"],
        json!([{"host": "registry.npmjs.org", "port": 443}])
    );
    assert!(
        !clients.to_string().contains(&token),
        "only the token's hash is in the clients file"
    );
    assert!(proxied.objects.contains_key(PROXY_DEPLOYMENT_PATH));
    let container = &proxied.objects[DEPLOY_PATH]["spec"]["template"]["spec"]["containers"][0];
    assert!(container["env"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["name"] == "HTTPS_PROXY"
            && e["valueFrom"]["secretKeyRef"]["name"] == "git-egress-proxy"));
    let no_engine = proxied;
    // The cluster serves Cilium: the policy is written, the NetworkPolicy unchanged.
    let mut cilium = no_engine;
    cilium.objects.insert(
        "/apis/cilium.io/v2".into(),
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "cilium.io/v2",
               "resources": [{"name": "ciliumnetworkpolicies", "singularName": "ciliumnetworkpolicy",
                              "namespaced": true, "kind": "CiliumNetworkPolicy",
                              "verbs": ["get", "create", "patch", "delete"]}]}),
    );
    let (_, calls, enforced) = cilium.reconcile().await;
    assert_eq!(np_writes(&calls), 1, "the rule to the proxy goes");
    assert_eq!(enforced.objects[NP_PATH]["spec"].get("egress"), None);
    let cnp = &enforced.objects[CNP_PATH];
    assert_eq!(cnp["metadata"]["ownerReferences"][0]["uid"], "uid-git");
    assert_eq!(
        cnp["spec"]["egress"][1],
        json!({"toFQDNs": [{"matchName": "registry.npmjs.org"}],
               "toPorts": [{"ports": [{"port": "443", "protocol": "TCP"}]}]})
    );
    assert_eq!(
        condition(&enforced.server(), "Degraded").reason,
        "AsExpected"
    );
    assert_eq!(condition(&enforced.server(), "HostEgress").reason, "Cilium");
    assert!(
        !enforced.objects.contains_key(PROXY_DEPLOYMENT_PATH)
            && !enforced.objects.contains_key(PROXY_CLIENTS_PATH),
        "the proxy goes when Cilium enforces the hosts"
    );
    // Steady: nothing written again.
    let (_, calls, steady) = enforced.reconcile().await;
    assert!(
        !calls
            .iter()
            .any(|c| c.path == CNP_PATH && c.method != "GET"),
        "{:?}",
        calls.iter().map(Call::short).collect::<Vec<_>>()
    );
    // Revoked: the policy is deleted.
    let (_, calls, revoked) = steady
        .with_annotation("mcpwarden.dev/approve", None)
        .reconcile()
        .await;
    assert!(calls
        .iter()
        .any(|c| c.method == "DELETE" && c.path == CNP_PATH));
    assert!(!revoked.objects.contains_key(CNP_PATH));
}

#[tokio::test]
async fn facade_tools_and_issuer_keys_reach_status_policy_and_jwks_config_map() {
    let mut fixture = Fixture::new().with_server().with_tool_profile(tools_v1());
    let jwks = r#"{"keys":[{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}]}"#;
    fixture.objects.insert(
        "/.well-known/openid-configuration".into(),
        json!({"issuer": "https://oidc.example.com/cluster-7", "jwks_uri": "https://x/openid/v1/jwks"}),
    );
    fixture.objects.insert(
        "/openid/v1/jwks".into(),
        serde_json::from_str(jwks).unwrap(),
    );
    let pod = |name: &str, ip: &str, phase: &str, ready: &str| {
        json!({"metadata": {"name": name, "namespace": NS},
        "status": {"phase": phase, "podIP": ip, "conditions": [{"type": "Ready", "status": ready}]}})
    };
    fixture.objects.insert(
        "/api/v1/namespaces/team-a/pods".into(),
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [
            pod("git-a", "10.1.0.1", "Running", "True"), pod("git-b", "10.1.0.2", "Running", "True"),
            pod("git-c", "10.1.0.3", "Pending", "False"),
            // Running, its facade still probing the server: not asked.
            pod("git-d", "10.1.0.4", "Running", "False")]}),
    );
    let tool = |state: &str, hash: &str| ObservedTool {
        name: "git_log".into(),
        exposed_as: Some("log".into()),
        hash: Some(hash.into()),
        state: state.into(),
        reason: (state == "quarantined").then(|| "definition changed".into()),
        risk: Some("low".into()),
    };
    let identity = ObservedServer {
        name: Some("mcp-server-git".into()),
        title: None,
        version: Some("2025.1".into()),
        era: Some("legacy".into()),
    };
    let report = |tools: Vec<ObservedTool>, server: Option<&ObservedServer>| FacadeReport {
        tools,
        server: server.cloned(),
        policy: None,
        listed: None,
    };
    // The first pod's probe has no answer yet; the second knows the server.
    fixture.facades.0.insert(
        "10.1.0.1:9090".into(),
        report(vec![tool("exposed", "sha256:old")], None),
    );
    fixture.facades.0.insert(
        "10.1.0.2:9090".into(),
        report(vec![tool("quarantined", "sha256:new")], Some(&identity)),
    );
    fixture.facades.0.insert(
        "10.1.0.3:9090".into(),
        report(vec![tool("hidden", "sha256:x")], None),
    );
    fixture
        .facades
        .0
        .insert("10.1.0.4:9090".into(), report(vec![], Some(&identity)));

    let presented = fixture.facades.1.clone();
    let (_, calls, after) = fixture.reconcile().await;
    let tools = after.server().status.unwrap().tools;
    assert_eq!(
        tools,
        [tool("quarantined", "sha256:new")],
        "the worst state of the running pods"
    );
    assert_eq!(
        after.server().status.unwrap().server,
        Some(identity),
        "the upstream's identity, from the pod that knows it"
    );
    // `/tools` shows hidden tools: the operator asks with the server's admin token.
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
        after.objects["/api/v1/namespaces/team-a/secrets/git-admin-token"].clone(),
    )
    .unwrap();
    let token = String::from_utf8(secret.data.unwrap()["token"].0.clone()).unwrap();
    assert_eq!(token.len(), 64, "32 random bytes, hex");
    let presented = presented.lock().unwrap().clone();
    assert_eq!(
        presented,
        vec![token; 2],
        "the token, to each Ready pod (not the one still probing)"
    );
    let cm = &after.objects["/api/v1/namespaces/team-a/configmaps/git-jwks"];
    let published: Value = serde_json::from_str(cm["data"]["jwks.json"].as_str().unwrap()).unwrap();
    assert_eq!(published, serde_json::from_str::<Value>(jwks).unwrap());
    assert_eq!(cm["metadata"]["ownerReferences"][0]["uid"], "uid-git");
    let policy = after.objects["/api/v1/namespaces/team-a/configmaps/git-policy"]["data"]
        ["policy.yaml"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        policy.contains("issuer: https://oidc.example.com/cluster-7"),
        "{policy}"
    );
    assert!(
        policy.contains("jwksFile: /etc/mcp-warden/jwks/jwks.json"),
        "{policy}"
    );
    assert!(calls.iter().any(|c| c.path == "/openid/v1/jwks"));
}

#[tokio::test]
async fn a_remote_server_runs_the_facade_alone_and_gets_egress_once_approved() {
    const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments/git";
    // 1. One credential Secret is missing: the objects are applied anyway
    //    (the pod waits for the Secret), and status says which one.
    let (_, calls, created) = Fixture::new()
        .with_remote_server()
        .with_tool_profile(tools_v1())
        .with_secret("forge-admin")
        .reconcile()
        .await;
    let looked_up: Vec<String> = calls
        .iter()
        .filter(|c| c.path.contains("/secrets/forge-"))
        .map(Call::short)
        .collect();
    assert_eq!(
        looked_up,
        [
            "GET /api/v1/namespaces/team-a/secrets/forge-admin",
            "GET /api/v1/namespaces/team-a/secrets/forge-oauth"
        ]
    );
    let degraded = condition(&created.server(), "Degraded").clone();
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "SecretNotFound")
    );
    assert!(
        degraded.message.contains("forge-oauth"),
        "{}",
        degraded.message
    );
    let pod = &created.objects[DEPLOY_PATH]["spec"]["template"]["spec"];
    let containers: Vec<&str> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(containers, ["facade"]);
    let args = pod["containers"][0]["args"].as_array().unwrap();
    let at = args.iter().position(|a| a == "--upstream-url").unwrap();
    assert_eq!(args[at + 1], "https://mcp.forge.example.com/mcp");
    let secrets: Vec<&str> = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["secret"]["secretName"].as_str())
        .collect();
    assert_eq!(
        secrets,
        [
            "git-peer-key",
            "git-admin-token",
            "forge-admin",
            "forge-oauth"
        ]
    );
    assert_eq!(
        created.objects[NP_PATH]["spec"].get("egress"),
        None,
        "no egress before approval"
    );
    let status = created.server().status.unwrap();
    assert_eq!(
        status.requested_capabilities,
        [
            "network.dns",
            "network.egress.host:idp.example.com:443",
            "network.egress.host:mcp.forge.example.com:443",
        ]
    );
    let digest = status.capability_digest.unwrap();

    // 2. The Secret appears and the digest is approved: DNS and port 443 to
    //    public addresses open, and nothing else.
    let (_, calls, approved) = created
        .with_secret("forge-oauth")
        .with_annotation("mcpwarden.dev/approve", Some(&digest))
        .reconcile()
        .await;
    assert_eq!(np_writes(&calls), 1);
    assert_eq!(
        condition(&approved.server(), "CapabilitiesApproved").status,
        "True"
    );
    // Nothing missing, and the hosts count as enforced: the facade is the
    // pod's only container.
    let degraded = condition(&approved.server(), "Degraded").clone();
    assert_eq!(degraded.status, "False", "{}", degraded.message);
    let egress = approved.objects[NP_PATH]["spec"]["egress"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(egress.len(), 2, "{egress:#?}");
    assert_eq!(egress[0]["ports"][0]["port"], 53);
    assert_eq!(
        egress[1]["ports"],
        json!([{"port": 443, "protocol": "TCP"}])
    );
    assert_eq!(egress[1]["to"][0]["ipBlock"]["cidr"], "0.0.0.0/0");
    assert!(egress[1]["to"][0]["ipBlock"]["except"]
        .as_array()
        .unwrap()
        .contains(&json!("169.254.0.0/16")));
}
