//! `prompts/get` and `resources/read|subscribe|unsubscribe` through the
//! gateway: to the backend the prompt's prefixed name or the resource's
//! `{backend}+{uri}` URI names, under the backend's own name, as the caller.
//!
//! Where it sits: routes of the gateway link ([`super`]), beside
//! `completion/complete` ([`super::complete`]), whose refusal they share.
//!
//! What a caller may not see stays unseen, as for a completion: a name no
//! backend serves, one the gateway withholds (a conflict), and one the
//! backend refuses this caller (not authenticated there, no role or a role
//! too low, a rule that hides it) all get the one answer — the facade's
//! -32004 `prompt_not_available` or `resource_not_available`, naming what
//! the caller sent. The backend's own refusal, which names the prompt or
//! URI as the backend knows it and says which role it wants, never reaches
//! the caller. Any other answer (a result, a budget, the server's own
//! error) comes back as the backend gave it.
//!
//! A prompt name the gateway has not seen listed yet (a fresh gateway reads
//! only tools at start) makes it list the prompts as this caller first.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use super::complete::{hides, unknown, Target};
use super::names::Catalog;
use super::{ask, param_str, with_params, State};
use crate::jsonrpc::{Message, RequestId};
use crate::upstream::{Credential, UpstreamError};

/// A prompt: to the backend its name routes to, as its own name.
pub(super) async fn prompt(
    state: &Arc<State>,
    id: &RequestId,
    msg: &Message,
    credential: Option<&Credential>,
) -> Result<Bytes, UpstreamError> {
    let (mut params, exposed) = param_str(msg, "name");
    let gateway = state.gateway();
    let route = || {
        let names = gateway.names.lock().unwrap();
        names.route(Catalog::Prompts, &exposed).ok()
    };
    let mut found = route();
    if found.is_none() {
        // Listing as this caller adds only what this caller may see; the
        // request's `_meta` (its era's version) goes with the list.
        let list = match params.get("_meta") {
            Some(meta) => json!({ "_meta": meta }),
            None => json!({}),
        };
        let _ = super::lists::list(state, id, &list, Catalog::Prompts, credential).await;
        found = route();
    }
    let Some((b, own)) = found else {
        return Ok(unknown(id, Target::Prompt, &exposed));
    };
    params["name"] = Value::String(own);
    let out = with_params(msg, &params).map_err(UpstreamError::Refused)?;
    let answer = ask(state, b, out, credential).await.map_err(|e| {
        UpstreamError::Refused(format!("backend {}: {e}", gateway.backends[b].name))
    })?;
    if answer.is_error && hides(&answer.to_value()) {
        return Ok(unknown(id, Target::Prompt, &exposed));
    }
    Ok(answer.bytes)
}

/// A resource request: to the backend its URI names, with the backend's
/// URI; the contents come back under the gateway's URIs.
pub(super) async fn by_uri(
    state: &Arc<State>,
    id: &RequestId,
    msg: &Message,
    credential: Option<&Credential>,
) -> Result<Bytes, UpstreamError> {
    let (mut params, uri) = param_str(msg, "uri");
    let gateway = state.gateway();
    let route = gateway.names.lock().unwrap().route_uri(&uri);
    let Some((b, own)) = route else {
        return Ok(unknown(id, Target::Resource, &uri));
    };
    params["uri"] = Value::String(own);
    let out = with_params(msg, &params).map_err(UpstreamError::Refused)?;
    let answer = ask(state, b, out, credential).await.map_err(|e| {
        UpstreamError::Refused(format!("backend {}: {e}", gateway.backends[b].name))
    })?;
    let mut value = answer.to_value();
    if answer.is_error && hides(&value) {
        return Ok(unknown(id, Target::Resource, &uri));
    }
    if let Some(Value::Array(contents)) = value.pointer_mut("/result/contents") {
        let names = gateway.names.lock().unwrap();
        for c in contents {
            if let Some(Value::String(u)) = c.get("uri") {
                c["uri"] = Value::String(names.exposed_uri(b, u));
            }
        }
    }
    Ok(Bytes::from(value.to_string()))
}
