//! `completion/complete` through the gateway: the completion goes to the
//! backend that serves what its `ref` names, with the backend's own name
//! for it, as the caller (an assertion minted for that backend).
//!
//! Where it sits: a route of the gateway link ([`super`]), beside
//! `prompts/get` (by the prefixed prompt name) and `resources/read` (by the
//! `{backend}+{uri}` URI). The gateway's own policy has judged the `ref` as
//! the exposed name before this runs (the facade's completion step); the
//! backend's facade judges it again as its own name, with its own rules and
//! the caller's role there.
//!
//! A prompt name the gateway has not seen listed yet (a fresh gateway reads
//! only tools at start) makes it list the prompts as this caller first.
//!
//! What a caller may not see stays unseen: a `ref` no backend serves, one
//! the gateway withholds (a conflict), and one the backend refuses this
//! caller (no role there, a role too low, a prompt or template its policy
//! hides) all get the one answer — the facade's "unknown prompt" or
//! "unknown resource" refusal naming the ref as the caller sent it — so the
//! answer never tells which prompts or templates exist for other callers.

use std::sync::Arc;

use bytes::Bytes;
use mcp_warden_policy::Denial;
use serde_json::{json, Value};

use super::names::Catalog;
use super::{ask, with_params, State};
use crate::jsonrpc::{self, Message, RequestId};
use crate::upstream::{Credential, UpstreamError};

/// What a completion's `ref` (or a `prompts/get`, a `resources/read`) names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// `ref/prompt`: `ref.name`, a prompt's exposed name.
    Prompt,
    /// `ref/resource`: `ref.uri`, a resource or template URI `{backend}+{uri}`.
    Resource,
}

impl Target {
    fn field(self) -> &'static str {
        match self {
            Target::Prompt => "name",
            Target::Resource => "uri",
        }
    }

    /// The facade's refusal of a prompt or resource the caller may not see.
    pub(super) fn unknown(self, name: &str) -> Denial {
        match self {
            Target::Prompt => Denial::PromptNotAvailable {
                name: name.to_string(),
            },
            Target::Resource => Denial::ResourceNotAvailable {
                uri: name.to_string(),
                reason: "resource_not_available",
            },
        }
    }
}

/// A completion: to the backend that serves its `ref`.
pub(super) async fn routed(
    state: &Arc<State>,
    id: &RequestId,
    msg: &Message,
    credential: Option<&Credential>,
) -> Result<Bytes, UpstreamError> {
    let mut params = msg
        .to_value()
        .get("params")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let reference = params.get("ref").cloned().unwrap_or(Value::Null);
    let target = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => Target::Prompt,
        _ => Target::Resource,
    };
    let exposed = reference
        .get(target.field())
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let gateway = state.gateway();
    let route = |target: Target| {
        let names = gateway.names.lock().unwrap();
        match target {
            Target::Prompt => names.route(Catalog::Prompts, &exposed).ok(),
            Target::Resource => names.route_uri(&exposed),
        }
    };
    let mut found = route(target);
    if found.is_none() && target == Target::Prompt {
        // Prompt names route once a list has shown them (the start-up
        // inventory reads tools only): list the prompts as this caller,
        // which adds only what this caller may see, and look again.
        // The request's `_meta` (its era's version and capabilities) goes
        // with the list, as with every request to a backend.
        let list = match params.get("_meta") {
            Some(meta) => json!({ "_meta": meta }),
            None => json!({}),
        };
        let _ = super::lists::list(state, id, &list, Catalog::Prompts, credential).await;
        found = route(target);
    }
    let Some((b, own)) = found else {
        return Ok(unknown(id, target, &exposed));
    };
    params["ref"][target.field()] = Value::String(own);
    let out = with_params(msg, &params).map_err(UpstreamError::Refused)?;
    let answer = ask(state, b, out, credential).await.map_err(|e| {
        UpstreamError::Refused(format!("backend {}: {e}", gateway.backends[b].name))
    })?;
    if answer.is_error && hides(&answer.to_value()) {
        return Ok(unknown(id, target, &exposed));
    }
    Ok(answer.bytes)
}

/// Whether a backend's error says the caller may not see what the `ref`
/// names: not authenticated there (-32001), no role or a role too low
/// (-32003), hidden by its rules (-32004). Other errors (a budget, the
/// server's own) are about a ref the caller may use and pass as they are.
pub(super) fn hides(answer: &Value) -> bool {
    let code = answer.pointer("/error/code").and_then(Value::as_i64);
    matches!(code, Some(-32001 | -32003 | -32004))
}

/// The refusal of a ref the caller may not see, exactly as the facade's
/// own policy words it for an unknown prompt or resource.
pub(super) fn unknown(id: &RequestId, target: Target, name: &str) -> Bytes {
    let denial = target.unknown(name);
    jsonrpc::error_response(
        Some(id),
        i64::from(denial.code()),
        &denial.to_string(),
        Some(json!({ "reason": denial.reason(), "hint": denial.hint() })),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::codes;

    fn error(bytes: &Bytes) -> Value {
        serde_json::from_slice::<Value>(bytes).unwrap()["error"].clone()
    }

    #[test]
    fn a_hidden_ref_is_refused_as_an_unknown_one_is() {
        let id = RequestId::number(7);
        let e = error(&unknown(
            &id,
            Target::Prompt,
            "everything__completable-prompt",
        ));
        assert_eq!(e["code"], -32004);
        assert_eq!(e["data"]["reason"], "prompt_not_available");
        assert!(e["message"]
            .as_str()
            .unwrap()
            .contains("`everything__completable-prompt`"));
        let e = error(&unknown(&id, Target::Resource, "everything+demo://x/{id}"));
        assert_eq!(e["code"], -32004);
        assert_eq!(e["data"]["reason"], "resource_not_available");
    }

    #[test]
    fn only_refusals_of_visibility_are_hidden() {
        let err = |code: i64| json!({ "error": { "code": code, "message": "m" } });
        for code in [-32001, -32003, -32004] {
            assert!(hides(&err(code)), "{code}");
        }
        for code in [-32005, -32602, -32603, codes::METHOD_NOT_FOUND] {
            assert!(!hides(&err(code)), "{code}");
        }
        assert!(!hides(&json!({ "result": {} })));
    }
}
