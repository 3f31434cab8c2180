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
use crate::gates::audit;
use crate::gates::output::OutputCheck;
use crate::gates::refusal::{Budget, Refusal, TaskIdError};
use crate::gates::Request;
use crate::jsonrpc::{self, Members, Message, RequestId};
use crate::request_state::{self, Claims, StateKind, StateSeal};
use crate::session::channel::Era;
use crate::session::task_watch;
use crate::session::tasks::{self, Creator, TaskEntry};
use crate::session::Session;
use mcp_warden_policy::{Decision, Denial};

/// The methods whose requests carry the client's tasks extension to the
/// server: the call that may make a task, and the task's own requests.
pub const TASK_METHODS: &[&str] = &["tools/call", "tasks/get", "tasks/update", "tasks/cancel"];

/// Whether an answer is a task handle (`resultType: "task"`).
pub(super) fn is_task_handle(answer: &Message) -> bool {
    !answer.is_error
        && answer.mentions(b"\"task\"")
        && serde_json::from_slice::<Value>(&answer.bytes)
            .ok()
            .is_some_and(|v| {
                v.pointer("/result/resultType").and_then(Value::as_str) == Some("task")
            })
}

/// The sealed claims of a task id the client holds: the caller, the tool,
/// this replica, until `keep` from now, naming the server's task `task`
/// (or the facade's own held marker).
pub(super) fn task_claims(
    app: &crate::session::context::Context,
    caller: &str,
    tool: &str,
    nonce: &str,
    keep: std::time::Duration,
    task: String,
) -> Claims {
    Claims {
        kind: StateKind::Task,
        caller: caller.to_string(),
        request: task_binding(tool),
        exp: request_state::now() + keep.as_secs(),
        approved: false,
        upstream: None,
        park: None,
        owner: app.session_ids.me().map(str::to_string),
        nonce: Some(nonce.to_string()),
        roots_keys: Vec::new(),
        task: Some(task),
        tool: Some(tool.to_string()),
    }
}

/// What a task id's claims bind besides the caller: that it is a task's,
/// for this tool (never a `requestState` any request repeats).
pub(super) fn task_binding(tool: &str) -> String {
    request_state::request_hash("tasks/*", &serde_json::json!({ "name": tool }))
}

/// Whether a call may be answered with a task: a modern client declared
/// the extension on it and the server offers it.
pub(crate) fn may_make_task(session: &Session, req: &Request) -> bool {
    session.client_era == Era::Modern
        && crate::era::declares_tasks(&req.value)
        && session.app.upstream_serves_tasks()
}

/// The per-identity cap on running tasks, checked before a call that may
/// make one goes upstream.
pub(crate) fn check_cap(session: &Session, req: &Request, tool: &str) -> Result<(), Refusal> {
    let cap = session.app.limits.max_live_tasks_per_identity;
    if cap == 0 || !may_make_task(session, req) {
        return Ok(());
    }
    let running = session.app.tasks.running_for(&req.caller.state_hash());
    if running >= cap {
        return Err(Refusal::Budget {
            tool: tool.to_string(),
            budget: Budget::LiveTasks,
            limit: cap as u64,
            observed: Some(running as u64 + 1),
        });
    }
    Ok(())
}

