//! Operator scale benchmark (ignored: run by `make bench`, never by `make test`):
//! build, then reconcile against an in-process mock API server, N MCPServers
//! (default 1,000, env `SCALE_SERVERS`) spread over 10 namespaces.
//!
//!   cargo test --release -p mcp-warden-operator --test scale -- --ignored --nocapture
//!
//! Measures: the pure build (`plan::plan`: validate, compile the policy, build
//! every object) per server; a first reconcile of each server (creates every
//! object) and a steady-state reconcile (reads only), per reconcile and in
//! total, with the API calls each makes; and the process RSS with the N
//! MCPServers in a reflector store (what the controller caches). Prints one
//! line `SCALE_JSON {...}`.
//!
//! The mock API answers in-process (no network, no etcd), so a reconcile's time
//! here is the operator's own CPU work plus JSON round trips; the process RSS
//! also holds the mock API's copy of every object, so it is an upper bound.

mod common;

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use http::{Request, Response, StatusCode};
use kube::{
    client::Body,
    runtime::{events::Recorder, reflector::store::Writer, watcher},
    Client,
};
use mcp_warden_crds::{MCPServer, ToolProfile};
use mcp_warden_operator::{
    config::BuildConfig,
    plan,
    reconcile::{self, Context},
    runtime::metrics::Metrics,
};
use serde_json::{json, Value};

const NAMESPACES: usize = 10;

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn server_json(i: usize) -> Value {
    let ns = format!("team-{}", i % NAMESPACES);
    json!({
        "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
        "metadata": {"name": format!("srv-{i}"), "namespace": ns, "uid": format!("uid-{i}"), "generation": 1},
        "spec": {"image": "ghcr.io/example/mcp-server-git:1.0", "command": ["mcp-server-git"],
                 "args": ["--repository", "/workspace"], "toolProfileRef": {"name": "git-readonly"}}
    })
}

fn tool_profile(ns: &str) -> Value {
    json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
    "metadata": {"name": "git-readonly", "namespace": ns, "uid": format!("uid-tp-{ns}")},
    "spec": {"tools": [
        {"name": "git_log", "alias": "log"},
        {"name": "git_status"},
        {"name": "git_diff", "arguments": [{"name": "path", "kind": "path", "allow": ["**"], "deny": ["**/.git/**"]}]},
        {"name": "git_show"}
    ]}})
}

/// The mock API: objects by path; GET/PATCH/POST/DELETE like the reconcile
/// tests' fake, for any namespace and name.
#[derive(Default)]
struct Api {
    objects: HashMap<String, Value>,
}

fn with_server_defaults(mut obj: Value) -> Value {
    obj["metadata"]["uid"] = json!("uid-child");
    obj["metadata"]["resourceVersion"] = json!("42");
    obj["metadata"]["creationTimestamp"] = json!("2026-01-01T00:00:00Z");
    match obj["kind"].as_str() {
        Some("Service") => obj["spec"]["clusterIP"] = json!("10.96.0.12"),
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
        Some("NetworkPolicy") => {
            if let Some(spec) = obj["spec"].as_object_mut() {
                spec.remove("egress");
            }
        }
        _ => {}
    }
    obj
}

fn not_found(path: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": format!("{path} not found"), "reason": "NotFound", "code": 404}))
    .unwrap()
}

