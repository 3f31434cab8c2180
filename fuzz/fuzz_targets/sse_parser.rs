//! The SSE parser (`mcp_warden_sidecar::sse::Parser`) that reads upstream
//! Streamable HTTP responses, and the encoder of the events the facade sends
//! to clients.
//!
//! Checks:
//! - feeding the stream in arbitrary chunks gives the same events, ids and
//!   retry as feeding it at once (TCP decides the chunking, not the server);
//! - the size bound holds: no dispatched event is over the limit;
//! - `encode_message(id, data)` read back by the parser gives exactly one
//!   event with the same id, and JSON data reads back as the same value (for
//!   any UTF-8, ids without CR/LF/NUL), CR and LF between tokens included.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_warden_sidecar::sse::{encode_message, Parser};

const BIG: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (ctl, stream) = data.split_at(2);

    // 1. Chunking does not change the result.
    let mut whole = Parser::new(BIG);
    let all = whole.feed(stream).expect("under the limit");
    let mut chunked = Parser::new(BIG);
    let mut got = Vec::new();
    let step = 1 + (ctl[0] as usize % 17);
    let mut rest = stream;
    let mut i = 0usize;
    while !rest.is_empty() {
        // vary the chunk size a little so \r\n pairs get split at every offset
        let n = (step + (i % 3)).min(rest.len());
        got.extend(chunked.feed(&rest[..n]).expect("under the limit"));
        rest = &rest[n..];
        i += 1;
    }
    assert_eq!(all, got, "chunking changed the events");
    assert_eq!(whole.last_event_id, chunked.last_event_id);
    assert_eq!(whole.retry_ms, chunked.retry_ms);

    // 2. A small limit holds.
    let max = 1 + ctl[1] as usize;
    let mut small = Parser::new(max);
    for chunk in stream.chunks(step) {
        match small.feed(chunk) {
            Ok(events) => {
                for ev in events {
                    assert!(ev.data.len() <= max, "an event over the limit passed");
                }
            }
            Err(_) => break,
        }
    }

    // 3. Encoder round trip.
    if let Ok(text) = std::str::from_utf8(stream) {
        let (id, payload) = match text.split_once('\u{1}') {
            Some((id, payload)) => (Some(id), payload),
            None => (None, text),
        };
        let id = id.filter(|id| !id.contains(['\n', '\r', '\0']));
        let bytes = encode_message(id, payload.as_bytes());
        let mut p = Parser::new(BIG);
        let events = p.feed(&bytes).expect("under the limit");
        assert_eq!(events.len(), 1, "one message must be one event: {bytes:?}");
        assert_eq!(events[0].id.as_deref(), id);
        assert_eq!(events[0].event.as_deref(), Some("message"));
        // JSON reads back as the same value (CR/LF between tokens may become
        // spaces); any other text arrives whole, with CR/LF as spaces.
        match serde_json::from_str::<serde_json::Value>(payload) {
            Ok(value) => {
                let back: serde_json::Value = serde_json::from_str(&events[0].data)
                    .unwrap_or_else(|e| panic!("JSON became unreadable ({e}): {bytes:?}"));
                assert_eq!(back, value, "the JSON changed: {bytes:?}");
            }
            Err(_) => assert_eq!(events[0].data, payload.replace(['\r', '\n'], " "), "{bytes:?}"),
        }
    }
});
