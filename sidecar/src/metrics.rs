//! The facade's Prometheus metrics, registered in one registry per process.
//!
//! Label values come only from bounded sets: MCP method names are mapped to
//! the known methods or `other`, outcomes are a fixed enum. Nothing a client
//! sends can create a new series.

use std::time::Duration;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

mod labels;

pub use labels::{method_label, HeldStream, StreamEnd, ASK_OUTCOMES, TASK_EVENTS};

pub struct Metrics {
    pub registry: Registry,
    requests: IntCounterVec,
    request_duration: HistogramVec,
    pub sessions_active: IntGauge,
    /// Legacy server sessions the facade holds for modern callers.
    pub bridges_active: IntGauge,
    pub upstream_restarts: IntCounter,
    pub upstream_invalid: IntCounter,
    pub upstream_unmatched: IntCounter,
    pub backlog_dropped: IntCounter,
    pub http_rejections: IntCounterVec,
    pub policy_reloads: IntCounterVec,
    /// 1 while the policy file on disk is one the facade rejected (the
    /// previous policy stays in force), 0 once a reload succeeds.
    pub policy_reload_failing: IntGauge,
    /// Calls waiting for an out-of-band approval, and how long the oldest
    /// has waited (set when scraped).
    pub approvals_pending: IntGauge,
    pub approval_oldest_pending: prometheus::Gauge,
    /// `tool_calls_total{tool,outcome,code}`: every tools/call, allowed or not.
    pub tool_calls: IntCounterVec,
    pub tool_call_duration: HistogramVec,
    pub tool_output_bytes: HistogramVec,
    /// `policy_denials_total{reason}`: reasons are the policy's stable set.
    pub policy_denials: IntCounterVec,
    /// `tools{state}`: upstream tools by state (exposed, hidden, quarantined).
    pub tools: prometheus::IntGaugeVec,
    pub redactions: IntCounterVec,
    /// `audit_dropped_total{sink}`: `queue` (the writer's queue was full),
    /// `file` (the file or stream could not be written), `http` (the HTTP
    /// store's buffer was full).
    audit_dropped_total: IntCounterVec,
    audit_buffered: prometheus::IntGaugeVec,
    audit_delivered: IntCounterVec,
    audit_failures: IntCounterVec,
    pub calls_in_flight: IntGauge,
    /// Requests relayed to the replica that owns their session.
    pub forwarded: IntCounter,
    /// `identity_budget_asks_total{outcome}`: asks to the replica that
    /// counts an identity's calls ([`ASK_OUTCOMES`]).
    identity_budget_asks: IntCounterVec,
    /// `identity_budget_peers`: the replicas this one counts identity
    /// budgets with, itself included (0: it counts alone).
    pub identity_budget_peers: IntGauge,
    /// `tasks_total{event}`: tasks made through the facade and how they
    /// ended ([`TASK_EVENTS`]).
    tasks: IntCounterVec,
    /// Server notifications shed because the client was not reading.
    pub notifications_dropped: IntCounter,
    /// Messages no gate lets through, by where they came from.
    messages_dropped: IntCounterVec,
    /// Server processes replaced because they did not let go of a call the
    /// client cancelled or that timed out.
    pub upstream_recycled: IntCounter,
    /// `egress_refusals_total{reason}`: connections the SSRF guard refused
    /// (`address_not_allowed`, `redirect`).
    pub egress_refusals: IntCounterVec,
    /// `gateway_conflicts{kind}`: names a gateway withholds now, by why
    /// (`collision`, `confusable`, `shadowing`).
    pub gateway_conflicts: prometheus::IntGaugeVec,
    /// `gateway_conflicts_resolved{kind}`: conflicts the gateway's mapping
    /// resolves now (one backend's copy served, the rest still withheld).
    pub gateway_conflicts_resolved: prometheus::IntGaugeVec,
    /// `streams_ended_total{stream,reason}` ([`HeldStream`], [`StreamEnd`]).
    streams_ended: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Self {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "mcpwarden_requests_total",
                "Client requests answered, by MCP method and outcome",
            ),
            &["method", "outcome"],
        )
        .expect("valid metric");
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "mcpwarden_request_duration_seconds",
                "Time from a client request to its answer",
            )
            .buckets(vec![
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                10.0, 30.0, 60.0,
            ]),
            &["method"],
        )
        .expect("valid metric");
        let sessions_active = IntGauge::new("mcpwarden_sessions_active", "Live client sessions")
            .expect("valid metric");
        let bridges_active = IntGauge::new(
            "mcpwarden_upstream_bridges_active",
            "Legacy server sessions the facade holds for modern (sessionless) callers",
        )
        .expect("valid metric");
        let upstream_restarts = IntCounter::new(
            "mcpwarden_upstream_restarts_total",
            "Upstream MCP server restarts after a crash or disconnect",
        )
        .expect("valid metric");
        let upstream_invalid = IntCounter::new(
            "mcpwarden_upstream_invalid_messages_total",
            "Messages from the MCP server that were not JSON-RPC",
        )
        .expect("valid metric");
        let upstream_unmatched = IntCounter::new(
            "mcpwarden_upstream_unmatched_responses_total",
            "Responses from the MCP server that matched no request in flight",
        )
        .expect("valid metric");
        let backlog_dropped = IntCounter::new(
            "mcpwarden_backlog_dropped_total",
            "Server messages dropped because the client kept no stream open and the backlog was full",
        )
        .expect("valid metric");
        let http_rejections = IntCounterVec::new(
            Opts::new(
                "mcpwarden_http_rejections_total",
                "HTTP requests refused before reaching a session, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let policy_reloads = IntCounterVec::new(
            Opts::new(
                "mcpwarden_policy_reloads_total",
                "Policy file reloads, by result",
            ),
            &["result"],
        )
        .expect("valid metric");
        for result in ["applied", "rejected"] {
            policy_reloads.with_label_values(&[result]);
        }
        let policy_reload_failing = IntGauge::new(
            "mcpwarden_policy_reload_failing",
            "1 while the policy file is one the facade rejected (the previous policy stays in force)",
        )
        .expect("valid metric");
        let approvals_pending = IntGauge::new(
            "mcpwarden_approvals_pending",
            "Tool calls waiting for an out-of-band approval on /approvals",
        )
        .expect("valid metric");
        let approval_oldest_pending = prometheus::Gauge::new(
            "mcpwarden_approval_oldest_pending_seconds",
            "How long the oldest call waiting for an out-of-band approval has waited (0: none waits)",
        )
        .expect("valid metric");
        let tool_calls = IntCounterVec::new(
            Opts::new(
                "mcpwarden_tool_calls_total",
                "Tool calls by exposed tool, outcome and JSON-RPC code",
            ),
            &["tool", "outcome", "code"],
        )
        .expect("valid metric");
        let tool_call_duration = HistogramVec::new(
            HistogramOpts::new(
                "mcpwarden_tool_call_duration_seconds",
                "Tool call latency through the facade",
            )
            .buckets(vec![
                0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                60.0, 120.0,
            ]),
            &["tool"],
        )
        .expect("valid metric");
        let tool_output_bytes = HistogramVec::new(
            HistogramOpts::new(
                "mcpwarden_tool_output_bytes",
                "Size of tool results sent to clients",
            )
            .buckets(prometheus::exponential_buckets(64.0, 4.0, 10).expect("valid buckets")),
            &["tool"],
        )
        .expect("valid metric");
        let policy_denials = IntCounterVec::new(
            Opts::new(
                "mcpwarden_policy_denials_total",
                "Requests refused by the policy, by stable reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let tools = prometheus::IntGaugeVec::new(
            Opts::new(
                "mcpwarden_tools",
                "Upstream tools by state (exposed, hidden, quarantined)",
            ),
            &["state"],
        )
        .expect("valid metric");
        let redactions = IntCounterVec::new(
            Opts::new(
                "mcpwarden_redactions_total",
                "Secrets redacted from tool results, by detector",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let audit_dropped_total = IntCounterVec::new(
            Opts::new(
                "mcpwarden_audit_dropped_total",
                "Audit records dropped because an audit sink could not keep up or be written, by sink (calls are never blocked by audit)",
            ),
            &["sink"],
        )
        .expect("valid metric");
        let audit_buffered = prometheus::IntGaugeVec::new(
            Opts::new(
                "mcpwarden_audit_buffered",
                "Audit records held for a sink that has not taken them yet, by sink",
            ),
            &["sink"],
        )
        .expect("valid metric");
        let audit_delivered = IntCounterVec::new(
            Opts::new(
                "mcpwarden_audit_delivered_total",
                "Audit records a remote sink accepted, by sink",
            ),
            &["sink"],
        )
        .expect("valid metric");
        let audit_failures = IntCounterVec::new(
            Opts::new(
                "mcpwarden_audit_delivery_failures_total",
                "Failed deliveries to a remote audit sink (each is retried with backoff), by sink",
            ),
            &["sink"],
        )
        .expect("valid metric");
        let calls_in_flight = IntGauge::new(
            "mcpwarden_tool_calls_in_flight",
            "Tool calls currently running",
        )
        .expect("valid metric");
        let forwarded = IntCounter::new(
            "mcpwarden_forwarded_requests_total",
            "Requests relayed to the replica that owns their session",
        )
        .expect("valid metric");
        let identity_budget_asks = IntCounterVec::new(
            Opts::new(
                "mcpwarden_identity_budget_asks_total",
                "Asks to the replica that counts an identity's calls per window, by outcome",
            ),
            &["outcome"],
        )
        .expect("valid metric");
        for outcome in ASK_OUTCOMES {
            identity_budget_asks.with_label_values(&[outcome]);
        }
        let identity_budget_peers = IntGauge::new(
            "mcpwarden_identity_budget_peers",
            "Replicas this one counts identity budgets with, itself included (0: alone)",
        )
        .expect("valid metric");
        let tasks = IntCounterVec::new(
            Opts::new(
                "mcpwarden_tasks_total",
                "Tasks (tasks extension) made through the facade, and how they ended",
            ),
            &["event"],
        )
        .expect("valid metric");
        for event in TASK_EVENTS {
            tasks.with_label_values(&[event]);
        }
        let messages_dropped = IntCounterVec::new(
            Opts::new(
                "mcpwarden_messages_dropped_total",
                "Messages the facade did not pass on (no gate lets them through), by kind",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let upstream_recycled = IntCounter::new(
            "mcpwarden_upstream_recycled_total",
            "Server processes replaced because they kept working on a call past its time limit",
        )
        .expect("valid metric");
        let notifications_dropped = IntCounter::new(
            "mcpwarden_notifications_dropped_total",
            "Server notifications shed because the client was not reading its stream",
        )
        .expect("valid metric");
        let egress_refusals = IntCounterVec::new(
            Opts::new(
                "mcpwarden_egress_refusals_total",
                "Upstream connections the facade refused to make (SSRF guard), by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let gateway_conflicts = prometheus::IntGaugeVec::new(
            Opts::new(
                "mcpwarden_gateway_conflicts",
                "Names a gateway withholds because two backends serve them or they could be confused, by kind",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let gateway_conflicts_resolved = prometheus::IntGaugeVec::new(
            Opts::new(
                "mcpwarden_gateway_conflicts_resolved",
                "Conflicting names a gateway serves from the backend its mapping names, by kind",
            ),
            &["kind"],
        )
        .expect("valid metric");
        let streams_ended = IntCounterVec::new(
            Opts::new(
                "mcpwarden_streams_ended_total",
                "Held client streams (subscriptions/listen, a legacy GET stream) the facade ended itself, by stream and reason",
            ),
            &["stream", "reason"],
        )
        .expect("valid metric");
        for stream in HeldStream::ALL {
            for reason in StreamEnd::ALL {
                streams_ended.with_label_values(&[stream.as_str(), reason.as_str()]);
            }
        }
        for c in [
            Box::new(streams_ended.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(egress_refusals.clone()),
            Box::new(gateway_conflicts.clone()),
            Box::new(gateway_conflicts_resolved.clone()),
            Box::new(notifications_dropped.clone()),
            Box::new(messages_dropped.clone()),
            Box::new(upstream_recycled.clone()),
            Box::new(forwarded.clone()),
            Box::new(identity_budget_asks.clone()),
            Box::new(identity_budget_peers.clone()),
            Box::new(tasks.clone()),
            Box::new(tool_calls.clone()),
            Box::new(tool_call_duration.clone()),
            Box::new(tool_output_bytes.clone()),
            Box::new(policy_denials.clone()),
            Box::new(tools.clone()),
            Box::new(redactions.clone()),
            Box::new(audit_dropped_total.clone()),
            Box::new(audit_buffered.clone()),
            Box::new(audit_delivered.clone()),
            Box::new(audit_failures.clone()),
            Box::new(calls_in_flight.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        for c in [
            Box::new(requests.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(request_duration.clone()),
            Box::new(sessions_active.clone()),
            Box::new(bridges_active.clone()),
            Box::new(upstream_restarts.clone()),
            Box::new(upstream_invalid.clone()),
            Box::new(upstream_unmatched.clone()),
            Box::new(backlog_dropped.clone()),
            Box::new(http_rejections.clone()),
            Box::new(policy_reloads.clone()),
            Box::new(policy_reload_failing.clone()),
            Box::new(approvals_pending.clone()),
            Box::new(approval_oldest_pending.clone()),
        ] {
            registry.register(c).expect("metric names are unique");
        }
        for sink in ["queue", "file"] {
            audit_dropped_total.with_label_values(&[sink]);
        }
        Metrics {
            registry,
            requests,
            request_duration,
            sessions_active,
            bridges_active,
            upstream_restarts,
            upstream_invalid,
            upstream_unmatched,
            backlog_dropped,
            http_rejections,
            policy_reloads,
            policy_reload_failing,
            approvals_pending,
            approval_oldest_pending,
            tool_calls,
            tool_call_duration,
            tool_output_bytes,
            policy_denials,
            tools,
            redactions,
            audit_dropped_total,
            audit_buffered,
            audit_delivered,
            audit_failures,
            calls_in_flight,
            forwarded,
            identity_budget_asks,
            identity_budget_peers,
            tasks,
            notifications_dropped,
            messages_dropped,
            upstream_recycled,
            egress_refusals,
            gateway_conflicts,
            gateway_conflicts_resolved,
            streams_ended,
        }
    }

    /// Count a held stream the facade ended itself.
    pub fn stream_ended(&self, stream: HeldStream, reason: StreamEnd) {
        self.streams_ended
            .with_label_values(&[stream.as_str(), reason.as_str()])
            .inc();
    }

    /// Count an ask to an identity's owner replica that ended with
    /// `outcome` (one of [`ASK_OUTCOMES`]; anything else is not counted).
    /// A task made, or ended (`event` one of [`TASK_EVENTS`]).
    pub fn task(&self, event: &'static str) {
        if TASK_EVENTS.contains(&event) {
            self.tasks.with_label_values(&[event]).inc();
        }
    }

    pub fn identity_budget_ask(&self, outcome: &'static str) {
        if ASK_OUTCOMES.contains(&outcome) {
            self.identity_budget_asks
                .with_label_values(&[outcome])
                .inc();
        }
    }

    /// The dropped-records counter of audit sink `sink` (`queue`, `file`, `http`).
    pub fn audit_dropped(&self, sink: &'static str) -> IntCounter {
        self.audit_dropped_total.with_label_values(&[sink])
    }

    /// The HTTP audit sink's meters.
    pub fn audit_http_meters(&self) -> crate::sinks::http::Meters {
        crate::sinks::http::Meters {
            dropped: self.audit_dropped("http"),
            buffered: self.audit_buffered.with_label_values(&["http"]),
            delivered: self.audit_delivered.with_label_values(&["http"]),
            failures: self.audit_failures.with_label_values(&["http"]),
        }
    }

    /// Count one answered client request.
    pub fn observe_request(&self, method: &str, outcome: &'static str, took: Duration) {
        let method = method_label(method);
        self.requests.with_label_values(&[method, outcome]).inc();
        self.request_duration
            .with_label_values(&[method])
            .observe(took.as_secs_f64());
    }

    /// Count a message no gate let through. `kind` is one of a fixed set
    /// (`client_notification`, `client_response`, `server_request`,
    /// `server_notification`).
    pub fn dropped(&self, kind: &'static str) {
        self.messages_dropped.with_label_values(&[kind]).inc();
    }

    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding cannot fail");
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_methods_share_one_label() {
        let m = Metrics::new();
        for i in 0..1000 {
            m.observe_request(&format!("made/up/{i}"), "error", Duration::from_millis(1));
        }
        m.observe_request("tools/call", "ok", Duration::from_millis(1));
        let text = String::from_utf8(m.render()).unwrap();
        assert!(
            text.contains(r#"mcpwarden_requests_total{method="other",outcome="error"} 1000"#),
            "{text}"
        );
        assert!(text.contains(r#"mcpwarden_requests_total{method="tools/call",outcome="ok"} 1"#));
        assert!(!text.contains("made/up"));
    }
}
