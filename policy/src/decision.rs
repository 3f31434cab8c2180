//! The one decision function shared by tools/list filtering and tools/call
//! gating (its denials are typed in [`crate::denial`]).
//!
//! Flow: [`Target`] (from the name mapping) + caller role + observed upstream
//! tool (+ arguments, on a call) --[`decide`]--> [`Decision`]. The sidecar
//! lists a tool iff `decide` (without arguments) allows it, so a listed tool
//! is always callable and a hidden one never is; it turns a [`Denial`] into
//! a JSON-RPC error in one place (`code()`, `reason()`, `limit()`,
//! `observed()`, `hint()`, and `Display` as the message).
//!
//! Precedence (the first step that refuses names the denial):
//! 1. no role (authenticated, unmapped)          → -32003 `no_role`
//! 2. name outside the allowlist                 → -32004 `tool_not_available`
//! 3. role below the tool's `requiredRole`       → -32003 `role_too_low`
//! 4. tool not present upstream                  → -32004 `tool_not_available`
//!    (the *same* denial as 2: same code, reason and message, so callers
//!    cannot probe what the server has)
//! 5. quarantined (pin mismatch, drift, poison)  → -32004 `pin_mismatch` |
//!    `definition_drift` | `poisoned_definition`
//! 6. side effects (the tool's effect tags, [`crate::risk::effect_tags`]):
//!    planning mode and any tag                  → -32004 `planning_mode`;
//!    a tag in `denySideEffects`                 → -32004 `side_effect_denied`.
//!    Planning mode is on when the profile's `mode`, the caller's role's
//!    entry in `roleRestrictions`, **or the caller** ([`Query::planning`])
//!    says so: asking can only turn it on, so a caller never leaves the
//!    planning mode its profile or role imposes; the denied tags are the
//!    profile's and the role's, joined.
//! 7. risk above `riskCeiling`, not approved     → -32004 `risk_above_ceiling`
//! 8. (calls) an argument rule says deny         → -32004, naming every
//!    rule that refused
//! 9. write-capable and no `sandbox.writeAllowed`→ -32006 `write_without_sandbox`
//! 10. allow; argument rules saying `check` are carried in the grant
//!     ([`Grant::approval`]): the sidecar asks the person at the client
//!     (elicitation) or waits for an approval on its admin port (out of
//!     band), else answers [`Grant::approval_denial`] (-32008).
//!
//! How several matching rules compose: this is a **join**, never "the
//! first one found". Outcomes are ordered `allow < check(elicitation) <
//! check(outOfBand) < deny`; every tool-level step (1–7, 9) and every
//! argument rule contributes, and the decision is the highest of them. A
//! tool-level refusal therefore beats an argument's check, any argument's
//! deny beats every check, and among checks the strongest channel any
//! matching rule names is the one used ([`crate::args`] joins the
//! argument rules: readings of one path, array elements, commands of one
//! line, several rules). The order of the steps above only chooses which
//! of several refusals is reported. What a decision names grows with it:
//! [`Approval::rules`] and the argument denials list every rule (and
//! reason) that reached the outcome, so the person approving sees all of
//! what they approve.
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
//! after this one; sandbox (9) comes before budgets so a call that can never
//! run does not spend budget.

use std::borrow::Cow;

use mcp_warden_crds::policy::{ApprovalChannel, RiskLevel, Role};
use serde_json::Value;

use crate::args::{ArgRules, ArgVerdict, RuleHit};
use crate::compile::CompiledPolicy;
pub use crate::denial::{describe, risk_name, role_name, Denial, ErrorCode, RuleReason};
use crate::limits::ResolvedLimits;
use crate::resources::Hidden;
use crate::risk::{effect_tags, effective, Effects};
use crate::tools::{ObservedTool, Target};

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
    /// The caller asked for planning mode (for its session or this
    /// request); `false` never lifts the planning mode the policy imposes.
    pub planning: bool,
    /// Effect tags the caller asked to have refused (a gateway passing its
    /// own `denySideEffects` on); added to the policy's, never lifting one.
    pub denied: Effects,
}

/// What a caller may ask of the decision: only ever more restriction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Asks {
    /// Planning mode.
    pub planning: bool,
    /// Effect tags to refuse.
    pub denied: Effects,
}

