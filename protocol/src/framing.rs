//! Line framing: the one place a message becomes a line, and the one way a
//! `--stdio` client's input becomes messages.
//!
//! Every write to a line-framed link — a stdio server, the bridge's socket,
//! a `--stdio` client — goes through [`one_line`]: raw CR and LF become
//! spaces. In valid JSON they can only be whitespace between tokens (inside
//! strings they are escaped), so the message keeps its meaning and is
//! exactly one line to a reader that splits on LF, on CR or on CRLF. Without
//! this, one JSON body the facade polices as one message would be two or
//! three messages to the server (a `ping` carrying a hidden `tools/call`).
//!
//! [`lines`] splits a `--stdio` client's input the way the strictest server
//! does (LF, CR and CRLF all end a line), so what the facade reads as one
//! message no server could read as several.

use std::borrow::Cow;

use tokio_util::codec::AnyDelimiterCodec;

/// `bytes` on one line: every CR and LF replaced by a space (one pass, no
/// copy when there is none).
pub fn one_line(bytes: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr2(b'\r', b'\n', bytes).is_none() {
        return Cow::Borrowed(bytes);
    }
    Cow::Owned(
        bytes
            .iter()
            .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b })
            .collect(),
    )
}

/// A decoder of lines ended by LF, CR or CRLF (CRLF yields an empty line,
/// which readers skip), each at most `max` bytes.
pub fn lines(max: usize) -> AnyDelimiterCodec {
    AnyDelimiterCodec::new_with_max_length(b"\r\n".to_vec(), Vec::new(), max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use tokio_util::codec::Decoder;

    #[test]
    fn raw_line_breaks_become_spaces_and_nothing_else_changes() {
        let body = b"{\"a\":\r\n{\"b\":\"x\\ny\"}\r}";
        let out = one_line(body);
        assert_eq!(&*out, b"{\"a\":  {\"b\":\"x\\ny\"} }");
        let before: serde_json::Value = serde_json::from_slice(body).unwrap();
        let after: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(before, after);
        assert!(matches!(one_line(b"{}"), Cow::Borrowed(_)));
    }

    #[test]
    fn lines_end_at_lf_cr_and_crlf() {
        let mut codec = lines(1024);
        let mut buf = BytesMut::from(&b"a\nb\rc\r\nd"[..]);
        let mut got = Vec::new();
        while let Some(line) = codec.decode(&mut buf).unwrap() {
            if !line.is_empty() {
                got.push(line);
            }
        }
        assert_eq!(got, ["a", "b", "c"]);
        assert_eq!(codec.decode_eof(&mut buf).unwrap().unwrap(), "d");
    }
}
