//! The JSON-RPC envelope parser and batch splitter (`mcp_warden_sidecar::jsonrpc`)
//! on arbitrary bytes, as they arrive in a POST body or on a server's stdout.
//!
//! Besides "no panic, no stack overflow, no hang", it checks what the facade
//! relies on afterwards:
//! - a parsed message keeps its bytes and its kind matches id/method;
//! - every batch element is a slice of the body;
//! - an id the parser accepted can be spliced into an error response that
//!   parses back as a response with the same id (the facade answers refusals
//!   that way);
//! - a request survives the alias rewrite the pipeline does
//!   (`jsonrpc::edit_params` replacing `params.name`): same kind, id and
//!   method, and (when readable) the same value but for the new name; a
//!   readable request whose params are an object is never refused.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mcp_warden_sidecar::jsonrpc::{self, Kind, Message, RequestId};

fn check_message(bytes: Bytes) {
    let Ok(msg) = Message::parse(bytes.clone()) else {
        return;
    };
    assert_eq!(msg.bytes, bytes, "parse must keep the original bytes");
    match msg.kind {
        Kind::Request => assert!(msg.id.is_some() && msg.method.is_some()),
        Kind::Notification => assert!(msg.id.is_none() && msg.method.is_some()),
        Kind::Response => assert!(msg.id.is_some() && msg.method.is_none()),
    }
    if let Some(id) = &msg.id {
        check_id_round_trip(id);
    }
    let _ = msg.mentions(b"progressToken");
    // What the pipeline does with a tools/call for an aliased tool:
    // `edit_params` replaces params.name and must keep every other value.
    if msg.kind == Kind::Request {
        let readable = msg.try_value().ok();
        let params_ok = readable.as_ref().is_some_and(|v| {
            v.get("params").is_none_or(serde_json::Value::is_object)
        });
        let edited = jsonrpc::edit_params(&msg, |p| {
            p.set("name", jsonrpc::raw_string("renamed"));
        });
        match (edited, readable) {
            (Ok(again), readable) => {
                assert_eq!(again.kind, Kind::Request);
                assert_eq!(again.id, msg.id, "the rename changed the request id");
                assert_eq!(again.method, msg.method);
                if let (Some(mut before), Ok(after)) = (readable, again.try_value()) {
                    if !before.get("params").is_some_and(serde_json::Value::is_object) {
                        before["params"] = serde_json::json!({});
                    }
                    before["params"]["name"] = serde_json::Value::String("renamed".into());
                    assert_eq!(before, after, "the rename changed more than params.name: {}",
                        String::from_utf8_lossy(&bytes));
                }
            }
            (Err(e), _) if params_ok => panic!(
                "a readable request with object params cannot be renamed: {e}\n  in: {}",
                String::from_utf8_lossy(&bytes)
            ),
            (Err(_), _) => {}
        }
    }
}

fn check_id_round_trip(id: &RequestId) {
    let err = jsonrpc::error_response(Some(id), -32004, "refused", None);
    let parsed = Message::parse(err.clone()).unwrap_or_else(|e| {
        panic!(
            "error response for id {} does not parse: {e:?}: {}",
            id.as_json(),
            String::from_utf8_lossy(&err)
        )
    });
    assert_eq!(parsed.kind, Kind::Response);
    assert_eq!(parsed.id.as_ref(), Some(id));
    assert!(parsed.is_error);
}

fuzz_target!(|data: &[u8]| {
    let body = Bytes::copy_from_slice(data);
    match jsonrpc::split_batch(&body) {
        Ok(Some(parts)) => {
            assert!(!parts.is_empty());
            let range = body.as_ptr() as usize..body.as_ptr() as usize + body.len();
            for part in parts {
                let start = part.as_ptr() as usize;
                assert!(part.is_empty() || (range.contains(&start) && start + part.len() <= range.end));
                check_message(part);
            }
        }
        Ok(None) => check_message(body),
        Err(e) => assert!(e.code() == -32700 || e.code() == -32600),
    }
});
