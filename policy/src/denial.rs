//! The typed denials [`crate::decide`] and the item decisions produce, and
//! their stable codes (contract): the sidecar turns a [`Denial`] into a
//! JSON-RPC error in one place (`code()`, `reason()`, `rules()`,
//! `limit()`, `observed()`, `hint()`, and `Display` as the message).
//!
//! Messages name the tool, rule or URI as the caller sent it (bounded in
//! length), never argument values.

use mcp_warden_crds::policy::{RiskLevel, Role, SideEffect};

use crate::args::RuleHit;
use crate::risk::effect_name;
use crate::schema::Violation;
use crate::tools::Quarantine;

/// The stable error codes of the facade's gates (contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// -32001: no or invalid token.
    AuthRequired,
    /// -32003: role lacks the tool's required role.
    PermissionDenied,
    /// -32004: not allowed, quarantined, argument rule deny.
    PolicyBlocked,
    /// -32005: a budget is spent.
    BudgetExceeded,
    /// -32006: write-capable tool without an approved sandbox.
    SandboxViolation,
    /// -32007: the call ran past its limit.
    Timeout,
    /// -32008: an argument needs approval and the client cannot ask.
    ApprovalRequired,
    /// -32602: arguments fail the inputSchema.
    InvalidParams,
}

impl ErrorCode {
    /// The JSON-RPC error code.
    pub fn code(self) -> i32 {
        match self {
            ErrorCode::AuthRequired => -32001,
            ErrorCode::PermissionDenied => -32003,
            ErrorCode::PolicyBlocked => -32004,
            ErrorCode::BudgetExceeded => -32005,
            ErrorCode::SandboxViolation => -32006,
            ErrorCode::Timeout => -32007,
            ErrorCode::ApprovalRequired => -32008,
            ErrorCode::InvalidParams => -32602,
        }
    }

    /// The name, e.g. `POLICY_BLOCKED`.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::AuthRequired => "AUTH_REQUIRED",
            ErrorCode::PermissionDenied => "PERMISSION_DENIED",
            ErrorCode::PolicyBlocked => "POLICY_BLOCKED",
            ErrorCode::BudgetExceeded => "BUDGET_EXCEEDED",
            ErrorCode::SandboxViolation => "SANDBOX_VIOLATION",
            ErrorCode::Timeout => "TIMEOUT",
            ErrorCode::ApprovalRequired => "APPROVAL_REQUIRED",
            ErrorCode::InvalidParams => "INVALID_PARAMS",
        }
    }
}

