//! Who may do what: the roles, risk levels, side effects and modes that the
//! other parts of a [`FacadePolicy`](super::FacadePolicy) (tool rules, role
//! bindings, resource and prompt rules) are written in, and the per-role
//! restrictions built from them. The decision that combines them lives in the
//! `mcp-warden-policy` crate; this is only the vocabulary.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What happens to tools no rule names.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum DefaultAction {
    /// Hide and refuse every tool that has no rule (the safe default).
    #[default]
    Deny,
    /// Expose every tool that has no rule, with the profile-wide limits.
    Allow,
}

/// Roles, from least to most privileged: viewer, user, admin.
#[derive(
    Serialize,
    Deserialize,
    JsonSchema,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// May call read-only tools.
    Viewer,
    /// May call ordinary tools (the default `requiredRole`).
    #[default]
    User,
    /// May call every allowed tool.
    Admin,
}

/// How dangerous a tool is.
#[derive(
    Serialize,
    Deserialize,
    JsonSchema,
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
)]
#[serde(rename_all = "camelCase")]
pub enum RiskLevel {
    /// Reads public or workspace data.
    #[default]
    Low,
    /// Reads sensitive data or has bounded side effects.
    Medium,
    /// Writes, deletes or reaches the network.
    High,
    /// Executes code or changes things outside the workspace.
    Critical,
}

/// Whether tools with side effects may run.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    /// Every tool the rest of the policy allows.
    #[default]
    Normal,
    /// Only tools without side effects: an agent plans, nothing changes.
    Planning,
}

impl Mode {
    /// Whether this is the default (`normal`).
    pub fn is_normal(&self) -> bool {
        *self == Mode::Normal
    }
}

/// Whether the facade offers the tool-search meta-tools.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ToolSearch {
    /// No meta-tools.
    #[default]
    Off,
    /// `search_tools` and `call_tool` listed beside the tools.
    Alongside,
    /// Only `search_tools` and `call_tool` listed; every allowed tool is
    /// still callable by its name.
    Only,
}

impl ToolSearch {
    /// Whether this is the default (`off`).
    pub fn is_off(&self) -> bool {
        *self == ToolSearch::Off
    }
}

/// A side effect a tool may have (the effect tags of a tool).
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "camelCase")]
pub enum SideEffect {
    /// Writes or changes data.
    Write,
    /// Deletes data.
    Delete,
    /// Runs commands or code.
    Exec,
    /// Reaches the network beyond the server.
    Network,
}

/// Restrictions for the callers of one role.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleRestriction {
    /// The role these apply to.
    pub role: Role,
    /// `planning`: callers of this role see and call no tool with a side effect.
    #[serde(default, skip_serializing_if = "Mode::is_normal")]
    pub mode: Mode,
    /// Side effects no tool may have for callers of this role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_side_effects: Vec<SideEffect>,
}
