//! Upstream tools as observed, and the name mapping between what agents call
//! and what the server has.
//!
//! Flow: upstream `tools/list` entry --[`ObservedTool::new`]--> hash and
//! inferred risk (once per definition) --[`CompiledPolicy::assess`] with the
//! first-seen hash and the poisoning findings--> quarantine state, which the
//! sidecar stores in the tool's `quarantine` field. Then, per message:
//! - tools/list: upstream name --[`CompiledPolicy::by_upstream`]--> [`Target`]
//! - tools/call: exposed name --[`CompiledPolicy::by_exposed`]--> [`Target`]
//!
//! and the target goes to [`crate::decide`].
//!
//! Name mapping: a listed tool is known by its exposed name (alias, else
//! upstream name) only; its upstream name, if aliased away, is unknown to
//! callers. Under `defaultAction: allow`, an unlisted upstream tool is known
//! by its own name unless a rule's alias took that name.

use mcp_warden_crds::policy::{DefaultAction, ScanAction};
use serde_json::Value;

use crate::compile::{CompiledPolicy, ToolPolicy};
use crate::pin::definition_hash;
use crate::poison::{Finding, FindingKind};
use crate::risk::{infer, Inferred};

/// One upstream tool as the facade last saw it.
#[derive(Debug, Clone)]
pub struct ObservedTool {
    /// The upstream name.
    pub name: String,
    /// The definition as listed upstream.
    pub definition: Value,
    /// [`definition_hash`] of `definition`.
    pub hash: String,
    /// Risk and side effects read from the definition.
    pub inferred: Inferred,
    /// Set by the sidecar from [`CompiledPolicy::assess`].
    pub quarantine: Option<Quarantine>,
}

impl ObservedTool {
    /// Hash and infer; `None` when the definition has no string `name`.
    pub fn new(definition: Value) -> Option<ObservedTool> {
        let name = definition.get("name")?.as_str()?.to_string();
        let hash = definition_hash(&definition);
        let inferred = infer(&definition);
        Some(ObservedTool {
            name,
            definition,
            hash,
            inferred,
            quarantine: None,
        })
    }

    /// The upstream description, if any.
    pub fn description(&self) -> Option<&str> {
        self.definition.get("description").and_then(Value::as_str)
    }
}

/// Why a tool is quarantined (hidden, and -32004 on call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quarantine {
    /// The profile pins another hash.
    PinMismatch,
    /// The definition changed while the facade ran.
    Drift,
    /// The poisoning scan found something (the first finding that
    /// quarantines: its kind and detail say why).
    Poisoned {
        /// The finding's kind.
        kind: FindingKind,
        /// The finding's detail, e.g. `hidden_comment`.
        detail: &'static str,
    },
    /// The definition breaks the protocol's rules for tool definitions (an
    /// `x-mcp-header` annotation a client must reject): no caller can use it.
    InvalidDefinition,
}

impl Quarantine {
    /// For a poisoned definition, `kind/detail` of the finding (for the
    /// audit line and `/tools`): why, beyond the reason.
    pub fn detail(self) -> Option<String> {
        match self {
            Quarantine::Poisoned { kind, detail } => Some(format!("{}/{detail}", kind.as_str())),
            _ => None,
        }
    }

    /// Stable snake_case reason (metric label).
    pub fn reason(self) -> &'static str {
        match self {
            Quarantine::PinMismatch => "pin_mismatch",
            Quarantine::Drift => "definition_drift",
            Quarantine::Poisoned { .. } => "poisoned_definition",
            Quarantine::InvalidDefinition => "invalid_definition",
        }
    }
}

