//! Whether a compiled policy only takes away from another (pure). While a
//! changed workload waits for approval the operator keeps the last approved
//! policy (`crate::capabilities`, rule 3), except when the change is a
//! tightening: an emergency removal of a tool or an allow pattern, or a new
//! deny or check pattern, must never wait for an admin.
//!
//! Decided on the compiled `FacadePolicy`, not on the ToolProfile, so what is
//! compared is exactly what the facade enforces. The rule is conservative:
//! anything it does not recognise as taking away counts as a change.
//!
//! | what changed | tightening when |
//! |---|---|
//! | `tools[]` | every new rule's tool was in the old policy (removal only; with `defaultAction: deny`, where a tool without a rule is refused) |
//! | a tool's fields other than `arguments` | never (equal, or it is a change) |
//! | an argument rule | same name, kind, `otherwise`, `root`, `approval`; `allow` a subset; `deny` a superset; every old `check` pattern still in `check` or `deny` |
//! | `approvedTools` | a subset |
//! | anything else (limits, auth, sandbox, redaction, roles…) | never |
//!
//! Deny beats check beats allow and a value no pattern matches gets
//! `otherwise`, so dropping an allow pattern can only move a value from
//! pass to `otherwise`, and a new deny or check pattern only upwards.

use std::collections::BTreeSet;

use mcp_warden_crds::{
    policy::{ArgumentRule, DefaultAction, ToolRule},
    FacadePolicy,
};
use serde_json::Value;

/// Whether `new` enforces nothing `old` did not (see the module header).
pub fn only_takes_away(old: &FacadePolicy, new: &FacadePolicy) -> bool {
    let rest = |p: &FacadePolicy| {
        let mut value = serde_json::to_value(p).expect("policies serialize");
        if let Some(map) = value.as_object_mut() {
            map.remove("tools");
            map.remove("approvedTools");
        }
        value
    };
    if rest(old) != rest(new) {
        return false;
    }
    let old_approved: BTreeSet<&String> = old.approved_tools.iter().collect();
    if !new.approved_tools.iter().all(|t| old_approved.contains(t)) {
        return false;
    }
    let removed_any = old
        .tools
        .iter()
        .any(|o| !new.tools.iter().any(|n| n.name == o.name));
    if removed_any && old.default_action != DefaultAction::Deny {
        return false; // the removed tool would fall to `defaultAction: allow`
    }
    new.tools.iter().all(|n| {
        old.tools
            .iter()
            .find(|o| o.name == n.name)
            .is_some_and(|o| tool_takes_away(o, n))
    })
}

fn tool_takes_away(old: &ToolRule, new: &ToolRule) -> bool {
    let without_arguments = |t: &ToolRule| {
        let mut value: Value = serde_json::to_value(t).expect("rules serialize");
        if let Some(map) = value.as_object_mut() {
            map.remove("arguments");
        }
        value
    };
    if without_arguments(old) != without_arguments(new)
        || old.arguments.len() != new.arguments.len()
    {
        return false;
    }
    old.arguments.iter().all(|o| {
        new.arguments
            .iter()
            .find(|n| n.name == o.name)
            .is_some_and(|n| argument_takes_away(o, n))
    })
}

fn argument_takes_away(old: &ArgumentRule, new: &ArgumentRule) -> bool {
    let set = |v: &[String]| v.iter().cloned().collect::<BTreeSet<String>>();
    let (old_deny, new_deny) = (set(&old.deny), set(&new.deny));
    let new_check_or_deny: BTreeSet<String> = set(&new.check).union(&new_deny).cloned().collect();
    old.kind == new.kind
        && old.otherwise == new.otherwise
        && old.root == new.root
        && old.approval == new.approval
        && set(&new.allow).is_subset(&set(&old.allow))
        && new_deny.is_superset(&old_deny)
        && new_check_or_deny.is_superset(&set(&old.check))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(tools: &str) -> FacadePolicy {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: FacadePolicy\ntools: {tools}\n"
        ))
        .unwrap()
    }

    const OLD: &str = "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], check: ['/data/big/**'], deny: ['**/.env']}]}, {name: git_log}]";

    #[test]
    fn taking_away_is_a_tightening() {
        let old = policy(OLD);
        assert!(only_takes_away(&old, &old), "no change");
        for new in [
            // a tool removed
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], check: ['/data/big/**'], deny: ['**/.env']}]}]",
            // an allow pattern removed
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**'], check: ['/data/big/**'], deny: ['**/.env']}]}, {name: git_log}]",
            // a deny pattern added, a check turned into a deny
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], deny: ['**/.env', '/data/big/**', '**/*.pem']}]}, {name: git_log}]",
        ] {
            assert!(only_takes_away(&old, &policy(new)), "{new}");
        }
    }

    #[test]
    fn anything_else_is_a_change() {
        let old = policy(OLD);
        for new in [
            // a tool added
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], check: ['/data/big/**'], deny: ['**/.env']}]}, {name: git_log}, {name: git_push}]",
            // an allow pattern added
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/**'], check: ['/data/big/**'], deny: ['**/.env']}]}, {name: git_log}]",
            // a deny pattern removed
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], check: ['/data/big/**']}]}, {name: git_log}]",
            // a check pattern dropped
            "[{name: read_file, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], deny: ['**/.env']}]}, {name: git_log}]",
            // an argument rule removed
            "[{name: read_file}, {name: git_log}]",
            // a tool renamed for the client
            "[{name: read_file, alias: cat, arguments: [{name: path, kind: path, allow: ['/data/**', '/tmp/**'], check: ['/data/big/**'], deny: ['**/.env']}]}, {name: git_log}]",
        ] {
            assert!(!only_takes_away(&old, &policy(new)), "{new}");
        }
        // removing a tool under defaultAction allow exposes it unruled
        let mut open = policy(OLD);
        open.default_action = DefaultAction::Allow;
        let mut fewer = policy("[{name: git_log}]");
        fewer.default_action = DefaultAction::Allow;
        assert!(!only_takes_away(&open, &fewer));
        // anything outside tools: a limit raised
        let mut limits = policy(OLD);
        limits.limits.max_output_bytes = Some(1 << 30);
        assert!(!only_takes_away(&old, &limits));
    }
}