async fn answer(
    request: Request<Body>,
    api: &Mutex<Api>,
    calls: &Mutex<(u64, u64)>,
) -> (StatusCode, Vec<u8>) {
    let method = request.method().to_string();
    let path = request.uri().path().to_string();
    let metadata_only = request
        .headers()
        .get("accept")
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("PartialObjectMetadata"));
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    {
        let mut c = calls.lock().unwrap();
        c.0 += 1;
        if method != "GET" {
            c.1 += 1;
        }
    }
    let mut api = api.lock().unwrap();
    match method.as_str() {
        "GET" => match api.objects.get(&path) {
            Some(obj) if metadata_only => (
                StatusCode::OK,
                serde_json::to_vec(&json!({"apiVersion": "meta.k8s.io/v1",
                    "kind": "PartialObjectMetadata", "metadata": obj["metadata"]}))
                .unwrap(),
            ),
            Some(obj) => (StatusCode::OK, serde_json::to_vec(obj).unwrap()),
            // Not an object: a collection (the operator lists pods, secrets,
            // servers). Every object directly under it; selectors are not
            // applied (the bench makes no pods, so what it lists is empty
            // or the namespace's own objects).
            None if !is_collection(&path) => (StatusCode::NOT_FOUND, not_found(&path)),
            None => {
                let prefix = format!("{path}/");
                let items: Vec<&Value> = api
                    .objects
                    .iter()
                    .filter(|(p, _)| {
                        p.strip_prefix(&prefix)
                            .is_some_and(|rest| !rest.contains('/'))
                    })
                    .map(|(_, o)| o)
                    .collect();
                (
                    StatusCode::OK,
                    serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "List",
                        "metadata": {"resourceVersion": "1"}, "items": items}))
                    .unwrap(),
                )
            }
        },
        "PATCH" if path.ends_with("/status") => {
            let server_path = path.trim_end_matches("/status").to_string();
            let server = api.objects.get_mut(&server_path).expect("server exists");
            server["status"] = body["status"].clone();
            (StatusCode::OK, serde_json::to_vec(server).unwrap())
        }
        "PATCH" => {
            let stored = with_server_defaults(body);
            let out = serde_json::to_vec(&stored).unwrap();
            api.objects.insert(path, stored);
            (StatusCode::OK, out)
        }
        "POST" if path.contains("/events") => (StatusCode::CREATED, bytes.to_vec()),
        "POST" => {
            let name = body["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let stored = with_server_defaults(body);
            let out = serde_json::to_vec(&stored).unwrap();
            api.objects.insert(format!("{path}/{name}"), stored);
            (StatusCode::CREATED, out)
        }
        "DELETE" => match api.objects.remove(&path) {
            Some(obj) => (StatusCode::OK, serde_json::to_vec(&obj).unwrap()),
            None => (StatusCode::NOT_FOUND, not_found(&path)),
        },
        _ => (StatusCode::METHOD_NOT_ALLOWED, not_found(&path)),
    }
}

/// Whether an API path names a collection (`…/namespaces/ns/pods`,
/// `…/nodes`) rather than an object: after the group and version, a
/// collection has an odd number of segments.
fn is_collection(path: &str) -> bool {
    let rest = path
        .strip_prefix("/api/v1/")
        .or_else(|| {
            path.strip_prefix("/apis/")
                .and_then(|p| p.splitn(3, '/').nth(2))
        })
        .unwrap_or_default();
    rest.split('/').filter(|s| !s.is_empty()).count() % 2 == 1
}

fn server_path(v: &Value) -> String {
    format!(
        "/apis/mcpwarden.dev/v1alpha1/namespaces/{}/mcpservers/{}",
        v["metadata"]["namespace"].as_str().unwrap(),
        v["metadata"]["name"].as_str().unwrap()
    )
}

