//! Every way the facade refuses a request, and the one place a refusal
//! becomes a JSON-RPC error (the stable codes -32001…-32008 and -32602, `data: {reason, limit?,
//! observed?, hint}`, a message that tells the model how to recover).

use bytes::Bytes;
use mcp_warden_policy::Denial;
use serde_json::json;

use crate::jsonrpc::{self, RequestId};

pub const AUTH_REQUIRED: i64 = -32001;
pub const PERMISSION_DENIED: i64 = -32003;
pub const POLICY_BLOCKED: i64 = -32004;
pub const BUDGET_EXCEEDED: i64 = -32005;
pub const SANDBOX_VIOLATION: i64 = -32006;
pub const TIMEOUT: i64 = -32007;
pub const APPROVAL_REQUIRED: i64 = -32008;

/// Which budget ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    ArgBytes,
    OutputBytes,
    CallsPerSession,
    CallsPerMinute,
    ConcurrentCalls,
    ConcurrentCallsTotal,
    SessionWallTime,
    CallsPerIdentity,
    /// The replica that counts the identity's calls could not be asked (or
    /// too many of the identity's asks wait): the call is refused, not
    /// guessed at, and may be retried.
    IdentityBudgetUnavailable,
    /// Tasks (tasks extension) the identity has running on this replica.
    LiveTasks,
}

impl Budget {
    pub fn reason(self) -> &'static str {
        match self {
            Budget::ArgBytes => "arg_bytes_exceeded",
            Budget::OutputBytes => "output_bytes_exceeded",
            Budget::CallsPerSession => "calls_per_session_exceeded",
            Budget::CallsPerMinute => "rate_limited",
            Budget::ConcurrentCalls => "concurrency_exceeded",
            Budget::ConcurrentCallsTotal => "total_concurrency_exceeded",
            Budget::SessionWallTime => "session_wall_time_exceeded",
            Budget::CallsPerIdentity => "calls_per_identity_exceeded",
            Budget::IdentityBudgetUnavailable => "identity_budget_unavailable",
            Budget::LiveTasks => "live_tasks_exceeded",
        }
    }

    fn hint(self) -> &'static str {
        match self {
            Budget::ArgBytes => "Send smaller arguments (split the work into several calls).",
            Budget::OutputBytes => "Ask for less output (a narrower query, a page, a range).",
            Budget::CallsPerSession => "This session has used all its calls; finish with what you have or start a new session.",
            Budget::CallsPerMinute => "Wait a few seconds before calling again.",
            Budget::ConcurrentCalls | Budget::ConcurrentCallsTotal => "Wait for a running call to finish, then retry (a call you cancelled counts until its time limit: the server may still be running it).",
            Budget::SessionWallTime => "This session has reached its time limit; start a new session.",
            Budget::CallsPerIdentity => "You have used your calls for this window across all your sessions (a new session does not reset it); wait for the next window.",
            Budget::IdentityBudgetUnavailable => "Your calls per window could not be counted just now (the replica that counts them did not answer); retry in a few seconds.",
            Budget::LiveTasks => "You have as many tasks running as you may; wait for one to finish (or cancel one), then retry.",
        }
    }
}

/// Why a task id (the tasks extension's `params.taskId`) is refused. The
/// ids clients see are the facade's own, sealed over the caller, the
/// server's task and the replica: anything else is refused before the
/// server hears of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TaskIdError {
    #[error("the taskId was altered or was not issued by this facade")]
    Tampered,
    #[error("the taskId was issued to another caller")]
    OtherCaller,
    #[error("the task's time to live has passed")]
    Expired,
    #[error("the task is not known here any more (it ended and was forgotten, or its replica restarted)")]
    Unknown,
    #[error("the task is held by another replica that cannot be reached")]
    OtherReplica,
}

impl TaskIdError {
    pub fn reason(self) -> &'static str {
        match self {
            TaskIdError::Tampered => "task_id_tampered",
            TaskIdError::OtherCaller => "task_other_caller",
            TaskIdError::Expired => "task_expired",
            TaskIdError::Unknown => "task_unknown",
            TaskIdError::OtherReplica => "task_other_replica",
        }
    }
}

