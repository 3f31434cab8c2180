//! The facade's own watch over each task (the tasks extension): limits and
//! the completion record hold whether or not the client polls.
//!
//! Where it sits: started by the tools/call step when the server answered
//! with a task handle ([`crate::session::steps::task::adopt`]). Every
//! `pollIntervalMs` (as the server asked, within bounds) it asks the server
//! `tasks/get` itself, on the channel, as the facade; it holds the call's
//! concurrency permit, so a running task counts against its caller like a
//! running call. It ends when the task ends (seen here or by a client's
//! `tasks/get`, whichever first writes the one `task_ended` record), when
//! the task is forgotten (its time to live passed), or at the wall-time
//! limit, where it cancels the task on the server. The server's
//! `roots/list` questions it answers itself (`tasks/update` with the
//! policy's roots): they are never put to the client, so a task that asks
//! only them would otherwise wait for an update no client sends.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::channel::Channel;
use super::context::Context;
use super::tasks::TaskEntry;
use crate::gates::audit::{self, Record};
use crate::gates::budget::CallPermit;
use crate::upstream::Credential;

/// Polls no closer than this, whatever the server asks.
const MIN_POLL: Duration = Duration::from_millis(100);
/// Polls at least this often (a server's huge interval would blind the
/// wall-time limit).
const MAX_POLL: Duration = Duration::from_secs(30);

/// What the watch needs of a task.
pub(crate) struct Watch {
    /// The task's key in `Context::tasks`.
    pub key: String,
    /// The server's `pollIntervalMs`, if it gave one.
    pub poll_ms: Option<u64>,
    /// The call's concurrency slots, held while the task runs.
    pub permit: Option<CallPermit>,
    /// Whom the polls go as (`None`: the facade; see
    /// [`Context::task_poll_credential`]).
    pub credential: Option<Credential>,
}

/// The poll interval for a server's `pollIntervalMs`.
pub(crate) fn interval(poll_ms: Option<u64>) -> Duration {
    poll_ms
        .map_or(Duration::from_secs(1), Duration::from_millis)
        .clamp(MIN_POLL, MAX_POLL)
}

pub(crate) fn spawn(app: Arc<Context>, channel: Arc<Channel>, watch: Watch) {
    tokio::spawn(async move {
        let Watch {
            key,
            poll_ms,
            permit,
            credential,
        } = watch;
        let every = interval(poll_ms);
        let caps = json!({ "extensions": { crate::era::TASKS_EXTENSION: {} } });
        let mut answered = HashSet::new();
        loop {
            tokio::time::sleep(every).await;
            let Some(entry) = app.tasks.get(&key) else {
                break; // forgotten: its time to live passed
            };
            if entry.is_terminal() {
                break;
            }
            let params = json!({ "taskId": entry.upstream_id });
            if entry.created.elapsed() >= app.limits.task_wall_time {
                let cancelled = channel
                    .internal_request_for(None, "tasks/cancel", &params, &caps, credential.clone())
                    .await;
                if let Err(why) = &cancelled {
                    tracing::warn!(tool = %entry.tool, %why, "could not cancel a task past its wall-time limit");
                }
                if let Some(entry) = app.tasks.update(&key, "cancelled") {
                    ended(&app, &entry, "wall_time_exceeded", None);
                }
                break;
            }
            let Ok(answer) = channel
                .internal_request_for(None, "tasks/get", &params, &caps, credential.clone())
                .await
            else {
                continue; // the server may be restarting: ask again
            };
            let value: Value = serde_json::from_slice(&answer.bytes).unwrap_or(Value::Null);
            let status = if answer.is_error {
                // The server no longer knows it: it ended there.
                Some("failed")
            } else {
                value.pointer("/result/status").and_then(Value::as_str)
            };
            if status == Some("input_required") {
                let requests = value.pointer("/result/inputRequests");
                if let Some(update) =
                    roots_update(&entry.upstream_id, requests, &app.roots(), &mut answered)
                {
                    let updated = channel
                        .internal_request_for(
                            None,
                            "tasks/update",
                            &update,
                            &caps,
                            credential.clone(),
                        )
                        .await;
                    if !matches!(&updated, Ok(m) if !m.is_error) {
                        // Asked again on the next poll.
                        answered.clear();
                    }
                }
            }
            if let Some(status) = status {
                if let Some(entry) = app.tasks.update(&key, status) {
                    let reason = final_reason(status);
                    ended(&app, &entry, reason, Some(answer.bytes.len() as u64));
                    break;
                }
            }
        }
        drop(permit);
    });
}

