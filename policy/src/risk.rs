//! Risk and side-effect inference for one upstream tool definition.
//!
//! Flow: upstream definition --[`infer`]--> [`Inferred`] (computed once per
//! definition, kept in [`crate::ObservedTool`]) --[`effective`] with the
//! profile's `risk`/`writes`--> what the decision function gates on.
//!
//! Sources, strongest first:
//! 1. MCP annotations, when *present* (absent hints are not read with the
//!    spec's pessimistic defaults for risk, only for `writes`, see below):
//!    `destructiveHint: true` (unless `readOnlyHint: true`) → at least high;
//!    `readOnlyHint: false` → at least medium; `openWorldHint: true` → at
//!    least medium. This is the *annotation floor*: nothing, not even the
//!    profile's `risk`, goes below it (a team cannot lower what the server
//!    itself declares to slip under the cluster's `riskCeiling`).
//! 2. Keywords in the name (split on `_ - .` and camelCase), by effect:
//!    exec-like (`exec run shell bash eval spawn script install …`) →
//!    critical; delete-like (`delete remove rm drop purge kill …`) and
//!    write-like (`write create update edit move commit push …`) → high and
//!    writes; network-like (`http fetch send email upload webhook …`) → high.
//! 3. A smaller set of description words, ignored when `readOnlyHint: true`
//!    (an honest read-only tool may say "does not modify anything").
//!
//! `writes`: the profile's explicit value, except that annotations that say
//! the tool writes (`readOnlyHint: false`, or `destructiveHint: true` without
//! `readOnlyHint: true`) cannot be overridden; otherwise inferred as
//! "not `readOnlyHint: true`" (the MCP default) or any write/delete/exec
//! keyword.

use mcp_warden_crds::policy::{RiskLevel, SideEffect};
use serde_json::Value;

/// Side effects named by keywords or annotations (bounded set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Runs commands or code.
    pub exec: bool,
    /// Deletes data.
    pub delete: bool,
    /// Writes or changes data.
    pub write: bool,
    /// Reaches the network.
    pub network: bool,
}

impl Effects {
    /// No side effect at all.
    pub const NONE: Effects = Effects {
        exec: false,
        delete: false,
        write: false,
        network: false,
    };

    /// The effects a profile names.
    pub fn from_tags(tags: &[SideEffect]) -> Effects {
        let mut e = Effects::NONE;
        for t in tags {
            *e.slot(*t) = true;
        }
        e
    }

    /// Whether the tool has effect `tag`.
    pub fn has(self, tag: SideEffect) -> bool {
        let mut e = self;
        *e.slot(tag)
    }

    /// Whether the tool has any side effect.
    pub fn any(self) -> bool {
        self != Effects::NONE
    }

    /// The effects both have (the first of them is what a refusal names).
    pub fn first_shared(self, other: Effects) -> Option<SideEffect> {
        self.tags().into_iter().find(|t| other.has(*t))
    }

    /// The union.
    pub fn union(self, o: Effects) -> Effects {
        Effects {
            exec: self.exec || o.exec,
            delete: self.delete || o.delete,
            write: self.write || o.write,
            network: self.network || o.network,
        }
    }

    /// The tags, in a fixed order (exec, delete, write, network).
    pub fn tags(self) -> Vec<SideEffect> {
        [
            (self.exec, SideEffect::Exec),
            (self.delete, SideEffect::Delete),
            (self.write, SideEffect::Write),
            (self.network, SideEffect::Network),
        ]
        .into_iter()
        .filter_map(|(on, t)| on.then_some(t))
        .collect()
    }

    fn slot(&mut self, tag: SideEffect) -> &mut bool {
        match tag {
            SideEffect::Exec => &mut self.exec,
            SideEffect::Delete => &mut self.delete,
            SideEffect::Write => &mut self.write,
            SideEffect::Network => &mut self.network,
        }
    }
}

/// `write`, `delete`, `exec`, `network` (metric label and `data.observed`).
pub fn effect_name(t: SideEffect) -> &'static str {
    match t {
        SideEffect::Write => "write",
        SideEffect::Delete => "delete",
        SideEffect::Exec => "exec",
        SideEffect::Network => "network",
    }
}

/// What a definition says about itself, before the profile has its say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inferred {
    /// Inferred risk: the max of the annotation floor and the keywords.
    pub risk: RiskLevel,
    /// The lowest risk the annotations allow.
    pub annotation_floor: RiskLevel,
    /// Inferred write capability.
    pub writes: bool,
    /// The annotations themselves say the tool writes.
    pub annotation_writes: bool,
    /// Named side effects (annotations and keywords).
    pub effects: Effects,
    /// The side effects the annotations alone declare (a profile's
    /// `sideEffects` cannot take these away).
    pub annotation_effects: Effects,
    /// Description prefix such as `[runs commands] `, empty when none applies.
    pub prefix: String,
}

