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

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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

/// One upstream tool's rule.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolRule {
    /// The tool's name as the upstream server lists it.
    pub name: String,
    /// The name agents see instead (snake_case, unique across the profile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Replaces the upstream description agents see.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The least role that may see and call this tool.
    #[serde(default)]
    pub required_role: Role,
    /// The tool's risk; when unset it is inferred from annotations and keywords,
    /// never lower than what the annotations say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub risk: Option<RiskLevel>,
    /// Whether the tool writes; when unset it is inferred (not `readOnlyHint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writes: Option<bool>,
    /// The tool's side effects, replacing the ones inferred from its name
    /// and description (`[]`: none). What its annotations declare
    /// (`readOnlyHint: false` → write, `destructiveHint` → delete,
    /// `openWorldHint` → network) and `writes: true` still count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<Vec<SideEffect>>,
    /// Expected definition hash, `sha256:<hex>`; a mismatch quarantines the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<String>,
    /// Rules for individual arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<ArgumentRule>,
    /// Overrides of the profile-wide limits for this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
}

/// A rule for one argument of a tool: each value passes, needs a person's
/// approval (check) or is refused (deny).
///
/// Precedence per value: deny beats check beats allow; a value no pattern
/// matches gets `otherwise`. Several values (array elements, commands in
/// one line, readings of one path) and several rules of one call: every
/// one contributes, the strictest outcome wins (deny > check > pass), a
/// check goes through the strongest channel any of them names (outOfBand >
/// elicitation), and every rule that asked is named.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ArgumentRule {
    /// The argument: a top-level property name, or a JSON pointer (`/a/b`).
    /// Array values are checked element by element.
    pub name: String,
    /// How values are interpreted before matching.
    pub kind: ArgumentKind,
    /// Patterns that pass.
    /// `path`: globs (`*` stops at `/`, `**` crosses it), case-sensitive,
    /// relative ones taken under `root`.
    /// `command`: an exact command line (`git status` allows only
    /// `git status`), or words followed by `*` for any further arguments
    /// (`git log *`); every word before the `*` must be literal in the call.
    /// `string`: regexes that must match the whole value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Patterns that need a person's approval first (see `approval`); same
    /// syntax as `deny`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<String>,
    /// Patterns that are refused. Deny beats check beats allow.
    /// `path`: globs that ignore case (`**/.env` also refuses `.ENV`); one
    /// for a directory's contents (`secrets/**`) also refuses the directory.
    /// `command`: a command and the words before its first option, then
    /// options that may appear anywhere after them, in any spelling
    /// (`git diff --output` refuses `git diff HEAD --output=f` and
    /// `--outp=f`; `pytest -p` refuses `-pX` and `-vp`); options alone
    /// (`--exec-path`) apply to every command. A `$` expansion, glob or
    /// brace that could turn into a refused word counts as that word.
    /// `string`: regexes that must match the whole value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
    /// The outcome for a value no pattern matches.
    #[serde(default)]
    pub otherwise: ArgumentOutcome,
    /// For `path`: relative paths are resolved against this directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root: Option<String>,
    /// Who approves a `check`: `elicitation` (default) asks the person at
    /// the calling client; `outOfBand` waits for an approval on the
    /// facade's admin port (`/approvals`), which the agent cannot reach.
    #[serde(default, skip_serializing_if = "ApprovalChannel::is_default")]
    pub approval: ApprovalChannel,
}

/// Where a `check` is approved.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalChannel {
    /// An MCP elicitation to the calling client: the client's user interface
    /// asks its user. A client (or an agent driving one) that declares the
    /// elicitation capability can answer it itself, so this is a
    /// confirmation step, not a second factor.
    #[default]
    Elicitation,
    /// A person approves through the facade's admin port (`GET /approvals`
    /// lists pending calls, `POST /approvals/<id>` decides), a channel the
    /// agent does not control; the call waits a bounded time.
    OutOfBand,
}

impl ApprovalChannel {
    /// Whether this is the default (left out when serializing).
    pub fn is_default(&self) -> bool {
        *self == ApprovalChannel::default()
    }
}

