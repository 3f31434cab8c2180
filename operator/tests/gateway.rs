//! The MCPGateway pipeline against the mock API server (the same fake as
//! `reconcile.rs`): a gateway's first reconcile makes its signing key once
//! and applies its objects with owner references; the next ones write
//! nothing new; `prefix: none` that cannot be shown safe waits with a
//! reason; what the gateway's pods withhold reaches its status; and an
//! MCPServer that a gateway selects trusts that gateway's public key (and
//! only a key the gateway itself published).

mod support;

use kube::runtime::controller::Action;
use mcp_warden_crds::MCPGateway;
use mcp_warden_operator::gateway;
use serde_json::{json, Value};
use support::{gateway::*, *};

const SERVERS: &str = "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpservers";
const GATEWAYS: &str = "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways";

fn server(name: &str, labels: Value, ready: bool, tools: &[&str]) -> Value {
    json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "labels": labels},
        "spec": {"image": "i", "command": ["x"], "toolProfileRef": {"name": "git-readonly"}},
        "status": {
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                "reason": if ready { "Available" } else { "Progressing" }, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "tools": tools.iter().map(|t| json!({"name": t, "state": "exposed"})).collect::<Vec<_>>()}})
}

fn gateway_object(backends: Value) -> MCPGateway {
    front(json!({ "backends": backends }))
}

/// `git` and `fs` as backends without prefixes, their shared `status`
/// mapped to `git`: names meet, one collision is resolved.
fn git_and_fs_unprefixed() -> MCPGateway {
    let mut gw = gateway_object(
        json!([{"name": "git", "prefix": "none"}, {"name": "fs", "prefix": "none"}]),
    );
    gw.spec.resolve =
        serde_json::from_value(json!([{"name": "status", "backend": "git"}])).unwrap();
    gw
}

fn with_servers(mut fixture: Fixture, servers: Vec<Value>) -> Fixture {
    fixture.objects.insert(
        FRONT_STATUS.trim_end_matches("/status").into(),
        serde_json::to_value(gateway_object(json!([{"name": "git"}]))).unwrap(),
    );
    fixture.objects.insert(
        SERVERS.into(),
        json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServerList", "metadata": {}, "items": servers}),
    );
    fixture
}

/// Run one gateway reconcile against the fake API.
async fn reconcile(state: Fixture, gw: &MCPGateway) -> (Action, Vec<Call>, Fixture) {
    reconcile_gateway(state, gw).await
}

/// The gateway as the API server has it after a status write.
fn with_written_status(gw: &MCPGateway, after: &Fixture) -> MCPGateway {
    let mut next = gw.clone();
    if let Some(written) = after.objects.get(FRONT_STATUS) {
        next.status = Some(serde_json::from_value(written["status"].clone()).unwrap());
    }
    next
}

fn decoded(body: &Value, key: &str) -> String {
    let bytes: k8s_openapi::ByteString = serde_json::from_value(body["data"][key].clone()).unwrap();
    String::from_utf8(bytes.0).unwrap()
}

