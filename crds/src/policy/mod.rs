//! `FacadePolicy`: the compiled policy document the tool facade enforces.
//!
//! Flow: ToolProfile + SandboxProfile + MCPServer --(operator compiler)-->
//! FacadePolicy (ConfigMap, or a local YAML/JSON file) --(sidecar loader)-->
//! the sidecar's policy engine. This module is only data and parsing; the
//! semantic checks (alias shape, collisions, globs, regexes) and the decision
//! function live in the `mcp-warden-policy` crate so the operator's validation
//! and the sidecar's enforcement share one implementation.
//!
//! Every field has a safe default: an empty document denies every tool, lets
//! nobody in anonymously, and applies the default budgets.
//!
//! The document's top level is here; each policy area's types are in their
//! own file and re-exported, so every type is named `policy::X`:
//! `access` (roles, risk, side effects, modes), `tools` (tool and
//! argument rules), `limits` (budgets), `resources` (resources and
//! prompts), `scanning` (redaction and the poisoning scan), `auth`
//! (callers and their roles), `upstream_auth` (credentials sent upstream)
//! and `load` (parsing a document).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod access;
mod auth;
mod limits;
mod load;
mod resources;
mod scanning;
mod tools;
mod upstream_auth;

pub use access::{DefaultAction, Mode, RiskLevel, Role, RoleRestriction, SideEffect, ToolSearch};
pub use auth::{
    AnonymousAccess, AuthConfig, JwtIssuer, RoleBinding, ServiceAccountTokens, StaticToken,
    StaticTokenFile, StaticTokens, TrustedGateway,
};
pub use limits::{BudgetWindow, IdentityBudget, Limits, OutputOverflow};
pub use load::LoadError;
pub use resources::{PromptPolicy, PromptRule, ResourcePolicy, ResourceRule, RuleAction};
pub use scanning::{Redaction, RedactionPattern, ScanAction};
pub use tools::{ApprovalChannel, ArgumentKind, ArgumentOutcome, ArgumentRule, ToolRule};
pub use upstream_auth::{
    ClientCredentials, FacadeCredential, TokenExchange, UpstreamAuth, UpstreamCredentialRule,
};

/// The issuer name of static bearer tokens in role bindings.
pub const STATIC_ISSUER: &str = "static";

/// `apiVersion` of a FacadePolicy document.
pub const API_VERSION: &str = "mcpwarden.dev/v1alpha1";
/// `kind` of a FacadePolicy document.
pub const KIND: &str = "FacadePolicy";

/// The policy the tool facade enforces for one MCP server.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FacadePolicy {
    /// Always `mcpwarden.dev/v1alpha1`.
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// Always `FacadePolicy`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Which MCPServer this policy belongs to; used in audit lines, metrics and
    /// as the default service-account token audience. Optional for local use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerRef>,
    /// What happens to an upstream tool that no entry in `tools` names.
    #[serde(default)]
    pub default_action: DefaultAction,
    /// Per-tool rules, keyed by the upstream tool name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolRule>,
    /// Profile-wide budgets; a tool's own `limits` override them field by field.
    #[serde(default)]
    pub limits: Limits,
    /// Which resources (`resources/list|read|templates/list|subscribe`)
    /// callers may see and read. Empty: none.
    #[serde(default, skip_serializing_if = "ResourcePolicy::is_default")]
    pub resources: ResourcePolicy,
    /// Which prompts (`prompts/list|get`) callers may see and get. Empty: none.
    #[serde(default, skip_serializing_if = "PromptPolicy::is_default")]
    pub prompts: PromptPolicy,
    /// Secret redaction in tool results.
    #[serde(default)]
    pub redaction: Redaction,
    /// Prefix exposed descriptions with the tool's risk, e.g. `[writes files]`.
    #[serde(default)]
    pub risk_prefix: bool,
    /// Quarantine a tool whose definition changes while the facade runs.
    #[serde(default = "default_true")]
    pub quarantine_on_drift: bool,
    /// Clean exposed tool schemas: drop `$comment` (free text no validator
    /// reads, a place to hide instructions to the model) and give the root a
    /// `type: object`. Every other JSON Schema 2020-12 keyword is kept as the
    /// server wrote it (`$schema`, `$defs`, `$anchor`, `$ref` unresolved),
    /// as MCP 2026-07-28 requires of clients.
    #[serde(default = "default_true")]
    pub clean_schemas: bool,
    /// What the poisoning scan of tool descriptions and schemas does on a finding.
    #[serde(default)]
    pub poisoning_scan: ScanAction,
    /// The highest risk a tool may have and still be exposed without being
    /// listed in `approvedTools`. Local files default to `critical` (no
    /// approval workflow); the operator compiles `medium` plus the approved set.
    #[serde(default = "default_risk_ceiling")]
    pub risk_ceiling: RiskLevel,
    /// Upstream tool names above `riskCeiling` that a cluster admin approved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_tools: Vec<String>,
    /// Who gets which role.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<RoleBinding>,
    /// `planning`: no tool with a side effect is listed or called (a caller
    /// may ask for planning mode itself, never leave it). Default `normal`.
    #[serde(default, skip_serializing_if = "Mode::is_normal")]
    pub mode: Mode,
    /// Side effects no tool may have: a tool with any of these effect tags
    /// is hidden and refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_side_effects: Vec<SideEffect>,
    /// Further restrictions for callers of one role (they add to the
    /// profile's `mode` and `denySideEffects`, never lift them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_restrictions: Vec<RoleRestriction>,
    /// The `search_tools` and `call_tool` meta-tools: `off` (default),
    /// `alongside` the tools in `tools/list`, or `only` them (an agent with
    /// hundreds of tools is shown two and searches).
    #[serde(default, skip_serializing_if = "ToolSearch::is_off")]
    pub tool_search: ToolSearch,
    /// Who may decide out-of-band approvals on the admin port.
    #[serde(default, skip_serializing_if = "ApprovalPolicy::is_default")]
    pub approval: ApprovalPolicy,
    /// The server's scope as the server learns it: the facade answers the
    /// server's `roots/list` with these itself (the client's answer could
    /// widen it). Empty: the server is not offered the `roots` capability.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<Root>,
    /// How callers authenticate.
    #[serde(default)]
    pub auth: AuthConfig,
    /// What the pod's sandbox allows; write-capable tools need `writeAllowed`.
    #[serde(default)]
    pub sandbox: SandboxGrant,
    /// Which credential the facade presents to an HTTP(S) upstream for each
    /// caller. Absent: requests carry none. A caller's own token is never
    /// forwarded either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_auth: Option<UpstreamAuth>,
}

