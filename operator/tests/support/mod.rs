//! The mock API server the reconcile tests run against (tower-test), in the
//! style of kube-rs controller-rs: a [`Fixture`] builds the cluster state
//! (`with_*`), a fake API loop answers GET/PATCH/POST from that state and
//! records every call. Shared by the test binaries that reconcile.
#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use futures::future::BoxFuture;
use http::{Request, Response, StatusCode};
use kube::{
    client::Body,
    runtime::{controller::Action, events::Recorder},
    Client,
};
use mcp_warden_crds::{MCPGateway, MCPServer};
use mcp_warden_operator::{
    config::BuildConfig,
    reconcile::{
        self,
        observe::{AdminSource, FacadeReport},
        Context,
    },
    runtime::metrics::Metrics,
};
use serde_json::{json, Value};

pub mod gateway;

pub const NS: &str = "team-a";
pub const TP_PATH: &str =
    "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/toolprofiles/git-readonly";
pub const SBP_PATH: &str = "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/sandboxprofiles/web";
pub const NP_PATH: &str = "/apis/networking.k8s.io/v1/namespaces/team-a/networkpolicies/git";
pub const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments/git";

/// One recorded API call.
#[derive(Clone, Debug)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub body: Value,
}

impl Call {
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }
    pub fn short(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// The writes among `calls` (`METHOD path`), in order.
pub fn writes_of(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.is_write())
        .map(Call::short)
        .collect()
}

/// Cluster state by object path (no query string).
#[derive(Clone, Default)]
pub struct Fixture {
    pub objects: BTreeMap<String, Value>,
    pub server: Option<MCPServer>,
    pub facades: FakeFacades,
}

/// The facades' `/tools` answers by `ip:9090`, the admin tokens the
/// operator presented, and the gateways' `/gateway` answers by `ip:9090`.
#[derive(Clone, Default)]
pub struct FakeFacades(
    pub BTreeMap<String, FacadeReport>,
    pub Arc<Mutex<Vec<String>>>,
    pub BTreeMap<String, Value>,
);

impl AdminSource for FakeFacades {
    fn get<'a>(
        &'a self,
        addr: &'a str,
        path: &'static str,
        token: &'a str,
    ) -> BoxFuture<'a, Result<bytes::Bytes, String>> {
        self.1.lock().unwrap().push(token.to_string());
        let body = match path {
            "/tools" => self.0.get(addr).map(|r| serde_json::to_vec(r).unwrap()),
            "/gateway" => self.2.get(addr).map(|v| serde_json::to_vec(v).unwrap()),
            _ => None,
        };
        let answer = body
            .map(bytes::Bytes::from)
            .ok_or_else(|| format!("connection refused: {addr}{path}"));
        Box::pin(async move { answer })
    }
}

impl Fixture {
    pub fn new() -> Self {
        Fixture::default()
    }

    /// The server as a remote one: no image, an HTTPS URL, two credential Secrets.
    pub fn with_remote_server(mut self) -> Self {
        self.server = Some(
            serde_json::from_value(json!({
                "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                "metadata": {"name": "git", "namespace": NS, "uid": "uid-git", "generation": 1},
                "spec": {"toolProfileRef": {"name": "git-readonly"}, "remote": {
                    "url": "https://mcp.forge.example.com/mcp",
                    "auth": {"rules": [
                        {"roles": ["admin"], "tokenSecretRef": {"name": "forge-admin", "key": "token"}},
                        {"clientCredentials": {"tokenUrl": "https://idp.example.com/token", "clientId": "warden",
                            "clientSecretRef": {"name": "forge-oauth", "key": "secret"}}}]}}}
            }))
            .unwrap(),
        );
        self
    }