/// How an argument's value is read.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ArgumentKind {
    /// A filesystem path, normalized before glob matching.
    #[default]
    Path,
    /// A shell command line, parsed into commands and argv.
    Command,
    /// Any string, matched with regexes.
    String,
}

/// The outcome of an argument rule.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ArgumentOutcome {
    /// Let the call through.
    Pass,
    /// Ask a person through the rule's `approval` channel; refuse with
    /// APPROVAL_REQUIRED if nobody can be asked or nobody answers in time.
    Check,
    /// Refuse the call.
    #[default]
    Deny,
}

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

/// Secret redaction in results.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Redaction {
    /// Redact at all (default true).
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Built-in detectors to run; empty means all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Extra detectors: a name (used as the metric's `kind` label) and a regex.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patterns: Vec<RedactionPattern>,
    /// Also look inside base64 text: a run of at least 24 base64 characters
    /// that decodes to text holding a secret is redacted whole (default
    /// false: it costs a decode of every such run).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub decode_base64: bool,
}

impl Default for Redaction {
    fn default() -> Self {
        Redaction {
            enabled: true,
            kinds: Vec::new(),
            patterns: Vec::new(),
            decode_base64: false,
        }
    }
}

/// A custom redaction detector.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedactionPattern {
    /// Short snake_case name; becomes the `kind` label of `mcpwarden_redactions_total`.
    pub name: String,
    /// Regular expression (Rust `regex` syntax) of what to redact.
    pub regex: String,
}

/// What the poisoning scan does with a suspicious tool definition.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase")]
pub enum ScanAction {
    /// Hide the tool and refuse calls until an admin pins it.
    #[default]
    Quarantine,
    /// Expose it, but log and count the finding.
    Warn,
    /// Do not scan.
    Off,
}

/// Grants a role to callers.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleBinding {
    /// The role granted.
    pub role: Role,
    /// Whose `subjects` and `groups` these are: a JWT issuer's `issuer`, the
    /// service-account issuer, or `static` for static tokens. Required when
    /// the policy accepts more than one of them: `alice` of one issuer is
    /// not `alice` of another. `serviceAccounts` always belong to the
    /// service-account issuer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// Exact subjects (token subject or JWT `sub`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// Groups (static token groups or the JWT `groups` claim).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Kubernetes service accounts as `namespace/name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
}

/// How callers prove who they are. Authenticators are tried in the order
/// static tokens, JWT issuers, service-account tokens; first match wins.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AuthConfig {
    /// Let callers without a token in, with this role. Absent: nobody is anonymous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anonymous: Option<AnonymousAccess>,
    /// Static bearer tokens, stored as sha256 hashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_tokens: Option<StaticTokens>,
    /// JWT issuers verified against a JWKS file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jwt: Vec<JwtIssuer>,
    /// This facade's own URLs, one per name clients reach it by
    /// (`https://git.mcp.example.com/mcp`): the protected resource of
    /// OAuth (RFC 9728 `resource`, RFC 8707 resource indicator). A request
    /// whose `Host` matches one gets that URL's metadata at
    /// `/.well-known/oauth-protected-resource` (and the path-suffixed
    /// form) and a 401 that points there; issuers with `resourceAudience`
    /// accept only tokens whose `aud` is one of them. Empty: no metadata
    /// is served. The command line's `--resource-url` adds to these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_urls: Vec<String>,
    /// Kubernetes projected service-account tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_tokens: Option<ServiceAccountTokens>,
    /// Gateways this facade serves as a backend of: a gateway calls with an
    /// assertion it signed for this backend, naming the caller it
    /// authenticated. The caller is then who the assertion names (its
    /// issuer, subject and groups), judged by this policy's own role
    /// bindings; nothing unsigned is ever believed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<TrustedGateway>,
    /// Accept only the assertions of `gateways`: static tokens, JWT
    /// issuers, service-account tokens and `anonymous` are not used to let
    /// anyone in, though their issuers still name, in role bindings, the
    /// callers a gateway vouches for. An MCPServer's `onlyThroughGateway`
    /// sets it (with `gateways` then holding that gateway alone, or
    /// nothing until its key exists: no way in).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub gateways_only: bool,
}