impl From<bool> for Asks {
    /// Planning mode asked for, or not; no tags.
    fn from(planning: bool) -> Asks {
        Asks {
            planning,
            denied: Effects::NONE,
        }
    }
}

/// Arguments that need a person's approval: every rule that asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval<'a> {
    /// Every rule that asked, with each reason, in policy order (never empty).
    pub rules: Vec<RuleHit<'a>>,
    /// Who approves: the client's user (elicitation) or a person on the
    /// admin port (out of band); the strongest channel any of `rules` names.
    pub channel: ApprovalChannel,
}

impl Approval<'_> {
    /// The rules, owned (for denials and pending lists).
    pub fn owned_rules(&self) -> Vec<RuleReason> {
        self.rules.iter().map(RuleReason::from).collect()
    }

    /// The rule names, joined: `cwd, command` (each name once).
    pub fn names(&self) -> String {
        let mut names: Vec<&str> = Vec::with_capacity(self.rules.len());
        for h in &self.rules {
            if !names.contains(&h.rule) {
                names.push(h.rule);
            }
        }
        names.join(", ")
    }

    /// The first rule that asked (its reason is the audit and metric reason).
    pub fn first(&self) -> RuleHit<'_> {
        self.rules.first().copied().unwrap_or(RuleHit {
            rule: "",
            reason: "argument_needs_approval",
        })
    }
}

/// Permission to list or call a tool, with everything the sidecar needs next.
#[derive(Debug, Clone)]
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
    /// On a call: arguments need approval first.
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
        self.approval.as_ref().map(|a| Denial::ApprovalRequired {
            tool: self.exposed_name.to_string(),
            rules: a.owned_rules(),
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
    let restriction = policy.restriction(role);
    let restriction = crate::compile::Restriction {
        denied: restriction.denied.union(q.denied),
        ..restriction
    };
    let effects = effect_tags(
        rule.and_then(|t| t.side_effects.as_deref()),
        rule.and_then(|t| t.writes),
        &up.inferred,
    );
    if let Some(denial) = side_effect_denial(exposed, effects, restriction, q.planning) {
        return Decision::Deny(denial);
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
            ArgVerdict::Check { rules, channel } => approval = Some(Approval { rules, channel }),
            ArgVerdict::Deny { rules } => {
                return Decision::Deny(Denial::ArgumentDenied {
                    tool: exposed.to_string(),
                    rules: rules.iter().map(RuleReason::from).collect(),
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

/// Step 6: planning mode first (any tag), then the denied tags.
fn side_effect_denial(
    tool: &str,
    effects: Effects,
    restriction: crate::compile::Restriction,
    asked: bool,
) -> Option<Denial> {
    if restriction.planning || asked {
        if let Some(effect) = effects.tags().first().copied() {
            return Some(Denial::PlanningMode {
                tool: tool.to_string(),
                effect,
            });
        }
    }
    effects
        .first_shared(restriction.denied)
        .map(|effect| Denial::SideEffectDenied {
            tool: tool.to_string(),
            effect,
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

    /// [`decide`] for one upstream tool in a tools/list answer; `asks`:
    /// what the caller asked for (planning mode: `true`).
    pub fn decide_list<'a>(
        &'a self,
        tool: &'a ObservedTool,
        role: Option<Role>,
        asks: impl Into<Asks>,
    ) -> Decision<'a> {
        let asks = asks.into();
        decide(
            self,
            Query {
                target: self.by_upstream(&tool.name),
                role,
                upstream: Some(tool),
                arguments: None,
                planning: asks.planning,
                denied: asks.denied,
            },
        )
    }

    /// [`decide`] for a tools/call of `name` (as the caller spelled it);
    /// `upstream` looks a tool up by its upstream name.
    pub fn decide_call<'a>(
        &'a self,
        name: &'a str,
        role: Option<Role>,
        asks: impl Into<Asks>,
        arguments: &'a Value,
        upstream: impl FnOnce(&str) -> Option<&'a ObservedTool>,
    ) -> Decision<'a> {
        let asks = asks.into();
        let target = self.by_exposed(name);
        let up = target.upstream_name().and_then(upstream);
        decide(
            self,
            Query {
                target,
                role,
                upstream: up,
                arguments: Some(arguments),
                planning: asks.planning,
                denied: asks.denied,
            },
        )
    }
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "side_effect_tests.rs"]
mod side_effect_tests;