/// A server's task handle for a call of `tool` (exposed and upstream
/// names), as the caller gets it: the server's task id replaced by a sealed
/// one of the facade's, `ttlMs` capped, the task kept. `Some` with it: what
/// the facade's own watch needs (the task's key, the server's poll
/// interval). Any other answer passes unchanged, and so does a handle the
/// facade did not ask for (the era's decoration refuses it).
pub(crate) fn adopt(
    session: &Session,
    req: &Request,
    (tool, upstream_tool): (&str, &str),
    answer: Message,
) -> (Message, Option<(String, Option<u64>)>) {
    let app = &session.app;
    if !is_task_handle(&answer) || !may_make_task(session, req) {
        return (answer, None);
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&answer.bytes) else {
        return (answer, None);
    };
    let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) else {
        return (answer, None);
    };
    let Some(upstream_id) = result
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return (answer, None);
    };
    let ttl_ms = result.get("ttlMs").and_then(Value::as_u64);
    let poll_ms = result.get("pollIntervalMs").and_then(Value::as_u64);
    let keep = tasks::kept_for(ttl_ms, app.limits.max_task_ttl);
    let nonce = request_state::nonce();
    let caller = req.caller.state_hash();
    let claims = task_claims(app, &caller, tool, &nonce, keep, upstream_id.clone());
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
        upstream_id,
        tool: tool.to_string(),
        upstream_tool: upstream_tool.to_string(),
        created: Instant::now(),
        // Kept a little past the id's expiry (whole seconds), so an id
        // past its time to live is refused as expired, not unknown.
        expires: Instant::now() + keep + Duration::from_secs(2),
        status,
        held: None,
        roots_asked: Vec::new(),
    };
    task_watch::task_record(app, &entry, "task_created", None, None);
    app.tasks.insert(nonce.clone(), entry);
    let bytes = serde_json::to_vec(&value).expect("values serialize");
    match Message::parse(bytes.into()) {
        Ok(message) => (message, Some((nonce, poll_ms))),
        Err(_) => (answer, None),
    }
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
    // The policy now, not the policy when the task was made: a task of a
    // tool this caller may no longer use (a role taken away, the tool
    // quarantined, planning mode) is neither driven nor read. Cancelling
    // only takes away, so it is always the creator's to do.
    if req.msg.method() != "tasks/cancel" {
        let observed = session.app.registry.get(&entry.upstream_tool);
        let decision = match observed.as_deref() {
            Some(tool) => req.policy.compiled.decide_list(tool, req.role, req.asks()),
            None => Decision::Deny(Denial::NotAvailable {
                tool: entry.tool.clone(),
            }),
        };
        if let Decision::Deny(denial) = decision {
            return Err(Refusal::Policy(denial));
        }
    }
    Ok((key, claims, entry))
}

/// `tasks/get`, `tasks/update`, `tasks/cancel`: answers the request once.
pub async fn run(session: &Arc<Session>, req: Request) {
    let method = req.msg.method();
    let (key, _claims, entry) = match admit(session, &req) {
        Ok(admitted) => admitted,
        Err(refusal) => return refuse(session, &req, &refusal),
    };
    if entry.held.is_some() {
        return super::held::run(session, req, key, entry).await;
    }
    // The table's, not the id's: a task the facade held for an approval
    // learns its server task only after the id was sealed.
    let upstream_id = entry.upstream_id.clone();
    let client_id = req
        .params()
        .get("taskId")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    // An update carries the client's answers to the server's questions:
    // capped and redacted, with the policy's roots.
    let answers = match update_answers(session, &req, &entry) {
        Ok(answers) => answers,
        Err(refusal) => return refuse(session, &req, &refusal),
    };
    let mut rename = move |p: &mut Members<'_>| {
        p.set("taskId", jsonrpc::raw_string(&upstream_id));
        // `inputResponses` is a required member of an update: none to pass
        // on is an empty one.
        match &answers {
            Some(Some(answers)) => p.set("inputResponses", answers.clone()),
            Some(None) => p.set(
                "inputResponses",
                serde_json::value::RawValue::from_string("{}".into()).expect("valid JSON"),
            ),
            None => {}
        }
    };
    let mut seen = None;
    let mut output = None;
    let ended = forward::exchange(session, &req, Some(&mut rename), |result| {
        let Some(obj) = result.as_object_mut() else {
            return;
        };
        if obj.contains_key("taskId") {
            obj.insert("taskId".into(), Value::String(client_id));
        }
        let roots_asked;
        (output, roots_asked) = police(session, &req, &entry, obj);
        if let Some(roots) = roots_asked {
            session.app.tasks.ask_roots(&key, roots);
        }
        seen = obj
            .get("status")
            .and_then(Value::as_str)
            .map(str::to_string);
    })
    .await;
    if let Some(status) = seen {
        if let Some(entry) = session.app.tasks.update(&key, &status) {
            let reason = task_watch::final_reason(&status);
            task_watch::ended(&session.app, &entry, reason, output);
        }
    }
    session.observe(method, ended.outcome(), req.started);
}

