//! Observe (reads only, after apply): what the running facades report, and
//! the cluster's service-account issuer keys.
//!
//! ```text
//! pods (label mcpwarden.dev/server=<name>, as resolve listed them; Running and Ready, with an IP)
//!   └─ AdminSource::get("<podIP>:9090", "/tools", token) ─▶ merge (worst state wins) ─▶ status.tools
//!                                                         (and the upstream's identity ─▶ status.server)
//!      (`/tools` shows hidden tools: the facade wants the server's admin token)
//! API server GET /.well-known/openid-configuration (issuer) + /openid/v1/jwks
//!   └─ JwksCache (5 min; a failure keeps the last good copy) ─▶ ConfigMap <name>-jwks + policy issuer
//! API server GET /apis/cilium.io/v2, /apis/projectcalico.org/v3 (discovery)
//!   └─ EngineCache (10 s; a failure keeps the last answer) ─▶ which policy allows egress by host name
//!                                                              (Cilium, Calico, else the egress proxy)
//! ```
//! The HTTP fetch sits behind [`AdminSource`] so reconcile tests can mock
//! it; the gateway reconcile reads its pods' `GET /gateway` with it too
//! (`crate::gateway::observe`).

use std::{
    collections::BTreeMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use mcp_warden_crds::mcpserver::{ObservedServer, ObservedTool};
use serde::{Deserialize, Serialize};
use tracing::{debug, warn};

use crate::{config::NamedEgress, names::ADMIN_PORT};

/// What one facade's `/tools` reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FacadeReport {
    /// Every upstream tool.
    pub tools: Vec<ObservedTool>,
    /// The upstream server's identity (`null` until the facade's probe
    /// has an answer).
    #[serde(default)]
    pub server: Option<ObservedServer>,
    /// `sha256:<hex>` of the policy file the facade runs (a facade too old
    /// to say: `None`).
    #[serde(default)]
    pub policy: Option<String>,
    /// Whether the facade has read a whole tool list yet (`None`: a facade
    /// too old to say).
    #[serde(default)]
    pub listed: Option<bool>,
}

/// Reads one admin-port document of a pod (a facade's `/tools`, a
/// gateway's `/gateway`): one HTTP client for both, mocked in reconcile tests.
pub trait AdminSource: Send + Sync {
    /// `GET http://{addr}{path}` with `Authorization: Bearer {token}`: the
    /// body of a 2xx answer (at most 4 MiB).
    fn get<'a>(
        &'a self,
        addr: &'a str,
        path: &'static str,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Bytes, String>>;
}

/// The real source: HTTP/1.1 to the pod's admin port, 3 s timeout.
pub struct HttpAdmin;

impl AdminSource for HttpAdmin {
    fn get<'a>(
        &'a self,
        addr: &'a str,
        path: &'static str,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Bytes, String>> {
        Box::pin(async move {
            let work = async {
                let tcp = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| e.to_string())?;
                let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                    .await
                    .map_err(|e| e.to_string())?;
                tokio::spawn(conn);
                let request = hyper::Request::get(path)
                    .header("host", addr)
                    .header("authorization", format!("Bearer {token}"))
                    .body(Empty::<Bytes>::new())
                    .map_err(|e| e.to_string())?;
                let response = sender
                    .send_request(request)
                    .await
                    .map_err(|e| e.to_string())?;
                if !response.status().is_success() {
                    return Err(format!("HTTP {}", response.status()));
                }
                Ok(http_body_util::Limited::new(response.into_body(), 4 << 20)
                    .collect()
                    .await
                    .map_err(|e| e.to_string())?
                    .to_bytes())
            };
            tokio::time::timeout(Duration::from_secs(3), work)
                .await
                .map_err(|_| "timed out".to_string())?
        })
    }
}

