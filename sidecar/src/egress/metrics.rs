//! The egress proxy's Prometheus metrics, in a registry of its own (the
//! proxy runs as its own process; nothing of the facade's is registered).
//!
//! Labels come from bounded enums ([`Outcome`], the two directions): no
//! client name, host or address becomes a series.

use prometheus::{Encoder, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

/// How one request to the proxy ended: the `outcome` label and the audit
/// record's `outcome` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A tunnel was opened and has ended.
    Tunnel,
    /// A plain `http://` request was forwarded.
    Forwarded,
    /// No or a wrong credential (407).
    Unauthenticated,
    /// The pair is not approved for this client (403).
    HostNotApproved,
    /// A resolved (or given) address is one the guard refuses (403).
    AddressNotAllowed,
    /// Not a request the proxy serves: malformed, `https://` absolute form,
    /// origin form (400/405).
    BadRequest,
    /// The client is at its connection bound (429).
    Limited,
    /// The name did not resolve, or no address could be connected in time
    /// (502/504).
    UpstreamFailed,
}

impl Outcome {
    pub const ALL: [Outcome; 8] = [
        Outcome::Tunnel,
        Outcome::Forwarded,
        Outcome::Unauthenticated,
        Outcome::HostNotApproved,
        Outcome::AddressNotAllowed,
        Outcome::BadRequest,
        Outcome::Limited,
        Outcome::UpstreamFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Tunnel => "tunnel",
            Outcome::Forwarded => "forwarded",
            Outcome::Unauthenticated => "unauthenticated",
            Outcome::HostNotApproved => "host_not_approved",
            Outcome::AddressNotAllowed => "address_not_allowed",
            Outcome::BadRequest => "bad_request",
            Outcome::Limited => "limited",
            Outcome::UpstreamFailed => "upstream_failed",
        }
    }
}

pub struct EgressMetrics {
    pub registry: Registry,
    /// `mcpwarden_egress_requests_total{outcome}`.
    pub requests: IntCounterVec,
    /// `mcpwarden_egress_bytes_total{direction}`: `up` (client to
    /// upstream) and `down`.
    pub bytes: IntCounterVec,
    pub tunnels_active: IntGauge,
    /// Clients in the set in force.
    pub clients: IntGauge,
    /// 1 while the clients file on disk is one the proxy could not take.
    pub clients_reload_failing: IntGauge,
    pub audit_dropped: IntCounter,
}

impl EgressMetrics {
    pub fn new() -> EgressMetrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "mcpwarden_egress_requests_total",
                "Requests to the egress proxy, by how they ended",
            ),
            &["outcome"],
        )
        .expect("metric");
        let bytes = IntCounterVec::new(
            Opts::new(
                "mcpwarden_egress_bytes_total",
                "Bytes relayed by the egress proxy (up: to the upstream)",
            ),
            &["direction"],
        )
        .expect("metric");
        let gauge = |name: &str, help: &str| IntGauge::new(name, help).expect("metric");
        let m = EgressMetrics {
            tunnels_active: gauge(
                "mcpwarden_egress_tunnels_active",
                "Tunnels and forwarded requests open now",
            ),
            clients: gauge(
                "mcpwarden_egress_clients",
                "Clients in the clients file in force",
            ),
            clients_reload_failing: gauge(
                "mcpwarden_egress_clients_reload_failing",
                "1 while the clients file on disk could not be taken",
            ),
            audit_dropped: IntCounter::new(
                "mcpwarden_egress_audit_dropped_total",
                "Audit lines dropped because the writer could not keep up",
            )
            .expect("metric"),
            requests,
            bytes,
            registry,
        };
        for o in Outcome::ALL {
            m.requests.with_label_values(&[o.as_str()]);
        }
        for d in ["up", "down"] {
            m.bytes.with_label_values(&[d]);
        }
        m.registry
            .register(Box::new(m.requests.clone()))
            .expect("register");
        m.registry
            .register(Box::new(m.bytes.clone()))
            .expect("register");
        for g in [&m.tunnels_active, &m.clients, &m.clients_reload_failing] {
            m.registry.register(Box::new(g.clone())).expect("register");
        }
        m.registry
            .register(Box::new(m.audit_dropped.clone()))
            .expect("register");
        m
    }

    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

impl Default for EgressMetrics {
    fn default() -> Self {
        EgressMetrics::new()
    }
}
