//! Reconcile against a mock API server (tower-test), in the style of kube-rs
//! controller-rs: a [`Fixture`] builds the cluster state (`with_*`), a fake
//! API loop answers GET/PATCH/POST from that state and records every call,
//! and each scenario asserts the calls in order.
//!
//! Scenarios: create → every object applied with an owner reference; steady
//! state → zero writes; profile change → only the ConfigMap is rewritten (no
//! pod restart) and the server is found by the profile watch's mapper;
//! missing profile → `PolicyCompiled=False`/`ToolProfileNotFound` + a Warning
//! Event, then waiting without retries. The approval's side (egress, named
//! egress, tool reports, remote servers) is in `reconcile_approval.rs`.

mod support;

use kube::runtime::controller::Action;
use mcp_warden_operator::reconcile::{self, controller, RESYNC};
use serde_json::json;
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
        // the replicas' addresses (for <name>-peers) and what their facades report
        "GET /api/v1/namespaces/team-a/pods".into(),
        // the gateways of the namespace: does one select this server? (none here)
        "GET /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways".into(),
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
        "GET /api/v1/namespaces/team-a/configmaps/git-peers".into(),
        "GET /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/git".into(),
        "GET /api/v1/namespaces/team-a/secrets/git-peer-key".into(),
        "GET /api/v1/namespaces/team-a/secrets/git-admin-token".into(),
        // an HTTPRoute is read even when not asked for, to remove a stale one of ours
        "GET /apis/gateway.networking.k8s.io/v1/namespaces/team-a/httproutes/git".into(),
        "PATCH /api/v1/namespaces/team-a/serviceaccounts/git".into(),
        "PATCH /api/v1/namespaces/team-a/configmaps/git-policy".into(),
        "PATCH /api/v1/namespaces/team-a/configmaps/git-peers".into(),
        "POST /api/v1/namespaces/team-a/secrets".into(),
        "POST /api/v1/namespaces/team-a/secrets".into(),
        "PATCH /apis/apps/v1/namespaces/team-a/deployments/git".into(),
        "PATCH /api/v1/namespaces/team-a/services/git".into(),
        "GET /api/v1/namespaces/team-a/services/git-peers".into(),
        "PATCH /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/git".into(),
        "GET /apis/policy/v1/namespaces/team-a/poddisruptionbudgets/git".into(),
        "GET /apis/networking.k8s.io/v1/namespaces/team-a/ingresses/git".into(),
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
    let event = &calls[28].body;
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
            "GET /api/v1/namespaces/team-a/pods".into(),
            "GET /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways".into(),
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
    let event = &calls[9].body;
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
