//! Reconcile against a mock API server (tower-test), in the style of kube-rs
//! controller-rs: a [`Fixture`] builds the cluster state (`with_*`), a fake
//! API loop answers GET/PATCH/POST from that state and records every call,
//! and each scenario asserts the calls in order.
//!
//! Scenarios: create → every object applied with an owner reference; steady
//! state → zero writes; profile change → only the ConfigMap is rewritten (no
//! pod restart) and the server is found by the profile watch's mapper;
//! missing profile → `PolicyCompiled=False`/`ToolProfileNotFound` + a Warning
//! Event, then waiting without retries; a remote server → the facade alone,
//! its credential Secrets looked up, egress only for the approved digest.

mod support;

use kube::runtime::controller::Action;
use mcp_warden_crds::mcpserver::{ObservedServer, ObservedTool};
use mcp_warden_operator::reconcile::observe::FacadeReport;
use mcp_warden_operator::reconcile::{self, controller, RESYNC};
use serde_json::{json, Value};
use support::*;

#[tokio::test]
async fn create_applies_every_object_with_owner_references() {
    let (action, calls, after) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    let sequence: Vec<String> = calls.iter().map(Call::short).collect();
    let expected = [
        format!("GET {TP_PATH}"),
        "GET /.well-known/openid-configuration".into(),
        // no Cilium, no Calico here: named egress has no engine (and no object is read for it)
        "GET /apis/cilium.io/v2".into(),
        "GET /apis/projectcalico.org/v3".into(),
        // the cluster's own ranges (none here), which name broad egress
        "GET /apis/networking.k8s.io/v1/servicecidrs".into(),
        "GET /api/v1/nodes".into(),
        // every object is read (and its owner checked) before anything is written
        "GET /api/v1/namespaces/team-a/serviceaccounts/git".into(),
        "GET /api/v1/namespaces/team-a/configmaps/git-policy".into(),
        "GET /apis/apps/v1/namespaces/team-a/deployments/git".into(),
        "GET /api/v1/namespaces/team-a/services/git".into(),
        "GET /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/git".into(),
        "GET /api/v1/namespaces/team-a/secrets/git-peer-key".into(),
        "GET /api/v1/namespaces/team-a/secrets/git-admin-token".into(),
        // an HTTPRoute is read even when not asked for, to remove a stale one of ours
        "GET /apis/gateway.networking.k8s.io/v1/namespaces/team-a/httproutes/git".into(),
        "PATCH /api/v1/namespaces/team-a/serviceaccounts/git".into(),
        "PATCH /api/v1/namespaces/team-a/configmaps/git-policy".into(),
        "POST /api/v1/namespaces/team-a/secrets".into(),
        "POST /api/v1/namespaces/team-a/secrets".into(),
        "PATCH /apis/apps/v1/namespaces/team-a/deployments/git".into(),
        "PATCH /api/v1/namespaces/team-a/services/git".into(),
        "GET /api/v1/namespaces/team-a/services/git-peers".into(),
        "PATCH /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/git".into(),
        "GET /apis/policy/v1/namespaces/team-a/poddisruptionbudgets/git".into(),
        "GET /apis/networking.k8s.io/v1/namespaces/team-a/ingresses/git".into(),
        "GET /api/v1/namespaces/team-a/pods".into(),
        "POST /apis/events.k8s.io/v1/namespaces/team-a/events".into(),
        "PATCH /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpservers/git/status".into(),
    ];
    assert_eq!(sequence, expected);
    for call in calls.iter().filter(|c| {
        (c.method == "PATCH" && !c.path.ends_with("/status"))
            || (c.method == "POST" && !c.path.ends_with("/events"))
    }) {
        let owners = &call.body["metadata"]["ownerReferences"];
        assert_eq!(owners[0]["uid"], "uid-git", "{}: {owners}", call.path);
        assert_eq!(owners[0]["kind"], "MCPServer");
        assert_eq!(owners[0]["controller"], true);
    }
    let event = &calls[25].body;
    assert_eq!(event["reason"], "Applied");
    assert_eq!(event["type"], "Normal");
    let server = after.server();
    assert_eq!(condition(&server, "PolicyCompiled").status, "True");
    assert_eq!(
        condition(&server, "Ready").status,
        "False",
        "no Deployment existed before this apply"
    );
    let status = server.status.as_ref().unwrap();
    assert_eq!(
        status.endpoint.as_deref(),
        Some("http://git.team-a.svc.cluster.local:8080/mcp")
    );
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(action, Action::requeue(RESYNC));
}

