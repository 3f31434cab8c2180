//! What the facade answers itself for a legacy client in front of a modern
//! server, which has no handshake, no `ping` and no session log level.
//!
//! - `initialize`: the server's capabilities (from `server/discover`, cut
//!   by the policy) and identity, the client's version if the facade serves
//!   it; the client's capabilities and identity are kept for the `_meta` of
//!   its requests;
//! - `ping`: `{}`;
//! - `logging/setLevel`: kept, and sent as `_meta` log level with every
//!   request from then on.
//!
//! `resources/subscribe` and `unsubscribe` pass the resource rules first
//! ([`super::catalog`]) and then change the session's subscription on the
//! server.

use std::sync::Arc;

use serde_json::Value;

use crate::gates::Request;
use crate::jsonrpc;
use crate::session::Session;

/// Answer `req` here if it is one of the facade's own; `true` if it was.
pub async fn answers(session: &Arc<Session>, req: &Request) -> bool {
    let result = match req.msg.method() {
        "initialize" => {
            let mut params = req.params().clone();
            let elicits = params.pointer("/capabilities/elicitation").is_some();
            // The modern server reads these from every request's `_meta`.
            if let Some(caps) = params
                .get_mut("capabilities")
                .and_then(Value::as_object_mut)
            {
                session.app.fit_client_capabilities(caps);
            }
            let requested = params.get("protocolVersion").and_then(Value::as_str);
            let Some(info) = session.app.upstream.get() else {
                return false;
            };
            let result = crate::session::initialize_result(requested, info);
            session.record_initialize(params, elicits);
            if let Some(v) = result.get("protocolVersion").and_then(Value::as_str) {
                session.set_protocol_version(v.to_string());
            }
            result
        }
        "ping" => serde_json::json!({}),
        "logging/setLevel" => {
            let level = req
                .params()
                .get("level")
                .and_then(Value::as_str)
                .unwrap_or("");
            if crate::session::log_severity(level).is_none() {
                let bytes = jsonrpc::error_response(
                    Some(&req.id),
                    jsonrpc::codes::INVALID_PARAMS,
                    "Invalid params: level must be an RFC 5424 severity (debug … emergency)",
                    None,
                );
                session.answer_call(&req.id, bytes);
                session.observe(req.msg.method(), "error", req.started);
                return true;
            }
            session.set_log_level(level);
            serde_json::json!({})
        }
        _ => return false,
    };
    session.answer_call(
        &req.id,
        jsonrpc::result_response(&req.id, &result.to_string()),
    );
    session.observe(req.msg.method(), "ok", req.started);
    true
}