/// A gateway whose assertions this facade accepts.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrustedGateway {
    /// The gateway's `iss` (its `--gateway-issuer`).
    pub issuer: String,
    /// The gateway's public key (PEM: Ed25519, P-256 or RSA), whose private
    /// half only the gateway holds.
    pub public_key_file: String,
    /// The audience this backend is to the gateway: its backend name.
    /// An assertion minted for another backend is refused.
    pub audience: String,
    /// The issuers of the callers this gateway may vouch for (`static`, a
    /// JWT issuer URL, the service-account issuer). An assertion for a
    /// caller of another issuer is refused; role bindings name these.
    pub caller_issuers: Vec<String>,
    /// Allowed clock skew for `exp`/`nbf`, in seconds (default 60, at most 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
}

/// Anonymous access.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnonymousAccess {
    /// The role anonymous callers get.
    pub role: Role,
}

/// Static bearer tokens.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticTokens {
    /// A YAML/JSON file with a list of `{sha256, subject, groups}` (a mounted Secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Inline entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<StaticToken>,
    /// Tokens kept in files, one raw token per file (a mounted Secret key),
    /// each standing for a subject and its groups. A file is hashed when
    /// read and re-read when it changes (rotation needs no restart); a
    /// missing file, or a token shorter than 16 characters, is skipped with
    /// a warning and its token refused until the file is right.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub token_files: Vec<StaticTokenFile>,
}

/// A static token held in a file.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticTokenFile {
    /// The file holding the token (surrounding whitespace is ignored).
    pub path: String,
    /// Who holds it.
    pub subject: String,
    /// Groups of the holder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// One static token, by hash.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StaticToken {
    /// Hex sha256 of the token.
    pub sha256: String,
    /// Who holds it.
    pub subject: String,
    /// Groups of the holder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// A JWT issuer.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JwtIssuer {
    /// Expected `iss`.
    pub issuer: String,
    /// Accepted `aud` values; at least one must match. Leave empty with
    /// `resourceAudience`, which replaces them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audiences: Vec<String>,
    /// People log in at this issuer: it is one of the
    /// `authorization_servers` of the protected-resource metadata, where
    /// MCP clients that implement the specification's authorization go
    /// to get a token for this facade.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub login: bool,
    /// Scopes every token of this issuer must carry (in its `scope`
    /// claim, space-separated, or `scp`) to use this server at all, e.g.
    /// `[mcp]`. A valid token without them gets HTTP 403
    /// `insufficient_scope` naming them. Scopes admit a caller to the
    /// server; what it may call there is its role's (`roles`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_scopes: Vec<String>,
    /// Accept only tokens issued for this facade: `aud` must be one of
    /// `auth.resourceUrls` (the resource indicator the client asked the
    /// issuer for, RFC 8707), so a token for another server is refused.
    /// Replaces `audiences`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resource_audience: bool,
    /// Path of the JWKS document.
    pub jwks_file: String,
    /// Allowed clock skew for `exp`/`nbf`, in seconds (default 60, at most 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_skew_seconds: Option<u64>,
    /// Claim holding the groups (default `groups`): a claim name, or a JSON
    /// pointer into the claims when it starts with `/`
    /// (`/realm_access/roles`). A string is one group, an array of strings
    /// several; anything else none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub groups_claim: Option<String>,
    /// Claim holding the subject that role bindings name (default `sub`;
    /// e.g. `email`, `preferred_username`), a name or a JSON pointer. A
    /// token without it as a string is refused (`missing_claim`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username_claim: Option<String>,
}

/// Kubernetes projected service-account tokens.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceAccountTokens {
    /// The cluster's service-account issuer (`iss`).
    pub issuer: String,
    /// Path of the issuer's JWKS (published by the operator in a ConfigMap).
    pub jwks_file: String,
    /// Required audience; default `mcpwarden.dev/<namespace>/<name>` of `server`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