#[tokio::test]
async fn steady_state_makes_no_writes() {
    let (_, _, created) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    // Second pass: the Deployment now reports available → Ready flips once.
    let (_, calls, settled) = created.reconcile().await;
    let writes = writes_of(&calls);
    assert!(
        writes
            .iter()
            .all(|w| w.ends_with("/status") || w.contains("/events")),
        "{writes:?}"
    );
    assert_eq!(condition(&settled.server(), "Ready").status, "True");
    // Third pass: nothing changed anywhere → reads only.
    let (action, calls, _) = settled.reconcile().await;
    let writes = writes_of(&calls);
    assert_eq!(writes, Vec::<String>::new());
    assert!(calls.len() >= 6, "it still looked: {calls:?}");
    assert_eq!(action, Action::requeue(RESYNC));
}

#[tokio::test]
async fn profile_change_rewrites_only_the_policy() {
    let (_, _, created) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    let (_, _, settled) = created.reconcile().await;
    // The profile watch maps the changed ToolProfile to this server…
    let server = settled.server();
    let refs = controller::servers_referencing(
        [&server],
        controller::ProfileKind::Tool,
        NS,
        "git-readonly",
    );
    assert_eq!(refs.len(), 1);
    // …whose reconcile rewrites the ConfigMap and nothing else (no pod
    // restart): nothing above the baseline, so no approval to wait for. The
    // status records the new workload hash of the profile.
    let changed = settled
        .with_tool_profile(json!([{"name": "git_log", "alias": "log"}, {"name": "git_diff"}]));
    let (_, calls, after) = changed.reconcile().await;
    let writes = writes_of(&calls);
    assert_eq!(
        writes,
        [
            "PATCH /api/v1/namespaces/team-a/configmaps/git-policy",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "PATCH /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpservers/git/status",
        ]
    );
    let policy = after.objects["/api/v1/namespaces/team-a/configmaps/git-policy"]["data"]
        ["policy.yaml"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(policy.contains("git_diff"), "{policy}");
}

#[tokio::test]
async fn missing_profile_sets_condition_and_event_then_waits() {
    let (action, calls, after) = Fixture::new().with_server().reconcile().await;
    let sequence: Vec<String> = calls.iter().map(Call::short).collect();
    assert_eq!(
        sequence,
        [
            format!("GET {TP_PATH}"),
            "GET /.well-known/openid-configuration".into(),
            "GET /apis/cilium.io/v2".into(),
            "GET /apis/projectcalico.org/v3".into(),
            "GET /apis/networking.k8s.io/v1/servicecidrs".into(),
            "GET /api/v1/nodes".into(),
            // is a workload applied earlier still running? (none here)
            "GET /apis/apps/v1/namespaces/team-a/deployments/git".into(),
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events".into(),
            "PATCH /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpservers/git/status".into(),
        ]
    );
    let event = &calls[7].body;
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "ToolProfileNotFound");
    let server = after.server();
    let compiled = condition(&server, "PolicyCompiled");
    assert_eq!(
        (compiled.status.as_str(), compiled.reason.as_str()),
        ("False", "ToolProfileNotFound")
    );
    assert_eq!(
        action,
        Action::await_change(),
        "no retry: wait for the profile to appear"
    );
    // Reconciling again (e.g. after the status write) publishes nothing new: no event storm.
    let (action, calls, _) = after.reconcile().await;
    assert_eq!(
        calls.iter().filter(|c| c.is_write()).count(),
        0,
        "{calls:?}"
    );
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn a_deleted_profile_keeps_the_last_workload_running_and_says_so() {
    let (_, _, created) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    let (_, _, mut settled) = created.reconcile().await;
    assert_eq!(condition(&settled.server(), "Ready").status, "True");
    let deployment_before = settled.objects[DEPLOY_PATH].clone();
    settled.objects.remove(TP_PATH);
    let (action, calls, after) = settled.reconcile().await;
    let writes = writes_of(&calls);
    assert!(
        writes
            .iter()
            .all(|w| w.ends_with("/status") || w.contains("/events")),
        "nothing but status and Events is written: {writes:?}"
    );
    assert_eq!(after.objects[DEPLOY_PATH], deployment_before);
    let server = after.server();
    let degraded = condition(&server, "Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "ToolProfileNotFound")
    );
    assert!(
        degraded.message.contains("\"git-readonly\" not found")
            && degraded
                .message
                .contains("keeps running unchanged (Deployment git"),
        "{}",
        degraded.message
    );
    assert_eq!(
        condition(&server, "Ready").status,
        "True",
        "it still serves"
    );
    let warnings: Vec<String> = calls
        .iter()
        .filter(|c| c.path.contains("/events") && c.body["type"] == "Warning")
        .map(|c| c.body["note"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|n| n.contains("git-readonly") && n.contains("keeps running")),
        "{warnings:?}"
    );
    assert_eq!(action, Action::await_change());
}

#[tokio::test]
async fn objects_under_its_names_that_it_does_not_own_are_not_taken_over() {
    const CM: &str = "/api/v1/namespaces/team-a/configmaps/git-policy";
    for (path, foreign) in [
        // made by someone else, and one left over from a deleted server of the same name
        (
            CM,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "git-policy", "namespace": NS, "uid": "x"}, "data": {"policy.yaml": "{}"}}),
        ),
        (
            PEER_KEY,
            json!({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "git-peer-key", "namespace": NS, "uid": "y", "ownerReferences": [
                              {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "name": "git",
                               "uid": "uid-old-git", "controller": true}]},
                          "data": {"peer.key": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}}),
        ),
    ] {
        let mut fixture = Fixture::new().with_server().with_tool_profile(tools_v1());
        fixture.objects.insert(path.into(), foreign.clone());
        let (action, calls, after) = fixture.reconcile().await;
        let writes = writes_of(&calls);
        assert!(
            writes
                .iter()
                .all(|w| w.ends_with("/status") || w.contains("/events")),
            "{path}: nothing may be written: {writes:?}"
        );
        assert_eq!(after.objects[path], foreign, "left as it was");
        let server = after.server();
        let degraded = condition(&server, "Degraded");
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "ObjectNotOwned")
        );
        let kind_name = if path == CM {
            "ConfigMap/git-policy"
        } else {
            "Secret/git-peer-key"
        };
        assert!(degraded.message.contains(kind_name), "{}", degraded.message);
        assert_eq!(condition(&server, "Ready").reason, "ObjectNotOwned");
        // The status never claims a ConfigMap that was not written.
        let compiled = condition(&server, "PolicyCompiled").message.clone();
        assert!(
            compiled.contains("not written") && !compiled.contains("compiled into"),
            "{compiled}"
        );
        let warning = calls
            .iter()
            .find(|c| c.path.contains("/events") && c.body["reason"] == "ObjectNotOwned")
            .unwrap_or_else(|| panic!("no Event: {writes:?}"));
        assert_eq!(warning.body["type"], "Warning");
        // Objects in the way are not watched: look again soon.
        assert_eq!(action, Action::requeue(reconcile::SECRET_RECHECK));
    }
}

