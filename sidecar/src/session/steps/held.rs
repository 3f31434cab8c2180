//! Tasks of the facade's own: a call a person must approve, made by a
//! caller that may get a task, becomes a task the facade holds until the
//! person answers, and the server hears of the call only after a yes.
//!
//! ```text
//! tools/call (approval to ask, tasks declared and served)
//!   └─ hold: a sealed task id (caller, tool, this replica, marked held);
//!      the call's name and arguments kept as asked; status input_required
//! tasks/get ──▶ the approval's elicitation in `inputRequests`
//! tasks/update (mcp-warden/approval) ──▶ answered once, before its time
//!   └─ the call step again, approved or declined (its own audit line):
//!      a server task ──▶ the task follows it (`Tasks::bind`, the watch)
//!      a direct result ──▶ through the output filter, kept until the
//!      first `tasks/get` that reports it or the task's time to live
//!      (counted in the caller's live tasks and against `HELD_BYTES`)
//!      a refusal (declined: -32004) ──▶ the task ends `failed` with it
//! tasks/cancel ──▶ the task ends `cancelled`; nothing reached the server
//! ```
//!
//! The arguments the person approves are the ones the facade kept: an
//! update carries only answers (anything else is refused as tampering),
//! and another caller never reaches the task (the sealed id names its
//! caller, see `task::admit`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::gates::audit;
use crate::gates::refusal::Refusal;
use crate::gates::Request;
use crate::jsonrpc::{self, Message};
use crate::request_state::{self, StateError};
use crate::session::mrtr::APPROVAL_KEY;
use crate::session::task_watch;
use crate::session::tasks::{self, Creator, Held, TaskEntry};
use crate::session::Session;

/// What a held task's sealed id names in place of a server's task id.
pub const HELD_TASK: &str = "mcp-warden/held";

/// How often a client should ask about a held task.
const POLL_MS: u64 = 500;

/// Hold the call `req` of `tool` (exposed and upstream names) as a task of
/// the facade's own while `question` is asked: the `CreateTaskResult`.
pub(crate) fn hold(
    session: &Session,
    req: &Request,
    (tool, upstream_tool): (&str, &str),
    question: Value,
) -> Bytes {
    let app = &session.app;
    let keep = tasks::kept_for(None, app.limits.max_task_ttl);
    let nonce = request_state::nonce();
    let caller = req.caller.state_hash();
    let claims = super::task::task_claims(app, &caller, tool, &nonce, keep, HELD_TASK.to_string());
    let task_id = app.state_seal.seal(&claims);
    let params = req.params();
    let call = json!({
        "name": params.get("name").cloned().unwrap_or(Value::Null),
        "arguments": params.get("arguments").cloned().unwrap_or_else(|| json!({})),
    });
    let answer_within = app.state_seal.expiry().saturating_sub(request_state::now());
    let created_at = audit::now_rfc3339();
    let ttl_ms = keep.as_millis() as u64;
    let hashed = audit::hash_session(&session.id);
    let entry = TaskEntry {
        caller,
        creator: Creator {
            issuer: req.caller.issuer.clone(),
            subject: req.caller.subject.clone(),
            auth: req.caller.method.as_str(),
            role: req.role.map(mcp_warden_policy::role_name),
            call_id: format!("{hashed}:{}", req.id.as_json().trim_matches('"')),
            session: hashed,
        },
        upstream_id: String::new(),
        tool: tool.to_string(),
        upstream_tool: upstream_tool.to_string(),
        created: Instant::now(),
        expires: Instant::now() + keep + Duration::from_secs(2),
        status: "input_required".into(),
        held: Some(Held {
            call,
            question,
            answer_by: Instant::now() + Duration::from_secs(answer_within),
            outcome: None,
            bytes: 0,
            created_at: created_at.clone(),
            ttl_ms,
        }),
        roots_asked: Vec::new(),
    };
    task_watch::task_record(app, &entry, "task_created", None, None);
    app.tasks.insert(nonce, entry);
    let result = json!({
        "resultType": "task",
        "taskId": task_id,
        "status": "input_required",
        "createdAt": created_at,
        "lastUpdatedAt": created_at,
        "ttlMs": ttl_ms,
        "pollIntervalMs": POLL_MS,
    });
    jsonrpc::result_response(&req.id, &result.to_string())
}

