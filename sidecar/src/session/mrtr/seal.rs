//! The states a modern client retries with, as they leave the facade: a
//! modern server's `input_required` sealed inside one of the facade's
//! ([`seal_answer`]: bound to the caller, the request and an expiry; its
//! `roots/list` questions taken out, for the facade to answer from the
//! policy on the retry),
//! and the facade's own approval question ([`approval_request`]).

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::{Round, APPROVAL_KEY};
use crate::gates::methods;
use crate::jsonrpc::{self, codes, RequestId};
use crate::request_state::{Claims, StateKind};
use crate::session::context::Context;

/// A modern client's answer, as it leaves: a modern server's
/// `input_required` gets a state of the facade's (carrying the server's),
/// and asks only for what the facade passes to clients.
pub(crate) fn seal_answer(app: &Context, round: &Round, bytes: Bytes) -> Bytes {
    if memchr::memmem::find(&bytes, b"input_required").is_none() {
        return bytes;
    }
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return bytes;
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let Some(result) = value.get_mut("result").and_then(Value::as_object_mut) else {
        return bytes;
    };
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return bytes;
    }
    // The server's scope is the policy's: its `roots/list` questions are
    // never put to the client; the facade answers them on the retry (a
    // server that asks nothing else was answered before this point).
    let roots_keys = roots_requests(result);
    if let Some(requests) = result
        .get_mut("inputRequests")
        .and_then(Value::as_object_mut)
    {
        requests.retain(|key, _| !roots_keys.contains(key));
    }
    let asks = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|r| {
            r.values()
                .map(|q| {
                    q.get("method")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let refused = asks
        .iter()
        .find(|m| methods::server_request(m) != Some(true))
        .map(|m| format!("the MCP server asked the client for `{m}`, which the facade does not pass to clients"))
        .or_else(|| {
            asks.is_empty()
                .then(|| "the MCP server kept asking for its roots, which the facade answered".to_string())
        });
    if let Some(text) = refused {
        return Bytes::from(
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": codes::INTERNAL_ERROR, "message": text, "data": {"reason": "input_request_refused"}}}))
            .expect("values serialize"),
        );
    }
    let claims = Claims {
        kind: StateKind::Upstream,
        caller: round.caller.clone(),
        request: round.request.clone(),
        exp: app.state_seal.expiry(),
        approved: round.approval() == Some(true),
        upstream: result
            .get("requestState")
            .and_then(Value::as_str)
            .map(str::to_string),
        park: None,
        // An approved state is spent where it was issued (see `Spent`).
        owner: app.session_ids.me().map(str::to_string),
        nonce: Some(app.spent_states.nonce()),
        roots_keys,
        task: None,
        tool: None,
    };
    result.insert("requestState".into(), json!(app.state_seal.seal(&claims)));
    Bytes::from(serde_json::to_vec(&value).expect("values serialize"))
}

/// The keys of the `roots/list` questions in an `input_required` result.
fn roots_requests(result: &Map<String, Value>) -> Vec<String> {
    result
        .get("inputRequests")
        .and_then(Value::as_object)
        .map(|requests| {
            requests
                .iter()
                .filter(|(_, q)| q.get("method").and_then(Value::as_str) == Some("roots/list"))
                .map(|(key, _)| key.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The `input_required` result asking a person to approve a call.
pub(crate) fn approval_request(
    app: &Context,
    round: &Round,
    id: &RequestId,
    question: Value,
) -> Bytes {
    let claims = Claims {
        kind: StateKind::Approval,
        caller: round.caller.clone(),
        request: round.request.clone(),
        exp: app.state_seal.expiry(),
        approved: false,
        upstream: None,
        park: None,
        // Spent where it was issued (see `Spent`): a retry landing on
        // another replica is relayed here.
        owner: app.session_ids.me().map(str::to_string),
        nonce: Some(app.spent_states.nonce()),
        roots_keys: Vec::new(),
        task: None,
        tool: None,
    };
    let result = json!({
        "resultType": "input_required",
        "inputRequests": { APPROVAL_KEY: { "method": "elicitation/create", "params": question } },
        "requestState": app.state_seal.seal(&claims),
    });
    jsonrpc::result_response(id, &result.to_string())
}