const EXEC: &[&str] = &[
    "exec",
    "execute",
    "run",
    "runs",
    "shell",
    "bash",
    "sh",
    "zsh",
    "powershell",
    "cmd",
    "command",
    "eval",
    "spawn",
    "script",
    "terminal",
    "subprocess",
    "install",
];
const DELETE: &[&str] = &[
    "delete", "remove", "rm", "rmdir", "drop", "destroy", "purge", "truncate", "wipe", "erase",
    "kill", "unlink",
];
const WRITE: &[&str] = &[
    "write", "create", "update", "edit", "modify", "move", "mv", "rename", "copy", "mkdir",
    "append", "insert", "upsert", "put", "patch", "save", "commit", "push", "merge", "rebase",
    "checkout", "reset", "upload", "chmod",
];
const NETWORK: &[&str] = &[
    "http", "https", "fetch", "request", "curl", "wget", "download", "upload", "send", "post",
    "email", "mail", "webhook", "url", "browse", "navigate",
];
const DESC_EXEC: &[&str] = &["execute", "executes", "executing", "shell"];
const DESC_DELETE: &[&str] = &["delete", "deletes", "deleting", "destroy", "destroys"];
const DESC_WRITE: &[&str] = &[
    "write",
    "writes",
    "overwrite",
    "overwrites",
    "modify",
    "modifies",
];
const DESC_NETWORK: &[&str] = &["http", "https", "url", "webhook", "upload", "uploads"];

/// Infer risk, writes and side effects from a tool definition.
pub fn infer(tool: &Value) -> Inferred {
    let ann = tool.get("annotations");
    let hint = |k: &str| ann.and_then(|a| a.get(k)).and_then(Value::as_bool);
    let read_only = hint("readOnlyHint");
    let destructive = hint("destructiveHint");
    let open_world = hint("openWorldHint");

    let mut floor = RiskLevel::Low;
    let mut effects = Effects::default();
    if destructive == Some(true) && read_only != Some(true) {
        floor = RiskLevel::High;
        effects.delete = true;
    }
    if read_only == Some(false) {
        floor = floor.max(RiskLevel::Medium);
        effects.write = true;
    }
    if open_world == Some(true) {
        floor = floor.max(RiskLevel::Medium);
        effects.network = true;
    }
    let annotation_writes =
        read_only == Some(false) || (destructive == Some(true) && read_only != Some(true));
    let annotation_effects = effects;

    let mut kw = Effects::default();
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
    for word in words(name) {
        mark(&word, EXEC, DELETE, WRITE, NETWORK, &mut kw);
    }
    if read_only != Some(true) {
        let desc = tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or("");
        for word in desc
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            mark(
                &word.to_lowercase(),
                DESC_EXEC,
                DESC_DELETE,
                DESC_WRITE,
                DESC_NETWORK,
                &mut kw,
            );
        }
    }
    let keyword_risk = if kw.exec {
        RiskLevel::Critical
    } else if kw.delete || kw.write || kw.network {
        RiskLevel::High
    } else {
        RiskLevel::Low
    };
    let risk = floor.max(keyword_risk);
    effects.exec |= kw.exec;
    effects.delete |= kw.delete;
    effects.write |= kw.write;
    effects.network |= kw.network;
    let writes = annotation_writes
        || read_only != Some(true)
        || effects.exec
        || effects.delete
        || effects.write;
    let prefix = prefix_for(&effects, writes);
    Inferred {
        risk,
        annotation_floor: floor,
        writes,
        annotation_writes,
        effects,
        annotation_effects,
        prefix,
    }
}

/// The profile's values combined with the inference: `(risk, writes)`.
pub fn effective(
    rule_risk: Option<RiskLevel>,
    rule_writes: Option<bool>,
    inferred: &Inferred,
) -> (RiskLevel, bool) {
    let risk = match rule_risk {
        Some(r) => r.max(inferred.annotation_floor),
        None => inferred.risk,
    };
    let writes = match rule_writes {
        Some(w) => w || inferred.annotation_writes,
        None => inferred.writes,
    };
    (risk, writes)
}

/// The effect tags the decision gates on: the profile's `sideEffects`
/// (plus what the annotations declare and `writes: true`) when it gives
/// them, else the inferred effects plus `write` for any tool that writes
/// (a deleting or executing tool writes too; and by the MCP default, a tool
/// without `readOnlyHint: true` does, unless the profile says `writes:
/// false`).
pub fn effect_tags(
    rule_tags: Option<&[SideEffect]>,
    rule_writes: Option<bool>,
    inferred: &Inferred,
) -> Effects {
    match rule_tags {
        Some(tags) => {
            let mut e = Effects::from_tags(tags).union(inferred.annotation_effects);
            e.write |= rule_writes == Some(true) || inferred.annotation_writes;
            e
        }
        None => {
            let mut e = inferred.effects;
            e.write |= effective(None, rule_writes, inferred).1;
            e
        }
    }
}

