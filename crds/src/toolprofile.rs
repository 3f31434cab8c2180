//! `ToolProfile` (short name `tp`): which upstream tools an MCPServer exposes,
//! to whom, and within which budgets.
//!
//! The rule types are the `FacadePolicy` building blocks from [`crate::policy`],
//! so the schema is written once: the operator's compiler copies a profile
//! into the policy almost field for field.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::policy::{
    DefaultAction, Limits, PromptPolicy, Redaction, ResourcePolicy, RoleBinding, ScanAction,
    ToolRule,
};

/// The exposed name of a tool (its alias, else its upstream name), in CEL.
const EXPOSED: &str = "(has(t.alias) ? t.alias : t.name)";

/// A reusable tool policy: the tools an MCPServer exposes, their roles, risks,
/// argument rules and budgets. Referenced by `MCPServer.spec.toolProfileRef`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[kube(
    group = "mcpwarden.dev",
    version = "v1alpha1",
    kind = "ToolProfile",
    namespaced,
    shortname = "tp",
    derive = "PartialEq",
    derive = "Default",
    doc = "ToolProfile: which upstream tools an MCPServer exposes, to which roles, with which argument rules and budgets.",
    printcolumn(
        name = "Default",
        type_ = "string",
        description = "What happens to tools no rule names",
        json_path = ".spec.defaultAction"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = crate::schema::bound_strings)]
pub struct ToolProfileSpec {
    /// What happens to an upstream tool that no entry in `tools` names:
    /// `deny` (hidden and refused, the default) or `allow`.
    #[serde(default)]
    pub default_action: DefaultAction,
    /// Per-tool rules, keyed by the upstream tool name (unique). Aliases must
    /// be snake_case, and exposed names (alias, else name) must be unique.
    #[serde(default)]
    #[schemars(length(max = 256))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    #[x_kube(validation = kube::core::Rule::new("self.all(t, !has(t.alias) || t.alias.matches('^[a-z][a-z0-9_]{0,63}$'))").message("alias must be snake_case: a lowercase letter, then lowercase letters, digits or _, at most 64 characters"))]
    #[x_kube(validation = kube::core::Rule::new(format!("self.all(t, self.exists_one(u, {} == {}))", EXPOSED.replace("t.", "u."), EXPOSED)).message("exposed tool names (alias, else name) must be unique"))]
    #[x_kube(validation = kube::core::Rule::new("self.all(t, !has(t.pin) || t.pin.matches('^sha256:[0-9a-f]{64}$'))").message("pin must be sha256: followed by 64 lowercase hex digits"))]
    pub tools: Vec<ToolRule>,
    /// Profile-wide budgets; a tool's own `limits` override them field by field.
    /// Unset fields use the facade's built-in defaults.
    #[serde(default)]
    pub limits: Limits,
    /// Secret redaction in tool results (on by default, every built-in detector).
    #[serde(default)]
    pub redaction: Redaction,
    /// Who gets which role (`viewer`, `user`, `admin`). Nobody has a role by
    /// default, so nobody can call a tool until a binding names them.
    #[serde(default)]
    #[schemars(length(max = 64))]
    pub roles: Vec<RoleBinding>,
    /// Quarantine a tool whose definition changes while the server runs
    /// (default true).
    #[serde(default = "default_true")]
    pub quarantine_on_drift: bool,
    /// What the scan of tool descriptions and schemas for hidden instructions
    /// does on a finding: `quarantine` (default), `warn` or `off`.
    #[serde(default)]
    pub poisoning_scan: ScanAction,
    /// Prefix exposed descriptions with the tool's risk, e.g. `[writes files]`
    /// (default false).
    #[serde(default)]
    pub risk_prefix: bool,
    /// Which resources callers may list, read and subscribe to, by URI
    /// pattern (`file:///srv/docs/**`, `**/.env`, `note://public/*`): a
    /// matching `deny` rule hides a resource, else the first matching `allow`
    /// rule gives the role it needs, else `defaultAction` (default `deny`:
    /// no resource is visible until a rule allows it).
    #[serde(default)]
    pub resources: ResourcePolicy,
    /// Which prompts callers may list and get, by exact name; same
    /// precedence as `resources` (default `deny`).
    #[serde(default)]
    pub prompts: PromptPolicy,
}

fn default_true() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crd_has_short_name_and_rules() {
        let crd = ToolProfile::crd();
        assert_eq!(crd.spec.names.short_names, Some(vec!["tp".to_string()]));
        let text = serde_json::to_string(&crd).unwrap();
        assert!(text.contains("exists_one"), "uniqueness rule missing");
        assert!(
            text.contains("x-kubernetes-list-map-keys"),
            "tools must be a map list"
        );
    }

    #[test]
    fn empty_spec_is_safe() {
        let spec: ToolProfileSpec = serde_json::from_str("{}").unwrap();
        assert_eq!(spec.default_action, DefaultAction::Deny);
        assert!(spec.quarantine_on_drift);
        assert!(spec.redaction.enabled);
        assert!(spec.roles.is_empty());
    }
}
