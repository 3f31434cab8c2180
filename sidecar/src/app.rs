//! The process-wide context every layer shares: where the upstream is, the
//! runtime limits, the live policy, the session table and the metrics.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use mcp_warden_policy::SchemaCache;

use crate::metrics::Metrics;
use crate::pipeline::audit::Audit;
use crate::pipeline::budget::GlobalCalls;
use crate::pipeline::policy::LivePolicy;
use crate::pipeline::registry::Registry;
use crate::session::ids::SessionIds;
use crate::session::manager::Sessions;
use crate::upstream::spares::Spares;
use crate::upstream::{LinkLimits, UpstreamTarget};

/// Runtime limits: each has a safe default and a `run` flag.
#[derive(Clone, Debug)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_header_bytes: usize,
    pub header_read_timeout: Duration,
    /// A body must arrive within this (slow-drip bodies are cut off).
    pub body_read_timeout: Duration,
    pub max_sessions: usize,
    pub idle_timeout: Duration,
    pub stream_queue_depth: usize,
    pub upstream_wait: Duration,
    /// How long a request the policy does not time (everything but
    /// tools/call: ping, resources/read, prompts/get, …) may wait for the
    /// server before the client gets -32007 and the server a cancellation.
    pub request_timeout: Duration,
    pub max_restarts: u32,
    pub restart_window: Duration,
    pub restart_backoff_initial: Duration,
    pub restart_backoff_max: Duration,
    /// Server processes kept started ahead of new sessions (stdio/socket).
    pub spares: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_header_bytes: 64 * 1024,
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(30),
            max_sessions: 1024,
            idle_timeout: Duration::from_secs(15 * 60),
            stream_queue_depth: 256,
            upstream_wait: Duration::from_secs(30),
            request_timeout: Duration::from_secs(120),
            max_restarts: 5,
            restart_window: Duration::from_secs(60),
            restart_backoff_initial: Duration::from_millis(100),
            restart_backoff_max: Duration::from_secs(5),
            spares: 1,
        }
    }
}

/// Which `Host` and `Origin` values the HTTP transport accepts (DNS
/// rebinding protection, as the MCP transport spec requires).
#[derive(Clone, Debug, Default)]
pub struct HostPolicy {
    /// Accepted host names (no port). Empty: any host.
    pub hosts: Vec<String>,
    /// Accepted `Origin` values; requests without `Origin` are not browsers
    /// and pass. Empty: only loopback origins.
    pub origins: Vec<String>,
}

pub struct App {
    pub target: UpstreamTarget,
    pub limits: Limits,
    pub link_limits: LinkLimits,
    pub spares: Arc<Spares>,
    pub hosts: HostPolicy,
    pub policy: ArcSwap<LivePolicy>,
    /// Upstream tools as observed (hashes, drift, quarantine).
    pub registry: Registry,
    /// Compiled input/output validators, by definition hash.
    pub schemas: SchemaCache,
    pub audit: Audit,
    pub global_calls: Arc<GlobalCalls>,
    pub sessions: Sessions,
    /// Mints session ids and tells which replica owns one.
    pub session_ids: SessionIds,
    pub metrics: Metrics,
    /// Set once the upstream answered `initialize` (the readiness probe).
    pub ready: AtomicBool,
    /// Set on SIGTERM: no new sessions, live ones drain.
    pub draining: AtomicBool,
}

impl App {
    pub fn new(
        target: UpstreamTarget,
        limits: Limits,
        hosts: HostPolicy,
        policy: Arc<LivePolicy>,
        audit: Audit,
        session_ids: SessionIds,
        max_upstream_message_bytes: usize,
    ) -> Arc<App> {
        let link_limits = LinkLimits {
            queue_depth: limits.stream_queue_depth,
            max_message_bytes: max_upstream_message_bytes,
        };
        Arc::new(App {
            spares: Spares::new(target.clone(), link_limits.clone(), limits.spares),
            target,
            link_limits,
            limits,
            hosts,
            policy: ArcSwap::new(policy),
            registry: Registry::default(),
            schemas: SchemaCache::new(),
            audit,
            global_calls: Arc::new(GlobalCalls::default()),
            sessions: Sessions::default(),
            session_ids,
            metrics: Metrics::new(),
            ready: AtomicBool::new(false),
            draining: AtomicBool::new(false),
        })
    }
}