fn mark(
    word: &str,
    exec: &[&str],
    delete: &[&str],
    write: &[&str],
    network: &[&str],
    e: &mut Effects,
) {
    e.exec |= exec.contains(&word);
    e.delete |= delete.contains(&word);
    e.write |= write.contains(&word);
    e.network |= network.contains(&word);
}

/// Split an identifier into lowercase words: `_ - . /` and camelCase humps.
pub(crate) fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn prefix_for(e: &Effects, writes: bool) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if e.exec {
        parts.push("[runs commands]");
    }
    if e.delete {
        parts.push("[deletes data]");
    }
    if e.write || (writes && !e.exec && !e.delete) {
        parts.push("[writes files]");
    }
    if e.network {
        parts.push("[network]");
    }
    let mut s = parts.join(" ");
    if !s.is_empty() {
        s.push(' ');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ro(name: &str, desc: &str) -> Value {
        json!({"name": name, "description": desc, "annotations": {"readOnlyHint": true}})
    }

    #[test]
    fn words_split_snake_kebab_and_camel() {
        assert_eq!(
            words("git_commitAll-now.v2"),
            ["git", "commit", "all", "now", "v2"]
        );
        assert_eq!(
            words("longRunningOperation"),
            ["long", "running", "operation"]
        );
    }

    #[test]
    fn read_only_tool_is_low_and_does_not_write() {
        let i = infer(&ro(
            "read_file",
            "Read a file; it does not modify anything.",
        ));
        assert_eq!(i.risk, RiskLevel::Low);
        assert!(!i.writes);
        assert_eq!(i.prefix, "");
    }

    #[test]
    fn missing_read_only_hint_means_writes_but_not_high_risk() {
        let i = infer(&json!({"name": "echo", "description": "Echoes back the input"}));
        assert!(i.writes);
        assert_eq!(i.risk, RiskLevel::Low);
        assert_eq!(i.prefix, "[writes files] ");
    }

    #[test]
    fn name_keywords_raise_risk() {
        assert_eq!(infer(&ro("run_command", "")).risk, RiskLevel::Critical);
        assert_eq!(infer(&ro("delete_file", "")).risk, RiskLevel::High);
        assert!(
            infer(&ro("delete_file", "")).writes,
            "a name keyword beats readOnlyHint"
        );
        assert_eq!(infer(&ro("git_push", "")).risk, RiskLevel::High);
        assert_eq!(infer(&ro("sendEmail", "")).risk, RiskLevel::High);
        assert_eq!(infer(&ro("sendEmail", "")).prefix, "[network] ");
        assert_eq!(infer(&ro("longRunningOperation", "")).risk, RiskLevel::Low);
    }

    #[test]
    fn description_keywords_count_unless_read_only() {
        let t = json!({"name": "tool", "description": "Executes the given shell line"});
        assert_eq!(infer(&t).risk, RiskLevel::Critical);
        assert_eq!(
            infer(&ro("tool", "Executes the given shell line")).risk,
            RiskLevel::Low
        );
    }

    #[test]
    fn annotations_set_a_floor_the_profile_cannot_lower() {
        let t = json!({"name": "tidy", "annotations": {"destructiveHint": true}});
        let i = infer(&t);
        assert_eq!(i.annotation_floor, RiskLevel::High);
        assert_eq!(i.risk, RiskLevel::High);
        assert_eq!(
            effective(Some(RiskLevel::Low), Some(false), &i),
            (RiskLevel::High, true)
        );
        assert_eq!(
            effective(Some(RiskLevel::Critical), None, &i),
            (RiskLevel::Critical, true)
        );
        let ow = infer(
            &json!({"name": "lookup", "annotations": {"readOnlyHint": true, "openWorldHint": true}}),
        );
        assert_eq!(ow.risk, RiskLevel::Medium);
        assert!(!ow.writes);
        assert_eq!(ow.prefix, "[network] ");
    }

    #[test]
    fn profile_may_lower_keyword_risk_and_writes() {
        let i = infer(&json!({"name": "run_report", "annotations": {"readOnlyHint": true}}));
        assert_eq!(i.risk, RiskLevel::Critical);
        assert_eq!(
            effective(Some(RiskLevel::Low), Some(false), &i),
            (RiskLevel::Low, false)
        );
        assert_eq!(effective(None, None, &i), (RiskLevel::Critical, true));
    }

    #[test]
    fn additive_write_annotation_is_medium() {
        let i = infer(
            &json!({"name": "note", "annotations": {"readOnlyHint": false, "destructiveHint": false}}),
        );
        assert_eq!(i.risk, RiskLevel::Medium);
        assert!(i.annotation_writes);
    }
}
