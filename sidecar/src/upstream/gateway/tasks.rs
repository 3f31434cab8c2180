//! The tasks extension through the gateway: which backend serves tasks,
//! and which backend each task is at.
//!
//! Where it sits: beside the gateway's routing ([`super::send`]). A
//! backend's task handle (its facade's own sealed id, bound there to the
//! caller the gateway vouched for) comes up with the id prefixed by the
//! backend's name, `{backend}:{backend's id}`; `tasks/get|update|cancel`
//! go to the backend that prefix names, with the backend's id. Only the
//! facade above ever sees that id: it seals it, with the caller and the
//! tool, into the id the caller gets (`session::steps::task`), so a caller
//! can read which backend a task is at but cannot swap it — an altered id
//! fails the seal before anything reaches this link, and a backend's own
//! facade refuses a task of another caller anyway.
//!
//! Whether the gateway offers tasks is learnt from the backends' own
//! `server/discover` (asked as a caller: a backend that trusts only the
//! gateway's assertions answers nobody else) and from their task handles.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use super::{ask, with_params, State};
use crate::jsonrpc::{self, Message, RequestId};
use crate::upstream::{Credential, UpstreamError};

/// How long a backend may take to say what it serves.
const DISCOVER_WAIT: Duration = Duration::from_secs(5);

/// Between a backend's name (never holding `:`) and its task id.
const SEPARATOR: char = ':';

/// The id the facade above keeps for backend `backend`'s task `id`.
pub(super) fn link_id(backend: &str, id: &str) -> String {
    format!("{backend}{SEPARATOR}{id}")
}

/// The backend and the backend's id an id of [`link_id`] names.
pub(super) fn split_id(id: &str) -> Option<(&str, &str)> {
    id.split_once(SEPARATOR)
        .filter(|(b, rest)| !b.is_empty() && !rest.is_empty())
}

/// Ask every backend whose tasks support is not known yet its
/// `server/discover`, as `credential`'s caller, and remember what each says.
pub(super) async fn learn(state: &State, msg: &Message, credential: Option<&Credential>) {
    let gateway = state.gateway();
    // No credential: the gateway's own request (its probe), which its
    // backends hear as the gateway itself, never as nobody.
    let own = match credential {
        Some(_) => None,
        None => gateway
            .signer
            .as_ref()
            .map(|s| Credential::on_behalf_of(s.itself())),
    };
    let credential = credential.or(own.as_ref());
    let unknown: Vec<usize> = {
        let tasks = gateway.tasks.lock().unwrap();
        (0..gateway.backends.len())
            .filter(|&b| tasks[b].is_none())
            .collect()
    };
    let asks = unknown.into_iter().map(|b| async move {
        let answer = tokio::time::timeout(DISCOVER_WAIT, ask(state, b, msg.clone(), credential));
        (b, answer.await)
    });
    for (b, answer) in futures::future::join_all(asks).await {
        // Only an answer says anything: a refusal (no caller yet, the
        // backend restarting) leaves the backend unknown.
        let Ok(Ok(answer)) = answer else { continue };
        if answer.is_error {
            continue;
        }
        let offers = answer
            .to_value()
            .pointer("/result/capabilities/extensions")
            .and_then(|e| e.get(crate::era::TASKS_EXTENSION))
            .is_some_and(|t| !t.is_null());
        gateway.tasks.lock().unwrap()[b] = Some(offers);
    }
}

/// A backend's answer to a call: a task handle's id becomes the gateway's
/// ([`link_id`]), written anew; `None`: it passes as the backend wrote it.
pub(super) fn adopt_handle(state: &State, b: usize, answer: &Message) -> Option<Bytes> {
    if answer.is_error || !answer.mentions(b"\"task\"") {
        return None;
    }
    let mut value = answer.to_value();
    if value.pointer("/result/resultType").and_then(Value::as_str) != Some("task") {
        return None;
    }
    let Some(Value::String(id)) = value.pointer_mut("/result/taskId") else {
        return None;
    };
    let gateway = state.gateway();
    *id = link_id(&gateway.backends[b].name, id);
    // A task handle is the surest sign a backend serves tasks.
    gateway.tasks.lock().unwrap()[b] = Some(true);
    Some(Bytes::from(value.to_string()))
}

/// `tasks/get`, `tasks/update`, `tasks/cancel`: to the backend the id names,
/// with the backend's own id, as the caller.
pub(super) async fn routed(
    state: &State,
    id: &RequestId,
    msg: &Message,
    credential: Option<&Credential>,
) -> Result<Bytes, UpstreamError> {
    let (mut params, task) = super::param_str(msg, "taskId");
    let gateway = state.gateway();
    let found = split_id(&task).and_then(|(name, own)| {
        let b = gateway.backends.iter().position(|x| x.name == name)?;
        Some((b, own.to_string()))
    });
    let Some((b, own)) = found else {
        return Ok(jsonrpc::error_response(
            Some(id),
            jsonrpc::codes::INVALID_PARAMS,
            "no backend of the gateway holds this task",
            Some(json!({ "reason": "gateway_unknown_task" })),
        ));
    };
    params["taskId"] = Value::String(own);
    let out = with_params(msg, &params).map_err(UpstreamError::Refused)?;
    let answer = ask(state, b, out, credential).await.map_err(|e| {
        UpstreamError::Refused(format!("backend {}: {e}", gateway.backends[b].name))
    })?;
    let mut value = answer.to_value();
    if let Some(Value::String(back)) = value.pointer_mut("/result/taskId") {
        *back = link_id(&gateway.backends[b].name, back);
    }
    Ok(Bytes::from(value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_id_names_its_backend_whatever_the_backends_id_holds() {
        let id = link_id("tasks", "mw1.abc:def.xyz");
        assert_eq!(split_id(&id), Some(("tasks", "mw1.abc:def.xyz")));
        assert_eq!(split_id("no-separator"), None);
        assert_eq!(split_id(":id"), None);
        assert_eq!(split_id("tasks:"), None);
    }
}
