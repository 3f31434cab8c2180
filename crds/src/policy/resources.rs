//! Resources and prompts: which `resources/*` URIs and `prompts/*` names
//! callers may see, read and get. Both use the same rule shape (allow or
//! deny, a least role) and the same precedence, written on [`ResourcePolicy`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::access::{DefaultAction, Role};

/// Whether a matching rule lets something through or keeps it out.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum RuleAction {
    /// Visible and usable by callers with at least the rule's `requiredRole`.
    #[default]
    Allow,
    /// Hidden and refused, whatever other rule matches (deny beats allow).
    Deny,
}

/// The resources callers may list, read and subscribe to.
///
/// Precedence: a matching `deny` rule hides the resource; else the highest
/// `requiredRole` of the matching `allow` rules (whatever their order);
/// else `defaultAction` decides (an `allow` default needs the `viewer` role).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourcePolicy {
    /// What happens to a resource no rule matches (default `deny`).
    #[serde(default)]
    pub default_action: DefaultAction,
    /// URI rules, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<ResourceRule>,
}

impl ResourcePolicy {
    /// Whether this is the empty (deny-all) policy, left out when serializing.
    pub fn is_default(&self) -> bool {
        self == &ResourcePolicy::default()
    }
}

/// One resource rule.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRule {
    /// A URI glob. `file:///srv/docs/**` and patterns without a scheme
    /// (`**/.env`) match `file://` URIs by their normalized path, like
    /// `kind: path` argument rules; any other pattern (`note://public/*`)
    /// matches the whole URI. `*` stops at `/`, `**` crosses it. Resource
    /// templates are matched by their `uriTemplate` text.
    pub uri: String,
    /// `allow` (default) or `deny`. Deny patterns ignore case.
    #[serde(default)]
    pub action: RuleAction,
    /// The least role that may see and read a resource this rule allows
    /// (default `viewer`: reading a resource changes nothing).
    #[serde(default = "viewer")]
    pub required_role: Role,
}

/// The prompts callers may list and get. Same precedence as [`ResourcePolicy`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptPolicy {
    /// What happens to a prompt no rule names (default `deny`).
    #[serde(default)]
    pub default_action: DefaultAction,
    /// Prompt rules, by exact name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<PromptRule>,
}

impl PromptPolicy {
    /// Whether this is the empty (deny-all) policy, left out when serializing.
    pub fn is_default(&self) -> bool {
        self == &PromptPolicy::default()
    }
}

/// One prompt rule.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptRule {
    /// The prompt's name as the server lists it.
    pub name: String,
    /// `allow` (default) or `deny`.
    #[serde(default)]
    pub action: RuleAction,
    /// The least role that may see and get it (default `viewer`).
    #[serde(default = "viewer")]
    pub required_role: Role,
}

fn viewer() -> Role {
    Role::Viewer
}
