//! A JWT issuer in a gateway's ToolProfile that names no JWKS ConfigMap:
//! the operator reads its keys from the issuer (OIDC discovery over real
//! HTTPS, the issuer on loopback) as it does for an MCPServer's profile,
//! publishes them into `<gateway>-issuers` for the pod's mount, and says
//! `Degraded` / `IssuerKeysUnavailable` (the MCPServer's reason too) for an
//! issuer it cannot read. The reconciles run against the mock API server.

mod issuer;
mod support;

use mcp_warden_operator::webhook::certs;
use serde_json::{json, Value};
use support::{gateway::*, *};

const GW_PATH: &str = "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways/front";
const ISSUERS_CM: &str = "/api/v1/namespaces/team-a/configmaps/front-issuers";
/// Nothing listens there: its keys cannot be read.
const GONE: &str = "https://localhost:1";

fn profile(name: &str, issuers: &[&str], extra: Value) -> Value {
    let mut spec = json!({"auth": {"jwt": issuers.iter()
        .map(|i| json!({"issuer": i, "audiences": ["mcp"]})).collect::<Vec<_>>()}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
           "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
           "spec": spec})
}

#[tokio::test]
async fn a_gateways_issuer_keys_are_read_from_the_issuer_like_a_servers() {
    let scratch = tempfile::tempdir().unwrap();
    let pair = certs::generate(vec!["localhost".into()]).unwrap();
    let tls = issuer::trust_only(&pair, scratch.path());
    let keys = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "k1"}]});
    let port = issuer::serve_issuer(tls, &keys, None).await;
    let live = format!("https://localhost:{port}");

    // The gateway: its profile names two issuers and no JWKS ConfigMap.
    let gw =
        front(json!({"backends": [{"name": "git"}], "toolProfileRef": {"name": "front-profile"}}));
    let mut fixture = Fixture::new();
    fixture
        .objects
        .insert(GW_PATH.into(), serde_json::to_value(&gw).unwrap());
    fixture.objects.insert(
        "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpservers".into(),
        json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServerList", "metadata": {},
               "items": [{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                   "metadata": {"name": "git", "namespace": NS, "uid": "uid-git"},
                   "spec": {"image": "i", "command": ["x"], "toolProfileRef": {"name": "p"}},
                   "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                       "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}]}),
    );
    fixture.objects.insert(
        "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/toolprofiles/front-profile".into(),
        profile(
            "front-profile",
            &[&live, GONE],
            json!({"defaultAction": "allow"}),
        ),
    );
    let (_, calls, after) = reconcile_gateway(fixture, &gw).await;
    assert!(
        writes_of(&calls).contains(&format!("PATCH {ISSUERS_CM}")),
        "{:?}",
        writes_of(&calls)
    );
    let published = &after.objects[ISSUERS_CM];
    assert_eq!(
        published["metadata"]["ownerReferences"][0]["uid"],
        "uid-front"
    );
    let data = published["data"].as_object().unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["0.json"],
        "only the issuer that answered"
    );
    let got: Value = serde_json::from_str(data["0.json"].as_str().unwrap()).unwrap();
    assert_eq!(got, keys);
    // The pod reads them where the policy says.
    let volume = front_volume(&after, "issuer-0");
    assert_eq!(volume["configMap"]["name"], "front-issuers");
    // The issuer that did not answer: Degraded, with a Warning Event.
    let (reason, message) = degraded(front_status(&after));
    assert_eq!(reason, "IssuerKeysUnavailable");
    assert!(
        message.contains(GONE) && !message.contains(&live),
        "{message}"
    );
    let event = calls
        .iter()
        .find(|c| c.path.ends_with("/events") && c.body["reason"] == "IssuerKeysUnavailable")
        .expect("an Event");
    assert_eq!(event.body["type"], "Warning");

    // An MCPServer whose profile names the same unreachable issuer says it
    // with the same reason.
    let mut fixture = Fixture::new().with_server();
    fixture.objects.insert(
        TP_PATH.into(),
        profile(
            "git-readonly",
            &[GONE],
            json!({"tools": [{"name": "git_status"}]}),
        ),
    );
    let (_, _, after) = fixture.reconcile().await;
    let status = serde_json::to_value(after.server().status.unwrap()).unwrap();
    let (reason, message) = degraded(&status);
    assert_eq!(reason, "IssuerKeysUnavailable");
    assert!(message.contains(GONE), "{message}");
}
