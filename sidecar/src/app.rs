//! The process-wide context every layer shares: where the upstream is, the
//! runtime limits, the live policy, the session table and the metrics.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use mcp_warden_policy::SchemaCache;

use crate::approvals::Approvals;
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
    /// How long a call waits for an out-of-band approval.
    pub approval_timeout: Duration,
    /// Calls that may wait for an out-of-band approval at once (0: none can,
    /// as with `--stdio`, which has no admin listener).
    pub max_pending_approvals: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
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
            approval_timeout: Duration::from_secs(300),
            max_pending_approvals: 64,
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

/// Who may read the admin port's `/tools` (every upstream tool, hidden ones
/// too, with full definitions) and read and decide `/approvals`: holders of
/// the admin token; without one, anyone who can reach a loopback admin
/// listener (local use) and nobody on any other (a pod's admin port is
/// reachable by whatever scrapes it).
#[derive(Clone, Debug, Default)]
pub struct AdminAccess {
    pub token: Option<String>,
    pub loopback: bool,
}

impl AdminAccess {
    /// Whether `Authorization` header value `header` may use `/tools` and
    /// `/approvals`.
    pub fn allows(&self, header: Option<&str>) -> bool {
        match &self.token {
            Some(token) => crate::auth::bearer(header)
                .is_some_and(|given| constant_time_eq(given.as_bytes(), token.as_bytes())),
            None => self.loopback,
        }
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    // Hash both so the comparison's time says nothing about lengths either.
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

pub struct App {
    pub target: UpstreamTarget,
    /// Who may use `/tools` and `/approvals` on the admin port.
    pub admin: AdminAccess,
    /// Calls waiting for an out-of-band approval.
    pub approvals: Approvals,
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
        admin: AdminAccess,
    ) -> Arc<App> {
        let link_limits = LinkLimits {
            queue_depth: limits.stream_queue_depth,
            max_message_bytes: limits.max_upstream_message_bytes,
        };
        Arc::new(App {
            admin,
            approvals: Approvals::new(limits.max_pending_approvals, limits.approval_timeout),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_needs_the_token_when_there_is_one_and_loopback_when_not() {
        let token = AdminAccess {
            token: Some("s3cret".into()),
            loopback: true,
        };
        assert!(token.allows(Some("Bearer s3cret")));
        for h in [
            None,
            Some("Bearer wrong"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            assert!(!token.allows(h), "{h:?}");
        }
        let local = AdminAccess {
            token: None,
            loopback: true,
        };
        assert!(local.allows(None));
        let exposed = AdminAccess {
            token: None,
            loopback: false,
        };
        assert!(!exposed.allows(None) && !exposed.allows(Some("Bearer x")));
    }
}
