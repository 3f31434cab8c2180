//! Differential: for any body the facade accepts as one JSON-RPC message,
//! the bytes it writes to a line-framed link (a stdio server, the bridge
//! socket, a `--stdio` client) are exactly one message to a reader that
//! splits on LF, to one that splits on CR, and to one that splits on CRLF —
//! and that message is the one the facade judged (the same JSON value, but
//! for the id the facade put in).
//!
//! The bytes are built as the facade builds them: `jsonrpc::rebuild` under
//! the facade's own id (and with `params._meta.progressToken` replaced, as
//! for a request asking for progress), then `framing::one_line`, the one
//! function every framed write goes through.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use mcp_warden_sidecar::framing::one_line;
use mcp_warden_sidecar::jsonrpc::{self, Kind, Members, Message, ParamsEdit, RequestId};
use serde_json::value::RawValue;
use serde_json::Value;

/// The non-empty lines a reader sees: split at LF only, at CR or LF
/// (universal newlines), or at the CRLF sequence only.
fn lines<'a>(text: &'a [u8], reader: &str) -> Vec<&'a [u8]> {
    let parts: Vec<&[u8]> = match reader {
        "lf" => text.split(|&b| b == b'\n').collect(),
        "universal" => text.split(|&b| b == b'\n' || b == b'\r').collect(),
        _ => {
            let mut out = Vec::new();
            let mut rest = text;
            while let Some(at) = rest.windows(2).position(|w| w == b"\r\n") {
                out.push(&rest[..at]);
                rest = &rest[at + 2..];
            }
            out.push(rest);
            out
        }
    };
    parts
        .into_iter()
        .map(|p| p.strip_suffix(b"\n").unwrap_or(p))
        .filter(|p| !p.is_empty())
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = Message::parse(Bytes::copy_from_slice(data)) else {
        return;
    };
    let id = RequestId::number(7);
    let request = msg.kind == Kind::Request;
    let mut progress = |p: &mut Members| {
        let mut meta = p
            .get("_meta")
            .and_then(|m| Members::parse(m.get().as_bytes()).ok())
            .unwrap_or_default();
        meta.set("progressToken", RawValue::from_string("7".into()).unwrap());
        p.set("_meta", meta.to_raw());
    };
    let with_progress = request && msg.mentions(b"progressToken");
    let edit: Option<ParamsEdit<'_>> =
        if with_progress { Some(&mut progress) } else { None };
    let Ok(out) = jsonrpc::rebuild(&msg, request.then_some(&id), edit) else {
        return;
    };
    let mut line = one_line(&out).into_owned();
    assert!(!line.contains(&b'\n') && !line.contains(&b'\r'), "a raw line break survived");
    line.push(b'\n');
    // LF readers (most SDKs), CR-or-LF readers (Python's universal newlines),
    // CRLF readers: one non-empty line each, the whole message.
    for reader in ["lf", "universal", "crlf"] {
        let parts = lines(&line, reader);
        assert_eq!(parts.len(), 1, "{} lines for one message ({reader})", parts.len());
        assert_eq!(parts[0], &line[..line.len() - 1]);
    }
    // The line is the message the facade judged.
    let (Ok(mut judged), Ok(mut sent)) = (
        serde_json::from_slice::<Value>(data),
        serde_json::from_slice::<Value>(&line),
    ) else {
        // Out-of-range numbers and the like: the facade's strict reader
        // refuses such requests before anything is written.
        return;
    };
    if request {
        assert_eq!(sent["id"], Value::from(7));
        sent["id"] = judged["id"].clone();
    }
    if with_progress {
        for v in [&mut judged, &mut sent] {
            if let Some(meta) = v.pointer_mut("/params/_meta").and_then(Value::as_object_mut) {
                meta.remove("progressToken");
            }
        }
        // `_meta` may have been added (or `params` created) to carry the token.
        let strip = |v: &mut Value| {
            if let Some(params) = v.get_mut("params").and_then(Value::as_object_mut) {
                if params.get("_meta").is_some_and(|m| m == &Value::Object(Default::default())) {
                    params.remove("_meta");
                }
            }
        };
        strip(&mut judged);
        strip(&mut sent);
        if let Some(obj) = sent.as_object_mut() {
            if obj.get("params").is_some_and(|p| p == &Value::Object(Default::default()))
                && judged.get("params").is_none()
            {
                obj.remove("params");
            }
        }
    }
    assert_eq!(judged, sent, "the line is not the message the facade judged");
});
