//! The sessions' shared context: where the upstream is, the runtime limits,
//! the live policy, the tool registry, audit and metrics.
//!
//! Where it sits: the session layer. The application builds it once and
//! wraps it ([`crate::app::App`] adds the router's tables, the admin
//! access and the listeners' host policy); sessions, their channels and
//! their steps see only this.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use mcp_warden_policy::SchemaCache;

use crate::approvals::Approvals;
use crate::auth::identity::Identity;
use crate::gates::audit::Audit;
use crate::gates::budget::{GlobalCalls, SessionBudget};
use crate::gates::policy::LivePolicy;
use crate::gates::registry::Registry;
use crate::jsonrpc::Message;
use crate::metrics::Metrics;
use crate::session::channel::Era;
use crate::session::ids::SessionIds;
use crate::upstream::spares::Spares;
use crate::upstream::{Credential, LinkLimits, LinkMode, ParamHeaders, UpstreamTarget};

/// Runtime limits: each has a safe default and a `run` flag.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_body_bytes: usize,
    /// Messages one JSON-RPC batch may hold (revisions that allow batches).
    pub max_batch_size: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout: Duration,
    /// A body must arrive within this (slow-drip bodies are cut off).
    pub body_read_timeout: Duration,
    pub max_sessions: usize,
    /// Sessions one caller (an issuer-qualified subject; an address, for
    /// anonymous callers) may hold at once.
    pub max_sessions_per_identity: usize,
    pub idle_timeout: Duration,
    pub stream_queue_depth: usize,
    pub upstream_wait: Duration,
    /// How long a request the policy does not time (everything but
    /// tools/call: ping, resources/read, prompts/get, …) may wait for the
    /// server before the client gets -32007 and the server a cancellation.
    pub request_timeout: Duration,
    /// How long a request the client cancelled (or that timed out) may stay
    /// on the server before the server process is replaced: until then it
    /// keeps its concurrency slot.
    pub cancel_grace: Duration,
    pub max_restarts: u32,
    pub restart_window: Duration,
    pub restart_backoff_initial: Duration,
    pub restart_backoff_max: Duration,
    /// Server processes kept started ahead of new sessions (stdio/socket).
    pub spares: usize,
    /// Longest single message from the server.
    pub max_upstream_message_bytes: usize,
    /// Which revision of MCP the server speaks: found with `server/discover`
    /// (`auto`), or set.
    pub upstream_era: EraChoice,
    /// How long a modern client's `requestState` stays good.
    pub request_state_ttl: Duration,
    /// The tasks extension: how long the facade keeps a task and honours
    /// its id at most (a server's longer `ttlMs` is cut to it).
    pub max_task_ttl: Duration,
    /// The tasks extension: how long a task may run before the facade
    /// cancels it on the server (it polls the server itself to know).
    pub task_wall_time: Duration,
    /// The tasks extension: tasks one identity may have running at once on
    /// this replica (0: no limit).
    pub max_live_tasks_per_identity: usize,
    /// How long a call waits for an out-of-band approval.
    pub approval_timeout: Duration,
    /// Calls that may wait for an out-of-band approval at once (0: none can,
    /// as with `--stdio`, which has no admin listener).
    pub max_pending_approvals: usize,
    /// How many of those one caller may hold (0: a quarter of them).
    pub max_pending_approvals_per_identity: usize,
    /// Roots from the command line (`--root`), after the policy's own.
    pub roots: Vec<mcp_warden_crds::Root>,
}

/// How the server's era is decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EraChoice {
    /// `server/discover` first; a server that does not answer it is legacy.
    #[default]
    Auto,
    /// `initialize` and a session per client.
    Legacy,
    /// Stateless, one server shared by every caller.
    Modern,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_batch_size: 16,
            max_header_bytes: 64 * 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_sessions: 1024,
            max_sessions_per_identity: 8,
            idle_timeout: Duration::from_secs(5 * 60),
            stream_queue_depth: 256,
            upstream_wait: Duration::from_secs(30),
            request_timeout: Duration::from_secs(120),
            cancel_grace: Duration::from_secs(10),
            max_restarts: 5,
            restart_window: Duration::from_secs(60),
            restart_backoff_initial: Duration::from_millis(100),
            restart_backoff_max: Duration::from_secs(5),
            spares: 1,
            max_upstream_message_bytes: 16 * 1024 * 1024,
            upstream_era: EraChoice::Auto,
            request_state_ttl: crate::request_state::LIFETIME,
            max_task_ttl: Duration::from_secs(3600),
            task_wall_time: Duration::from_secs(3600),
            max_live_tasks_per_identity: 16,
            approval_timeout: Duration::from_secs(300),
            max_pending_approvals: 64,
            max_pending_approvals_per_identity: 0,
            roots: Vec::new(),
        }
    }
}

