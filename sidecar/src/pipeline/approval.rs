//! Human approval for arguments a rule marks `check` (seed 001): the facade
//! asks the person at the client with an MCP elicitation, on the call's own
//! stream, and waits for the answer. A client that did not declare the
//! elicitation capability cannot ask: the call is refused with -32008.
//!
//! A modern client is asked the same [`question`] through the call's
//! result (`input_required`, see `session::mrtr`), and retries with the
//! answer under a state the facade signed for that exact call.

use std::time::Duration;

use mcp_warden_policy::{Approval, Denial};
use serde_json::{json, Value};

use super::refusal::Refusal;
use crate::session::Session;

/// Longest wait for a person's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

pub async fn ask(
    session: &Session,
    stream: u64,
    tool: &str,
    approval: Approval<'_>,
    arguments: &Value,
) -> Result<(), Refusal> {
    let denial = || {
        Refusal::Policy(Denial::ApprovalRequired {
            tool: tool.to_string(),
            rule: approval.rule.to_string(),
            reason: approval.reason,
        })
    };
    if !session.client_can_elicit() {
        return Err(denial());
    }
    let params = question(tool, approval, arguments);
    let answer = session
        .ask_client(stream, "elicitation/create", params, ANSWER_TIMEOUT)
        .await
        .map_err(|_| denial())?;
    let accepted = answer.pointer("/result/action").and_then(Value::as_str) == Some("accept")
        && answer
            .pointer("/result/content/approve")
            .and_then(Value::as_bool)
            == Some(true);
    if accepted {
        Ok(())
    } else {
        Err(Refusal::ApprovalDeclined {
            tool: tool.to_string(),
            rule: approval.rule.to_string(),
        })
    }
}

/// The elicitation that asks a person to approve a call.
pub fn question(tool: &str, approval: Approval<'_>, arguments: &Value) -> Value {
    let value = argument_preview(arguments, approval.rule);
    json!({
        "message": format!(
            "The assistant wants to call `{tool}` with {} = {value}. The server's policy asks a person to approve this ({}). Allow it?",
            approval.rule, approval.reason.replace('_', " "),
        ),
        "requestedSchema": {
            "type": "object",
            "properties": { "approve": { "type": "boolean", "title": "Approve this call", "default": false } },
            "required": ["approve"],
        },
    })
}

/// The argument's value as the person should see it (bounded in length).
fn argument_preview(arguments: &Value, rule: &str) -> String {
    let value = if rule.starts_with('/') {
        arguments.pointer(rule)
    } else {
        arguments.get(rule)
    };
    let text = match value {
        Some(Value::String(s)) => format!("{s:?}"),
        Some(other) => other.to_string(),
        None => "(absent)".to_string(),
    };
    if text.len() > 500 {
        let mut cut = 500;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{}…", &text[..cut])
    } else {
        text
    }
}