/// The admin addresses (`<podIP>:9090`, sorted) of the pods that are
/// Running and Ready: a facade still probing its server may report the
/// server's identity before its tool list is read, and a gateway that is
/// not Ready has not listed its backends yet.
pub fn admin_addrs(pods: &[Pod]) -> Vec<String> {
    let ready = |s: &&k8s_openapi::api::core::v1::PodStatus| {
        s.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    };
    let mut addrs: Vec<String> = pods
        .iter()
        .filter_map(|p| p.status.as_ref())
        .filter(|s| s.phase.as_deref() == Some("Running"))
        .filter(ready)
        .filter_map(|s| s.pod_ip.clone())
        .map(|ip| format!("{ip}:{ADMIN_PORT}"))
        .collect();
    addrs.sort();
    addrs
}

/// Decode a facade's `/tools` document.
pub fn parse_tools(body: &[u8]) -> Result<FacadeReport, String> {
    serde_json::from_slice::<FacadeReport>(body).map_err(|e| format!("not a /tools document: {e}"))
}

fn severity(state: &str) -> u8 {
    match state {
        "quarantined" => 2,
        "hidden" => 1,
        _ => 0,
    }
}

/// One entry per tool name, sorted; where replicas disagree, the worst
/// state wins (quarantined > hidden > exposed) with its hash and reason.
pub fn merge(per_pod: Vec<Vec<ObservedTool>>) -> Vec<ObservedTool> {
    let mut by_name: BTreeMap<String, ObservedTool> = BTreeMap::new();
    for tool in per_pod.into_iter().flatten() {
        match by_name.get(&tool.name) {
            Some(have) if severity(&have.state) >= severity(&tool.state) => {}
            _ => {
                by_name.insert(tool.name.clone(), tool);
            }
        }
    }
    by_name.into_values().collect()
}

/// The tools every running facade of `server` reports, and the upstream's
/// identity (the first pod's, by address, that knows it); `None` when no
/// pod answered, there is no admin token to ask with, a facade has not read
/// its server's tool list yet, or a facade still runs another policy than
/// `policy` (the `sha256:` of the policy file in force, when known): its
/// tool states are the old policy's, and a mounted ConfigMap reaches each
/// pod within the kubelet's sync period. Status then keeps what it had, and
/// [`Observed::settling`] asks for another look soon.
pub async fn observe_tools(
    source: &dyn AdminSource,
    pods: &[Pod],
    token: Option<&str>,
    policy: Option<&str>,
) -> Observed {
    let Some(token) = token else {
        return Observed::default();
    };
    let mut reports = Vec::new();
    for addr in &admin_addrs(pods) {
        match source.get(addr, "/tools", token).await {
            Ok(body) => match parse_tools(&body) {
                Ok(report) => reports.push(report),
                Err(e) => debug!(%addr, error = %e, "no /tools from this facade"),
            },
            Err(e) => debug!(%addr, error = %e, "no /tools from this facade"),
        }
    }
    combine(reports, policy)
}

/// What the facades report, together.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// The merged report; `None`: keep what status has.
    pub report: Option<FacadeReport>,
    /// A facade still runs another policy than the one in force.
    pub settling: bool,
}

/// Merge the facades' reports (see [`observe_tools`]).
pub fn combine(reports: Vec<FacadeReport>, policy: Option<&str>) -> Observed {
    let stale = |r: &FacadeReport| {
        r.listed == Some(false)
            || matches!((policy, r.policy.as_deref()), (Some(want), Some(got)) if want != got)
    };
    if reports.iter().any(stale) {
        debug!("a facade has not loaded the policy in force, or read its tool list, yet");
        return Observed {
            report: None,
            settling: true,
        };
    }
    let mut server = None;
    let mut answers = Vec::new();
    let mut running = None;
    for report in reports {
        server = server.or(report.server);
        running = running.or(report.policy);
        answers.push(report.tools);
    }
    Observed {
        report: (!answers.is_empty()).then(|| FacadeReport {
            tools: merge(answers),
            server,
            policy: running,
            listed: Some(true),
        }),
        settling: false,
    }
}

/// The issuer and its JWKS, as read from the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuerKeys {
    /// `issuer` of `/.well-known/openid-configuration`.
    pub issuer: String,
    /// The body of `/openid/v1/jwks`.
    pub jwks: String,
}

/// A 5-minute cache of [`IssuerKeys`]; a failed refresh keeps the last copy.
#[derive(Default)]
pub struct JwksCache {
    state: Mutex<Option<(Instant, Option<IssuerKeys>)>>,
}

