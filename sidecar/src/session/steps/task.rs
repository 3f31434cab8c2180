//! The tasks extension of 2026-07-28 (`io.modelcontextprotocol/tasks`)
//! through the facade: every task bound to the caller who created it.
//!
//! ```text
//! tools/call ──▶ call step (every gate) ──▶ server answers a task handle
//!                   └─ adopt: the server's id sealed with the caller, the
//!                      tool and this replica; kept in `Context::tasks`
//! tasks/get|update|cancel ──▶ (declared the extension? -32021)
//!                   └─ open: the facade's seal, this caller, not expired,
//!                      this replica (else relayed to it, see the modern
//!                      POST), still in the table — else -32602 + audit
//!                   └─ the server's id upstream (body and Mcp-Name), the
//!                      answer under the client's id, redacted and capped
//! ```
//!
//! The id a client sees is never the server's: a caller who learns another
//! caller's id, or alters one, reaches nothing. Negotiation is per request:
//! the client's tasks extension reaches the server only on the methods
//! here (`session::upstream` keeps it), only when the server offers it;
//! a legacy client is never offered tasks (the method table has them for
//! modern clients only, and its handshake strips the capability).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::forward;
use crate::gates::audit::{self, Record};
use crate::gates::refusal::{Refusal, TaskIdError};
use crate::gates::Request;
use crate::jsonrpc::{self, Members, Message};
use crate::request_state::{self, Claims, StateKind, StateSeal};
use crate::session::channel::Era;
use crate::session::tasks::{self, TaskEntry};
use crate::session::Session;

/// The methods whose requests carry the client's tasks extension to the
/// server: the call that may make a task, and the task's own requests.
pub const TASK_METHODS: &[&str] = &["tools/call", "tasks/get", "tasks/update", "tasks/cancel"];

/// The longest the facade keeps a task (and honours its id), whatever
/// `ttlMs` the server gave it.
pub const MAX_TASK_TTL: Duration = Duration::from_secs(3600);

/// Whether an answer is a task handle (`resultType: "task"`).
fn is_task_handle(answer: &Message) -> bool {
    !answer.is_error
        && answer.mentions(b"\"task\"")
        && serde_json::from_slice::<Value>(&answer.bytes)
            .ok()
            .is_some_and(|v| {
                v.pointer("/result/resultType").and_then(Value::as_str) == Some("task")
            })
}

/// What a task id's claims bind besides the caller: that it is a task's,
/// for this tool (never a `requestState` any request repeats).
fn task_binding(tool: &str) -> String {
    request_state::request_hash("tasks/*", &serde_json::json!({ "name": tool }))
}

/// A server's task handle for a call of `tool`, as the caller gets it: the
/// server's task id replaced by a sealed one of the facade's, `ttlMs`
/// capped, the task kept. Any other answer passes unchanged, and so does a
/// handle the facade did not ask for (the era's decoration refuses it).
pub(crate) fn adopt(session: &Session, req: &Request, tool: &str, answer: Message) -> Message {
    let app = &session.app;
    if session.client_era != Era::Modern
        || !is_task_handle(&answer)
        || !crate::era::declares_tasks(&req.value)
        || !app.upstream_serves_tasks()
    {
        return answer;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&answer.bytes) else {
        return answer;
    };
    let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) else {
        return answer;
    };
    let Some(upstream_id) = result
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return answer;
    };
    let ttl_ms = result.get("ttlMs").and_then(Value::as_u64);
    let keep = tasks::kept_for(ttl_ms, MAX_TASK_TTL);
    let nonce = request_state::nonce();
    let caller = req.caller.state_hash();
    let claims = Claims {
        kind: StateKind::Task,
        caller: caller.clone(),
        request: task_binding(tool),
        exp: request_state::now() + keep.as_secs() + 1,
        approved: false,
        upstream: None,
        park: None,
        owner: app.session_ids.me().map(str::to_string),
        nonce: Some(nonce.clone()),
        roots_keys: Vec::new(),
        task: Some(upstream_id.clone()),
        tool: Some(tool.to_string()),
    };
    let client_id = app.state_seal.seal(&claims);
    result.insert("taskId".into(), Value::String(client_id));
    if ttl_ms.is_some_and(|ms| u128::from(ms) > keep.as_millis()) {
        result.insert("ttlMs".into(), serde_json::json!(keep.as_millis() as u64));
    }
    let status = result
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("working")
        .to_string();
    app.tasks.insert(
        nonce,
        TaskEntry {
            caller,
            upstream_id,
            tool: tool.to_string(),
            created: Instant::now(),
            expires: Instant::now() + keep,
            status,
        },
    );
    record(
        session,
        req,
        "task_created",
        tool,
        None,
        Duration::ZERO,
        None,
    );
    let bytes = serde_json::to_vec(&value).expect("values serialize");
    Message::parse(bytes.into()).unwrap_or(answer)
}

