//! Rule-precedence tests for [`super::decide`].

use super::*;
use crate::poison::FindingKind;
use crate::tools::Quarantine;
use mcp_warden_crds::policy::FacadePolicy;
use serde_json::json;
use std::collections::HashMap;

const POLICY: &str = r#"
tools:
  - name: read-file
    alias: read_file
    description: Read a workspace file.
    requiredRole: viewer
    arguments:
      - {name: path, kind: path, root: /workspace, allow: ["**"], check: ["secrets/**"], deny: ["**/.git/**"]}
  - name: admin_tool
    requiredRole: admin
  - name: write_file
  - name: run_command
    writes: false
  - name: danger
    risk: critical
    writes: false
  - name: approved_danger
    risk: critical
    writes: false
  - name: missing_upstream
riskCeiling: high
approvedTools: [approved_danger]
riskPrefix: true
"#;

struct World {
    policy: CompiledPolicy,
    upstream: HashMap<String, ObservedTool>,
}

fn ro(name: &str) -> serde_json::Value {
    json!({"name": name, "description": format!("{name} upstream"), "annotations": {"readOnlyHint": true}})
}

fn world(policy: &str) -> World {
    let policy =
        CompiledPolicy::compile(&FacadePolicy::from_yaml_str(policy, "t").unwrap()).unwrap();
    let defs = [
        ro("read-file"),
        ro("admin_tool"),
        json!({"name": "write_file", "description": "Create or overwrite a file"}),
        ro("run_command"),
        ro("danger"),
        ro("approved_danger"),
        ro("unlisted"),
        json!({"name": "unlisted_writer"}),
    ];
    let upstream = defs
        .into_iter()
        .map(|d| ObservedTool::new(d).unwrap())
        .map(|t| (t.name.clone(), t))
        .collect();
    World { policy, upstream }
}

impl World {
    fn call(
        &self,
        name: &str,
        role: Option<Role>,
        args: serde_json::Value,
    ) -> Result<Grant<'_>, Denial> {
        let args = Box::leak(Box::new(args));
        let name: &'static str = Box::leak(name.to_string().into_boxed_str());
        match self
            .policy
            .decide_call(name, role, false, args, |n| self.upstream.get(n))
        {
            Decision::Allow(g) => Ok(g),
            Decision::Deny(d) => Err(d),
        }
    }
    fn denial(&self, name: &str, role: Option<Role>) -> Denial {
        self.call(name, role, json!({}))
            .expect_err("expected a denial")
    }
}

#[test]
fn unmapped_callers_get_permission_denied_for_everything() {
    let w = world(POLICY);
    for name in ["read_file", "nonexistent", "admin_tool"] {
        let d = w.denial(name, None);
        assert_eq!(d, Denial::NoRole);
        assert_eq!(d.code(), -32003);
    }
    assert!(w
        .upstream
        .values()
        .all(|t| !w.policy.decide_list(t, None, false).is_allow()));
}

#[test]
fn not_allowed_and_not_upstream_are_indistinguishable() {
    // The same name, once outside the allowlist (server has it) and once in
    // the allowlist (server lacks it), must get the very same answer.
    let outside = world(POLICY);
    let a = outside.denial("unlisted", Some(Role::Admin));
    let mut listed_missing = world(&POLICY.replace("tools:\n", "tools:\n  - name: unlisted\n"));
    assert!(listed_missing
        .call("unlisted", Some(Role::Admin), json!({}))
        .is_ok());
    listed_missing.upstream.remove("unlisted");
    let b = listed_missing.denial("unlisted", Some(Role::Admin));
    assert_eq!(a, b);
    assert_eq!(a.to_string(), b.to_string());
    assert_eq!((a.code(), a.reason()), (-32004, "tool_not_available"));
    // And for a name nobody knows.
    assert_eq!(
        outside
            .denial("missing_upstream", Some(Role::Admin))
            .reason(),
        "tool_not_available"
    );
    assert_eq!(
        outside.denial("ghost", Some(Role::Admin)),
        Denial::NotAvailable {
            tool: "ghost".into()
        }
    );
}

#[test]
fn a_tool_hidden_by_role_answers_permission_denied() {
    let w = world(POLICY);
    let d = w.denial("admin_tool", Some(Role::User));
    assert_eq!(
        d,
        Denial::RoleTooLow {
            tool: "admin_tool".into(),
            required: Role::Admin,
            actual: Role::User
        }
    );
    assert_eq!(
        (d.code(), d.limit(), d.observed()),
        (-32003, Some("admin"), Some("user"))
    );
    assert!(!w
        .policy
        .decide_list(&w.upstream["admin_tool"], Some(Role::User), false)
        .is_allow());
    assert!(w
        .policy
        .decide_list(&w.upstream["admin_tool"], Some(Role::Admin), false)
        .is_allow());
    // Role is judged on the profile, before existence: no probing by low roles.
    assert_eq!(
        w.denial("missing_upstream", Some(Role::Viewer)).reason(),
        "role_too_low"
    );
    // Role beats quarantine.
    let mut q = world(POLICY);
    q.upstream.get_mut("admin_tool").unwrap().quarantine = Some(Quarantine::Drift);
    assert_eq!(
        q.denial("admin_tool", Some(Role::User)).reason(),
        "role_too_low"
    );
    assert_eq!(
        q.denial("admin_tool", Some(Role::Admin)).reason(),
        "definition_drift"
    );
}