/// Why a tool is hidden or a call refused. `Display` is the message for
/// the model; it names the tool as the caller named it, never argument values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denial {
    /// Authenticated, but no role is bound to the caller.
    #[error("You have no role on this server, so nothing on it is available. {}", self.hint())]
    NoRole,
    /// A resource outside the allowlist, denied, or not a URI the policy
    /// can judge (the reason says which).
    #[error("Unknown resource: `{}`. {}", bounded(.uri), self.hint())]
    ResourceNotAvailable {
        /// The URI (or URI template) as the caller sent it.
        uri: String,
        /// `resource_not_available`, or why the URI was refused (`nul_byte`, …).
        reason: &'static str,
    },
    /// A prompt outside the allowlist.
    #[error("Unknown prompt: `{}`. {}", bounded(.name), self.hint())]
    PromptNotAvailable {
        /// The name the caller used.
        name: String,
    },
    /// Below the required role of a resource or prompt rule.
    #[error("The {what} `{}` requires the {} role; you have {}. {}", bounded(.name), role_name(*.required), role_name(*.actual), self.hint())]
    ItemRoleTooLow {
        /// `resource` or `prompt`.
        what: &'static str,
        /// The URI or prompt name.
        name: String,
        /// The rule's `requiredRole`.
        required: Role,
        /// The caller's role.
        actual: Role,
    },
    /// Below the tool's required role.
    #[error("Tool `{tool}` requires the {} role; you have {}. {}", role_name(*.required), role_name(*.actual), self.hint())]
    RoleTooLow {
        /// Exposed name.
        tool: String,
        /// The tool's `requiredRole`.
        required: Role,
        /// The caller's role.
        actual: Role,
    },
    /// Outside the allowlist *or* absent upstream (deliberately one variant).
    #[error("Unknown tool: `{tool}`. {}", self.hint())]
    NotAvailable {
        /// The name the caller used.
        tool: String,
    },
    /// Quarantined definition.
    #[error("Tool `{tool}` is blocked until an administrator reviews its changed or suspicious definition. {}", self.hint())]
    Quarantined {
        /// Exposed name.
        tool: String,
        /// Why.
        cause: Quarantine,
    },
    /// Risk above the ceiling without approval.
    #[error("Tool `{tool}` is {} risk, above this server's ceiling of {}, and has not been approved. {}", risk_name(*.risk), risk_name(*.ceiling), self.hint())]
    RiskAboveCeiling {
        /// Exposed name.
        tool: String,
        /// The tool's effective risk.
        risk: RiskLevel,
        /// The policy's `riskCeiling`.
        ceiling: RiskLevel,
    },
    /// Planning mode (the profile's, the role's or the caller's own) and
    /// the tool has a side effect.
    #[error("Tool `{tool}` has side effects ({}), and this session is in planning mode, where only tools without side effects run. {}", effect_name(*.effect), self.hint())]
    PlanningMode {
        /// Exposed name.
        tool: String,
        /// The first of its effect tags (exec, delete, write, network).
        effect: SideEffect,
    },
    /// The tool has an effect tag the profile (or the caller's role) denies.
    #[error("Tool `{tool}` has a side effect this server does not allow ({}). {}", effect_name(*.effect), self.hint())]
    SideEffectDenied {
        /// Exposed name.
        tool: String,
        /// The first denied tag it has.
        effect: SideEffect,
    },
    /// Write-capable tool without a write-enabled sandbox.
    #[error("Tool `{tool}` can write, and this server's sandbox does not allow writes. {}", self.hint())]
    WriteWithoutSandbox {
        /// Exposed name.
        tool: String,
    },
    /// Argument rules said deny.
    #[error("Tool `{tool}` refused {}. {}", describe(.rules), self.hint())]
    ArgumentDenied {
        /// Exposed name.
        tool: String,
        /// Every rule that refused, with its reason (never empty).
        rules: Vec<RuleReason>,
    },
    /// Argument rules said check and no person could be asked.
    #[error("Tool `{tool}` needs a person to approve {}, and this client cannot ask. {}", describe(.rules), self.hint())]
    ApprovalRequired {
        /// Exposed name.
        tool: String,
        /// Every rule that asked, with its reason (never empty).
        rules: Vec<RuleReason>,
    },
    /// Arguments fail the inputSchema.
    #[error("Invalid arguments for tool `{tool}`: {}. {}", crate::schema::summary(.violations), self.hint())]
    InvalidParams {
        /// Exposed name.
        tool: String,
        /// Every violation (messages carry no values).
        violations: Vec<Violation>,
    },
}

/// `viewer`, `user`, `admin`.
pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Viewer => "viewer",
        Role::User => "user",
        Role::Admin => "admin",
    }
}

/// `low`, `medium`, `high`, `critical`.
pub fn risk_name(r: RiskLevel) -> &'static str {
    match r {
        RiskLevel::Low => "low",
        RiskLevel::Medium => "medium",
        RiskLevel::High => "high",
        RiskLevel::Critical => "critical",
    }
}