/// What the server said about itself when the facade first reached it.
#[derive(Clone, Debug)]
pub struct UpstreamInfo {
    pub era: Era,
    /// Its capabilities (`server/discover`, or `initialize`'s result).
    pub capabilities: serde_json::Value,
    /// Its name and version.
    pub server_info: serde_json::Value,
    pub instructions: Option<String>,
}

/// What every session shares: limits, the live policy, the tool registry,
/// audit, metrics, budgets, parked calls, and what the server is. Built
/// once by the application and handed down; it holds nothing of the layers
/// above the session (the router's tables, the admin port, the listeners).
pub struct Context {
    pub target: UpstreamTarget,
    /// Calls waiting for an out-of-band approval.
    pub approvals: Approvals,
    pub limits: Limits,
    pub link_limits: LinkLimits,
    pub spares: Arc<Spares>,
    pub policy: ArcSwap<LivePolicy>,
    /// Upstream tools as observed (hashes, drift, quarantine).
    pub registry: Registry,
    /// Compiled input/output validators, by definition hash.
    pub schemas: SchemaCache,
    pub audit: Audit,
    /// OpenTelemetry spans (none when tracing is off).
    pub telemetry: crate::spans::Telemetry,
    pub global_calls: Arc<GlobalCalls>,
    /// Calls per identity per window, across the identity's sessions (and,
    /// with peers, across the replicas: each identity's owner counts).
    pub identity_budgets: crate::gates::shared_budget::SharedBudgets,
    /// Mints session ids and tells which replica owns one.
    pub session_ids: SessionIds,
    pub metrics: Metrics,
    /// Set once the upstream answered `initialize` or `server/discover`
    /// (the readiness probe).
    pub ready: AtomicBool,
    /// What the server is, once the probe found out.
    pub upstream: OnceLock<UpstreamInfo>,
    /// Woken when `upstream` is set.
    pub upstream_known: tokio::sync::Notify,
    /// Seals and opens the `requestState` of modern clients' retries.
    pub state_seal: crate::request_state::StateSeal,
    /// Approvals' states already used (each runs its call once).
    pub spent_states: crate::request_state::Spent,
    /// Calls on legacy servers that wait for a modern client's answer, by key.
    pub parked: Mutex<HashMap<String, crate::session::Parked>>,
    /// The tasks callers created through this replica (tasks extension).
    pub tasks: crate::session::tasks::Tasks,
    /// Budgets of callers without a session (modern clients), per caller.
    pub budgets: Mutex<HashMap<String, Arc<SessionBudget>>>,
    /// Set on SIGTERM: no new sessions, live ones drain.
    pub draining: AtomicBool,
    /// Fires when the drain is over and the listeners stop taking
    /// connections; a stream that would outlive it (a relayed GET) ends then.
    pub stopping: tokio_util::sync::CancellationToken,
}

pub use crate::era::TASKS_EXTENSION;

/// The client's capabilities as the server is told them: never the tasks
/// capability of 2025-11-25 (its `tasks/result` would fetch a result around
/// the output filter); the tasks extension only when `keep_tasks` (a modern
/// client declared it on a request the facade serves tasks for, see
/// `session::steps::task`); and `roots` only when the facade has roots to
/// answer `roots/list` with — itself, whatever the client declared. Every
/// era's path uses it: the legacy handshake, the `_meta` of each modern
/// request, the bridge's own handshake.
pub fn fit_capabilities(
    caps: &mut serde_json::Map<String, serde_json::Value>,
    offer_roots: bool,
    keep_tasks: bool,
) {
    caps.remove("tasks");
    if let Some(ext) = caps
        .get_mut("extensions")
        .and_then(serde_json::Value::as_object_mut)
    {
        if !keep_tasks {
            ext.remove(TASKS_EXTENSION);
        }
    }
    caps.remove("roots");
    if offer_roots {
        caps.insert("roots".into(), serde_json::json!({}));
    }
}