#[test]
fn quarantine_is_policy_blocked_with_its_cause() {
    let mut w = world(POLICY);
    w.upstream.get_mut("read-file").unwrap().quarantine = Some(Quarantine::Poisoned {
        kind: FindingKind::HiddenUnicode,
        detail: "zero_width",
    });
    let d = w.denial("read_file", Some(Role::Admin));
    assert_eq!((d.code(), d.reason()), (-32004, "poisoned_definition"));
    assert!(!w
        .policy
        .decide_list(&w.upstream["read-file"], Some(Role::Admin), false)
        .is_allow());
}

#[test]
fn risk_ceiling_blocks_unless_approved() {
    let w = world(POLICY);
    let d = w.denial("danger", Some(Role::Admin));
    assert_eq!(
        (d.code(), d.reason(), d.limit(), d.observed()),
        (-32004, "risk_above_ceiling", Some("high"), Some("critical"))
    );
    assert!(w
        .call("approved_danger", Some(Role::Admin), json!({}))
        .is_ok());
    // `run_command` is critical by keyword; the profile did not set a risk.
    assert_eq!(
        w.denial("run_command", Some(Role::Admin)).reason(),
        "risk_above_ceiling"
    );
}

#[test]
fn argument_deny_comes_before_sandbox_and_check_is_carried() {
    let w = world(POLICY);
    let d = w
        .call(
            "read_file",
            Some(Role::Viewer),
            json!({"path": "../etc/passwd"}),
        )
        .unwrap_err();
    assert_eq!(
        d,
        Denial::ArgumentDenied {
            tool: "read_file".into(),
            rules: vec![RuleReason {
                rule: "path".into(),
                reason: "path_not_allowed"
            }],
        }
    );
    assert_eq!(d.code(), -32004);
    assert!(!d.to_string().contains("passwd"), "{d}");
    let g = w
        .call(
            "read_file",
            Some(Role::Viewer),
            json!({"path": "secrets/key"}),
        )
        .unwrap();
    assert_eq!(
        g.approval,
        Some(Approval {
            rules: vec![RuleHit {
                rule: "path",
                reason: "path_needs_approval"
            }],
            channel: mcp_warden_crds::policy::ApprovalChannel::Elicitation,
        })
    );
    let a = g.approval_denial().unwrap();
    assert_eq!((a.code(), a.reason()), (-32008, "path_needs_approval"));
    let ok = w
        .call(
            "read_file",
            Some(Role::Viewer),
            json!({"path": "src/lib.rs"}),
        )
        .unwrap();
    assert_eq!(ok.approval, None);
    assert!(ok.approval_denial().is_none());
}

#[test]
fn write_capable_tools_need_the_sandbox_grant() {
    let w = world(POLICY);
    let d = w.denial("write_file", Some(Role::User));
    assert_eq!((d.code(), d.reason()), (-32006, "write_without_sandbox"));
    let granted = world(&format!("{POLICY}sandbox: {{writeAllowed: true}}\n"));
    let g = granted
        .call("write_file", Some(Role::User), json!({}))
        .unwrap();
    assert!(g.writes);
    assert_eq!(g.risk, RiskLevel::High);
}

#[test]
fn default_allow_gates_unlisted_tools_like_listed_ones() {
    let w = world(
        "defaultAction: allow\nriskCeiling: high\ntools: [{name: a, alias: unlisted_writer}]\n",
    );
    let g = w.call("unlisted", Some(Role::User), json!({})).unwrap();
    assert_eq!((g.exposed_name, g.upstream_name), ("unlisted", "unlisted"));
    assert_eq!(g.limits, w.policy.profile_limits());
    assert!(
        w.call("unlisted", Some(Role::Viewer), json!({})).is_err(),
        "implicit tools need the user role"
    );
    // No readOnlyHint: write-capable, so hidden without the sandbox grant.
    assert_eq!(
        w.denial("write_file", Some(Role::Admin)).reason(),
        "write_without_sandbox"
    );
    // run_command is critical by keyword: above the medium ceiling.
    assert_eq!(
        w.denial("run_command", Some(Role::Admin)).reason(),
        "risk_above_ceiling"
    );
    // `unlisted_writer` upstream is shadowed by the alias; the alias points at `a`, which the server lacks.
    assert!(!w
        .policy
        .decide_list(&w.upstream["unlisted_writer"], Some(Role::Admin), false)
        .is_allow());
    assert_eq!(
        w.denial("unlisted_writer", Some(Role::Admin)).reason(),
        "tool_not_available"
    );
}