/// The claims of a task id the facade sealed for `caller` (not yet checked
/// against this replica or its table).
pub fn open(seal: &StateSeal, id: &str, caller: &str) -> Result<Claims, TaskIdError> {
    let claims = seal.peek(id).ok_or(TaskIdError::Tampered)?;
    let tool = claims.tool.as_deref().unwrap_or("");
    if claims.kind != StateKind::Task
        || claims.task.is_none()
        || claims.nonce.is_none()
        || claims.request != task_binding(tool)
    {
        return Err(TaskIdError::Tampered);
    }
    if claims.caller != caller {
        return Err(TaskIdError::OtherCaller);
    }
    if claims.exp < request_state::now() {
        return Err(TaskIdError::Expired);
    }
    Ok(claims)
}

/// The task a `tasks/*` request names, if this caller may reach it here.
fn admit(session: &Session, req: &Request) -> Result<(String, Claims, TaskEntry), Refusal> {
    if !crate::era::declares_tasks(&req.value) {
        return Err(Refusal::MissingTasksExtension {
            method: req.msg.method().to_string(),
        });
    }
    let id = req
        .params()
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or(Refusal::TaskId(TaskIdError::Tampered))?;
    let caller = req.caller.state_hash();
    let claims = open(&session.app.state_seal, id, &caller).map_err(Refusal::TaskId)?;
    if claims.owner.as_deref() != session.app.session_ids.me() {
        return Err(Refusal::TaskId(TaskIdError::OtherReplica));
    }
    let key = claims.nonce.clone().unwrap_or_default();
    let entry = session
        .app
        .tasks
        .get(&key)
        .ok_or(Refusal::TaskId(TaskIdError::Unknown))?;
    if entry.caller != caller {
        return Err(Refusal::TaskId(TaskIdError::OtherCaller));
    }
    Ok((key, claims, entry))
}

/// `tasks/get`, `tasks/update`, `tasks/cancel`: answers the request once.
pub async fn run(session: &Arc<Session>, req: Request) {
    let method = req.msg.method();
    let (key, claims, entry) = match admit(session, &req) {
        Ok(admitted) => admitted,
        Err(refusal) => {
            session.answer_call(&req.id, refusal.to_response(Some(&req.id)));
            session.refused(
                &req.id,
                method,
                &req.caller,
                &refusal,
                req.started,
                &req.span,
            );
            req.span.refused(&refusal);
            return;
        }
    };
    let upstream_id = claims.task.clone().unwrap_or_default();
    let client_id = req
        .params()
        .get("taskId")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut rename = move |p: &mut Members<'_>| p.set("taskId", jsonrpc::raw_string(&upstream_id));
    let mut status = None;
    let ended = forward::exchange(session, &req, Some(&mut rename), |result| {
        if let Some(obj) = result.as_object_mut() {
            if obj.contains_key("taskId") {
                obj.insert("taskId".into(), Value::String(client_id));
            }
            status = obj
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
    })
    .await;
    if let Some(status) = status {
        session.app.tasks.set_status(&key, &status);
        if tasks::is_terminal(&status) && !entry.is_terminal() {
            let took = entry.created.elapsed();
            record(
                session,
                &req,
                "task_ended",
                &entry.tool,
                Some(&status),
                took,
                None,
            );
        }
    }
    session.observe(method, ended.outcome(), req.started);
}

/// A task's audit line: its creation, or its end (`outcome`: the final
/// status), with the tool, the duration and sizes; never its content.
fn record(
    session: &Session,
    req: &Request,
    event: &'static str,
    tool: &str,
    outcome: Option<&str>,
    took: Duration,
    output_bytes: Option<u64>,
) {
    let app = &session.app;
    if !app.audit.is_on() {
        return;
    }
    let hashed = audit::hash_session(&session.id);
    let caller = &req.caller;
    let record = Record {
        time: audit::now_rfc3339(),
        event,
        method: Some(crate::metrics::method_label(req.msg.method())),
        call_id: format!("{hashed}:{}", req.id.as_json().trim_matches('"')),
        session: hashed,
        issuer: caller.issuer.as_deref(),
        subject: caller.subject.as_deref(),
        auth: caller.method.as_str(),
        role: req.role.map(mcp_warden_policy::role_name),
        tool: Some(audit::bounded(tool)),
        decision: "allow",
        reason: outcome.and_then(outcome_reason),
        duration_ms: took.as_secs_f64() * 1000.0,
        output_bytes,
        ..Default::default()
    }
    .traced(&req.span);
    app.audit.write(&record, &app.metrics);
}

/// A final status as an audit reason (a bounded set).
fn outcome_reason(status: &str) -> Option<&'static str> {
    match status {
        "completed" => Some("completed"),
        "failed" => Some("failed"),
        "cancelled" => Some("cancelled"),
        _ => None,
    }
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
