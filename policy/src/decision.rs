//! The one decision function shared by tools/list filtering and tools/call
//! gating, and the typed denials it produces.
//!
//! Flow: [`Target`] (from the name mapping) + caller role + observed upstream
//! tool (+ arguments, on a call) --[`decide`]--> [`Decision`]. The sidecar
//! lists a tool iff `decide` (without arguments) allows it, so a listed tool
//! is always callable and a hidden one never is; it turns a [`Denial`] into
//! a JSON-RPC error in one place (`code()`, `reason()`, `limit()`,
//! `observed()`, `hint()`, and `Display` as the message).
//!
//! Precedence (first match wins):
//! 1. no role (authenticated, unmapped)          → -32003 `no_role`
//! 2. name outside the allowlist                 → -32004 `tool_not_available`
//! 3. role below the tool's `requiredRole`       → -32003 `role_too_low`
//! 4. tool not present upstream                  → -32004 `tool_not_available`
//!    (the *same* denial as 2: same code, reason and message, so callers
//!    cannot probe what the server has)
//! 5. quarantined (pin mismatch, drift, poison)  → -32004 `pin_mismatch` |
//!    `definition_drift` | `poisoned_definition`
//! 6. risk above `riskCeiling`, not approved     → -32004 `risk_above_ceiling`
//! 7. (calls) an argument rule says deny         → -32004 the rule's reason
//! 8. write-capable and no `sandbox.writeAllowed`→ -32006 `write_without_sandbox`
//! 9. allow; an argument rule saying `check` is carried in the grant
//!    ([`Grant::approval`]) with the rule's channel: the sidecar asks the
//!    person at the client (elicitation) or waits for an approval on its
//!    admin port (out of band), else answers [`Grant::approval_denial`]
//!    (-32008).
//!
//! Resources and prompts follow the same order with fewer steps
//! ([`CompiledPolicy::decide_resource`], [`CompiledPolicy::decide_template`],
//! [`CompiledPolicy::decide_prompt`]): no role → -32003 `no_role`; not
//! allowed (rule precedence in [`crate::resources`]) → -32004
//! `resource_not_available` | `prompt_not_available` (or the reason a URI
//! could not be judged); role below the rule's → -32003 `role_too_low`.
//!
//! Role (3) is judged on the profile alone, before existence (4), so a
//! caller whose role is too low learns only what the profile lists, never
//! what the server has. Budgets (-32005), timeouts (-32007) and schema
//! validation (-32602, [`crate::SchemaCache`]) are the sidecar's steps
//! after this one; sandbox (8) comes before budgets so a call that can never
//! run does not spend budget.

use std::borrow::Cow;

use mcp_warden_crds::policy::{ApprovalChannel, RiskLevel, Role};
use serde_json::Value;

use crate::args::{ArgRules, ArgVerdict};
use crate::compile::CompiledPolicy;
use crate::limits::ResolvedLimits;
use crate::resources::Hidden;
use crate::risk::effective;
use crate::schema::Violation;
use crate::tools::{ObservedTool, Quarantine, Target};

/// The stable error codes of DESIGN §6 (contract).
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
    /// Write-capable tool without a write-enabled sandbox.
    #[error("Tool `{tool}` can write, and this server's sandbox does not allow writes. {}", self.hint())]
    WriteWithoutSandbox {
        /// Exposed name.
        tool: String,
    },
    /// An argument rule said deny.
    #[error("Tool `{tool}` refused argument `{rule}` ({reason}). {}", self.hint())]
    ArgumentDenied {
        /// Exposed name.
        tool: String,
        /// The rule's `name` (argument name or pointer).
        rule: String,
        /// Stable reason, e.g. `path_denied`.
        reason: &'static str,
    },
    /// An argument rule said check and no person could be asked.
    #[error("Tool `{tool}` needs a person to approve argument `{rule}` ({reason}), and this client cannot ask. {}", self.hint())]
    ApprovalRequired {
        /// Exposed name.
        tool: String,
        /// The rule's `name`.
        rule: String,
        /// Stable reason, e.g. `command_needs_approval`.
        reason: &'static str,
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
            Denial::WriteWithoutSandbox { .. } => "write_without_sandbox",
            Denial::ArgumentDenied { reason, .. } | Denial::ApprovalRequired { reason, .. } => {
                reason
            }
            Denial::InvalidParams { .. } => "invalid_params",
        }
    }

    /// `data.limit`, where there is one (the required role, the ceiling).
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Denial::RoleTooLow { required, .. } | Denial::ItemRoleTooLow { required, .. } => {
                Some(role_name(*required))
            }
            Denial::RiskAboveCeiling { ceiling, .. } => Some(risk_name(*ceiling)),
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
            Denial::WriteWithoutSandbox { .. } => "Use a read-only tool, or ask an administrator for a write-enabled sandbox.",
            Denial::ArgumentDenied { .. } => "Change that argument to a value the policy allows (for paths: stay inside the workspace) and try again.",
            Denial::ApprovalRequired { .. } => "Use a client that supports elicitation, or choose a value that needs no approval.",
            Denial::InvalidParams { .. } => "Fix the arguments to match the tool's inputSchema and call again.",
        }
    }
}