    /// A Secret that exists (the operator reads its metadata only).
    pub fn with_secret(mut self, name: &str) -> Self {
        self.objects.insert(
            format!("/api/v1/namespaces/{NS}/secrets/{name}"),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}")},
                   "data": {"token": "c2VjcmV0"}}),
        );
        self
    }

    pub fn with_server(mut self) -> Self {
        self.server = Some(
            serde_json::from_value(json!({
                "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                "metadata": {"name": "git", "namespace": NS, "uid": "uid-git", "generation": 1},
                "spec": {"image": "img", "command": ["mcp-server-git"], "toolProfileRef": {"name": "git-readonly"}}
            }))
            .unwrap(),
        );
        self
    }

    pub fn with_replicas(mut self, n: i32) -> Self {
        let mut server = self.server();
        server.spec.replicas = n;
        server.metadata.generation = Some(server.metadata.generation.unwrap_or(1) + 1);
        self.server = Some(server);
        self
    }

    /// A SandboxProfile `web` with `egress`, referenced by the server.
    pub fn with_sandbox_egress(mut self, egress: Value) -> Self {
        self.objects.insert(
            SBP_PATH.into(),
            json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
                   "metadata": {"name": "web", "namespace": NS, "uid": "uid-sbp"},
                   "spec": {"network": {"egress": egress}}}),
        );
        let mut server = self.server();
        server.spec.sandbox_profile_ref =
            Some(mcp_warden_crds::mcpserver::ProfileRef { name: "web".into() });
        self.server = Some(server);
        self
    }

    /// Set (or with `None` remove) an annotation, as `kubectl annotate` would.
    pub fn with_annotation(mut self, key: &str, value: Option<&str>) -> Self {
        let mut server = self.server();
        let annotations = server
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        match value {
            Some(v) => annotations.insert(key.into(), v.into()),
            None => annotations.remove(key),
        };
        self.server = Some(server);
        self
    }

    pub fn with_tool_profile(mut self, tools: Value) -> Self {
        self.objects.insert(
            TP_PATH.into(),
            json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
                   "metadata": {"name": "git-readonly", "namespace": NS, "uid": "uid-tp"},
                   "spec": {"tools": tools}}),
        );
        self
    }

    pub fn server(&self) -> MCPServer {
        self.server.clone().expect("with_server()")
    }

    /// Run one reconcile against the fake API; returns the action, the calls
    /// in order, and the state afterwards (the server with its new status).
    pub async fn reconcile(self) -> (Action, Vec<Call>, Fixture) {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = Client::new(service, NS);
        let state = Arc::new(Mutex::new(self.clone()));
        let calls = Arc::new(Mutex::new(Vec::new()));
        let api = tokio::spawn({
            let (state, calls) = (state.clone(), calls.clone());
            async move {
                while let Some((request, send)) = handle.next_request().await {
                    let (status, body) = answer(request, &state, &calls).await;
                    let response = Response::builder()
                        .status(status)
                        .body(Body::from(body))
                        .unwrap();
                    send.send_response(response);
                }
            }
        });
        let ctx = Arc::new(Context {
            client: client.clone(),
            recorder: Recorder::new(client, "mcp-warden-operator".into()),
            metrics: Metrics::default(),
            config: BuildConfig::default(),
            failures: Default::default(),
            admin: Arc::new(self.facades.clone()),
            jwks: Default::default(),
            engine: mcp_warden_operator::reconcile::observe::EngineCache::new(true),
            issuer_keys: Default::default(),
            cluster_ranges: Default::default(),
            references: Default::default(),
        });
        // On the heap, as the controller holds it: a reconcile's future is
        // larger than a test thread's stack in a debug build.
        let action = Box::pin(reconcile::reconcile(Arc::new(self.server()), ctx))
            .await
            .expect("reconcile succeeds");
        api.abort();
        let calls = calls.lock().unwrap().clone();
        for call in &calls {
            assert!(
                mcp_warden_operator::rbac::allows(&call.method, &call.path),
                "{} is not in rbac::API_CALLS (and operator/RBAC.md)",
                call.short()
            );
        }
        let after = state.lock().unwrap().clone();
        (action, calls, after)
    }
}

/// The fake API server: GET from state (404 when absent), PATCH stores the
/// applied object with the fields a real API server adds, POST records.
pub async fn answer(
    request: Request<Body>,
    state: &Mutex<Fixture>,
    calls: &Mutex<Vec<Call>>,
) -> (StatusCode, Vec<u8>) {
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let metadata_only_wanted = request
        .headers()
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("PartialObjectMetadata"));
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    calls.lock().unwrap().push(Call {
        method: method.clone(),
        path: path.clone(),
        body: body.clone(),
    });
    let mut state = state.lock().unwrap();
    let server_path = format!("/apis/mcpwarden.dev/v1alpha1/namespaces/{NS}/mcpservers/git");
    match method.as_str() {
        "GET" if path.ends_with("/pods") && !state.objects.contains_key(&path) => (
            StatusCode::OK,
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
            )
            .unwrap(),
        ),
        // No gateway in the namespace unless a test put one there.
        "GET" if path.ends_with("/mcpgateways") && !state.objects.contains_key(&path) => (
            StatusCode::OK,
            serde_json::to_vec(&json!({"apiVersion": "mcpwarden.dev/v1alpha1",
                "kind": "MCPGatewayList", "metadata": {}, "items": []}))
            .unwrap(),
        ),
        // The namespace's servers (the egress proxy's clients): the fixture's,
        // unless a test put a list there (the gateway's backends).
        "GET" if path.ends_with("/mcpservers") && !state.objects.contains_key(&path) => (
            StatusCode::OK,
            serde_json::to_vec(&json!({"apiVersion": "mcpwarden.dev/v1alpha1",
                "kind": "MCPServerList", "metadata": {}, "items": state.server.iter().collect::<Vec<_>>()}))
            .unwrap(),
        ),
        // A list of Secrets: every stored one under the path.
        "GET" if path.ends_with("/secrets") => {
            let prefix = format!("{path}/");
            let items: Vec<&Value> = state
                .objects
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix) && !k[prefix.len()..].contains('/'))
                .map(|(_, v)| v)
                .collect();
            (
                StatusCode::OK,
                serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "SecretList",
                    "metadata": {}, "items": items}))
                .unwrap(),
            )
        }
        "GET" => match state.objects.get(&path) {
            Some(obj) if metadata_only_wanted => (StatusCode::OK, metadata_only(obj)),
            Some(obj) => (StatusCode::OK, serde_json::to_vec(obj).unwrap()),
            None => (StatusCode::NOT_FOUND, not_found(&path)),
        },
        "PATCH" if path == format!("{server_path}/status") => {
            let mut server = state.server.clone().unwrap();
            server.status = Some(serde_json::from_value(body["status"].clone()).unwrap());
            state.server = Some(server.clone());
            (StatusCode::OK, serde_json::to_vec(&server).unwrap())
        }
        // Another kind's status (a gateway's): merged into the object, as
        // the API server answers with the whole object.
        "PATCH"
            if path.ends_with("/status")
                && state.objects.contains_key(path.trim_end_matches("/status")) =>
        {
            let parent = path.trim_end_matches("/status").to_string();
            let mut obj = state.objects[&parent].clone();
            obj["status"] = body["status"].clone();
            state.objects.insert(parent, obj.clone());
            state.objects.insert(path, body);
            (StatusCode::OK, serde_json::to_vec(&obj).unwrap())
        }
        "PATCH" => {
            let stored = with_server_defaults(body);
            state.objects.insert(path, stored.clone());
            (StatusCode::OK, serde_json::to_vec(&stored).unwrap())
        }
        "POST" if path.contains("/events") => {
            (StatusCode::CREATED, serde_json::to_vec(&body).unwrap())
        }
        "POST" => {
            let name = body["metadata"]["name"].as_str().unwrap_or_default();
            let stored = with_server_defaults(body.clone());
            state
                .objects
                .insert(format!("{path}/{name}"), stored.clone());
            (StatusCode::CREATED, serde_json::to_vec(&stored).unwrap())
        }
        "DELETE" => match state.objects.remove(&path) {
            Some(obj) => (StatusCode::OK, serde_json::to_vec(&obj).unwrap()),
            None => (StatusCode::NOT_FOUND, not_found(&path)),
        },
        _ => (StatusCode::METHOD_NOT_ALLOWED, not_found(&path)),
    }
}