impl Context {
    /// The server's scope as the server learns it (`roots/list`): the
    /// policy's roots, then `--root`'s. Never the client's: a client could
    /// answer `file:///` and widen the server's reach.
    pub fn roots(&self) -> Vec<serde_json::Value> {
        let policy = self.policy.load();
        policy
            .doc
            .roots
            .iter()
            .chain(&self.limits.roots)
            .map(|r| match &r.name {
                Some(name) => serde_json::json!({ "uri": r.uri, "name": name }),
                None => serde_json::json!({ "uri": r.uri }),
            })
            .collect()
    }

    /// Whether the server's scope has any roots ([`Context::roots`], without
    /// writing them out).
    pub fn has_roots(&self) -> bool {
        !self.limits.roots.is_empty() || !self.policy.load().doc.roots.is_empty()
    }

    /// The client's capabilities as the server is told them
    /// ([`fit_capabilities`], offering `roots` when there are any).
    pub fn fit_client_capabilities(&self, caps: &mut serde_json::Map<String, serde_json::Value>) {
        fit_capabilities(caps, self.has_roots(), false);
    }
    /// Whether the server offers the tasks extension (a modern server's
    /// `server/discover` said so): only then are tasks served. A gateway
    /// learns it from its backends after the probe (they answer callers
    /// only), so it is asked each time.
    pub fn upstream_serves_tasks(&self) -> bool {
        if let UpstreamTarget::Gateway(g) = &self.target {
            return g.serves_tasks();
        }
        self.upstream.get().is_some_and(|info| {
            info.era == Era::Modern
                && info
                    .capabilities
                    .pointer("/extensions")
                    .and_then(|e| e.get(TASKS_EXTENSION))
                    .is_some_and(|t| !t.is_null())
        })
    }

    /// What the server is: waits (up to the upstream wait) for the probe.
    /// `None`: the server has not answered yet.
    pub async fn upstream_info(&self) -> Option<&UpstreamInfo> {
        let deadline = tokio::time::Instant::now() + self.limits.upstream_wait;
        loop {
            let known = self.upstream_known.notified();
            if let Some(info) = self.upstream.get() {
                return Some(info);
            }
            if tokio::time::timeout_at(deadline, known).await.is_err() {
                return self.upstream.get();
            }
        }
    }

    /// Record what the probe found (once) and wake whoever waits for it.
    pub fn set_upstream(&self, info: UpstreamInfo) {
        let _ = self.upstream.set(info);
        self.upstream_known.notify_waiters();
    }

    /// How links to the server speak, for a server of `era`.
    pub fn link_mode(self: &Arc<Self>, era: Era) -> LinkMode {
        if era == Era::Legacy {
            return LinkMode::default();
        }
        let app = Arc::downgrade(self);
        let param_headers: ParamHeaders = Arc::new(move |msg: &Message| {
            let Some(app) = app.upgrade() else {
                return Vec::new();
            };
            param_headers_of(&app, msg)
        });
        LinkMode {
            modern: true,
            param_headers: Some(param_headers),
            credential: None,
        }
    }

    /// The credential a request of `caller` carries upstream (an HTTP(S)
    /// upstream with `upstreamAuth`; else none). Asked after policy, per
    /// request.
    pub async fn credential_for(&self, caller: &Identity) -> Result<Option<Credential>, String> {
        if let UpstreamTarget::Gateway(_) = &self.target {
            // A gateway's backends hear who the caller is, each through an
            // assertion of its own (minted by the link); never the token.
            // An anonymous caller is nobody there, not the gateway itself.
            return Ok(match (&caller.issuer, &caller.subject) {
                (Some(issuer), Some(subject)) => Some(
                    Credential::on_behalf_of(crate::upstream::gateway::assertion::Principal {
                        issuer: issuer.clone(),
                        subject: subject.clone(),
                        groups: caller.groups.clone(),
                    })
                    .until(caller.expires_at),
                ),
                _ => Some(Credential::nobody()),
            });
        }
        let UpstreamTarget::Http(target) = &self.target else {
            return Ok(None);
        };
        let policy = self.policy.load_full();
        let Some(creds) = &policy.upstream_credentials else {
            return Ok(None);
        };
        let role = caller.role(&policy.compiled);
        creds
            .for_caller(caller, role, &target.client)
            .await
            .map_err(|e| e.to_string())
    }