impl Denial {
    /// The error code.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            Denial::NoRole | Denial::RoleTooLow { .. } | Denial::ItemRoleTooLow { .. } => {
                ErrorCode::PermissionDenied
            }
            Denial::ResourceNotAvailable { .. } | Denial::PromptNotAvailable { .. } => {
                ErrorCode::PolicyBlocked
            }
            Denial::NotAvailable { .. }
            | Denial::Quarantined { .. }
            | Denial::RiskAboveCeiling { .. }
            | Denial::PlanningMode { .. }
            | Denial::SideEffectDenied { .. }
            | Denial::ArgumentDenied { .. } => ErrorCode::PolicyBlocked,
            Denial::WriteWithoutSandbox { .. } => ErrorCode::SandboxViolation,
            Denial::ApprovalRequired { .. } => ErrorCode::ApprovalRequired,
            Denial::InvalidParams { .. } => ErrorCode::InvalidParams,
        }
    }

    /// The JSON-RPC error code (-32003, -32004, …).
    pub fn code(&self) -> i32 {
        self.error_code().code()
    }

    /// Stable snake_case reason: `data.reason` and the `reason` metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Denial::NoRole => "no_role",
            Denial::RoleTooLow { .. } | Denial::ItemRoleTooLow { .. } => "role_too_low",
            Denial::NotAvailable { .. } => "tool_not_available",
            Denial::ResourceNotAvailable { reason, .. } => reason,
            Denial::PromptNotAvailable { .. } => "prompt_not_available",
            Denial::Quarantined { cause, .. } => cause.reason(),
            Denial::RiskAboveCeiling { .. } => "risk_above_ceiling",
            Denial::PlanningMode { .. } => "planning_mode",
            Denial::SideEffectDenied { .. } => "side_effect_denied",
            Denial::WriteWithoutSandbox { .. } => "write_without_sandbox",
            Denial::ArgumentDenied { rules, .. } | Denial::ApprovalRequired { rules, .. } => {
                rules.first().map_or("argument_denied", |r| r.reason)
            }
            Denial::InvalidParams { .. } => "invalid_params",
        }
    }

    /// The argument rules an argument denial or approval names (empty for
    /// other denials): `data.rules`.
    pub fn rules(&self) -> &[RuleReason] {
        match self {
            Denial::ArgumentDenied { rules, .. } | Denial::ApprovalRequired { rules, .. } => rules,
            _ => &[],
        }
    }

    /// `data.limit`, where there is one (the required role, the ceiling).
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Denial::RoleTooLow { required, .. } | Denial::ItemRoleTooLow { required, .. } => {
                Some(role_name(*required))
            }
            Denial::RiskAboveCeiling { ceiling, .. } => Some(risk_name(*ceiling)),
            Denial::PlanningMode { .. } => Some("planning"),
            _ => None,
        }
    }

    /// `data.observed`, where there is one (the caller's role, the tool's risk).
    pub fn observed(&self) -> Option<&'static str> {
        match self {
            Denial::RoleTooLow { actual, .. } | Denial::ItemRoleTooLow { actual, .. } => {
                Some(role_name(*actual))
            }
            Denial::RiskAboveCeiling { risk, .. } => Some(risk_name(*risk)),
            Denial::PlanningMode { effect, .. } | Denial::SideEffectDenied { effect, .. } => {
                Some(effect_name(*effect))
            }
            _ => None,
        }
    }

    /// `data.hint`: how the model can recover.
    pub fn hint(&self) -> &'static str {
        match self {
            Denial::NoRole => "Ask an administrator to grant you a role.",
            Denial::RoleTooLow { .. } => "Use a tool your role allows, or ask an administrator for a higher role.",
            Denial::NotAvailable { .. } => "Call tools/list to see the tools you can use.",
            Denial::ResourceNotAvailable { .. } => {
                "Call resources/list or resources/templates/list to see the resources you can read."
            }
            Denial::PromptNotAvailable { .. } => "Call prompts/list to see the prompts you can use.",
            Denial::ItemRoleTooLow { .. } => "Ask an administrator for a higher role.",
            Denial::Quarantined { .. } | Denial::RiskAboveCeiling { .. } => {
                "Use another tool, or ask an administrator to approve this one."
            }
            Denial::PlanningMode { .. } => "Plan with the read-only tools that tools/list shows; a tool with side effects runs only in a session outside planning mode, and only if the server's policy does not impose planning mode.",
            Denial::SideEffectDenied { .. } => "Use a tool without that side effect; tools/list shows the ones you can use.",
            Denial::WriteWithoutSandbox { .. } => "Use a read-only tool, or ask an administrator for a write-enabled sandbox.",
            Denial::ArgumentDenied { .. } => "Change that argument to a value the policy allows (for paths: stay inside the workspace) and try again.",
            Denial::ApprovalRequired { .. } => "Use a client that supports elicitation, or choose a value that needs no approval.",
            Denial::InvalidParams { .. } => "Fix the arguments to match the tool's inputSchema and call again.",
        }
    }
}

/// An argument rule's part in a denial or approval, owned (see [`RuleHit`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleReason {
    /// The rule's `name` (argument name or pointer).
    pub rule: String,
    /// Stable snake_case reason, e.g. `path_denied`.
    pub reason: &'static str,
}

impl From<&RuleHit<'_>> for RuleReason {
    fn from(h: &RuleHit<'_>) -> Self {
        RuleReason {
            rule: h.rule.to_string(),
            reason: h.reason,
        }
    }
}

/// "argument `a` (reason_a), argument `b` (reason_b)": every rule, for a
/// message (names and reasons only, never values).
pub fn describe(rules: &[RuleReason]) -> String {
    let parts: Vec<String> = rules
        .iter()
        .map(|r| format!("argument `{}` ({})", bounded(&r.rule), r.reason))
        .collect();
    parts.join(", ")
}

/// A caller-chosen name or URI in a message, cut to a readable length.
fn bounded(s: &str) -> &str {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
