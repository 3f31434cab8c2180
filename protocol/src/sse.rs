//! Server-Sent Events: an incremental parser (for upstream Streamable HTTP
//! responses) and the encoder for the events the facade sends downstream.
//!
//! The parser follows the WHATWG event-stream rules that matter for MCP:
//! `\n`, `\r\n` and `\r` line endings, `data` lines joined with `\n`, `id`
//! and `retry` fields, comments ignored, an event dispatched on a blank line.
//! Its buffer is bounded so a server cannot make the facade hold an endless
//! event.

use bytes::{Bytes, BytesMut};

/// One dispatched event.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Event {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("an SSE event exceeded the {0}-byte limit")]
pub struct TooLarge(pub usize);

/// Incremental SSE parser.
#[derive(Debug)]
pub struct Parser {
    buf: BytesMut,
    data: String,
    has_data: bool,
    id: Option<String>,
    event: Option<String>,
    retry: Option<u64>,
    max: usize,
    /// The last `id` seen, kept across events (the `Last-Event-ID` to send).
    pub last_event_id: Option<String>,
    /// The last `retry` seen, in milliseconds.
    pub retry_ms: Option<u64>,
}

impl Parser {
    pub fn new(max_event_bytes: usize) -> Self {
        Parser {
            buf: BytesMut::new(),
            data: String::new(),
            has_data: false,
            id: None,
            event: None,
            retry: None,
            max: max_event_bytes,
            last_event_id: None,
            retry_ms: None,
        }
    }

    /// Feed a chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, TooLarge> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n' || b == b'\r') {
            // A lone `\r` at the end of the buffer may be the first half of `\r\n`.
            if self.buf[pos] == b'\r' && pos + 1 == self.buf.len() {
                break;
            }
            let line = self.buf.split_to(pos);
            let skip = if self.buf[0] == b'\r' && self.buf.get(1) == Some(&b'\n') {
                2
            } else {
                1
            };
            let _ = self.buf.split_to(skip);
            if let Some(ev) = self.line(&line) {
                out.push(ev);
            }
            if self.data.len() > self.max {
                return Err(TooLarge(self.max));
            }
        }
        if self.buf.len() + self.data.len() > self.max {
            return Err(TooLarge(self.max));
        }
        Ok(out)
    }

    fn line(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => {
                self.id = Some(value.to_string());
                self.last_event_id = Some(value.to_string());
            }
            "event" => self.event = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry = Some(ms);
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        let id = self.id.take();
        let event = self.event.take();
        let retry = self.retry.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        Some(Event {
            id,
            event,
            data: std::mem::take(&mut self.data),
            retry,
        })
    }
}

/// Encode one `message` event carrying a JSON-RPC message.
pub fn encode_message(id: Option<&str>, data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(data.len() + 48);
    out.extend_from_slice(b"event: message\n");
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(b"\n");
    }
    // CR and LF both end an SSE line. In valid JSON they can only be
    // whitespace between tokens (inside strings they are escaped), so they
    // become spaces: one data line, the same JSON value.
    out.extend_from_slice(b"data: ");
    if memchr::memchr2(b'\r', b'\n', data).is_some() {
        out.extend(
            data.iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
    } else {
        out.extend_from_slice(data);
    }
    out.extend_from_slice(b"\n");
    out.extend_from_slice(b"\n");
    out.freeze()
}

/// The SEP-1699 priming event: an id and empty data, so a client can resume
/// the stream even before the first message, with a reconnection delay.
pub fn encode_priming(id: &str, retry_ms: u64) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {retry_ms}\ndata: \n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_events_split_across_chunks_and_line_endings() {
        let mut p = Parser::new(1024);
        let mut events = p.feed(b"event: message\r\nid: 1\r\ndata: {\"a\":").unwrap();
        assert!(events.is_empty());
        events.extend(p.feed(b"1}\r").unwrap());
        events.extend(p.feed(b"\n\r\n: comment\ndata: x\ndata: y\n\n").unwrap());
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].data, "{\"a\":1}");
        assert_eq!(events[0].id.as_deref(), Some("1"));
        assert_eq!(events[1].data, "x\ny");
        assert_eq!(p.last_event_id.as_deref(), Some("1"));
    }

    #[test]
    fn priming_event_without_data_is_not_dispatched_but_sets_the_id_and_retry() {
        let mut p = Parser::new(1024);
        let events = p.feed(b"id: s1-0\nretry: 500\ndata:\n\n").unwrap();
        // Empty `data:` counts as data per the spec: it dispatches an empty event.
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "");
        assert_eq!(p.retry_ms, Some(500));
        let none = p.feed(b"id: s1-1\n\n").unwrap();
        assert!(none.is_empty());
        assert_eq!(p.last_event_id.as_deref(), Some("s1-1"));
    }

    #[test]
    fn bounds_event_size() {
        let mut p = Parser::new(16);
        assert_eq!(p.feed(&[b'a'; 64]), Err(TooLarge(16)));
        let mut p = Parser::new(16);
        assert!(p.feed(b"data: 0123456789\ndata: 0123456789\n").is_err());
    }

    #[test]
    fn encoder_round_trips_through_the_parser() {
        let mut p = Parser::new(1024);
        let bytes = encode_message(Some("s2-5"), b"{\"x\":\"a\"}");
        let events = p.feed(&bytes).unwrap();
        assert_eq!(
            events,
            vec![Event {
                id: Some("s2-5".into()),
                event: Some("message".into()),
                data: "{\"x\":\"a\"}".into(),
                retry: None
            }]
        );
    }

    #[test]
    fn line_breaks_between_json_tokens_cannot_cut_an_event() {
        let mut p = Parser::new(1024);
        let bytes = encode_message(
            Some("1-1"),
            b"{\"jsonrpc\":\r\"2.0\",\r\n\"id\":1,\n\"result\":{}}",
        );
        let events = p.feed(&bytes).unwrap();
        assert_eq!(events.len(), 1);
        let v: serde_json::Value = serde_json::from_str(&events[0].data).unwrap();
        assert_eq!(v["id"], 1);
    }
}