    /// The credential of the facade's own polls of a task `caller` created:
    /// a gateway's backends bind each task to the caller the gateway vouched
    /// for, so the gateway polls as that caller; any other server is polled
    /// as the facade (a caller's exchanged token would expire under a long
    /// task).
    pub async fn task_poll_credential(&self, caller: &Identity) -> Option<Credential> {
        match &self.target {
            UpstreamTarget::Gateway(_) => self.credential_for(caller).await.ok().flatten(),
            _ => None,
        }
    }

    /// The credential of the facade's own requests (probe, tool refresh).
    /// A gateway's are the gateway's own: its backends let it list.
    pub async fn facade_credential(&self) -> Result<Option<Credential>, String> {
        if let UpstreamTarget::Gateway(g) = &self.target {
            return Ok(g
                .signer
                .as_ref()
                .map(|s| Credential::on_behalf_of(s.itself())));
        }
        let UpstreamTarget::Http(target) = &self.target else {
            return Ok(None);
        };
        let policy = self.policy.load_full();
        let Some(creds) = &policy.upstream_credentials else {
            return Ok(None);
        };
        creds
            .for_facade(&target.client)
            .await
            .map_err(|e| e.to_string())
    }

    /// Whether requests upstream carry credentials at all (cheap: the hot
    /// path asks this first).
    pub fn has_upstream_credentials(&self) -> bool {
        match &self.target {
            UpstreamTarget::Gateway(g) => g.signer.is_some(),
            UpstreamTarget::Http(_) => self.policy.load().upstream_credentials.is_some(),
            _ => false,
        }
    }

    /// The budget of a caller without a session (a modern client): one per
    /// caller on this replica, kept while the caller is active.
    pub fn budget_for(&self, quota_key: &str) -> Arc<SessionBudget> {
        let mut budgets = self.budgets.lock().unwrap();
        let idle = self.limits.idle_timeout;
        budgets.retain(|_, b| b.active_within(idle));
        budgets.entry(quota_key.to_string()).or_default().clone()
    }

    pub fn new(
        target: UpstreamTarget,
        limits: Limits,
        policy: Arc<LivePolicy>,
        (audit, telemetry, metrics): (Audit, crate::spans::Telemetry, Metrics),
        session_ids: SessionIds,
    ) -> Arc<Context> {
        let state_ttl = limits.request_state_ttl;
        let link_limits = LinkLimits {
            queue_depth: limits.stream_queue_depth,
            max_message_bytes: limits.max_upstream_message_bytes,
        };
        Arc::new(Context {
            approvals: Approvals::new(limits.max_pending_approvals, limits.approval_timeout)
                .with_share(limits.max_pending_approvals_per_identity),
            spares: Spares::new(target.clone(), link_limits.clone(), limits.spares),
            target,
            link_limits,
            limits,
            policy: ArcSwap::new(policy),
            registry: Registry::default(),
            schemas: SchemaCache::new(),
            audit,
            telemetry,
            global_calls: Arc::new(GlobalCalls::default()),
            identity_budgets: Default::default(),
            metrics,
            ready: AtomicBool::new(false),
            upstream: OnceLock::new(),
            upstream_known: tokio::sync::Notify::new(),
            budgets: Mutex::new(HashMap::new()),
            tasks: Default::default(),
            state_seal: session_ids.state_seal().with_lifetime(state_ttl),
            spent_states: Default::default(),
            session_ids,
            parked: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            stopping: Default::default(),
        })
    }
}

/// The `Mcp-Param-*` headers of a `tools/call` on its way to a modern HTTP
/// server: the tool's `x-mcp-header` annotations, as the facade last saw
/// its definition, filled from the arguments sent.
fn param_headers_of(app: &Context, msg: &Message) -> Vec<(String, String)> {
    if msg.method() != "tools/call" || !msg.mentions(b"arguments") {
        return Vec::new();
    }
    let value = msg.to_value();
    let Some(tool) = value
        .pointer("/params/name")
        .and_then(serde_json::Value::as_str)
        .and_then(|name| app.registry.get(name))
    else {
        return Vec::new();
    };
    let schema = tool
        .definition
        .get("inputSchema")
        .unwrap_or(&serde_json::Value::Null);
    match crate::era::header_params(schema) {
        Ok(params) if !params.is_empty() => {
            let arguments = value
                .pointer("/params/arguments")
                .unwrap_or(&serde_json::Value::Null);
            crate::era::param_header_values(&params, arguments)
        }
        _ => Vec::new(),
    }
}
