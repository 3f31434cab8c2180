//! mcp-warden's tool facade: an MCP proxy that is the only way in to an MCP
//! server and enforces a `FacadePolicy` on every message.
//!
//! # Layers
//!
//! The facade is six layers. Each depends only on the layers below it; where
//! a lower layer needs something from above (a sink, a clock, metrics, the
//! shared context), the top hands it down as a small trait or struct. The
//! protocol layer is a crate of its own (`mcp-warden-protocol`), so the
//! compiler refuses an import that climbs out of it; `tests/layers.rs` reads
//! every `crate::…`/`super::…` path against [`LAYERS`] and fails on one that
//! climbs any other, and on an import cycle between two modules.
//!
//! ```text
//!  app         app · cli · admin · server · downstream · policy_file · egress
//!   │            assembly: the command line, the listeners, the client
//!   │            transports, the admin port; App = Context + Router + …;
//!   │            the egress proxy mode (its own process, `egress`)
//!  router      router (sessions, probe)
//!   │            which upstream link a message goes to (a session's own
//!   │            channel, the modern hub, a legacy bridge), the session table
//!  session     session (context, steps, channel, intake, route, mrtr, …)
//!   │            one client's streams, ids and parked calls; the steps that
//!   │            drive a request through the gates and to the server
//!  gates       gates · auth · credentials · approvals · metrics
//!   │            policy decisions over the call (who, which policy, which
//!   │            budgets, the request): refusals, output filter, audit
//!  transports  upstream · net · tls · sinks · spans · bridge
//!   │            bytes in and out: server links, outbound HTTP(S), audit
//!   │            sinks, trace spans, the in-pod stdio bridge
//!  protocol    jsonrpc · era · framing · sse · json_stream · strict_json ·
//!              request_state
//!                (crate mcp-warden-protocol) what an MCP message is
//! ```
//!
//! A message from a client travels down: [`downstream`] takes it, the
//! [`router`] finds its session, the [`session`] registers it and runs its
//! step ([`session::steps`]), which passes the [`gates`] and goes out on an
//! [`upstream`] link; the answer comes back up the same way.
//!
//! # Where a new feature goes
//!
//! - **A new gate** (a check a call must pass): a function or type in
//!   [`gates`] over what the call carries ([`gates::Request`]: caller,
//!   policy snapshot, the request) and the budgets it is handed, returning
//!   a [`gates::refusal::Refusal`] variant (the one place a refusal becomes
//!   a JSON-RPC error); then one line in the step that runs it
//!   ([`session::steps::call`] for tools/call, in its written order), and
//!   its method-table entry in [`gates::methods`] if it is per method.
//! - **A new transport** on the client side: a module in [`downstream`]
//!   that takes each message through [`downstream::take`] and hands it to a
//!   session found or made by the [`router`]; on the server side, a
//!   [`upstream::Link`] kind in [`upstream`] (it sees only protocol types).
//! - **A new upstream kind** (another server, a gateway's several): an
//!   [`upstream::UpstreamTarget`] variant for how to reach it, and a route
//!   in [`router`] that decides which link a session's messages take.
//! - **A new metric**: a field of [`metrics::Metrics`], registered there,
//!   with labels from a bounded enum.
#![forbid(unsafe_code)]

pub use mcp_warden_protocol::{
    era, framing, json_stream, jsonrpc, request_state, sse, strict_json,
};

pub mod admin;
pub mod app;
pub mod approvals;
pub mod auth;
pub mod bridge;
pub mod cli;
pub mod credentials;
pub mod downstream;
pub mod egress;
pub mod gates;
pub mod metrics;
pub mod net;
pub mod policy_file;
pub mod router;
pub mod server;
pub mod session;
pub mod sinks;
pub mod spans;
pub mod tls;
pub mod upstream;

/// The layer table, bottom first: a module may use modules of its own
/// layer and of the layers below, never one above. The picture above draws
/// it; `tests/layers.rs` holds every file to it.
pub const LAYERS: &[(&str, &[&str])] = &[
    (
        "protocol",
        &[
            "jsonrpc",
            "era",
            "framing",
            "sse",
            "json_stream",
            "strict_json",
            "request_state",
        ],
    ),
    (
        "transports",
        &["upstream", "net", "tls", "sinks", "spans", "bridge"],
    ),
    (
        "gates",
        &["gates", "auth", "credentials", "approvals", "metrics"],
    ),
    ("session", &["session"]),
    ("router", &["router"]),
    (
        "app",
        &[
            "app",
            "cli",
            "admin",
            "server",
            "downstream",
            "policy_file",
            "egress",
        ],
    ),
];