#[tokio::test]
async fn a_gateway_gets_its_key_once_its_objects_and_each_backends_status() {
    let fixture = with_servers(
        Fixture::new(),
        vec![
            server("git", json!({}), true, &["git_status", "git_log"]),
            server("fs", json!({"team": "a"}), false, &[]),
            server("time", json!({"team": "b"}), true, &["now"]),
        ],
    );
    let gw = gateway_object(
        json!([{"name": "git", "prefix": "vcs_"}, {"selector": {"matchLabels": {"team": "a"}}}]),
    );
    let (action, calls, after) = reconcile(fixture, &gw).await;
    assert_eq!(
        action,
        Action::requeue(mcp_warden_operator::reconcile::SETTLE_RECHECK)
    );
    let writes = writes_of(&calls);
    assert_eq!(
        writes,
        [
            "POST /api/v1/namespaces/team-a/secrets",
            "POST /api/v1/namespaces/team-a/secrets",
            "POST /api/v1/namespaces/team-a/secrets",
            "PATCH /api/v1/namespaces/team-a/configmaps/front-policy",
            "PATCH /api/v1/namespaces/team-a/configmaps/front-gateway-pub",
            "PATCH /apis/apps/v1/namespaces/team-a/deployments/front",
            "PATCH /api/v1/namespaces/team-a/services/front",
            "PATCH /apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/front",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "PATCH /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways/front/status",
        ]
    );
    for call in calls
        .iter()
        .filter(|c| c.is_write() && !c.path.contains("/events") && !c.path.ends_with("/status"))
    {
        let owners = &call.body["metadata"]["ownerReferences"];
        assert_eq!(owners[0]["kind"], "MCPGateway", "{}", call.path);
        assert_eq!(owners[0]["uid"], "uid-front");
        assert_eq!(owners[0]["controller"], true);
    }
    // The signing key: an Ed25519 PKCS#8 key in its Secret, its public half
    // beside the callers' issuers in the ConfigMap the backends read.
    let key = calls
        .iter()
        .find(|c| c.method == "POST" && c.body["metadata"]["name"] == "front-gateway-key")
        .expect("the key is created");
    assert_eq!(key.body["immutable"], true);
    let private = decoded(&key.body, "key.pem");
    assert!(private.starts_with("-----BEGIN PRIVATE KEY-----"));
    let public = &after.objects["/api/v1/namespaces/team-a/configmaps/front-gateway-pub"]["data"];
    assert_eq!(
        public["public.pem"].as_str().unwrap(),
        gateway::apply::public_half(&private).unwrap()
    );
    assert_eq!(
        public["caller-issuers"],
        "https://kubernetes.default.svc.cluster.local"
    );
    // The pod: the two backends, git with its prefix, fs selected by label.
    let joined = front_args(&after);
    assert!(joined.contains("--backend fs=http://fs.team-a.svc.cluster.local:8080/mcp --backend git=http://git.team-a.svc.cluster.local:8080/mcp --backend-prefix git=vcs_"), "{joined}");
    assert!(
        !joined.contains("--backend time="),
        "an unselected server is no backend: {joined}"
    );
    // Status: each backend, its readiness and tool count; not Ready until
    // the pods are, Degraded while fs is not Ready; never the key.
    let status = front_status(&after);
    assert_eq!(status["backendsReady"], "1/2");
    assert_eq!(
        status["backends"],
        json!([
            {"name": "fs", "prefix": "fs__", "ready": false, "reason": "Progressing"},
            {"name": "git", "prefix": "vcs_", "ready": true, "tools": 2}
        ])
    );
    assert_eq!(
        status["endpoint"],
        "http://front.team-a.svc.cluster.local:8080/mcp"
    );
    let conditions = status["conditions"].as_array().unwrap();
    let reason = |t: &str| conditions.iter().find(|c| c["type"] == t).unwrap()["reason"].clone();
    assert_eq!(reason("Ready"), "Progressing");
    assert_eq!(reason("Degraded"), "BackendsNotReady");
    assert!(!status.to_string().contains("PRIVATE"), "{status}");
    let events: Vec<&Value> = calls
        .iter()
        .filter(|c| c.path.ends_with("/events"))
        .map(|c| &c.body)
        .collect();
    assert_eq!(events[0]["reason"], "Applied");
    assert_eq!(events[1]["reason"], "Progressing");
    assert_eq!(events[1]["type"], "Warning");
    assert_eq!(events[2]["reason"], "BackendsNotReady");

    // The next reconcile: the pods are up (the fake's Deployment reports
    // one available), so only the status and its Ready Event are written;
    // the key is read, never made again.
    let gw2 = with_written_status(&gw, &after);
    let (_, calls, after) = reconcile(after, &gw2).await;
    assert_eq!(
        writes_of(&calls),
        [
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "PATCH /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways/front/status",
        ]
    );
    let ready = calls.iter().find(|c| c.path.ends_with("/events")).unwrap();
    assert_eq!(ready.body["reason"], "Available");
    // And then nothing at all.
    let gw3 = with_written_status(&gw2, &after);
    let (action, calls, _) = reconcile(after, &gw3).await;
    assert!(writes_of(&calls).is_empty(), "{:?}", writes_of(&calls));
    assert_eq!(
        action,
        Action::requeue(mcp_warden_operator::reconcile::RESYNC)
    );
}