/// The `tasks/update` that answers the server's `roots/list` questions
/// with the policy's roots (`roots`), each once (`answered`): the facade's
/// to answer, never put to the client, so a task that asks nothing else
/// goes on without waiting for a client's update. `answered` keeps only
/// the keys still asked, so a server cannot grow it.
fn roots_update(
    upstream_id: &str,
    requests: Option<&Value>,
    roots: &[Value],
    answered: &mut HashSet<String>,
) -> Option<Value> {
    let requests = requests.and_then(Value::as_object)?;
    answered.retain(|key| requests.contains_key(key));
    let answer = json!({ "roots": roots });
    let responses: Map<String, Value> = requests
        .iter()
        .filter(|(key, q)| {
            q.get("method").and_then(Value::as_str) == Some("roots/list")
                && !answered.contains(*key)
        })
        .map(|(key, _)| (key.clone(), answer.clone()))
        .collect();
    if responses.is_empty() {
        return None;
    }
    answered.extend(responses.keys().cloned());
    Some(json!({ "taskId": upstream_id, "inputResponses": responses }))
}

/// A final status as an audit reason (a bounded set).
pub(crate) fn final_reason(status: &str) -> &'static str {
    match status {
        "completed" => "completed",
        "cancelled" => "cancelled",
        _ => "failed",
    }
}

/// The one `task_ended` record of a task: how it ended, how long it ran,
/// the size of its last answer; never its content.
pub(crate) fn ended(app: &Context, entry: &TaskEntry, reason: &'static str, bytes: Option<u64>) {
    task_record(app, entry, "task_ended", Some(reason), bytes);
}

/// A task's audit line (`task_created`, `task_ended`).
pub(crate) fn task_record(
    app: &Context,
    entry: &TaskEntry,
    event: &'static str,
    reason: Option<&'static str>,
    output_bytes: Option<u64>,
) {
    app.metrics.task(reason.unwrap_or("created"));
    if !app.audit.is_on() {
        return;
    }
    let who = &entry.creator;
    let record = Record {
        time: audit::now_rfc3339(),
        event,
        method: Some(if event == "task_created" {
            "tools/call"
        } else {
            "tasks/get"
        }),
        call_id: who.call_id.clone(),
        session: who.session.clone(),
        issuer: who.issuer.as_deref(),
        subject: who.subject.as_deref(),
        auth: who.auth,
        role: who.role,
        tool: Some(audit::bounded(&entry.tool)),
        decision: "allow",
        reason,
        duration_ms: entry.created.elapsed().as_secs_f64() * 1000.0,
        output_bytes,
        ..Default::default()
    };
    app.audit.write(&record, &app.metrics);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_is_the_servers_within_bounds() {
        assert_eq!(interval(Some(500)), Duration::from_millis(500));
        assert_eq!(interval(Some(1)), MIN_POLL);
        assert_eq!(interval(Some(u64::MAX / 2)), MAX_POLL);
        assert_eq!(interval(None), Duration::from_secs(1));
    }

    #[test]
    fn the_servers_roots_questions_are_answered_with_the_policys_once_each() {
        let roots = [json!({"uri": "file:///work"})];
        let mut answered = HashSet::new();
        let asked = json!({
            "where": {"method": "roots/list"},
            "name": {"method": "elicitation/create", "params": {"message": "Name?"}},
        });
        let update = roots_update("t-1", Some(&asked), &roots, &mut answered).unwrap();
        assert_eq!(
            update,
            json!({"taskId": "t-1", "inputResponses": {"where": {"roots": [{"uri": "file:///work"}]}}})
        );
        // Still asked on the next poll (the client has not answered the
        // elicitation yet): not sent again.
        assert_eq!(
            roots_update("t-1", Some(&asked), &roots, &mut answered),
            None
        );
        // Nothing of roots asked, or no questions at all: nothing to send.
        let other = json!({"name": {"method": "elicitation/create"}});
        assert_eq!(
            roots_update("t-1", Some(&other), &roots, &mut answered),
            None
        );
        assert!(answered.is_empty(), "only the keys still asked are kept");
        assert_eq!(roots_update("t-1", None, &roots, &mut answered), None);
        // The same key asked again after it was gone is a new question.
        assert!(roots_update("t-1", Some(&asked), &roots, &mut answered).is_some());
    }
}