/// The credentials the facade presents to the upstream MCP server (an
/// HTTP(S) upstream), chosen per caller after policy. Secrets are files (a
/// mounted Secret), re-read when they change; no credential ever reaches a
/// log, an audit line or an error.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamAuth {
    /// Which credential a caller's requests carry: the first rule that
    /// matches the caller wins; a caller no rule matches is refused
    /// (`no_upstream_credential`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<UpstreamCredentialRule>,
    /// The credential of the facade's own requests (readiness probe,
    /// `server/discover`, the tool-list refresh): a `tokenFile` or
    /// `clientCredentials`. Absent: they carry none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facade: Option<FacadeCredential>,
    /// The header the credential goes in: `Authorization` (default) carries
    /// `Bearer <token>`; any other header (e.g. `X-Api-Key`) the token as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
}

/// Who a rule is for, and the credential they get. Every matcher given must
/// hold; a rule without matchers is for everyone. Exactly one credential.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpstreamCredentialRule {
    /// The caller's issuer (`static`, a JWT issuer, the service-account issuer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The caller is one of these subjects (of `issuer`, if given).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    /// The caller's role is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<Role>,
    /// A static token: the file's content (trimmed), e.g. a mounted Secret key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// The facade's own identity: an OAuth 2.0 client-credentials token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<ClientCredentials>,
    /// The caller's own upstream identity: the caller's token exchanged
    /// (RFC 8693) at the identity provider for one meant for the upstream.
    /// Only for callers that presented a JWT or service-account token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_exchange: Option<TokenExchange>,
    /// The facade's own credential (`facade`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_facade: bool,
    /// No credential: the upstream needs none from these callers.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub none: bool,
}

/// The facade's own upstream credential: exactly one of the two.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FacadeCredential {
    /// A static token file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_file: Option<String>,
    /// An OAuth 2.0 client-credentials token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_credentials: Option<ClientCredentials>,
}

/// OAuth 2.0 client credentials (RFC 6749 §4.4): the token is cached until
/// shortly before it expires.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientCredentials {
    /// The token endpoint (`https://…`; `http://` only on loopback).
    pub token_url: String,
    /// The facade's client id.
    pub client_id: String,
    /// A file holding the client secret (a mounted Secret key).
    pub client_secret_file: String,
    /// `scope` values asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// `audience` parameter, for identity providers that take one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// `resource` indicator (RFC 8707), e.g. the upstream's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
}

/// OAuth 2.0 token exchange (RFC 8693): the caller's token, exchanged for
/// one whose audience is the upstream; cached per caller token until
/// shortly before it expires.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenExchange {
    /// The identity provider's token endpoint.
    pub token_url: String,
    /// The facade's client id at the identity provider, if it authenticates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// A file holding the client secret (with `clientId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_file: Option<String>,
    /// `audience` of the token asked for (the upstream, by the IdP's name for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// `resource` of the token asked for (RFC 8707), e.g. the upstream's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `scope` values asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes: Vec<String>,
    /// What the caller's token is (default
    /// `urn:ietf:params:oauth:token-type:access_token`; `…:jwt` for IdPs
    /// that want that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_token_type: Option<String>,
    /// `requested_token_type`, if the IdP needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_token_type: Option<String>,
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

/// Why a policy document could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The document does not parse or has unknown/mistyped fields.
    #[error("invalid policy {path}: {message}")]
    Parse {
        /// The file (or `<inline>`).
        path: String,
        /// What is wrong, with the field path and, for YAML, the line and column.
        message: String,
    },
    /// `apiVersion` or `kind` is not a FacadePolicy.
    #[error("invalid policy {path}: expected apiVersion {API_VERSION} kind {KIND}, found {found}")]
    WrongKind {
        /// The file.
        path: String,
        /// What the document said.
        found: String,
    },
}