#[tokio::test]
async fn prefix_none_without_inventories_waits_and_says_why() {
    let fixture = with_servers(
        Fixture::new(),
        vec![
            server("git", json!({}), true, &["git_status"]),
            server("fs", json!({}), true, &[]),
        ],
    );
    let gw = gateway_object(json!([{"name": "git", "prefix": "none"}, {"name": "fs"}]));
    let (action, calls, after) = reconcile(fixture, &gw).await;
    assert_eq!(action, Action::await_change());
    assert_eq!(
        writes_of(&calls),
        [
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "POST /apis/events.k8s.io/v1/namespaces/team-a/events",
            "PATCH /apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways/front/status",
        ],
        "no key, no pod: nothing is built"
    );
    let ready = &front_status(&after)["conditions"][0];
    assert_eq!(ready["reason"], "PrefixNoneUnproven");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("MCPServer \"fs\" publishes no tool inventory yet"),
        "{ready}"
    );
    // Once fs publishes an inventory that does not meet git's names, it builds.
    let fixture = with_servers(
        after,
        vec![
            server("git", json!({}), true, &["git_status"]),
            server("fs", json!({}), true, &["read"]),
        ],
    );
    let (_, calls, _) = reconcile(fixture, &with_written_status(&gw, &Fixture::new())).await;
    assert!(writes_of(&calls)
        .contains(&"PATCH /apis/apps/v1/namespaces/team-a/deployments/front".to_string()));
}

/// Names the gateway would withhold, from the backends' inventories by the
/// facade's rules: a look-alike pair withheld (Conflicts=True, a Warning
/// Event), a collision `spec.resolve` maps (listed as resolved; it no
/// longer blocks `prefix: none`).
#[tokio::test]
async fn the_names_the_gateway_withholds_are_in_its_status() {
    let fixture = with_servers(
        Fixture::new(),
        vec![
            server("git", json!({}), true, &["status", "Log"]),
            server("fs", json!({}), true, &["status", "log", "read"]),
        ],
    );
    let gw = git_and_fs_unprefixed();
    let (_, calls, after) = reconcile(fixture, &gw).await;
    let status = front_status(&after);
    assert_eq!(
        status["conflicts"],
        json!([
            {"kind": "collision", "catalog": "tool", "names": ["status"], "backends": ["fs", "git"], "resolvedBy": "git"},
            {"kind": "confusable", "catalog": "tool", "names": ["Log", "log"], "backends": ["fs", "git"]}
        ])
    );
    let conditions = status["conditions"].as_array().unwrap();
    let conflicts = conditions
        .iter()
        .find(|c| c["type"] == "Conflicts")
        .unwrap();
    assert_eq!(conflicts["status"], "True");
    assert_eq!(conflicts["reason"], "NamesWithheld");
    assert!(
        conflicts["message"]
            .as_str()
            .unwrap()
            .contains("confusable tool Log/log (fs, git)"),
        "{conflicts}"
    );
    // The mapped collision does not stop the build.
    assert!(writes_of(&calls)
        .contains(&"PATCH /apis/apps/v1/namespaces/team-a/deployments/front".to_string()));
    let warned = calls
        .iter()
        .filter(|c| c.path.ends_with("/events"))
        .any(|c| c.body["reason"] == "NamesWithheld" && c.body["type"] == "Warning");
    assert!(warned, "an Event says which names are withheld");
}