/// A task request refused before the server hears of it: answered once,
/// audited and counted.
fn refuse(session: &Session, req: &Request, refusal: &Refusal) {
    session.answer_call(&req.id, refusal.to_response(Some(&req.id)));
    session.refused(
        &req.id,
        req.msg.method(),
        &req.caller,
        refusal,
        req.started,
        &req.span,
    );
    req.span.refused(refusal);
}

/// `tasks/update`'s `inputResponses` as the server gets them
/// ([`crate::session::mrtr::answers`]): `None` for any other method.
#[allow(clippy::type_complexity)]
fn update_answers(
    session: &Session,
    req: &Request,
    entry: &TaskEntry,
) -> Result<Option<Option<Box<serde_json::value::RawValue>>>, Refusal> {
    if req.msg.method() != "tasks/update" {
        return Ok(None);
    }
    let roots = serde_json::json!({ "roots": session.app.roots() });
    let answers = crate::session::mrtr::answers::forwarded(
        req.params().get("inputResponses"),
        &entry.roots_asked,
        &roots,
        &req.policy,
        &session.app.metrics,
    )
    .map_err(|e| Refusal::Unreadable {
        duplicate: false,
        detail: e.to_string(),
    })?;
    Ok(Some(answers.map(|a| {
        serde_json::value::to_raw_value(&a).expect("values serialize")
    })))
}

/// What a task returns passes the policy as the call's own answer would:
/// its `result` the tool's output filter (cap, redaction, outputSchema; a
/// result the filter refuses becomes the task's error), its `inputRequests`
/// only the server requests the facade passes to clients (a `roots/list`
/// one is the facade's to answer: by the task's watch, and on the client's
/// update; a task asking only that is shown still `working`). The size of the
/// result, when there is one, and the keys of the `roots/list` questions,
/// when it asks.
fn police(
    session: &Session,
    req: &Request,
    entry: &TaskEntry,
    task: &mut serde_json::Map<String, Value>,
) -> (Option<u64>, Option<Vec<String>>) {
    let mut asked = None;
    if let Some(requests) = task.get_mut("inputRequests").and_then(Value::as_object_mut) {
        let mut roots = Vec::new();
        requests.retain(|key, q| {
            let asks = q.get("method").and_then(Value::as_str).unwrap_or("");
            if asks == "roots/list" {
                roots.push(key.clone());
            }
            crate::gates::methods::server_request(asks) == Some(true)
        });
        // Only the facade's questions left: its watch answers them, so to
        // the client the task is still at work ([`task_watch`]).
        if requests.is_empty()
            && !roots.is_empty()
            && task.get("status").and_then(Value::as_str) == Some("input_required")
        {
            task.insert("status".into(), Value::String("working".into()));
            task.remove("inputRequests");
        }
        asked = Some(roots);
    }
    let Some(result) = task.remove("result") else {
        return (None, asked);
    };
    let app = &session.app;
    let policy = &req.policy;
    let limits = policy
        .compiled
        .tools()
        .iter()
        .find(|t| t.exposed == entry.tool)
        .map_or(policy.compiled.profile_limits(), |t| &t.limits);
    let definition = app.registry.get(&entry.upstream_tool);
    let check = OutputCheck {
        tool: &entry.tool,
        limits,
        redactor: policy.compiled.redactor(),
        schemas: &app.schemas,
        definition: definition.as_deref(),
    };
    let id = RequestId::number(0);
    let wrapped = jsonrpc::result_response(&id, &result.to_string());
    let checked = Message::parse(wrapped)
        .map_err(|_| Refusal::InvalidOutput {
            tool: entry.tool.clone(),
            detail: "the task's result cannot be read".into(),
        })
        .and_then(|m| check.apply(m, &id));
    match checked {
        Ok((bytes, filtered)) => {
            let value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            task.insert(
                "result".into(),
                value.get("result").cloned().unwrap_or(Value::Null),
            );
            (Some(filtered.output_bytes), asked)
        }
        Err(refusal) => {
            let error: Value =
                serde_json::from_slice(&refusal.to_response(None)).unwrap_or(Value::Null);
            task.insert("status".into(), Value::String("failed".into()));
            task.insert(
                "error".into(),
                error.get("error").cloned().unwrap_or(Value::Null),
            );
            (None, asked)
        }
    }
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