/// A refused request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    #[error("Authentication required: {hint}")]
    Auth { hint: &'static str },
    /// A valid token without the scopes its issuer requires to use this
    /// server at all (HTTP 403 `insufficient_scope`); a role missing for
    /// one tool is a policy denial instead.
    #[error("Insufficient scope: this server needs a token with scope {scope:?}")]
    Scope { scope: String },
    /// A method the facade does not serve (not in the method table).
    #[error("Method not found: `{}` is not served through this facade", crate::gates::audit::bounded(.method))]
    MethodNotAllowed { method: String },
    /// Params a strict reader refuses: a key given twice, or unreadable.
    #[error("Invalid params: {detail}")]
    Unreadable { duplicate: bool, detail: String },
    /// A modern request for a protocol version the facade does not serve.
    #[error("Unsupported protocol version {requested:?}")]
    UnsupportedVersion { requested: String },
    /// A modern request without a `_meta` field every request must carry.
    #[error(
        "Invalid params: _meta[{field:?}] is required on every request of this protocol version"
    )]
    MissingMeta { field: &'static str },
    /// An HTTP header does not match the body (or is missing).
    #[error("Header mismatch: {detail}")]
    HeaderMismatch { detail: String },
    /// A retry's `requestState` is not one the facade will continue.
    #[error("Invalid params: {0}")]
    RequestState(crate::request_state::StateError),
    /// A retry without the answer its state asks for.
    #[error("Invalid params: inputResponses has no answer for {key:?}")]
    MissingInput { key: &'static str },
    /// A task request whose `taskId` the facade will not pass on.
    #[error("Invalid params: {0}")]
    TaskId(TaskIdError),
    /// A tasks extension request from a client that did not declare the
    /// extension in this request's capabilities.
    #[error("Missing required client capability: `{method}` needs the io.modelcontextprotocol/tasks extension")]
    MissingTasksExtension { method: String },
    /// A forwarded request the server did not answer in time.
    #[error("the MCP server did not answer `{method}` within {limit_secs} s")]
    RequestTimeout {
        method: &'static str,
        limit_secs: u64,
    },
    #[error("{0}")]
    Policy(Denial),
    #[error("Budget exceeded for `{tool}`: {} (limit {limit}{}). {}", .budget.reason(), .observed.map(|o| format!(", observed {o}")).unwrap_or_default(), .budget.hint())]
    Budget {
        tool: String,
        budget: Budget,
        limit: u64,
        observed: Option<u64>,
    },
    #[error("Tool `{tool}` did not finish within {limit_secs} s and was cancelled. Retry with a smaller task, or check whether it had side effects first.")]
    Timeout { tool: String, limit_secs: u64 },
    #[error("A person declined the call to tool `{tool}` (argument `{rule}`). Do not retry the same call; ask the user how to proceed.")]
    ApprovalDeclined {
        tool: String,
        rule: String,
        /// Who declined, for an out-of-band approval.
        approver: Option<String>,
    },
    /// An out-of-band approval could not be had: nobody decided in time,
    /// too many calls wait, or no admin listener serves `/approvals`.
    #[error("Tool `{tool}` needs a person to approve argument `{rule}` through the platform's approval channel, and no approval came ({}). Ask the user to get the call approved, then retry.", .reason.replace('_', " "))]
    ApprovalUnavailable {
        tool: String,
        rule: String,
        /// `approval_timeout`, `approval_queue_full`, `approval_share_exhausted`
        /// (the caller holds its share of the queue) or `approval_unavailable`.
        reason: &'static str,
        limit_secs: u64,
    },
    #[error("Tool `{tool}` returned structured output that does not match its outputSchema ({detail}). Treat its result as unavailable.")]
    InvalidOutput { tool: String, detail: String },
}

impl Refusal {
    /// The refusal of params a strict reader cannot take.
    pub fn unreadable(e: &serde_json::Error) -> Refusal {
        let duplicate = e.to_string().contains("duplicate key");
        let detail = if duplicate {
            format!("{e}; send each key once")
        } else {
            format!("the request cannot be read ({e}); send valid UTF-8 strings and numbers a 64-bit float can hold")
        };
        Refusal::Unreadable { duplicate, detail }
    }

    pub fn code(&self) -> i64 {
        match self {
            Refusal::Auth { .. } => AUTH_REQUIRED,
            Refusal::Scope { .. } => PERMISSION_DENIED,
            Refusal::MethodNotAllowed { .. } => jsonrpc::codes::METHOD_NOT_FOUND,
            Refusal::Unreadable { .. } => jsonrpc::codes::INVALID_PARAMS,
            Refusal::RequestTimeout { .. } => TIMEOUT,
            Refusal::UnsupportedVersion { .. } => crate::era::codes::UNSUPPORTED_VERSION,
            Refusal::MissingMeta { .. } => jsonrpc::codes::INVALID_PARAMS,
            Refusal::HeaderMismatch { .. } => crate::era::codes::HEADER_MISMATCH,
            Refusal::RequestState(_) | Refusal::MissingInput { .. } | Refusal::TaskId(_) => {
                jsonrpc::codes::INVALID_PARAMS
            }
            Refusal::MissingTasksExtension { .. } => crate::era::codes::MISSING_CAPABILITY,
            Refusal::Policy(d) => d.code() as i64,
            Refusal::Budget { .. } => BUDGET_EXCEEDED,
            Refusal::Timeout { .. } => TIMEOUT,
            Refusal::ApprovalDeclined { .. } => POLICY_BLOCKED,
            Refusal::ApprovalUnavailable { .. } => APPROVAL_REQUIRED,
            Refusal::InvalidOutput { .. } => jsonrpc::codes::INTERNAL_ERROR,
        }
    }

    /// The gate that refused (a span event's name): `auth`, `request`
    /// (method table, strict read, modern `_meta`, retries), `policy`,
    /// `budget`, `schema`, `approval`, `upstream` or `output`.
    pub fn gate(&self) -> &'static str {
        match self {
            Refusal::Auth { .. } | Refusal::Scope { .. } => "auth",
            Refusal::MethodNotAllowed { .. }
            | Refusal::Unreadable { .. }
            | Refusal::UnsupportedVersion { .. }
            | Refusal::MissingMeta { .. }
            | Refusal::HeaderMismatch { .. }
            | Refusal::RequestState(_)
            | Refusal::MissingInput { .. }
            | Refusal::TaskId(_)
            | Refusal::MissingTasksExtension { .. } => "request",
            Refusal::Policy(Denial::InvalidParams { .. }) => "schema",
            Refusal::Policy(Denial::ApprovalRequired { .. }) => "approval",
            Refusal::Policy(_) => "policy",
            Refusal::Budget {
                budget: Budget::OutputBytes,
                ..
            } => "output",
            Refusal::Budget { .. } => "budget",
            Refusal::RequestTimeout { .. } | Refusal::Timeout { .. } => "upstream",
            Refusal::ApprovalDeclined { .. } | Refusal::ApprovalUnavailable { .. } => "approval",
            Refusal::InvalidOutput { .. } => "output",
        }
    }

    /// Stable snake_case reason: `data.reason`, the audit line and the
    /// `policy_denials_total{reason}` label.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::Auth { .. } => "auth_required",
            Refusal::Scope { .. } => "insufficient_scope",
            Refusal::MethodNotAllowed { .. } => "method_not_allowed",
            Refusal::Unreadable {
                duplicate: true, ..
            } => "duplicate_key",
            Refusal::Unreadable { .. } => "unreadable_params",
            Refusal::RequestTimeout { .. } => "timeout",
            Refusal::UnsupportedVersion { .. } => "unsupported_protocol_version",
            Refusal::MissingMeta { .. } => "missing_meta",
            Refusal::HeaderMismatch { .. } => "header_mismatch",
            Refusal::RequestState(e) => e.reason(),
            Refusal::MissingInput { .. } => "missing_input_response",
            Refusal::TaskId(e) => e.reason(),
            Refusal::MissingTasksExtension { .. } => "missing_tasks_extension",
            Refusal::Policy(d) => d.reason(),
            Refusal::Budget { budget, .. } => budget.reason(),
            Refusal::Timeout { .. } => "timeout",
            Refusal::ApprovalDeclined { .. } => "approval_declined",
            Refusal::ApprovalUnavailable { reason, .. } => reason,
            Refusal::InvalidOutput { .. } => "output_schema_violation",
        }
    }

    fn hint(&self) -> &'static str {
        match self {
            Refusal::Auth { hint } => hint,
            Refusal::Scope { .. } => "Log in again asking for the scopes the WWW-Authenticate challenge names.",
            Refusal::MethodNotAllowed { .. } => {
                "Use the methods the server's capabilities offer (tools, resources, prompts, completion, logging)."
            }
            Refusal::Unreadable { .. } => "Send the request again as plain JSON, each key once.",
            Refusal::RequestTimeout { .. } => "Retry later, or with a smaller request.",
            Refusal::UnsupportedVersion { .. } => "Retry with one of the supported versions.",
            Refusal::MissingMeta { .. } => "Send the protocol version and the client's capabilities in _meta.",
            Refusal::HeaderMismatch { .. } => "Send MCP-Protocol-Version, Mcp-Method and Mcp-Name headers that match the body.",
            Refusal::RequestState(_) => "Send the request again without requestState and inputResponses.",
            Refusal::MissingInput { .. } => "Answer every input request, with the same requestState.",
            Refusal::TaskId(_) => "Use the taskId this facade returned to you for a task you created; call the tool again for a new task.",
            Refusal::MissingTasksExtension { .. } => "Declare the io.modelcontextprotocol/tasks extension in _meta's clientCapabilities.",
            Refusal::Policy(d) => d.hint(),
            Refusal::Budget { budget, .. } => budget.hint(),
            Refusal::Timeout { .. } => {
                "Retry with a smaller task, or check whether the call had side effects first."
            }
            Refusal::ApprovalDeclined { .. } => "Ask the user how to proceed.",
            Refusal::ApprovalUnavailable { .. } => {
                "Ask the user to have the call approved on the platform's approval channel, then retry; or choose a value that needs no approval."
            }
            Refusal::InvalidOutput { .. } => "Report the tool as broken to an administrator.",
        }
    }

    /// The JSON-RPC error response: the only place refusals become wire bytes.
    pub fn to_response(&self, id: Option<&RequestId>) -> Bytes {
        let mut data = json!({ "reason": self.reason(), "hint": self.hint() });
        match self {
            // The spec's own error: its data is the spec's shape (with the
            // facade's reason and hint beside it).
            Refusal::UnsupportedVersion { requested } => {
                let spec = crate::era::unsupported_version_data(requested);
                data["supported"] = spec["supported"].clone();
                data["requested"] = spec["requested"].clone();
            }
            Refusal::Budget {
                limit, observed, ..
            } => {
                data["limit"] = json!(limit);
                if let Some(observed) = observed {
                    data["observed"] = json!(observed);
                }
            }
            Refusal::MissingTasksExtension { .. } => {
                data["requiredCapabilities"] =
                    json!({ "extensions": { crate::era::TASKS_EXTENSION: {} } });
            }
            Refusal::Scope { scope } => data["scope"] = json!(scope),
            Refusal::Timeout { limit_secs, .. }
            | Refusal::RequestTimeout { limit_secs, .. }
            | Refusal::ApprovalUnavailable { limit_secs, .. } => data["limit"] = json!(limit_secs),
            Refusal::Policy(Denial::InvalidParams { violations, .. }) => {
                data["violations"] = violations
                    .iter()
                    .map(|v| json!({ "path": v.instance_path, "keyword": v.keyword, "message": v.message }))
                    .collect();
            }
            Refusal::Policy(d) => {
                // Every argument rule that refused or asked, so nothing a
                // person approves (or a model fixes) is left unnamed.
                if !d.rules().is_empty() {
                    data["rules"] = d
                        .rules()
                        .iter()
                        .map(|r| json!({ "rule": r.rule, "reason": r.reason }))
                        .collect();
                }
                if let Some(limit) = d.limit() {
                    data["limit"] = json!(limit);
                }
                if let Some(observed) = d.observed() {
                    data["observed"] = json!(observed);
                }
            }
            _ => {}
        }
        jsonrpc::error_response(id, self.code(), &self.to_string(), Some(data))
    }
}