/// What [`decide`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The tool, as resolved by [`CompiledPolicy::by_exposed`] / [`CompiledPolicy::by_upstream`].
    pub target: Target<'a>,
    /// The caller's role; `None` = authenticated but unmapped.
    pub role: Option<Role>,
    /// The tool as the server lists it; `None` = the server does not have it.
    pub upstream: Option<&'a ObservedTool>,
    /// The call's `arguments` (`None` for tools/list).
    pub arguments: Option<&'a Value>,
}

/// An argument that needs a person's approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Approval<'a> {
    /// The rule's `name`.
    pub rule: &'a str,
    /// Stable reason.
    pub reason: &'static str,
    /// Who approves: the client's user (elicitation) or a person on the
    /// admin port (out of band).
    pub channel: ApprovalChannel,
}

/// Permission to list or call a tool, with everything the sidecar needs next.
#[derive(Debug, Clone, Copy)]
pub struct Grant<'a> {
    /// The name to call upstream.
    pub upstream_name: &'a str,
    /// The name agents see.
    pub exposed_name: &'a str,
    /// The profile's description override.
    pub description_override: Option<&'a str>,
    /// Effective risk.
    pub risk: RiskLevel,
    /// Effective write capability.
    pub writes: bool,
    /// Budgets.
    pub limits: &'a ResolvedLimits,
    /// Argument rules (already applied when the query had arguments).
    pub arguments: &'a ArgRules,
    /// On a call: an argument needs approval first.
    pub approval: Option<Approval<'a>>,
    prefix: &'a str,
}