/// How long a read (or a failure) is kept.
pub const JWKS_REFRESH: Duration = Duration::from_secs(300);

impl JwksCache {
    /// A cache that already holds `keys` (tests, or a fixed issuer).
    pub fn with(keys: Option<IssuerKeys>) -> JwksCache {
        JwksCache {
            state: Mutex::new(Some((Instant::now(), keys))),
        }
    }

    /// The issuer keys, refreshed when older than [`JWKS_REFRESH`].
    pub async fn get(&self, client: &Client) -> Option<IssuerKeys> {
        let cached = self.state.lock().expect("jwks lock").clone();
        if let Some((at, keys)) = &cached {
            if at.elapsed() < JWKS_REFRESH {
                return keys.clone();
            }
        }
        let fresh = match fetch_issuer_keys(client).await {
            Ok(keys) => Some(keys),
            Err(e) => {
                warn!(error = %e, "cannot read the service-account issuer JWKS; tokens stay unverifiable until it can be read");
                cached.and_then(|(_, k)| k)
            }
        };
        *self.state.lock().expect("jwks lock") = Some((Instant::now(), fresh.clone()));
        fresh
    }
}

async fn fetch_issuer_keys(client: &Client) -> Result<IssuerKeys, String> {
    let get = |path: &str| {
        http::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())
    };
    let discovery = client
        .request_text(get("/.well-known/openid-configuration")?)
        .await
        .map_err(|e| format!("/.well-known/openid-configuration: {e}"))?;
    let issuer = serde_json::from_str::<serde_json::Value>(&discovery)
        .ok()
        .and_then(|v| v.get("issuer")?.as_str().map(str::to_string))
        .ok_or("/.well-known/openid-configuration has no issuer")?;
    let jwks = client
        .request_text(get("/openid/v1/jwks")?)
        .await
        .map_err(|e| format!("/openid/v1/jwks: {e}"))?;
    let keys = serde_json::from_str::<serde_json::Value>(&jwks)
        .ok()
        .and_then(|v| v.get("keys").map(|k| k.is_array()))
        .unwrap_or(false);
    if !keys {
        return Err("/openid/v1/jwks is not a JWK set".into());
    }
    Ok(IssuerKeys { issuer, jwks })
}

/// Which engine for egress by host name the cluster serves (Cilium first,
/// then Calico), asked by API discovery and kept [`ENGINE_REFRESH`]: a
/// cluster that installs Cilium later is noticed without a restart, and a
/// cluster without either costs two small GETs every few seconds, never an
/// error.
pub struct EngineCache {
    discover: bool,
    state: Mutex<Option<(Instant, NamedEgress)>>,
}

/// How long a discovery answer is kept.
pub const ENGINE_REFRESH: Duration = Duration::from_secs(10);

impl EngineCache {
    /// `discover: false` means "none" without asking (`--named-egress none`
    /// or a fixed engine set in the build config).
    pub fn new(discover: bool) -> EngineCache {
        EngineCache {
            discover,
            state: Mutex::new(None),
        }
    }

    /// Drop the cached answer: the next [`EngineCache::get`] asks again
    /// (a kind appeared or went, `super::kinds`).
    pub fn forget(&self) {
        *self.state.lock().expect("engine lock") = None;
    }

    /// The engine, or `fixed` when discovery is off.
    pub async fn get(&self, client: &Client, fixed: NamedEgress) -> NamedEgress {
        if !self.discover {
            return fixed;
        }
        let cached = *self.state.lock().expect("engine lock");
        if let Some((at, engine)) = cached {
            if at.elapsed() < ENGINE_REFRESH {
                return engine;
            }
        }
        let engine = match discover_engine(client).await {
            Ok(engine) => engine,
            Err(e) => {
                warn!(error = %e, "cannot ask the API server for Cilium or Calico; keeping the last answer");
                cached.map(|(_, e)| e).unwrap_or_default()
            }
        };
        if cached.map(|(_, e)| e) != Some(engine) {
            tracing::info!(engine = ?engine, "policy engine for egress by host name");
        }
        *self.state.lock().expect("engine lock") = Some((Instant::now(), engine));
        engine
    }
}

