//! An approval binds the workload it approves, against the mock API server:
//! a changed image is held (the Deployment is not written, the condition
//! names what changed) until its own digest is approved; a ToolProfile
//! change that only takes away applies at once while one that adds waits;
//! and when nothing approved is live to keep, the new workload runs without
//! capabilities.

mod support;

use serde_json::{json, Value};
use support::*;

const DEPLOY_PATH: &str = "/apis/apps/v1/namespaces/team-a/deployments/git";
const CM_PATH: &str = "/api/v1/namespaces/team-a/configmaps/git-policy";

fn writes_to(calls: &[Call], path: &str) -> usize {
    calls
        .iter()
        .filter(|c| c.is_write() && c.path == path)
        .count()
}

fn with_image(mut f: Fixture, image: &str) -> Fixture {
    let mut server = f.server();
    server.spec.image = image.into();
    server.metadata.generation = Some(server.metadata.generation.unwrap_or(1) + 1);
    f.server = Some(server);
    f
}

fn server_image(f: &Fixture) -> Value {
    f.objects[DEPLOY_PATH]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "server")
        .unwrap()["image"]
        .clone()
}

/// Created, then approved (digest read from the status): settled and in force.
async fn approved(tools: Value) -> Fixture {
    let egress = json!({"rules": [{"cidr": "203.0.113.0/24", "ports": [443]}]});
    let (_, _, pending) = Fixture::new()
        .with_server()
        .with_tool_profile(tools)
        .with_sandbox_egress(egress)
        .reconcile()
        .await;
    let digest = pending.server().status.unwrap().capability_digest.unwrap();
    let (_, _, approved) = pending
        .with_annotation("mcpwarden.dev/approve", Some(&digest))
        .reconcile()
        .await;
    let cond = condition(&approved.server(), "CapabilitiesApproved").clone();
    assert_eq!(cond.reason, "Approved", "{}", cond.message);
    approved
}

#[tokio::test]
async fn a_changed_image_is_held_until_its_own_digest_is_approved() {
    let before = approved(tools_v1()).await;
    let old_digest = before.server().status.unwrap().approved_digest.unwrap();
    assert_eq!(server_image(&before), "img");

    let (_, calls, held) = with_image(before, "docker.io/attacker/anything:latest")
        .reconcile()
        .await;
    assert_eq!(
        writes_to(&calls, DEPLOY_PATH),
        0,
        "no rollout of the new image"
    );
    assert_eq!(writes_to(&calls, CM_PATH), 0);
    assert_eq!(
        server_image(&held),
        "img",
        "the approved image keeps running"
    );
    // the approved egress stays (it is the approved workload's)
    assert!(held.objects[NP_PATH]["spec"]["egress"].is_array());
    let status = held.server().status.unwrap();
    assert_eq!(status.approved_digest.as_deref(), Some(old_digest.as_str()));
    let new_digest = status.capability_digest.clone().unwrap();
    assert_ne!(
        new_digest, old_digest,
        "same names, another workload: another digest"
    );
    assert_ne!(status.workload["image"], status.approved_workload["image"]);
    let cond = condition(&held.server(), "CapabilitiesApproved").clone();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "ApprovalPending")
    );
    assert!(cond.message.contains("(image)"), "{}", cond.message);
    assert!(
        cond.message.contains(&format!(
            "kubectl annotate mcpserver git -n team-a mcpwarden.dev/approve={new_digest}"
        )),
        "{}",
        cond.message
    );
    let compiled = condition(&held.server(), "PolicyCompiled").message.clone();
    assert!(
        compiled.contains("not written until approved"),
        "{compiled}"
    );
    assert_status_snapshot(&held, "status-held.yaml");

    // Held across reconciles (a restart reads the same status and annotation).
    let (_, calls, still) = held.reconcile().await;
    assert_eq!(writes_to(&calls, DEPLOY_PATH), 0);

    // Approving the new digest rolls it out.
    let (_, calls, rolled) = still
        .with_annotation("mcpwarden.dev/approve", Some(&new_digest))
        .reconcile()
        .await;
    assert_eq!(writes_to(&calls, DEPLOY_PATH), 1);
    assert_eq!(server_image(&rolled), "docker.io/attacker/anything:latest");
    assert_eq!(
        condition(&rolled.server(), "CapabilitiesApproved").reason,
        "Approved"
    );
}

#[tokio::test]
async fn a_profile_change_that_only_takes_away_applies_at_once() {
    let tools =
        json!([{"name": "git_log"}, {"name": "git_diff"}, {"name": "git_push", "risk": "high"}]);
    let before = approved(tools).await;
    let policy = |f: &Fixture| {
        f.objects[CM_PATH]["data"]["policy.yaml"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(policy(&before).contains("git_diff"));

    // Removing a tool: a tightening, written at once, no Deployment rollout.
    let fewer = json!([{"name": "git_log"}, {"name": "git_push", "risk": "high"}]);
    let (_, calls, tightened) = before.with_tool_profile(fewer.clone()).reconcile().await;
    assert_eq!(writes_to(&calls, CM_PATH), 1, "the tightening is not held");
    assert!(!policy(&tightened).contains("git_diff"));
    let cond = condition(&tightened.server(), "CapabilitiesApproved").clone();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("True", "Tightened"),
        "{}",
        cond.message
    );
    assert!(cond.message.contains("(toolProfile)"), "{}", cond.message);
    // …and it stays applied on the next pass.
    let (_, calls, tightened) = tightened.reconcile().await;
    assert_eq!(writes_to(&calls, CM_PATH), 0);

    // Adding a tool: held, the tightened policy stays.
    let more =
        json!([{"name": "git_log"}, {"name": "git_push", "risk": "high"}, {"name": "git_reset"}]);
    let (_, calls, held) = tightened.with_tool_profile(more).reconcile().await;
    assert_eq!(writes_to(&calls, CM_PATH), 0, "an added tool waits");
    assert!(!policy(&held).contains("git_reset"));
    let cond = condition(&held.server(), "CapabilitiesApproved").clone();
    assert_eq!(cond.reason, "ApprovalPending");
    assert!(cond.message.contains("(toolProfile)"), "{}", cond.message);
}

#[tokio::test]
async fn with_nothing_approved_live_the_new_workload_runs_without_capabilities() {
    let mut before = approved(tools_v1()).await;
    before.objects.remove(DEPLOY_PATH);
    let (_, calls, after) = with_image(before, "other:2").reconcile().await;
    assert_eq!(writes_to(&calls, DEPLOY_PATH), 1);
    assert_eq!(server_image(&after), "other:2");
    assert_eq!(
        after.objects[NP_PATH]["spec"].get("egress"),
        None,
        "no approved egress for an unapproved workload"
    );
    let status = after.server().status.unwrap();
    assert!(status.approved_capabilities.is_empty());
    assert_eq!(
        condition(&after.server(), "CapabilitiesApproved").reason,
        "PendingApproval"
    );
}

/// The whole status as YAML (transition times dropped: they are the clock's)
/// against `tests/snapshots/<name>`; `UPDATE_SNAPSHOTS=1` rewrites it.
fn assert_status_snapshot(f: &Fixture, name: &str) {
    let mut status = serde_json::to_value(f.server().status.unwrap()).unwrap();
    for c in status["conditions"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("lastTransitionTime");
    }
    let got = serde_yaml_ng::to_string(&status).unwrap();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(
        got,
        want,
        "{} (UPDATE_SNAPSHOTS=1 to accept)",
        path.display()
    );
}
