//! Nothing the facade would refuse reaches a pod: every ToolProfile in
//! `examples/invalid-policy/` passes the CRD's schema (it deserializes) yet
//! fails the facade's own loader with the message its `# expect:` comment
//! names — as the profile's check and as a server's plan — while every
//! profile in `examples/` passes. Against the mock API server, a server whose
//! approved profile turns invalid writes no ConfigMap and no Deployment and
//! says `InvalidPolicy` with the loader's message.

mod support;

use mcp_warden_crds::ToolProfile;
use mcp_warden_operator::validate::{facade_accepts, ValidateError};
use serde_json::json;
use support::*;

fn tool_profiles(text: &str) -> Vec<ToolProfile> {
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|doc| {
            let value = serde_yaml_ng::Value::deserialize(doc).ok()?;
            (value.get("kind")?.as_str()? == "ToolProfile")
                .then(|| serde_yaml_ng::from_value(value).expect("a ToolProfile deserializes"))
        })
        .collect()
}

use serde::Deserialize;

#[test]
fn the_facade_loader_refuses_each_invalid_policy_example_with_its_message() {
    let files = yaml_files("examples/invalid-policy");
    assert!(files.len() >= 4, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: no `# expect:` comment", file.display()));
        let [profile] = &tool_profiles(&text)[..] else {
            panic!("{}: one ToolProfile", file.display())
        };
        match facade_accepts(&profile.spec) {
            Err(e @ ValidateError::InvalidPolicy(_)) => {
                assert_eq!(e.reason(), "InvalidPolicy");
                assert!(
                    e.to_string().contains(expect),
                    "{}: {e} does not say {expect:?}",
                    file.display()
                );
            }
            other => panic!("{}: the loader accepted it: {other:?}", file.display()),
        }
    }
}

#[test]
fn every_example_profile_passes_the_facade_loader() {
    let mut checked = 0;
    for file in yaml_files("examples") {
        for profile in tool_profiles(&std::fs::read_to_string(&file).unwrap()) {
            facade_accepts(&profile.spec).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            checked += 1;
        }
    }
    assert!(checked >= 5, "the scan is not vacuous: {checked}");
}

#[tokio::test]
async fn an_invalid_profile_writes_nothing_and_says_invalid_policy() {
    let (_, _, created) = Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    let (_, _, settled) = created.reconcile().await;
    let bad = json!([{"name": "git_log", "arguments": [
        {"name": "revision", "kind": "string", "allow": ["^https://(example\\.com/"]}]}]);
    let (_, calls, after) = settled.with_tool_profile(bad).reconcile().await;
    let writes = writes_of(&calls);
    assert!(
        writes
            .iter()
            .all(|w| w.ends_with("/status") || w.contains("/events")),
        "nothing but status and Events: {writes:?}"
    );
    let cond = condition(&after.server(), "PolicyCompiled").clone();
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "InvalidPolicy")
    );
    assert!(cond.message.contains("unclosed group"), "{}", cond.message);
}
