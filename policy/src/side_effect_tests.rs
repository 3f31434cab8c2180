//! Planning mode and effect tags in [`super::decide`] (step 6): who can turn
//! planning mode on, what counts as a side effect, and that list and call
//! agree under every combination.

use super::*;
use mcp_warden_crds::policy::{FacadePolicy, SideEffect};
use serde_json::json;

/// Tools shaped like the real servers' (server-filesystem's annotations,
/// mcp-server-git's names, server-everything's bare `echo`).
fn upstream() -> Vec<ObservedTool> {
    [
        json!({"name": "read_text_file", "annotations": {"readOnlyHint": true, "openWorldHint": false}}),
        json!({"name": "write_file", "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": false}}),
        json!({"name": "git_status", "annotations": {"readOnlyHint": true}}),
        json!({"name": "git_commit", "annotations": {"readOnlyHint": false, "destructiveHint": false}}),
        json!({"name": "fetch_page", "annotations": {"readOnlyHint": true}}),
        json!({"name": "search_web", "annotations": {"readOnlyHint": true, "openWorldHint": true}}),
        json!({"name": "echo", "description": "Echoes back the input"}),
        json!({"name": "delete_thing", "annotations": {"readOnlyHint": true}}),
    ]
    .into_iter()
    .map(|d| ObservedTool::new(d).unwrap())
    .collect()
}

fn policy(extra: &str) -> CompiledPolicy {
    let yaml = format!(
        "defaultAction: allow\nsandbox: {{writeAllowed: true}}\nauth: {{staticTokens: {{}}}}\nroles: [{{role: viewer, subjects: [v]}}, {{role: user, subjects: [u]}}]\n{extra}"
    );
    CompiledPolicy::compile(&FacadePolicy::from_yaml_str(&yaml, "t").unwrap()).unwrap()
}

fn listed(p: &CompiledPolicy, role: Role, asked: bool) -> Vec<String> {
    let tools = upstream();
    let mut out: Vec<String> = tools
        .iter()
        .filter(|t| p.decide_list(t, Some(role), asked).is_allow())
        .map(|t| t.name.clone())
        .collect();
    out.sort();
    out
}

fn call(p: &CompiledPolicy, name: &str, role: Role, asked: bool) -> Result<(), Denial> {
    let tools = upstream();
    let args = json!({});
    match p.decide_call(name, Some(role), asked, &args, |n| {
        tools.iter().find(|t| t.name == n)
    }) {
        Decision::Allow(_) => Ok(()),
        Decision::Deny(d) => Err(d),
    }
}

const READ_ONLY: [&str; 3] = ["git_status", "read_text_file", "search_web"];

#[test]
fn planning_mode_keeps_only_tools_without_side_effects() {
    let p = policy("mode: planning\n");
    // search_web reaches the network (openWorldHint) and fetch_page by its
    // name; echo has no readOnlyHint, so by the MCP default it writes.
    assert_eq!(
        listed(&p, Role::User, false),
        ["git_status", "read_text_file"]
    );
    let d = call(&p, "write_file", Role::User, false).unwrap_err();
    assert_eq!((d.code(), d.reason()), (-32004, "planning_mode"));
    assert_eq!(d.observed(), Some("delete"));
    assert_eq!(d.limit(), Some("planning"));
    assert!(d.to_string().contains("planning mode"), "{d}");
    let d = call(&p, "git_commit", Role::User, false).unwrap_err();
    assert_eq!((d.reason(), d.observed()), ("planning_mode", Some("write")));
    assert!(call(&p, "read_text_file", Role::User, false).is_ok());
    assert_eq!(
        call(&p, "delete_thing", Role::User, false)
            .unwrap_err()
            .observed(),
        Some("delete"),
        "a name keyword counts even beside readOnlyHint"
    );
}

#[test]
fn a_caller_can_ask_for_planning_mode_but_never_leave_it() {
    let open = policy("");
    assert!(call(&open, "write_file", Role::User, false).is_ok());
    assert_eq!(
        call(&open, "write_file", Role::User, true)
            .unwrap_err()
            .reason(),
        "planning_mode"
    );
    assert_eq!(
        listed(&open, Role::User, true),
        ["git_status", "read_text_file"]
    );
    // Imposed by the profile: not asking changes nothing.
    let imposed = policy("mode: planning\n");
    assert_eq!(
        listed(&imposed, Role::User, false),
        listed(&imposed, Role::User, true)
    );
}

