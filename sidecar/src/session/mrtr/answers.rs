//! A client's answers to the server's questions, as the server gets them.
//!
//! Where it sits: a modern client's retry (`inputResponses`, see
//! `session::upstream`) and a task's update (`steps::task`) carry the
//! client's answers to the server's questions. What goes on:
//!
//! - each answer through the output filter (cap and redaction: an
//!   elicitation or sampling result is content like any other);
//! - for each `roots/list` question the facade took out, the policy's
//!   roots; and any answer shaped like a `roots/list` result (a top-level
//!   `roots`) gets the policy's roots in its place, whatever its key: the
//!   server's scope is the policy's, and a client that answers a question
//!   before it is asked (the spec lets a server read `inputResponses`
//!   without a state of its own) must not name the roots either;
//! - never the answer to the facade's own approval question.
//!
//! Answers to questions nobody asked otherwise go on: the spec has the
//! server ignore what it does not need, and a client can give any answer
//! to a question it is asked.

use serde_json::{Map, Value};

use super::APPROVAL_KEY;
use crate::gates::output::{filter_answer_value, AnswerTooLarge};
use crate::gates::policy::LivePolicy;
use crate::metrics::Metrics;

/// The `inputResponses` the server gets from the client's `responses`
/// (`None`: nothing to send): `roots_keys` are the server's `roots/list`
/// questions the facade took out, `roots` the policy's answer to one.
pub(crate) fn forwarded(
    responses: Option<&Value>,
    roots_keys: &[String],
    roots: &Value,
    policy: &LivePolicy,
    metrics: &Metrics,
) -> Result<Option<Map<String, Value>>, AnswerTooLarge> {
    let mut out = Map::new();
    let given = responses.and_then(Value::as_object);
    for (key, answer) in given.into_iter().flatten() {
        if key == APPROVAL_KEY {
            continue;
        }
        if answer.get("roots").is_some() {
            metrics.dropped("client_roots_answer");
            out.insert(key.clone(), roots.clone());
            continue;
        }
        let mut answer = answer.clone();
        filter_answer_value(&mut answer, policy, metrics)?;
        out.insert(key.clone(), answer);
    }
    for key in roots_keys {
        out.insert(key.clone(), roots.clone());
    }
    Ok((!out.is_empty()).then_some(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(doc: Value) -> std::sync::Arc<LivePolicy> {
        let doc = serde_json::from_value(doc).unwrap();
        LivePolicy::new(doc, std::path::Path::new(".")).unwrap()
    }

    fn allow_all() -> std::sync::Arc<LivePolicy> {
        policy(
            json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "FacadePolicy", "defaultAction": "allow"}),
        )
    }

    #[test]
    fn the_servers_roots_are_the_policys_whatever_the_client_answers() {
        let (policy, metrics) = (allow_all(), Metrics::new());
        let roots = json!({"roots": [{"uri": "file:///work"}]});
        let client = json!({
            "form": {"action": "accept", "content": {"name": "octocat"}},
            "roots_request": {"roots": [{"uri": "file:///"}]},
            "unasked": {"roots": [{"uri": "file:///etc"}]},
            "mcp-warden/approval": {"action": "accept", "content": {"approve": true}},
        });
        let asked = vec!["roots_request".to_string(), "never_answered".to_string()];
        let out = forwarded(Some(&client), &asked, &roots, &policy, &metrics)
            .unwrap()
            .unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"form": client["form"], "roots_request": roots, "unasked": roots,
                   "never_answered": roots}),
        );
        // No question (no state): the same; nothing at all is none.
        let out = forwarded(Some(&client), &[], &roots, &policy, &metrics)
            .unwrap()
            .unwrap();
        assert_eq!(out["roots_request"], roots);
        assert!(!out.contains_key(APPROVAL_KEY));
        let approval_only = json!({APPROVAL_KEY: client[APPROVAL_KEY]});
        assert_eq!(
            forwarded(Some(&approval_only), &[], &roots, &policy, &metrics).unwrap(),
            None
        );
    }

    #[test]
    fn an_answer_is_redacted_and_capped_like_anything_the_server_reads() {
        let metrics = Metrics::new();
        let policy = policy(
            json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "FacadePolicy",
            "defaultAction": "allow", "limits": {"maxOutputBytes": 200}}),
        );
        let secret = "AKIA".to_string() + "IOSFODNN7EXAMPLE";
        let client =
            json!({"form": {"action": "accept", "content": {"note": format!("key {secret}")}}});
        let out = forwarded(Some(&client), &[], &Value::Null, &policy, &metrics)
            .unwrap()
            .unwrap();
        let note = out["form"]["content"]["note"].as_str().unwrap();
        assert!(!note.contains(&secret), "{note}");
        let big = json!({"form": {"action": "accept", "content": {"note": "x".repeat(300)}}});
        let refused = forwarded(Some(&big), &[], &Value::Null, &policy, &metrics).unwrap_err();
        assert_eq!(refused.limit, 200);
    }
}