impl FacadePolicy {
    /// Parse a YAML (or JSON, a subset of YAML) document. `origin` names the
    /// source in errors.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Self, LoadError> {
        let parse_err = |message: String| LoadError::Parse {
            path: origin.to_string(),
            message,
        };
        // An empty file is an empty (deny-all) policy, not an error.
        let policy: FacadePolicy = if text.trim().is_empty() {
            FacadePolicy::default()
        } else {
            let de = serde_yaml_ng::Deserializer::from_str(text);
            serde_path_to_error_like(de).map_err(parse_err)?
        };
        if policy.api_version != API_VERSION || policy.kind != KIND {
            return Err(LoadError::WrongKind {
                path: origin.to_string(),
                found: format!("{} {}", policy.api_version, policy.kind),
            });
        }
        Ok(policy)
    }

    /// Read and parse a policy file.
    pub fn from_file(path: &Path) -> Result<Self, LoadError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
            path: origin.clone(),
            source,
        })?;
        Self::from_yaml_str(&text, &origin)
    }

    /// A policy that exposes every tool to everyone with the default budgets:
    /// what `run` uses when no `--policy` is given.
    pub fn allow_all() -> Self {
        FacadePolicy {
            default_action: DefaultAction::Allow,
            clean_schemas: false,
            quarantine_on_drift: false,
            poisoning_scan: ScanAction::Warn,
            risk_ceiling: RiskLevel::Critical,
            resources: ResourcePolicy {
                default_action: DefaultAction::Allow,
                rules: Vec::new(),
            },
            prompts: PromptPolicy {
                default_action: DefaultAction::Allow,
                rules: Vec::new(),
            },
            auth: AuthConfig {
                anonymous: Some(AnonymousAccess { role: Role::Admin }),
                ..Default::default()
            },
            sandbox: SandboxGrant {
                write_allowed: true,
            },
            ..Default::default()
        }
    }
}

/// Deserialize and turn serde_yaml_ng's error (which carries the line and
/// column) into one message that also names the field path.
fn serde_path_to_error_like(de: serde_yaml_ng::Deserializer<'_>) -> Result<FacadePolicy, String> {
    FacadePolicy::deserialize(de).map_err(|e| match e.location() {
        Some(loc) => format!(
            "line {}, column {}: {}",
            loc.line(),
            loc.column(),
            strip_location(&e.to_string())
        ),
        None => e.to_string(),
    })
}

fn strip_location(message: &str) -> &str {
    message.split(" at line ").next().unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_document_denies_everything() {
        let p = FacadePolicy::from_yaml_str("", "t").unwrap();
        assert_eq!(p.default_action, DefaultAction::Deny);
        assert!(p.auth.anonymous.is_none());
        assert!(p.redaction.enabled);
        assert!(p.quarantine_on_drift);
    }

    #[test]
    fn default_matches_an_empty_mapping() {
        assert_eq!(
            FacadePolicy::from_yaml_str("{}", "t").unwrap(),
            FacadePolicy::default()
        );
    }

    #[test]
    fn unknown_field_names_line_and_field() {
        let text = "apiVersion: mcpwarden.dev/v1alpha1\nkind: FacadePolicy\ntools:\n  - name: a\n    aliass: b\n";
        let err = FacadePolicy::from_yaml_str(text, "p.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("p.yaml"), "{err}");
        assert!(err.contains("line 5"), "{err}");
        assert!(err.contains("aliass"), "{err}");
    }

    #[test]
    fn wrong_kind_is_rejected() {
        let err = FacadePolicy::from_yaml_str("kind: Pod\n", "p.yaml").unwrap_err();
        assert!(matches!(err, LoadError::WrongKind { .. }));
    }

    #[test]
    fn json_is_accepted() {
        let p = FacadePolicy::from_yaml_str(
            r#"{"defaultAction":"allow","tools":[{"name":"echo","alias":"say"}]}"#,
            "j",
        )
        .unwrap();
        assert_eq!(p.default_action, DefaultAction::Allow);
        assert_eq!(p.tools[0].alias.as_deref(), Some("say"));
    }

    #[test]
    fn allow_all_round_trips() {
        let p = FacadePolicy::allow_all();
        let text = serde_yaml_ng::to_string(&p).unwrap();
        assert_eq!(FacadePolicy::from_yaml_str(&text, "rt").unwrap(), p);
    }
}