#[test]
fn a_role_can_impose_planning_mode_and_deny_tags_on_its_callers() {
    let p = policy(
        "roleRestrictions:\n  - {role: user, mode: planning}\n  - {role: admin, denySideEffects: [network]}\n",
    );
    assert_eq!(
        listed(&p, Role::User, false),
        ["git_status", "read_text_file"]
    );
    let admin = listed(&p, Role::Admin, false);
    assert!(admin.contains(&"write_file".to_string()), "{admin:?}");
    assert!(!admin.contains(&"search_web".to_string()), "{admin:?}");
    assert!(!admin.contains(&"fetch_page".to_string()), "{admin:?}");
    let d = call(&p, "search_web", Role::Admin, false).unwrap_err();
    assert_eq!(
        (d.code(), d.reason(), d.observed()),
        (-32004, "side_effect_denied", Some("network"))
    );
    assert_eq!(
        listed(&policy(""), Role::Admin, false).len(),
        upstream().len()
    );
}

#[test]
fn deny_side_effects_refuses_by_tag_and_joins_profile_and_role() {
    let p = policy(
        "denySideEffects: [delete]\nroleRestrictions: [{role: user, denySideEffects: [exec]}]\n",
    );
    assert_eq!(
        call(&p, "write_file", Role::User, false)
            .unwrap_err()
            .reason(),
        "side_effect_denied"
    );
    assert_eq!(
        call(&p, "delete_thing", Role::Admin, false)
            .unwrap_err()
            .reason(),
        "side_effect_denied",
        "the profile's tags hold for every role"
    );
    assert!(call(&p, "git_commit", Role::User, false).is_ok());
}

#[test]
fn a_profile_may_declare_tags_but_not_remove_what_annotations_declare() {
    let p = policy(
        "mode: planning\ntools:\n  - {name: echo, sideEffects: []}\n  - {name: write_file, sideEffects: []}\n  - {name: git_status, sideEffects: [network]}\n",
    );
    let seen = listed(&p, Role::User, false);
    assert_eq!(
        seen,
        ["echo", "read_text_file"],
        "echo declared side-effect free"
    );
    assert_eq!(
        call(&p, "write_file", Role::User, false)
            .unwrap_err()
            .reason(),
        "planning_mode",
        "readOnlyHint: false and destructiveHint are the server's own word"
    );
}

#[test]
fn list_and_call_agree_under_every_restriction() {
    for extra in [
        "",
        "mode: planning\n",
        "denySideEffects: [write]\n",
        "roleRestrictions: [{role: user, mode: planning}, {role: admin, denySideEffects: [network]}]\n",
    ] {
        let p = policy(extra);
        for role in [Role::Viewer, Role::User, Role::Admin] {
            for asked in [false, true] {
                let seen = listed(&p, role, asked);
                for t in upstream() {
                    let ok = call(&p, &t.name, role, asked).is_ok();
                    assert_eq!(ok, seen.contains(&t.name), "{extra} {role:?} {asked} {}", t.name);
                }
                if asked || extra.starts_with("mode") {
                    assert!(seen.iter().all(|n| READ_ONLY.contains(&n.as_str())));
                }
            }
        }
    }
}

#[test]
fn a_second_entry_for_one_role_is_an_error() {
    let yaml =
        "defaultAction: allow\nroleRestrictions: [{role: user, mode: planning}, {role: user}]\n";
    let errs =
        CompiledPolicy::compile(&FacadePolicy::from_yaml_str(yaml, "t").unwrap()).unwrap_err();
    assert!(errs
        .iter()
        .any(|e| e.to_string().contains("roleRestrictions[1].role")));
}

#[test]
fn effect_tags_round_trip() {
    let e = crate::risk::Effects::from_tags(&[SideEffect::Network, SideEffect::Exec]);
    assert_eq!(e.tags(), [SideEffect::Exec, SideEffect::Network]);
    assert!(e.has(SideEffect::Network) && !e.has(SideEffect::Write));
}