#[test]
fn list_and_call_agree() {
    for policy in [
        POLICY.to_string(),
        format!("{POLICY}sandbox: {{writeAllowed: true}}\n"),
        "defaultAction: allow\n".to_string(),
    ] {
        let w = world(&policy);
        for role in [
            None,
            Some(Role::Viewer),
            Some(Role::User),
            Some(Role::Admin),
        ] {
            for tool in w.upstream.values() {
                let listed = match w.policy.decide_list(tool, role, false) {
                    Decision::Allow(g) => Some(g.exposed_name.to_string()),
                    Decision::Deny(_) => None,
                };
                if let Some(exposed) = listed {
                    let g = w
                        .call(&exposed, role, json!({}))
                        .unwrap_or_else(|d| panic!("{exposed} listed but refused: {d}"));
                    assert_eq!(g.upstream_name, tool.name);
                } else if let Target::Rule(t) = w.policy.by_upstream(&tool.name) {
                    assert!(
                        w.call(&t.exposed, role, json!({})).is_err(),
                        "{} hidden but callable",
                        tool.name
                    );
                } else {
                    assert!(
                        w.call(&tool.name, role, json!({})).is_err(),
                        "{} hidden but callable",
                        tool.name
                    );
                }
            }
        }
    }
}

#[test]
fn grant_carries_alias_description_and_prefix() {
    let w = world(&format!("{POLICY}sandbox: {{writeAllowed: true}}\n"));
    let Decision::Allow(g) =
        w.policy
            .decide_list(&w.upstream["read-file"], Some(Role::Viewer), false)
    else {
        panic!()
    };
    assert_eq!(
        (g.exposed_name, g.upstream_name),
        ("read_file", "read-file")
    );
    assert_eq!(
        g.exposed_description(w.upstream["read-file"].description()),
        "Read a workspace file."
    );
    let Decision::Allow(g) =
        w.policy
            .decide_list(&w.upstream["write_file"], Some(Role::User), false)
    else {
        panic!()
    };
    assert_eq!(
        g.exposed_description(w.upstream["write_file"].description()),
        "[writes files] Create or overwrite a file"
    );
}

#[test]
fn every_denial_has_a_code_reason_and_hint() {
    let all = [
        Denial::NoRole,
        Denial::RoleTooLow {
            tool: "t".into(),
            required: Role::Admin,
            actual: Role::Viewer,
        },
        Denial::NotAvailable { tool: "t".into() },
        Denial::Quarantined {
            tool: "t".into(),
            cause: Quarantine::PinMismatch,
        },
        Denial::RiskAboveCeiling {
            tool: "t".into(),
            risk: RiskLevel::High,
            ceiling: RiskLevel::Low,
        },
        Denial::WriteWithoutSandbox { tool: "t".into() },
        Denial::ArgumentDenied {
            tool: "t".into(),
            rules: vec![RuleReason {
                rule: "p".into(),
                reason: "path_denied",
            }],
        },
        Denial::ApprovalRequired {
            tool: "t".into(),
            rules: vec![RuleReason {
                rule: "p".into(),
                reason: "path_needs_approval",
            }],
        },
        Denial::InvalidParams {
            tool: "t".into(),
            violations: vec![],
        },
    ];
    let codes: Vec<i32> = all.iter().map(Denial::code).collect();
    assert_eq!(
        codes,
        [-32003, -32003, -32004, -32004, -32004, -32006, -32004, -32008, -32602]
    );
    for d in &all {
        assert!(
            d.reason()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{}",
            d.reason()
        );
        assert!(d.to_string().ends_with(d.hint()), "{d}");
        assert_eq!(d.error_code().code(), d.code());
    }
    assert_eq!(ErrorCode::PolicyBlocked.name(), "POLICY_BLOCKED");
}

/// The review's finding: a command needing an out-of-band approval must
/// not be downgraded to an elicitation because another argument (here the
/// working directory) also asks for one.
const RUN: &str = r#"
tools:
  - name: run
    writes: false
    arguments:
      - {name: cwd, kind: path, allow: ["/work/**"], check: ["/work/prod/**"]}
      - {name: command, kind: command, allow: ["git *"], check: ["git push"], approval: outOfBand}
"#;

fn run_world() -> World {
    let mut w = world(RUN);
    let run = ObservedTool::new(ro("run")).unwrap();
    w.upstream.insert("run".into(), run);
    w
}

#[test]
fn the_strongest_channel_of_every_matching_rule_wins() {
    use mcp_warden_crds::policy::ApprovalChannel::{Elicitation, OutOfBand};
    let w = run_world();
    let channel = |cwd: &str, command: &str| {
        let g = w
            .call(
                "run",
                Some(Role::User),
                json!({"cwd": cwd, "command": command}),
            )
            .unwrap();
        g.approval.as_ref().map(|a| a.channel)
    };
    assert_eq!(
        channel("/work/dev", "git push origin main"),
        Some(OutOfBand)
    );
    assert_eq!(
        channel("/work/prod/app", "git push origin main"),
        Some(OutOfBand)
    );
    assert_eq!(channel("/work/prod/app", "git status"), Some(Elicitation));
    assert_eq!(channel("/work/dev", "git status"), None);
}