/// What a name refers to under the policy.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A listed tool.
    Rule(&'a ToolPolicy),
    /// An unlisted tool, allowed by `defaultAction: allow` (its upstream name).
    Implicit(&'a str),
    /// Outside the allowlist or not a name callers may use.
    Unknown(&'a str),
}

impl<'a> Target<'a> {
    /// The upstream name to look the tool up by (`None` for `Unknown`).
    pub fn upstream_name(&self) -> Option<&'a str> {
        match self {
            Target::Rule(t) => Some(&t.upstream),
            Target::Implicit(n) => Some(n),
            Target::Unknown(_) => None,
        }
    }
}

impl CompiledPolicy {
    /// Resolve a name a caller used (tools/call).
    pub fn by_exposed<'a>(&'a self, name: &'a str) -> Target<'a> {
        if let Some(&i) = self.by_exposed.get(name) {
            return Target::Rule(&self.tools[i]);
        }
        if self.default_action == DefaultAction::Allow && !self.by_upstream.contains_key(name) {
            return Target::Implicit(name);
        }
        Target::Unknown(name)
    }

    /// Resolve an upstream tool's name (tools/list).
    pub fn by_upstream<'a>(&'a self, name: &'a str) -> Target<'a> {
        if let Some(&i) = self.by_upstream.get(name) {
            return Target::Rule(&self.tools[i]);
        }
        if self.default_action == DefaultAction::Allow && !self.by_exposed.contains_key(name) {
            return Target::Implicit(name);
        }
        Target::Unknown(name)
    }

    /// Whether a definition must be quarantined, in this order:
    /// 1. the rule has a pin: a mismatch quarantines ([`Quarantine::PinMismatch`]);
    ///    a match *approves* the definition (drift and findings are ignored:
    ///    pinning is how an admin releases a tool);
    /// 2. `quarantineOnDrift` and the hash differs from `first_seen` → [`Quarantine::Drift`];
    /// 3. `poisoningScan: quarantine` and any finding → [`Quarantine::Poisoned`]
    ///    (`warn` and `off` never quarantine; the sidecar logs under `warn`).
    ///    A mention of a sibling tool alone is only a warning: servers say
    ///    "use read_text_file instead" all the time; shadowing pairs such a
    ///    reference with an instruction, exfiltration or hidden text, and
    ///    those findings quarantine on their own.
    pub fn assess(
        &self,
        tool: &ObservedTool,
        first_seen: Option<&str>,
        findings: &[Finding],
    ) -> Option<Quarantine> {
        let pin = self
            .by_upstream
            .get(&tool.name)
            .and_then(|&i| self.tools[i].pin.as_deref());
        if let Some(pin) = pin {
            return (pin != tool.hash).then_some(Quarantine::PinMismatch);
        }
        if self.quarantine_on_drift && first_seen.is_some_and(|h| h != tool.hash) {
            return Some(Quarantine::Drift);
        }
        if self.poisoning_scan == ScanAction::Quarantine {
            if let Some(f) = findings.iter().find(|f| f.quarantines()) {
                return Some(Quarantine::Poisoned {
                    kind: f.kind,
                    detail: f.detail,
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::policy::FacadePolicy;
    use serde_json::json;

    fn policy(yaml: &str) -> CompiledPolicy {
        let p = FacadePolicy::from_yaml_str(yaml, "t").unwrap();
        CompiledPolicy::compile(&p).unwrap()
    }

    #[test]
    fn aliases_map_both_ways_and_hide_the_upstream_name() {
        let p = policy("tools: [{name: read-file, alias: read_file}]");
        assert_eq!(p.by_exposed("read_file").upstream_name(), Some("read-file"));
        assert!(matches!(p.by_exposed("read-file"), Target::Unknown(_)));
        assert!(matches!(p.by_upstream("read-file"), Target::Rule(t) if t.exposed == "read_file"));
        assert!(matches!(p.by_upstream("other"), Target::Unknown(_)));
    }

    #[test]
    fn default_allow_exposes_unlisted_tools_unless_an_alias_took_the_name() {
        let p = policy("defaultAction: allow\ntools: [{name: a, alias: b}]");
        assert!(matches!(p.by_exposed("zzz"), Target::Implicit("zzz")));
        assert!(matches!(p.by_upstream("zzz"), Target::Implicit("zzz")));
        assert!(
            matches!(p.by_upstream("b"), Target::Unknown(_)),
            "upstream b is shadowed by the alias"
        );
        assert!(
            matches!(p.by_exposed("a"), Target::Unknown(_)),
            "a is only reachable as b"
        );
    }

    fn observed(desc: &str) -> ObservedTool {
        ObservedTool::new(json!({"name": "t", "description": desc})).unwrap()
    }

    #[test]
    fn assess_pin_then_drift_then_poisoning() {
        let tool = observed("hello");
        let finding = Finding {
            kind: FindingKind::HiddenUnicode,
            detail: "zero_width",
            location: "/description".into(),
        };
        let p = policy("tools: [{name: t}]");
        assert_eq!(p.assess(&tool, Some(&tool.hash), &[]), None);
        assert_eq!(
            p.assess(&tool, Some("sha256:old"), &[]),
            Some(Quarantine::Drift)
        );
        assert_eq!(
            p.assess(&tool, None, std::slice::from_ref(&finding)),
            Some(Quarantine::Poisoned {
                kind: FindingKind::HiddenUnicode,
                detail: "zero_width"
            })
        );

        let pinned = policy(&format!("tools: [{{name: t, pin: '{}'}}]", tool.hash));
        assert_eq!(
            pinned.assess(&tool, Some("sha256:old"), std::slice::from_ref(&finding)),
            None,
            "a matching pin approves"
        );
        let other = observed("changed");
        assert_eq!(
            pinned.assess(&other, None, &[]),
            Some(Quarantine::PinMismatch)
        );

        let reference = Finding {
            kind: FindingKind::ToolReference,
            detail: "tool_name",
            location: "/description".into(),
        };
        assert_eq!(
            p.assess(&tool, None, std::slice::from_ref(&reference)),
            None,
            "a sibling mention alone only warns"
        );
        assert_eq!(
            p.assess(&tool, None, &[reference, finding.clone()]),
            Some(Quarantine::Poisoned {
                kind: FindingKind::HiddenUnicode,
                detail: "zero_width"
            }),
            "with another signal it quarantines, naming that signal"
        );

        let lax = policy("quarantineOnDrift: false\npoisoningScan: warn\ntools: [{name: t}]");
        assert_eq!(lax.assess(&tool, Some("sha256:old"), &[finding]), None);
    }

    #[test]
    fn observed_tool_needs_a_name() {
        assert!(ObservedTool::new(json!({"description": "x"})).is_none());
        let t = observed("x");
        assert!(t.hash.starts_with("sha256:"));
        assert_eq!(t.description(), Some("x"));
    }
}