/// `tasks/get|update|cancel` on a task the facade holds (admitted: the
/// caller's, on this replica): answers the request once.
pub(super) async fn run(session: &Arc<Session>, req: Request, key: String, entry: TaskEntry) {
    let method = req.msg.method().to_string();
    let id = req.id.clone();
    let started = req.started;
    let Some(held) = entry.held.clone() else {
        return;
    };
    let answer = match method.as_str() {
        "tasks/get" => {
            // A kept result is delivered once, then let go of.
            if held.bytes > 0 {
                session.app.tasks.release(&key);
            }
            Ok(view(&req, &entry, &held))
        }
        "tasks/cancel" => {
            end(session, &key, "cancelled", json!({}));
            Ok(json!({ "resultType": "complete" }))
        }
        _ => update(session, req, key).await,
    };
    match answer {
        Ok(result) => {
            session.answer_call(&id, jsonrpc::result_response(&id, &result.to_string()));
            session.observe(&method, "ok", started);
        }
        Err((refusal, req)) => {
            session.answer_call(&id, refusal.to_response(Some(&id)));
            session.refused(&id, &method, &req.caller, &refusal, started, &req.span);
            req.span.refused(&refusal);
        }
    }
}

/// The task as `tasks/get` reports it.
fn view(req: &Request, entry: &TaskEntry, held: &Held) -> Value {
    let task_id = req.params().get("taskId").cloned().unwrap_or(Value::Null);
    let mut task = json!({
        "resultType": "complete",
        "taskId": task_id,
        "status": entry.status,
        "createdAt": held.created_at,
        "lastUpdatedAt": held.created_at,
        "ttlMs": held.ttl_ms,
        "pollIntervalMs": POLL_MS,
    });
    if entry.status == "input_required" {
        task["inputRequests"] = json!({
            APPROVAL_KEY: { "method": "elicitation/create", "params": held.question },
        });
    }
    if let (Some(Value::Object(outcome)), Some(obj)) = (&held.outcome, task.as_object_mut()) {
        for (k, v) in outcome {
            obj.insert(k.clone(), v.clone());
        }
    }
    task
}

/// End the held task under `key` with `outcome`, writing its one
/// `task_ended` record.
fn end(session: &Session, key: &str, status: &str, outcome: Value) {
    if let Some((entry, status)) = session.app.tasks.settle(key, status, outcome) {
        let kept = session
            .app
            .tasks
            .get(key)
            .and_then(|e| e.held.map(|h| h.bytes as u64))
            .filter(|b| *b > 0);
        task_watch::ended(
            &session.app,
            &entry,
            task_watch::final_reason(&status),
            kept,
        );
    }
}

