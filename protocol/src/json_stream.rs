//! A stream of JSON texts in one HTTP body: how some servers answer a
//! `subscriptions/listen` under `Content-Type: application/json` — the
//! acknowledgement, then one notification per line for as long as the
//! subscription lives (the conformance suite's own client reads it so).
//!
//! Sits beside [`crate::sse`] in the protocol layer: the HTTP upstream feeds
//! it the body's chunks and gets back each complete message's bytes. Texts
//! are split by the JSON grammar, not by line breaks, so a message printed
//! over several lines is one message and two on one line are two.

use bytes::Bytes;
use serde_json::value::RawValue;

/// Why a JSON stream cannot go on.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JsonStreamError {
    #[error("a message in the upstream's JSON stream exceeds {0} bytes")]
    TooLarge(usize),
    #[error("the upstream's JSON stream is malformed: {0}")]
    Malformed(String),
}

/// Splits a body's chunks into complete JSON texts.
pub struct JsonStream {
    buf: Vec<u8>,
    max: usize,
}

impl JsonStream {
    /// A stream whose messages are at most `max_message_bytes` each.
    pub fn new(max_message_bytes: usize) -> Self {
        JsonStream {
            buf: Vec::new(),
            max: max_message_bytes,
        }
    }

    /// Feed a chunk; returns the messages it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Bytes>, JsonStreamError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut consumed = 0;
        {
            let mut texts =
                serde_json::Deserializer::from_slice(&self.buf).into_iter::<&RawValue>();
            loop {
                match texts.next() {
                    Some(Ok(text)) => {
                        out.push(Bytes::copy_from_slice(text.get().as_bytes()));
                        consumed = texts.byte_offset();
                    }
                    // The rest is the start of a message still on its way.
                    Some(Err(e)) if e.is_eof() => break,
                    Some(Err(e)) => return Err(JsonStreamError::Malformed(e.to_string())),
                    None => {
                        consumed = self.buf.len();
                        break;
                    }
                }
            }
        }
        self.buf.drain(..consumed);
        // Only what waits for its end counts against the bound: complete
        // messages were checked by the caller's own size limit already.
        if self.buf.iter().any(|b| !b.is_ascii_whitespace()) && self.buf.len() > self.max {
            return Err(JsonStreamError::TooLarge(self.max));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(out: Vec<Bytes>) -> Vec<String> {
        out.into_iter()
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn newline_delimited_messages_come_out_one_by_one_across_chunks() {
        let mut s = JsonStream::new(1024);
        assert_eq!(texts(s.feed(b"{\"a\":1}\n{\"b\":").unwrap()), ["{\"a\":1}"]);
        assert!(s.feed(b"[1,2").unwrap().is_empty());
        assert_eq!(texts(s.feed(b"]}\n").unwrap()), ["{\"b\":[1,2]}"]);
        assert!(s.feed(b"\n  \n").unwrap().is_empty());
    }

    #[test]
    fn texts_are_split_by_the_grammar_not_by_lines() {
        let mut s = JsonStream::new(1024);
        let out = s.feed(b"{\n \"a\": \"x\\ny\"\n}{\"b\":2}").unwrap();
        assert_eq!(texts(out), ["{\n \"a\": \"x\\ny\"\n}", "{\"b\":2}"]);
    }

    #[test]
    fn garbage_and_unbounded_messages_end_the_stream() {
        let mut s = JsonStream::new(1024);
        assert!(matches!(
            s.feed(b"{\"a\":1} nope"),
            Err(JsonStreamError::Malformed(_))
        ));
        let mut s = JsonStream::new(8);
        assert_eq!(
            s.feed(b"{\"a\":\"0123456789"),
            Err(JsonStreamError::TooLarge(8))
        );
    }
}
