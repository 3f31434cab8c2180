//! Budgets: the per-session, per-identity and per-call limits a policy sets
//! profile-wide and a tool rule overrides field by field. The sidecar's
//! budget layer enforces them; unset fields fall back to the built-in defaults
//! named in each field's doc.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Budgets. Every field is optional: unset fields fall back to the
/// profile-wide value, then to the built-in default named in its doc.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Largest serialized `arguments` object, in bytes (default 65536).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_arg_bytes: Option<u64>,
    /// Largest tool result, in bytes (default 1048576).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_bytes: Option<u64>,
    /// What happens to a result over `maxOutputBytes` (default `truncate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_overflow: Option<OutputOverflow>,
    /// Tool calls one session may make (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_session: Option<u64>,
    /// Sustained tool calls per minute per session, token bucket (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls_per_minute: Option<u64>,
    /// Concurrent tool calls per session (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls: Option<u64>,
    /// Concurrent tool calls across all sessions (default 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrent_calls_total: Option<u64>,
    /// Wall time of one call before it is cancelled (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_seconds: Option<u64>,
    /// Total wall time of a session after which calls are refused (default 28800).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_wall_seconds: Option<u64>,
    /// Tool calls one caller — an issuer-qualified identity, across all its
    /// sessions — may make per window, e.g. `{calls: 100, per: hour}`
    /// (default: no such budget). Windows are fixed (the clock's minute,
    /// hour or day, UTC). Profile-wide it counts every call; on a tool, that
    /// tool's calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_calls_per_identity: Option<IdentityBudget>,
}

/// Calls per identity per window.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IdentityBudget {
    /// Calls allowed in one window (at least 1).
    pub calls: u64,
    /// The window.
    pub per: BudgetWindow,
}

/// The window of an identity budget.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum BudgetWindow {
    Minute,
    Hour,
    Day,
}

impl BudgetWindow {
    /// The window's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            BudgetWindow::Minute => 60,
            BudgetWindow::Hour => 3600,
            BudgetWindow::Day => 86_400,
        }
    }
}

/// What happens to output over the limit.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum OutputOverflow {
    /// Cut the text and add a visible marker saying how much was dropped.
    #[default]
    Truncate,
    /// Replace the result with a BUDGET_EXCEEDED error.
    Fail,
}
