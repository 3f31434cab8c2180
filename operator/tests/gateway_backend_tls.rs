//! A gateway in front of backends served with `expose.tls`, against the
//! mock API server: the CA in a backend's TLS Secret (`ca.crt`) is copied
//! into `<gw>-backend-ca` and given to that backend alone
//! (`--backend-ca`); a backend whose CA is not found leaves the gateway
//! `Degraded`, `BackendCANotFound`, and is looked at again in a minute.

mod support;

use k8s_openapi::ByteString;
use kube::runtime::controller::Action;
use serde_json::{json, Value};
use support::{gateway::*, *};

const GW_PATH: &str = "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways/front";
const CA_CM: &str = "/api/v1/namespaces/team-a/configmaps/front-backend-ca";

fn server(name: &str, tls: Option<&str>) -> Value {
    let mut spec = json!({"image": "i", "command": ["x"], "toolProfileRef": {"name": "p"}});
    if let Some(secret) = tls {
        spec["expose"] = json!({"tls": {"secretName": secret}});
    }
    json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
        "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
        "spec": spec,
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Available",
            "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
}

fn tls_secret(name: &str, ca: Option<&str>) -> Value {
    let b64 = |s: &str| serde_json::to_value(ByteString(s.as_bytes().to_vec())).unwrap();
    let mut data = json!({"tls.crt": b64("cert"), "tls.key": b64("KEY")});
    if let Some(ca) = ca {
        data["ca.crt"] = b64(ca);
    }
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": NS}, "data": data})
}

#[tokio::test]
async fn a_tls_backend_is_trusted_by_its_own_ca_and_one_without_is_reported() {
    let ca = mcp_warden_operator::webhook::certs::generate(vec!["git.team-a.svc".into()])
        .unwrap()
        .cert_pem;
    let gw = front(json!({"backends": [{"name": "git"}, {"name": "fs"}, {"name": "time"}]}));
    let mut fixture = Fixture::new();
    let objects = &mut fixture.objects;
    objects.insert(GW_PATH.into(), serde_json::to_value(&gw).unwrap());
    objects.insert(
        "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpservers".into(),
        json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServerList", "metadata": {},
               "items": [server("git", Some("git-tls")), server("fs", Some("fs-tls")), server("time", None)]}),
    );
    objects.insert(
        "/api/v1/namespaces/team-a/secrets/git-tls".into(),
        tls_secret("git-tls", Some(&ca)),
    );
    // fs's Secret has no CA (e.g. an ACME certificate).
    objects.insert(
        "/api/v1/namespaces/team-a/secrets/fs-tls".into(),
        tls_secret("fs-tls", None),
    );
    let (action, calls, after) = reconcile_gateway(fixture, &gw).await;
    assert!(
        writes_of(&calls).contains(&format!("PATCH {CA_CM}")),
        "{:?}",
        writes_of(&calls)
    );
    // The CA alone is copied, never the Secret's key.
    let copied = &after.objects[CA_CM];
    assert_eq!(copied["data"], json!({"git.crt": ca}));
    assert!(!copied.to_string().contains("KEY"));
    let joined = front_args(&after);
    assert!(
        joined.contains(
            "--backend git=https://git.team-a.svc.cluster.local:8080/mcp --backend-ca git=/etc/mcp-warden/backend-ca/git.crt"
        ),
        "{joined}"
    );
    assert_eq!(
        joined.split(' ').filter(|a| *a == "--backend-ca").count(),
        1,
        "fs (no CA found) and time (no TLS) get none: {joined}"
    );
    let volume = front_volume(&after, "backend-ca");
    assert_eq!(volume["configMap"]["name"], "front-backend-ca");
    // fs is said: Degraded with its Secret named, a Warning Event, and
    // (once the pods are up) a look again in a minute: the Secret is not
    // watched.
    let status = front_status(&after);
    let (reason, message) = degraded(status);
    assert_eq!(reason, "BackendCANotFound");
    assert!(
        message.contains("fs: its TLS Secret fs-tls has no ca.crt") && !message.contains("git:"),
        "{message}"
    );
    assert!(calls.iter().any(|c| c.path.ends_with("/events")
        && c.body["reason"] == "BackendCANotFound"
        && c.body["type"] == "Warning"));
    assert_eq!(
        action,
        Action::requeue(mcp_warden_operator::reconcile::SETTLE_RECHECK),
        "the pods first"
    );
    let mut again = gw.clone();
    again.status = Some(serde_json::from_value(status.clone()).unwrap());
    let (action, _, _) = reconcile_gateway(after, &again).await;
    assert_eq!(
        action,
        Action::requeue(mcp_warden_operator::reconcile::SECRET_RECHECK)
    );
}
