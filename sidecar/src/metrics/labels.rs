//! The bounded sets every label value of the facade's metrics comes from
//! (`crate::metrics` registers the series): known MCP methods (the rest
//! share `other`), and fixed enums of outcomes and reasons.

/// MCP methods that get their own label value; everything else is `other`.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "tasks/get",
    "tasks/update",
    "tasks/list",
    "tasks/result",
    "tasks/cancel",
];

/// How an ask to the replica that counts an identity's calls ends: the
/// owner granted or refused the call, could not be asked in time, or the
/// identity had too many asks waiting already.
pub const ASK_OUTCOMES: [&str; 4] = ["granted", "refused", "unreachable", "busy"];

/// What became of a task (tasks extension): made, or how it ended.
pub const TASK_EVENTS: [&str; 5] = [
    "created",
    "completed",
    "failed",
    "cancelled",
    "wall_time_exceeded",
];

/// A stream the facade holds open for a caller until something ends it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldStream {
    /// A modern client's `subscriptions/listen`.
    Listen,
    /// A legacy session's server-to-client GET stream.
    Get,
}

impl HeldStream {
    pub const ALL: [HeldStream; 2] = [HeldStream::Listen, HeldStream::Get];

    pub fn as_str(self) -> &'static str {
        match self {
            HeldStream::Listen => "listen",
            HeldStream::Get => "get",
        }
    }
}

/// Why the facade itself ended a held stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// The credential the caller opened it with expired.
    CredentialExpired,
    /// The facade stopped (SIGTERM, after its drain).
    Shutdown,
}

impl StreamEnd {
    pub const ALL: [StreamEnd; 2] = [StreamEnd::CredentialExpired, StreamEnd::Shutdown];

    pub fn as_str(self) -> &'static str {
        match self {
            StreamEnd::CredentialExpired => "credential_expired",
            StreamEnd::Shutdown => "shutdown",
        }
    }
}

pub fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("other")
}