/// A gateway pod as the kubelet reports it.
fn gateway_pod(name: &str, ip: &str, ready: bool) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"mcpwarden.dev/gateway": "front"}},
        "status": {"phase": "Running", "podIP": ip,
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

/// What only the gateway's pods know reaches the status: their `/gateway`
/// view, read with the gateway's own admin token from its Ready pods,
/// adds a shadowing quarantine and a prompt collision to the collision the
/// inventories show (once, not twice), and the condition counts them.
#[tokio::test]
async fn what_the_gateway_pods_withhold_is_in_its_status() {
    let mut fixture = with_servers(
        Fixture::new(),
        vec![
            server("git", json!({}), true, &["status"]),
            server("fs", json!({}), true, &["status", "read"]),
        ],
    );
    fixture.objects.insert(
        "/api/v1/namespaces/team-a/pods".into(),
        json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": [
            gateway_pod("front-1", "10.0.0.7", true),
            gateway_pod("front-2", "10.0.0.8", false),
        ]}),
    );
    let conflict =
        |kind: &str, catalog: &str, name: &str, backends: Value, detail: &str, resolved: Value| {
            json!({"kind": kind, "catalog": catalog, "names": [name], "backends": backends,
               "detail": detail, "resolved": resolved})
        };
    fixture.facades.2.insert(
        "10.0.0.7:9090".into(),
        json!({"backends": [{"name": "fs", "tools": 1, "answering": true},
                            {"name": "git", "tools": 1, "answering": true}],
               "conflicts": [
            conflict("collision", "tool", "status", json!(["fs", "git"]), "",
                json!({"name": "status", "backend": "git"})),
            conflict("collision", "prompt", "summarize", json!(["fs", "git"]), "", Value::Null),
            conflict("shadowing", "tool", "read", json!(["fs"]), "shadowing/names-other-tool", Value::Null),
        ]}),
    );
    // Not Ready: not asked (it may not have listed its backends yet).
    fixture.facades.2.insert(
        "10.0.0.8:9090".into(),
        json!({"backends": [], "conflicts": [
            conflict("collision", "resource_template", "file", json!(["fs", "git"]), "", Value::Null)]}),
    );
    let presented = fixture.facades.1.clone();
    let gw = git_and_fs_unprefixed();
    let (_, calls, after) = reconcile(fixture, &gw).await;
    let status = front_status(&after);
    assert_eq!(
        status["conflicts"],
        json!([
            {"kind": "collision", "catalog": "tool", "names": ["status"], "backends": ["fs", "git"],
             "resolvedBy": "git", "reportedByGateway": true},
            {"kind": "collision", "catalog": "prompt", "names": ["summarize"], "backends": ["fs", "git"],
             "reportedByGateway": true},
            {"kind": "shadowing", "catalog": "tool", "names": ["read"], "backends": ["fs"],
             "detail": "shadowing/names-other-tool", "reportedByGateway": true},
        ])
    );
    let conditions = status["conditions"].as_array().unwrap();
    let conflicts = conditions
        .iter()
        .find(|c| c["type"] == "Conflicts")
        .unwrap();
    assert_eq!(
        (&conflicts["status"], &conflicts["reason"]),
        (&json!("True"), &json!("NamesWithheld"))
    );
    let message = conflicts["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the gateway withholds 2 name(s) (tool 1, prompt 1; collision 1, shadowing 1)"
        ) && message.ends_with("collision prompt summarize (fs, git); shadowing tool read (fs)"),
        "{message}"
    );
    // The token presented is the gateway's own, made in this reconcile, and
    // it is nowhere in status or Events.
    let secret = calls
        .iter()
        .find(|c| c.method == "POST" && c.body["metadata"]["name"] == "front-admin-token")
        .expect("the admin token is made once, with the keys");
    let token = decoded(&secret.body, "token");
    assert!(token.len() >= 64, "{token}");
    assert_eq!(*presented.lock().unwrap(), std::slice::from_ref(&token));
    assert!(!status.to_string().contains(&token));
    let events: Vec<&Value> = calls
        .iter()
        .filter(|c| c.path.ends_with("/events"))
        .map(|c| &c.body)
        .collect();
    assert!(events.iter().all(|e| !e.to_string().contains(&token)));
    let warned = events
        .iter()
        .find(|e| e["reason"] == "NamesWithheld")
        .expect("an Event says which names are withheld");
    assert!(
        warned["note"]
            .as_str()
            .unwrap()
            .contains("shadowing tool read (fs)"),
        "{warned}"
    );
}