const PEER_KEY: &str = "/api/v1/namespaces/team-a/secrets/git-peer-key";
const PEERS_SVC: &str = "/api/v1/namespaces/team-a/services/git-peers";
const PDB: &str = "/apis/policy/v1/namespaces/team-a/poddisruptionbudgets/git";

#[tokio::test]
async fn scale_out_adds_peer_objects_keeps_the_key_and_scale_in_removes_them() {
    let (_, calls, created) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    let key = created.objects[PEER_KEY]["data"]["peer.key"].clone();
    let created_key = calls
        .iter()
        .find(|c| c.method == "POST" && c.path.ends_with("/secrets"))
        .expect("the peer key is created");
    assert_eq!(created_key.body["metadata"]["name"], "git-peer-key");
    let bytes = key.as_str().map(|b64| b64.len()).unwrap_or(0);
    assert!(bytes >= 44, "32 random bytes, base64: {key}");
    assert!(!created.objects.contains_key(PEERS_SVC) && !created.objects.contains_key(PDB));

    // Scale to 3: headless Service + PDB appear; the key is neither re-created
    // nor rewritten, and the pod template does not change (no rollout).
    let (_, calls, scaled) = created.clone().with_replicas(3).reconcile().await;
    let writes = writes_of(&calls);
    assert!(writes.contains(&format!("PATCH {PEERS_SVC}")), "{writes:?}");
    assert!(writes.contains(&format!("PATCH {PDB}")), "{writes:?}");
    assert!(
        !writes.iter().any(|w| w.contains("/secrets")),
        "the key is made once: {writes:?}"
    );
    assert_eq!(scaled.objects[PEER_KEY]["data"]["peer.key"], key);
    let deployment = calls
        .iter()
        .find(|c| c.method == "PATCH" && c.path.contains("/deployments/"))
        .expect("replicas changed");
    assert_eq!(deployment.body["spec"]["replicas"], 3);
    let before = &created.objects["/apis/apps/v1/namespaces/team-a/deployments/git"];
    assert!(
        reconcile::apply::contains(
            &before["spec"]["template"],
            &deployment.body["spec"]["template"]
        ),
        "scaling must not roll the pods"
    );
    assert_eq!(scaled.objects[PDB]["spec"]["maxUnavailable"], 1);
    assert_eq!(scaled.objects[PEERS_SVC]["spec"]["clusterIP"], "None");
    let np = &scaled.objects["/apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/git"];
    assert_eq!(
        np["spec"]["egress"][0]["to"][0]["podSelector"]["matchLabels"]["mcpwarden.dev/server"],
        "git"
    );

    // Back to 1: both are deleted (they are ours), the key stays.
    let (_, calls, back) = scaled.with_replicas(1).reconcile().await;
    let deletes: Vec<String> = calls
        .iter()
        .filter(|c| c.method == "DELETE")
        .map(Call::short)
        .collect();
    assert_eq!(
        deletes,
        [format!("DELETE {PEERS_SVC}"), format!("DELETE {PDB}")]
    );
    assert!(!back.objects.contains_key(PEERS_SVC) && !back.objects.contains_key(PDB));
    assert_eq!(back.objects[PEER_KEY]["data"]["peer.key"], key);
}

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

const CNP_PATH: &str = "/apis/cilium.io/v2/namespaces/team-a/ciliumnetworkpolicies/git-egress";

/// Named egress: without an engine an approved host opens nothing and
/// `Degraded` says why; with Cilium (discovered) the approval writes a
/// CiliumNetworkPolicy with exactly the host, and revoking deletes it.
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
    let digest = status.capability_digest.unwrap();
    // Approved, no engine: the NetworkPolicy stays closed (no DNS, no port).
    let (_, calls, no_engine) = pending
        .with_annotation("mcpwarden.dev/approve", Some(&digest))
        .reconcile()
        .await;
    assert_eq!(np_writes(&calls), 0);
    assert_eq!(no_engine.objects[NP_PATH]["spec"].get("egress"), None);
    let degraded = condition(&no_engine.server(), "Degraded").clone();
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "NamedEgressNotEnforced")
    );
    assert!(degraded
        .message
        .contains("network.egress.host:registry.npmjs.org:443"));
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
    assert_eq!(np_writes(&calls), 0);
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