/// Ask for each engine's API group version; a 404 means "not here".
async fn discover_engine(client: &Client) -> Result<NamedEgress, String> {
    for engine in [NamedEgress::Cilium, NamedEgress::Calico] {
        let api = engine.api_resource().expect("an engine has a kind");
        match client.list_api_group_resources(&api.api_version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == api.plural) => return Ok(engine),
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(format!("{}: {e}", api.api_version)),
        }
    }
    // Neither: the operator's own egress proxy enforces host names.
    Ok(NamedEgress::Proxy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, state: &str, hash: &str) -> ObservedTool {
        ObservedTool {
            name: name.into(),
            hash: Some(hash.into()),
            state: state.into(),
            ..ObservedTool::default()
        }
    }

    #[test]
    fn parses_the_facade_document() {
        let body = br#"{"tools":[{"name":"git_log","exposedAs":"log","hash":"sha256:1","firstSeenHash":"sha256:0",
            "state":"quarantined","reason":"definition changed","risk":"low","findings":[{"kind":"drift","location":"description"}]}]}"#;
        let report = parse_tools(body).unwrap();
        assert_eq!(report.server, None, "a facade still probing");
        let tools = report.tools;
        assert_eq!(tools[0].name, "git_log");
        assert_eq!(tools[0].exposed_as.as_deref(), Some("log"));
        assert_eq!(tools[0].state, "quarantined");
        assert_eq!(tools[0].risk.as_deref(), Some("low"));
        assert!(parse_tools(b"[]").is_err());
        let known = br#"{"tools":[],"server":{"name":"tracker","title":null,"version":"2.1","era":"modern"}}"#;
        assert_eq!(
            parse_tools(known).unwrap().server,
            Some(ObservedServer {
                name: Some("tracker".into()),
                title: None,
                version: Some("2.1".into()),
                era: Some("modern".into()),
            })
        );
    }

    #[test]
    fn merge_keeps_the_worst_state_sorted() {
        let merged = merge(vec![
            vec![tool("b", "exposed", "h1"), tool("a", "exposed", "h1")],
            vec![tool("b", "quarantined", "h2")],
            vec![tool("b", "hidden", "h3")],
        ]);
        assert_eq!(
            merged.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        assert_eq!(
            (merged[1].state.as_str(), merged[1].hash.as_deref()),
            ("quarantined", Some("h2"))
        );
    }

    #[test]
    fn a_facade_on_an_older_policy_keeps_status_and_asks_for_another_look() {
        let report = |state: &str, policy: Option<&str>| FacadeReport {
            tools: vec![tool("read_text_file", state, "h1")],
            server: None,
            policy: policy.map(str::to_string),
            listed: None,
        };
        // One pod has reloaded the tightened policy, the other not yet.
        let mixed = combine(
            vec![
                report("hidden", Some("sha256:new")),
                report("exposed", Some("sha256:old")),
            ],
            Some("sha256:new"),
        );
        assert_eq!(
            mixed,
            Observed {
                report: None,
                settling: true
            }
        );
        // Every pod runs the policy in force: merged, settled.
        let settled = combine(
            vec![
                report("hidden", Some("sha256:new")),
                report("hidden", Some("sha256:new")),
            ],
            Some("sha256:new"),
        );
        assert!(!settled.settling);
        assert_eq!(settled.report.unwrap().tools[0].state, "hidden");
        // Nothing to compare with (a held change; a facade that does not say): merged.
        for (reported, in_force) in [(Some("sha256:old"), None), (None, Some("sha256:new"))] {
            let observed = combine(vec![report("exposed", reported)], in_force);
            assert!(
                !observed.settling && observed.report.is_some(),
                "{reported:?} {in_force:?}"
            );
        }
        assert_eq!(combine(vec![], Some("sha256:new")), Observed::default());
        // A facade that knows its server but has not read its tool list yet.
        let unlisted = FacadeReport {
            listed: Some(false),
            ..report("exposed", Some("sha256:new"))
        };
        assert_eq!(
            combine(vec![unlisted], Some("sha256:new")),
            Observed {
                report: None,
                settling: true
            }
        );
    }
}
