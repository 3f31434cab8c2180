//! The gates: the policy decisions a request passes, as data and functions
//! over the call itself — who calls ([`crate::auth::identity`]), the policy
//! snapshot it is judged by ([`policy`]), the budgets it spends
//! ([`budget`]) and the request ([`Request`]) — never over a session.
//!
//! Where it sits: above the protocol and the transports, below the session.
//! A session's steps ([`crate::session::steps`]) compose these gates with
//! the forwarding only a session can do:
//! - [`methods`]: every method the facade lets through and the gates each
//!   one passes;
//! - [`policy`]: the live policy, swapped atomically on reload;
//! - [`planning`]: planning mode as a caller asks for it;
//! - [`budget`]: per-session and facade-wide call budgets;
//! - [`shared_budget`]: calls per identity across replicas (each
//!   identity's owner replica counts; the others ask it);
//! - [`input`]: a call's arguments against the tool's input schema;
//! - [`registry`]: the upstream tools as observed (hashes, drift,
//!   poisoning);
//! - [`output`]: the filter every answer of the server passes;
//! - [`refusal`]: every way a request is refused, and the one place a
//!   refusal becomes a JSON-RPC error;
//! - [`audit`]: the audit trail.

pub mod audit;
pub mod budget;
pub mod input;
pub mod methods;
pub mod output;
pub mod planning;
pub mod policy;
pub mod refusal;
pub mod registry;
pub mod shared_budget;

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::auth::identity::Identity;
use crate::jsonrpc::{Message, RequestId};
use output::Filtered;
use policy::LivePolicy;
use refusal::Refusal;

/// A client request as the session hands it to its step.
pub struct Request {
    /// The client's id (canonical).
    pub id: RequestId,
    pub msg: Message,
    /// The whole request, read strictly (no duplicate keys).
    pub value: Value,
    /// The stream its answer goes on.
    pub stream: u64,
    pub caller: Arc<Identity>,
    /// The caller's role under `policy` (checked by the role gate).
    pub role: Option<mcp_warden_crds::Role>,
    /// The caller asked for planning mode (its session or this request).
    pub planning: bool,
    /// Effect tags the request asked to have refused ([`planning::asks_denied`]).
    pub denied: mcp_warden_policy::risk::Effects,
    /// The policy this request is judged by, start to end.
    pub policy: Arc<LivePolicy>,
    pub started: Instant,
    /// Its span (a no-op when tracing is off): gates add events, the step
    /// the outcome; it ends when the request is dropped.
    pub span: crate::spans::RequestSpan,
}

impl Request {
    /// What the caller asked of the decision (only ever more restriction).
    pub fn asks(&self) -> mcp_warden_policy::Asks {
        mcp_warden_policy::Asks {
            planning: self.planning,
            denied: self.denied,
        }
    }

    /// `params`, or an empty object.
    pub fn params(&self) -> &Value {
        static EMPTY: Value = Value::Null;
        self.value.get("params").unwrap_or(&EMPTY)
    }
}

/// How an exchange ended, for metrics and the audit line.
pub enum Ended {
    /// Answered with the server's (filtered) answer; `error`: it was an error.
    Answered { filtered: Filtered, error: bool },
    /// Answered with a refusal (the filter refused the answer, or the time ran out).
    Refused(Refusal),
    /// Answered with an upstream failure.
    Failed,
    /// Not answered: the client cancelled it, or the session ended.
    Unanswered,
}

impl Ended {
    pub fn outcome(&self) -> &'static str {
        match self {
            Ended::Answered { error: false, .. } => "ok",
            Ended::Answered { error: true, .. } => "error",
            Ended::Refused(r) if r.reason() == "timeout" => "timeout",
            Ended::Refused(_) => "denied",
            Ended::Failed => "failed",
            Ended::Unanswered => "cancelled",
        }
    }
}