fn summary(mut d: Vec<Duration>) -> Value {
    d.sort_unstable();
    let us = |x: Duration| (x.as_secs_f64() * 1e6 * 10.0).round() / 10.0;
    let p = |q: f64| us(d[((q * d.len() as f64).ceil() as usize).clamp(1, d.len()) - 1]);
    let total: Duration = d.iter().sum();
    json!({"n": d.len(), "total_ms": (total.as_secs_f64() * 1e4).round() / 10.0,
           "mean_us": us(total / d.len() as u32), "p50_us": p(0.5), "p99_us": p(0.99), "max_us": p(1.0)})
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "benchmark: run by `make bench`"]
async fn reconcile_many_servers() {
    let n: usize = std::env::var("SCALE_SERVERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let rss_start = rss_kib();
    let server_values: Vec<Value> = (0..n).map(server_json).collect();
    let servers: Vec<MCPServer> = server_values
        .iter()
        .map(|v| serde_json::from_value(v.clone()).unwrap())
        .collect();
    let profiles: HashMap<String, ToolProfile> = (0..NAMESPACES)
        .map(|i| {
            let ns = format!("team-{i}");
            (
                ns.clone(),
                serde_json::from_value(tool_profile(&ns)).unwrap(),
            )
        })
        .collect();

    // 1. The pure build: validate, compile, build every object.
    let config = BuildConfig::default();
    let mut build = Vec::with_capacity(n);
    let mut objects = 0usize;
    for s in &servers {
        let ns = s.metadata.namespace.as_deref().unwrap();
        let t0 = Instant::now();
        let p =
            plan::plan(&common::inputs(s, Some(&profiles[ns].spec), None), &config).expect("plan");
        build.push(t0.elapsed());
        objects += p.objects.to_values().len();
        std::hint::black_box(p);
    }

    // 2. The cache: N MCPServers in a reflector store, as the controller keeps them.
    let rss_before_store = rss_kib();
    let mut writer: Writer<MCPServer> = Writer::default();
    writer.apply_watcher_event(&watcher::Event::Init);
    for s in &servers {
        writer.apply_watcher_event(&watcher::Event::InitApply(s.clone()));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let store = writer.as_reader();
    assert_eq!(store.state().len(), n);
    let rss_with_store = rss_kib();

    // 3. Reconcile every server against the mock API: create, then steady state.
    let api = Arc::new(Mutex::new(Api::default()));
    {
        let mut a = api.lock().unwrap();
        for (ns, p) in &profiles {
            a.objects.insert(
                format!("/apis/mcpwarden.dev/v1alpha1/namespaces/{ns}/toolprofiles/git-readonly"),
                serde_json::to_value(p).unwrap(),
            );
        }
        for v in &server_values {
            a.objects.insert(server_path(v), v.clone());
        }
    }
    let calls = Arc::new(Mutex::new((0u64, 0u64)));
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let mock = tokio::spawn({
        let (api, calls) = (api.clone(), calls.clone());
        async move {
            while let Some((request, send)) = handle.next_request().await {
                let (status, body) = answer(request, &api, &calls).await;
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(body))
                        .unwrap(),
                );
            }
        }
    });
    let ctx = Arc::new(Context::new(
        client.clone(),
        Recorder::new(client, "mcp-warden-operator".into()),
        Metrics::default(),
        BuildConfig::default(),
    ));
    let mut passes = serde_json::Map::new();
    for pass in ["create", "settle", "steady"] {
        let mut times = Vec::with_capacity(n);
        let before = *calls.lock().unwrap();
        let t_pass = Instant::now();
        for v in &server_values {
            let current: MCPServer =
                serde_json::from_value(api.lock().unwrap().objects[&server_path(v)].clone())
                    .unwrap();
            let t0 = Instant::now();
            reconcile::reconcile(Arc::new(current), ctx.clone())
                .await
                .expect("reconcile");
            times.push(t0.elapsed());
        }
        let wall = t_pass.elapsed();
        let after = *calls.lock().unwrap();
        let mut s = summary(times);
        s["wall_ms"] = json!((wall.as_secs_f64() * 1e4).round() / 10.0);
        s["api_calls_per_reconcile"] = json!((after.0 - before.0) as f64 / n as f64);
        s["writes_per_reconcile"] = json!((after.1 - before.1) as f64 / n as f64);
        passes.insert(pass.into(), s);
    }
    mock.abort();
    let rss_end = rss_kib();
    let mib = |k: u64| (k as f64 / 1024.0 * 10.0).round() / 10.0;
    let out = json!({
        "servers": n,
        "namespaces": NAMESPACES,
        "objects_per_server": objects as f64 / n as f64,
        "build": summary(build),
        "reconcile": passes,
        "rss_mib": {
            "start": mib(rss_start),
            "store_of_servers_delta": mib(rss_with_store.saturating_sub(rss_before_store)),
            "with_store": mib(rss_with_store),
            "end_with_mock_api_state": mib(rss_end),
        },
    });
    println!("SCALE_JSON {out}");
    assert_eq!(
        passes["steady"]["writes_per_reconcile"],
        json!(0.0),
        "steady state writes nothing"
    );
}
