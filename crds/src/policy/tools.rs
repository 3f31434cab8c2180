//! Tool rules: which upstream tools are exposed under what name and role,
//! and the argument rules (allow / check / deny patterns) each call's
//! values are checked against before the facade forwards it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{
    access::{RiskLevel, Role, SideEffect},
    limits::Limits,
};

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
