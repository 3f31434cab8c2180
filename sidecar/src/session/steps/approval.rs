//! Human approval for arguments a rule marks `check`, through
//! the channel the rule names:
//! - `elicitation` (default): the facade asks the person at the client with
//!   an MCP elicitation, on the call's own stream, and waits for the
//!   answer. A client that did not declare the elicitation capability
//!   cannot ask: the call is refused with -32008. This is the client's user
//!   interface, not a second factor: a client (or an agent driving one)
//!   that declares the capability can answer its own elicitation.
//! - `outOfBand`: the call waits on the admin port's pending list
//!   ([`crate::approvals`]) until a person decides through a platform tool
//!   (`POST /approvals/<id>`), a channel the agent does not control; no
//!   decision within `--approval-timeout-secs` refuses it (-32008,
//!   `approval_timeout`). The approver's name goes into the audit line.
//!
//! A modern client is asked the same [`question`] through the call's
//! result (`input_required`, see `session::mrtr`), and retries with the
//! answer under a state the facade signed for that exact call; an
//! `outOfBand` rule waits on the pending list whatever the client's era.

use std::time::Duration;

use mcp_warden_crds::ApprovalChannel;
use mcp_warden_policy::{Approval, Denial};
use serde_json::{json, Value};

use crate::approvals::{OpenError, PendingCall, PendingRule};
use crate::auth::identity::Identity;
use crate::gates::audit;
use crate::gates::refusal::Refusal;
use crate::session::Session;

/// Longest wait for a person's answer to an elicitation.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(300);

/// Ask for approval; `Ok` carries the out-of-band approver's name.
pub async fn ask(
    session: &Session,
    stream: u64,
    tool: &str,
    approval: &Approval<'_>,
    arguments: &Value,
    caller: &Identity,
) -> Result<Option<String>, Refusal> {
    match approval.channel {
        ApprovalChannel::Elicitation => elicit(session, stream, tool, approval, arguments)
            .await
            .map(|()| None),
        ApprovalChannel::OutOfBand => out_of_band(session, tool, approval, arguments, caller)
            .await
            .map(Some),
    }
}

async fn elicit(
    session: &Session,
    stream: u64,
    tool: &str,
    approval: &Approval<'_>,
    arguments: &Value,
) -> Result<(), Refusal> {
    let denial = || {
        Refusal::Policy(Denial::ApprovalRequired {
            tool: tool.to_string(),
            rules: approval.owned_rules(),
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
            rule: approval.names(),
            approver: None,
        })
    }
}

/// The elicitation that asks a person to approve a call: it names every
/// argument a rule asked about, with its value and why, so the person sees
/// all of what they approve.
pub fn question(tool: &str, approval: &Approval<'_>, arguments: &Value) -> Value {
    let asked: Vec<String> = approval
        .rules
        .iter()
        .map(|h| {
            let value = argument_preview(arguments, h.rule);
            format!("{} = {value} ({})", h.rule, h.reason.replace('_', " "))
        })
        .collect();
    json!({
        "message": format!(
            "The assistant wants to call `{tool}` with {}. The server's policy asks a person to approve this. Allow it?",
            asked.join("; "),
        ),
        "requestedSchema": {
            "type": "object",
            "properties": { "approve": { "type": "boolean", "title": "Approve this call", "default": false } },
            "required": ["approve"],
        },
    })
}

async fn out_of_band(
    session: &Session,
    tool: &str,
    approval: &Approval<'_>,
    arguments: &Value,
    caller: &Identity,
) -> Result<String, Refusal> {
    let approvals = &session.app.approvals;
    let unavailable = |reason: &'static str| Refusal::ApprovalUnavailable {
        tool: tool.to_string(),
        rule: approval.names(),
        reason,
        limit_secs: approvals.wait.as_secs(),
    };
    // The person sees the value, with the policy's redaction applied: the
    // pending list is not a way to read secrets the agent put there.
    let rules: Vec<PendingRule> = {
        let policy = session.app.policy.load();
        let redactor = policy.compiled.redactor();
        let mut counts = redactor.counts();
        approval
            .rules
            .iter()
            .map(|h| PendingRule {
                rule: h.rule.to_string(),
                reason: h.reason,
                argument: redactor
                    .redact(&argument_preview(arguments, h.rule), &mut counts)
                    .into_owned(),
            })
            .collect()
    };
    let first = rules.first().cloned().unwrap_or_default();
    let ticket = approvals
        .open(PendingCall {
            id: String::new(),
            tool: tool.to_string(),
            rule: first.rule,
            reason: first.reason,
            argument: first.argument,
            rules,
            issuer: caller.issuer.clone(),
            subject: caller.subject.clone(),
            session: audit::hash_session(&session.id),
            owner: session.quota_key.clone(),
            requested_at: 0,
            expires_at: 0,
        })
        .map_err(|e| match e {
            OpenError::Unreachable => unavailable("approval_unavailable"),
            OpenError::Full => unavailable("approval_queue_full"),
            OpenError::ShareExhausted(_) => unavailable("approval_share_exhausted"),
        })?;
    tracing::info!(
        id = ticket.id(),
        tool,
        rules = approval.names(),
        "call waiting for an out-of-band approval"
    );
    match ticket.decision(approvals.wait).await {
        Some(v) if v.approved => Ok(v.approver),
        Some(v) => Err(Refusal::ApprovalDeclined {
            tool: tool.to_string(),
            rule: approval.names(),
            approver: Some(v.approver),
        }),
        None => Err(unavailable("approval_timeout")),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_policy::RuleHit;

    #[test]
    fn the_question_names_every_rule_that_asked() {
        let approval = Approval {
            rules: vec![
                RuleHit {
                    rule: "cwd",
                    reason: "path_needs_approval",
                },
                RuleHit {
                    rule: "command",
                    reason: "command_needs_approval",
                },
            ],
            channel: ApprovalChannel::OutOfBand,
        };
        let q = question(
            "run",
            &approval,
            &json!({"cwd": "/work/prod/app", "command": "git push origin main"}),
        );
        let text = q["message"].as_str().unwrap();
        for part in [
            "cwd = \"/work/prod/app\" (path needs approval)",
            "command = \"git push origin main\" (command needs approval)",
        ] {
            assert!(text.contains(part), "{text}");
        }
    }
}