/// The backends' side, in the MCPServer reconcile: a gateway that selects
/// the server, with its own published key, becomes an `auth.gateways`
/// entry and the key a file beside the policy.
#[tokio::test]
async fn a_selected_server_trusts_the_gateways_own_key_only() {
    let gateways = |items: Vec<Value>| json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGatewayList", "metadata": {}, "items": items});
    let gw = |name: &str, backends: Value| {
        json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
               "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
               "spec": {"backends": backends}})
    };
    let public = |gw: &str, owner_uid: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": format!("{gw}-gateway-pub"), "namespace": NS,
                   "ownerReferences": [{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
                       "name": gw, "uid": owner_uid, "controller": true}]},
               "data": {"public.pem": format!("-----BEGIN PUBLIC KEY-----\n{gw}\n-----END PUBLIC KEY-----\n"),
                        "caller-issuers": "static\nhttps://kubernetes.default.svc.cluster.local"}})
    };
    let mut fixture = Fixture::new().with_server().with_tool_profile(tools_v1());
    fixture.objects.insert(
        GATEWAYS.into(),
        gateways(vec![
            gw("front", json!([{"name": "git", "prefix": "vcs_"}])),
            gw("other", json!([{"name": "fs"}])),
            gw("forged", json!([{"name": "git"}])),
        ]),
    );
    for (name, owner) in [
        ("front", "uid-front"),
        ("other", "uid-other"),
        ("forged", "uid-someone-else"),
    ] {
        fixture.objects.insert(
            format!("/api/v1/namespaces/team-a/configmaps/{name}-gateway-pub"),
            public(name, owner),
        );
    }
    let (_, _, after) = fixture.reconcile().await;
    let cm = &after.objects["/api/v1/namespaces/team-a/configmaps/git-policy"]["data"];
    let keys: Vec<&String> = cm.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["gateway-front.pem", "policy.yaml"],
        "only the gateway that selects git, with its own key"
    );
    assert!(cm["gateway-front.pem"]
        .as_str()
        .unwrap()
        .contains("\nfront\n"));
    let policy: mcp_warden_crds::FacadePolicy =
        serde_yaml_ng::from_str(cm["policy.yaml"].as_str().unwrap()).unwrap();
    assert_eq!(
        serde_json::to_value(&policy.auth.gateways).unwrap(),
        json!([{"issuer": "mcpwarden.dev/team-a/mcpgateway/front",
                "publicKeyFile": "/etc/mcp-warden/policy/gateway-front.pem",
                "audience": "git",
                "callerIssuers": ["static", "https://kubernetes.default.svc.cluster.local"]}])
    );

    // No gateway selects it: no trust, no key.
    let mut alone = Fixture::new().with_server().with_tool_profile(tools_v1());
    alone.objects.insert(
        GATEWAYS.into(),
        gateways(vec![gw("other", json!([{"name": "fs"}]))]),
    );
    let (_, _, after) = alone.reconcile().await;
    let cm = &after.objects["/api/v1/namespaces/team-a/configmaps/git-policy"]["data"];
    assert_eq!(cm.as_object().unwrap().len(), 1);
    assert!(!cm["policy.yaml"].as_str().unwrap().contains("gateways"));
}