/// What the API server adds on write: uid, resourceVersion, timestamps and
/// defaults. None of it may count as drift.
pub fn with_server_defaults(mut obj: Value) -> Value {
    obj["metadata"]["uid"] = json!("uid-child");
    obj["metadata"]["resourceVersion"] = json!("42");
    obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    match obj["kind"].as_str() {
        Some("Service") if obj["spec"]["clusterIP"].is_null() => {
            obj["spec"]["clusterIP"] = json!("10.96.0.12")
        }
        Some("Deployment") => {
            obj["spec"]["progressDeadlineSeconds"] = json!(600);
            obj["spec"]["template"]["spec"]["dnsPolicy"] = json!("ClusterFirst");
            // Only where the object has none: the API server defaults, never overrides.
            if obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"].is_null() {
                obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] =
                    json!("IfNotPresent");
            }
            obj["status"] = json!({"availableReplicas": 1, "replicas": 1});
        }
        Some("NetworkPolicy") if obj["spec"]["egress"] == json!([]) => {
            // Go drops the empty egress list.
            obj["spec"].as_object_mut().unwrap().remove("egress");
        }
        _ => {}
    }
    obj
}

pub fn metadata_only(obj: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]}))
        .unwrap()
}

pub fn not_found(path: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{path} not found"), "reason": "NotFound", "code": 404}),
    )
    .unwrap()
}

pub fn condition<'a>(
    server: &'a MCPServer,
    type_: &str,
) -> &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    let status = server.status.as_ref().expect("status written");
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"))
}

pub fn tools_v1() -> Value {
    json!([{"name": "git_log", "alias": "log"}])
}

/// The `*.yaml` files of a folder of the repository, sorted.
pub fn yaml_files(dir: &str) -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir);
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// Run one MCPGateway reconcile against the fake API; returns the action,
/// the calls in order (each one the chart's RBAC allows), and the state after.
pub async fn reconcile_gateway(state: Fixture, gw: &MCPGateway) -> (Action, Vec<Call>, Fixture) {
    let facades = state.facades.clone();
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, NS);
    let shared = Arc::new(Mutex::new(state));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let api = tokio::spawn({
        let (state, calls) = (shared.clone(), calls.clone());
        async move {
            while let Some((request, send)) = handle.next_request().await {
                let (status, body) = answer(request, &state, &calls).await;
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(body))
                        .unwrap(),
                );
            }
        }
    });
    let mut ctx = Context::new(
        client.clone(),
        Recorder::new(client, "mcp-warden-operator".into()),
        Metrics::default(),
        BuildConfig::default(),
    );
    ctx.admin = Arc::new(facades);
    let ctx = Arc::new(ctx);
    let action = Box::pin(mcp_warden_operator::gateway::reconcile(
        Arc::new(gw.clone()),
        ctx,
    ))
    .await
    .expect("reconcile succeeds");
    api.abort();
    let calls = calls.lock().unwrap().clone();
    for call in &calls {
        assert!(
            mcp_warden_operator::rbac::allows(&call.method, &call.path),
            "{} is not in rbac::API_CALLS (and operator/RBAC.md)",
            call.short()
        );
    }
    let after = shared.lock().unwrap().clone();
    (action, calls, after)
}