/// `tasks/update`: the approval's answer, once. Answers to anything else
/// are ignored (as the extension asks); any member other than the answers
/// would change what was approved and is refused.
async fn update(
    session: &Arc<Session>,
    req: Request,
    key: String,
) -> Result<Value, (Refusal, Request)> {
    let ack = json!({ "resultType": "complete" });
    let params = req.params();
    let only_answers = params.as_object().is_some_and(|p| {
        p.keys()
            .all(|k| matches!(k.as_str(), "taskId" | "inputResponses" | "_meta"))
    });
    if !only_answers {
        return Err((Refusal::RequestState(StateError::Tampered), req));
    }
    let Some(answer) = params
        .get("inputResponses")
        .and_then(|r| r.get(APPROVAL_KEY))
        .cloned()
    else {
        return Ok(ack);
    };
    let Some(held) = session.app.tasks.answer(&key) else {
        return Ok(ack);
    };
    if Instant::now() > held.answer_by {
        let refusal = Refusal::RequestState(StateError::Expired);
        end(session, &key, "failed", error_of(&refusal));
        return Err((refusal, req));
    }
    let approved = answer.get("action").and_then(Value::as_str) == Some("accept")
        && answer.pointer("/content/approve").and_then(Value::as_bool) == Some(true);
    // The call step runs as for the call itself, with the kept name and
    // arguments and the person's answer: policy, budgets and schema again
    // (the policy may have changed meanwhile), its own audit line, then
    // the server. The update is answered once the server has the call.
    let mut call = held.call.clone();
    if let Some(meta) = params.get("_meta") {
        call["_meta"] = meta.clone();
    }
    let value = json!({
        "jsonrpc": "2.0",
        "id": serde_json::from_str::<Value>(req.id.as_json()).unwrap_or(Value::Null),
        "method": "tools/call",
        "params": call,
    });
    let Ok(msg) = Message::parse(Bytes::from(value.to_string())) else {
        end(
            session,
            &key,
            "failed",
            json!({"error": {"code": -32603, "message": "the held call cannot be read"}}),
        );
        return Ok(ack);
    };
    let as_call = Request {
        id: req.id.clone(),
        msg,
        value,
        stream: req.stream,
        caller: req.caller.clone(),
        role: req.role,
        planning: req.planning,
        denied: req.denied,
        policy: req.policy.clone(),
        started: Instant::now(),
        span: crate::spans::RequestSpan::NONE,
    };
    session
        .clone()
        .tools_call_as(as_call, Some((key, approved)))
        .await;
    Ok(ack)
}

/// A refusal as a task's `error`.
pub(super) fn error_of(refusal: &Refusal) -> Value {
    let response: Value = serde_json::from_slice(&refusal.to_response(None)).unwrap_or(Value::Null);
    json!({ "error": response.get("error").cloned().unwrap_or(Value::Null) })
}

/// What the call step made of a held call: a server task (already bound,
/// nothing to keep), a result or an error (the task ends with it).
pub(super) fn finish(session: &Session, key: &str, answer: Result<Bytes, &Refusal>) {
    let outcome = match answer {
        Err(refusal) => error_of(refusal),
        Ok(bytes) if bytes.is_empty() => json!({"error": {
            "code": -32603, "message": "the call ended without an answer",
        }}),
        Ok(bytes) => {
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            match (value.get("result"), value.get("error")) {
                (Some(r), _) if r.get("resultType").and_then(Value::as_str) == Some("task") => {
                    return
                }
                (Some(result), _) => {
                    let mut result = result.clone();
                    if let Some(obj) = result.as_object_mut() {
                        obj.remove("resultType");
                    }
                    json!({ "result": result })
                }
                (None, Some(error)) => json!({ "error": error }),
                _ => {
                    json!({"error": {"code": -32603, "message": "the server's answer cannot be read"}})
                }
            }
        }
    };
    let status = if outcome.get("result").is_some() {
        "completed"
    } else {
        "failed"
    };
    end(session, key, status, outcome);
}

/// The approved call's answer is a server task: the held task follows it.
/// `Some` with what the facade's watch needs, as `task::adopt`.
pub(super) fn follow(
    session: &Session,
    key: &str,
    answer: &Message,
) -> Option<(String, Option<u64>)> {
    if !super::task::is_task_handle(answer) {
        return None;
    }
    let value: Value = serde_json::from_slice(&answer.bytes).ok()?;
    let result = value.get("result")?;
    let upstream_id = result.get("taskId").and_then(Value::as_str)?;
    let status = result
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("working");
    session.app.tasks.bind(key, upstream_id, status);
    let poll_ms = result.get("pollIntervalMs").and_then(Value::as_u64);
    Some((key.to_string(), poll_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_becomes_the_tasks_error() {
        let refusal = Refusal::ApprovalDeclined {
            tool: "deploy".into(),
            rule: "label".into(),
            approver: None,
        };
        let error = error_of(&refusal);
        assert_eq!(error["error"]["code"], json!(-32004));
        assert_eq!(error["error"]["data"]["reason"], json!("approval_declined"));
    }
}
