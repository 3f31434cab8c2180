//! The `initialize` step: the handshake goes to the server under the
//! facade's id, and each side learns only what the facade serves.
//!
//! The client's `initialize` is kept (a restarted server gets it replayed)
//! and tells whether the client can answer elicitations (for approvals).
//! Neither side hears of the tasks capability: a task-augmented request
//! would fetch its result with `tasks/result`, which the method table does
//! not serve. The server hears of `roots` only when the policy has roots:
//! the facade answers `roots/list` itself, so the client cannot widen the
//! server's scope ([`crate::session::context::Context::fit_client_capabilities`]).

use std::sync::Arc;

use serde_json::Value;

use super::forward::exchange;
use crate::gates::Ended;
use crate::gates::Request;
use crate::jsonrpc::Members;
use crate::session::Session;

pub async fn initialize(session: &Arc<Session>, req: Request) {
    let mut params = req.params().clone();
    let elicits = params.pointer("/capabilities/elicitation").is_some();
    if let Some(caps) = params
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        session.app.fit_client_capabilities(caps);
    }
    let fitted = params.get("capabilities").cloned();
    session.record_initialize(params, elicits);
    let mut edit = |p: &mut Members| {
        if let Some(caps) = &fitted {
            let raw = serde_json::value::to_raw_value(caps).expect("objects serialize");
            p.set("capabilities", raw);
        }
    };
    let mut version = None;
    let ended = exchange(session, &req, Some(&mut edit), |result| {
        if let Some(caps) = result
            .get_mut("capabilities")
            .and_then(Value::as_object_mut)
        {
            // A legacy client is never offered tasks, of either revision.
            caps.remove("tasks");
            if let Some(ext) = caps.get_mut("extensions").and_then(Value::as_object_mut) {
                ext.remove(crate::era::TASKS_EXTENSION);
            }
        }
        version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
    })
    .await;
    if let (Ended::Answered { error: false, .. }, Some(v)) = (&ended, version) {
        session.set_protocol_version(v);
    }
    session.observe("initialize", ended.outcome(), req.started);
}