impl<'a> Grant<'a> {
    /// The description agents see: the override, else `upstream`, with the
    /// risk prefix (`[writes files] …`) when the policy turns it on.
    pub fn exposed_description(&self, upstream: Option<&'a str>) -> Cow<'a, str> {
        let base = self.description_override.or(upstream).unwrap_or("");
        if self.prefix.is_empty() {
            Cow::Borrowed(base)
        } else {
            Cow::Owned(format!("{}{base}", self.prefix))
        }
    }

    /// The -32008 denial for a client that cannot answer an elicitation.
    pub fn approval_denial(&self) -> Option<Denial> {
        self.approval.map(|a| Denial::ApprovalRequired {
            tool: self.exposed_name.to_string(),
            rule: a.rule.to_string(),
            reason: a.reason,
        })
    }
}

/// The outcome of [`decide`].
#[derive(Debug, Clone)]
pub enum Decision<'a> {
    /// List it / forward the call.
    Allow(Grant<'a>),
    /// Hide it / refuse the call.
    Deny(Denial),
}

impl Decision<'_> {
    /// Whether this is an allow.
    pub fn is_allow(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

static NO_ARGUMENT_RULES: ArgRules = ArgRules::EMPTY;

/// A caller-chosen name or URI in a message, cut to a readable length.
fn bounded(s: &str) -> &str {
    let mut end = s.len().min(200);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The decision, in the precedence written at the top of this module.
pub fn decide<'a>(policy: &'a CompiledPolicy, q: Query<'a>) -> Decision<'a> {
    let Some(role) = q.role else {
        return Decision::Deny(Denial::NoRole);
    };
    let (rule, exposed) = match q.target {
        Target::Unknown(name) => {
            return Decision::Deny(Denial::NotAvailable {
                tool: name.to_string(),
            })
        }
        Target::Rule(t) => (Some(t), t.exposed.as_str()),
        Target::Implicit(name) => (None, name),
    };
    let required = rule.map_or(Role::User, |t| t.required_role);
    if role < required {
        return Decision::Deny(Denial::RoleTooLow {
            tool: exposed.to_string(),
            required,
            actual: role,
        });
    }
    let Some(up) = q.upstream else {
        return Decision::Deny(Denial::NotAvailable {
            tool: exposed.to_string(),
        });
    };
    if let Some(cause) = up.quarantine {
        return Decision::Deny(Denial::Quarantined {
            tool: exposed.to_string(),
            cause,
        });
    }
    let (risk, writes) = effective(
        rule.and_then(|t| t.risk),
        rule.and_then(|t| t.writes),
        &up.inferred,
    );
    if risk > policy.risk_ceiling && !policy.approved.contains(&up.name) {
        return Decision::Deny(Denial::RiskAboveCeiling {
            tool: exposed.to_string(),
            risk,
            ceiling: policy.risk_ceiling,
        });
    }
    let arguments = rule.map_or(&NO_ARGUMENT_RULES, |t| &t.arguments);
    let mut approval = None;
    if let Some(args) = q.arguments {
        match arguments.evaluate(args) {
            ArgVerdict::Pass => {}
            ArgVerdict::Check {
                rule,
                reason,
                channel,
            } => {
                approval = Some(Approval {
                    rule,
                    reason,
                    channel,
                })
            }
            ArgVerdict::Deny { rule, reason } => {
                return Decision::Deny(Denial::ArgumentDenied {
                    tool: exposed.to_string(),
                    rule: rule.to_string(),
                    reason,
                })
            }
        }
    }
    if writes && !policy.write_allowed {
        return Decision::Deny(Denial::WriteWithoutSandbox {
            tool: exposed.to_string(),
        });
    }
    let prefix = if !policy.risk_prefix
        || rule.and_then(|t| t.writes) == Some(false) && !up.inferred.annotation_writes
    {
        ""
    } else {
        up.inferred.prefix.as_str()
    };
    Decision::Allow(Grant {
        upstream_name: &up.name,
        exposed_name: exposed,
        description_override: rule.and_then(|t| t.description.as_deref()),
        risk,
        writes,
        limits: rule.map_or(&policy.profile_limits, |t| &t.limits),
        arguments,
        approval,
        prefix,
    })
}

/// The shared tail of the resource and prompt decisions: no role first,
/// then what the rules say, then the role.
fn decide_item(
    what: &'static str,
    name: &str,
    role: Option<Role>,
    required: Result<Role, Hidden>,
) -> Result<(), Denial> {
    let role = role.ok_or(Denial::NoRole)?;
    let required = required.map_err(|hidden| match (what, hidden) {
        ("prompt", _) => Denial::PromptNotAvailable {
            name: name.to_string(),
        },
        (_, Hidden::NotAllowed) => Denial::ResourceNotAvailable {
            uri: name.to_string(),
            reason: "resource_not_available",
        },
        (_, Hidden::Refused(reason)) => Denial::ResourceNotAvailable {
            uri: name.to_string(),
            reason,
        },
    })?;
    if role < required {
        return Err(Denial::ItemRoleTooLow {
            what,
            name: name.to_string(),
            required,
            actual: role,
        });
    }
    Ok(())
}

impl CompiledPolicy {
    /// May a caller with `role` list, read or subscribe to resource `uri`?
    pub fn decide_resource(&self, uri: &str, role: Option<Role>) -> Result<(), Denial> {
        decide_item("resource", uri, role, self.resources.required_role(uri))
    }

    /// May a caller with `role` see (or complete) resource template `uri_template`?
    pub fn decide_template(&self, uri_template: &str, role: Option<Role>) -> Result<(), Denial> {
        let required = self.resources.template_role(uri_template);
        decide_item("resource", uri_template, role, required)
    }

    /// May a caller with `role` list, get (or complete) prompt `name`?
    pub fn decide_prompt(&self, name: &str, role: Option<Role>) -> Result<(), Denial> {
        decide_item("prompt", name, role, self.prompts.required_role(name))
    }

    /// [`decide`] for one upstream tool in a tools/list answer.
    pub fn decide_list<'a>(&'a self, tool: &'a ObservedTool, role: Option<Role>) -> Decision<'a> {
        decide(
            self,
            Query {
                target: self.by_upstream(&tool.name),
                role,
                upstream: Some(tool),
                arguments: None,
            },
        )
    }

    /// [`decide`] for a tools/call of `name` (as the caller spelled it);
    /// `upstream` looks a tool up by its upstream name.
    pub fn decide_call<'a>(
        &'a self,
        name: &'a str,
        role: Option<Role>,
        arguments: &'a Value,
        upstream: impl FnOnce(&str) -> Option<&'a ObservedTool>,
    ) -> Decision<'a> {
        let target = self.by_exposed(name);
        let up = target.upstream_name().and_then(upstream);
        decide(
            self,
            Query {
                target,
                role,
                upstream: up,
                arguments: Some(arguments),
            },
        )
    }
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;