impl crate::spans::Refused for Refusal {
    fn gate(&self) -> &'static str {
        Refusal::gate(self)
    }
    fn code(&self) -> i64 {
        Refusal::code(self)
    }
    fn reason(&self) -> &'static str {
        Refusal::reason(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_refusals_carry_limit_and_observed() {
        let r = Refusal::Budget {
            tool: "t".into(),
            budget: Budget::ArgBytes,
            limit: 10,
            observed: Some(12),
        };
        let v: serde_json::Value =
            serde_json::from_slice(&r.to_response(Some(&RequestId::number(1)))).unwrap();
        assert_eq!(v["error"]["code"], -32005);
        assert_eq!(v["error"]["data"]["reason"], "arg_bytes_exceeded");
        assert_eq!(
            (
                v["error"]["data"]["limit"].as_u64(),
                v["error"]["data"]["observed"].as_u64()
            ),
            (Some(10), Some(12))
        );
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("smaller arguments"));
    }

    #[test]
    fn argument_denials_name_every_rule_in_their_data() {
        use mcp_warden_policy::RuleReason;
        let r = Refusal::Policy(Denial::ApprovalRequired {
            tool: "run".into(),
            rules: vec![
                RuleReason {
                    rule: "cwd".into(),
                    reason: "path_needs_approval",
                },
                RuleReason {
                    rule: "command".into(),
                    reason: "command_needs_approval",
                },
            ],
        });
        let v: serde_json::Value =
            serde_json::from_slice(&r.to_response(Some(&RequestId::number(1)))).unwrap();
        assert_eq!(v["error"]["code"], -32008);
        assert_eq!(
            v["error"]["data"]["rules"],
            json!([
                {"rule": "cwd", "reason": "path_needs_approval"},
                {"rule": "command", "reason": "command_needs_approval"}
            ])
        );
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("`cwd`") && message.contains("`command`"),
            "{message}"
        );
    }

    #[test]
    fn policy_denials_keep_their_codes() {
        let r = Refusal::Policy(Denial::NotAvailable { tool: "x".into() });
        assert_eq!(r.code(), POLICY_BLOCKED);
        assert_eq!(r.reason(), "tool_not_available");
    }
}