impl Default for FacadePolicy {
    /// The same document as an empty file: deny every tool, nobody anonymous.
    fn default() -> Self {
        FacadePolicy {
            api_version: default_api_version(),
            kind: default_kind(),
            server: None,
            default_action: DefaultAction::Deny,
            tools: Vec::new(),
            limits: Limits::default(),
            resources: ResourcePolicy::default(),
            prompts: PromptPolicy::default(),
            redaction: Redaction::default(),
            risk_prefix: false,
            clean_schemas: true,
            quarantine_on_drift: true,
            poisoning_scan: ScanAction::default(),
            risk_ceiling: default_risk_ceiling(),
            approved_tools: Vec::new(),
            roles: Vec::new(),
            mode: Mode::Normal,
            deny_side_effects: Vec::new(),
            role_restrictions: Vec::new(),
            tool_search: ToolSearch::Off,
            approval: ApprovalPolicy::default(),
            roots: Vec::new(),
            auth: AuthConfig::default(),
            sandbox: SandboxGrant::default(),
            upstream_auth: None,
        }
    }
}

fn default_api_version() -> String {
    API_VERSION.to_string()
}
fn default_kind() -> String {
    KIND.to_string()
}
fn default_true() -> bool {
    true
}
fn default_risk_ceiling() -> RiskLevel {
    RiskLevel::Critical
}

/// One root of the server's scope (MCP `roots/list`).
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Root {
    /// A `file://` URI of an absolute path, e.g. `file:///workspace`.
    pub uri: String,
    /// A name for people and the server's logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Who decides the calls an argument rule with `approval: outOfBand` holds.
///
/// A person decides on the admin port (`POST /approvals/<id>`) with their
/// own bearer token — the same kinds the MCP port accepts (static, JWT,
/// service account); the facade records that identity as the approver. Only
/// callers whose role (from `roles`) is listed here may decide, and never
/// on a call of their own. The operator's admin token reads `/approvals`
/// but cannot decide.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// Roles whose holders may approve or deny a waiting call (default
    /// `[admin]`; empty: nobody, so every out-of-band check times out).
    #[serde(default = "default_approver_roles")]
    pub approver_roles: Vec<Role>,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        ApprovalPolicy {
            approver_roles: default_approver_roles(),
        }
    }
}

impl ApprovalPolicy {
    pub fn is_default(&self) -> bool {
        *self == ApprovalPolicy::default()
    }
}

fn default_approver_roles() -> Vec<Role> {
    vec![Role::Admin]
}

/// The MCPServer a policy was compiled for.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerRef {
    /// Namespace of the MCPServer.
    #[serde(default)]
    pub namespace: String,
    /// Name of the MCPServer.
    pub name: String,
}

/// What the sandbox around the server allows.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SandboxGrant {
    /// The server runs in an approved sandbox that allows writes; without it,
    /// write-capable tools are refused with SANDBOX_VIOLATION.
    #[serde(default)]
    pub write_allowed: bool,
}
