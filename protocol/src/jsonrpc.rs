//! JSON-RPC 2.0 envelopes: classify a message without copying it, and
//! rebuild it for the next hop.
//!
//! Sits at the very start of the message path (both directions): transports
//! hand raw bytes to [`Message::parse`], the session looks at `kind`, `id`
//! and `method`. Nothing a client wrote is
//! forwarded as written: [`rebuild`] writes the message again under the
//! facade's own id, every other member kept as the client wrote it (so
//! `_meta`, unknown fields and numbers like `1e400` survive), and the
//! framed writer puts what it writes on exactly one line.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

mod write;
pub use write::*;

/// Standard JSON-RPC error codes the transport layer produces itself.
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
}

/// A request id, canonical: a string id as serde_json writes it (escapes
/// decoded, so `"\u0031"` and `"1"` are one id, as they are to any JSON
/// parser), an integer as its decimal value (`-0` is `0`). Used as a map
/// key and written back as the id of an answer.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(Box<str>);

impl RequestId {
    /// The canonical form of an id's JSON text; `None` when it is not a
    /// string or a safe integer.
    pub fn from_raw(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        if raw.starts_with('"') {
            let text: String = serde_json::from_str(raw).ok()?;
            return Some(RequestId(serde_json::to_string(&text).ok()?.into()));
        }
        if !is_safe_integer(raw) {
            return None;
        }
        let n: i64 = raw.parse().ok()?;
        Some(RequestId(n.to_string().into()))
    }

    /// An id the facade mints (upstream: per session, monotonic; downstream:
    /// for requests it sends the client). Plain integers.
    pub fn number(n: u64) -> Self {
        RequestId(n.to_string().into())
    }

    /// The id as JSON text, ready to splice into a message.
    pub fn as_json(&self) -> &str {
        &self.0
    }

    /// The id as a facade-minted number, if it is one.
    pub fn as_number(&self) -> Option<u64> {
        self.0.parse().ok()
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a message is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
}

/// One parsed JSON-RPC message: the original bytes plus what routing needs.
#[derive(Clone)]
pub struct Message {
    pub bytes: Bytes,
    pub kind: Kind,
    pub id: Option<RequestId>,
    pub method: Option<Box<str>>,
    /// For responses: whether it carries `error` rather than `result`.
    pub is_error: bool,
    /// Where the `id` value is in `bytes` (when read from them): the id can
    /// be replaced without reading the message again ([`with_id`]).
    id_span: Option<(usize, usize)>,
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the payload: messages carry user content.
        f.debug_struct("Message")
            .field("kind", &self.kind)
            .field("id", &self.id)
            .field("method", &self.method)
            .finish()
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    jsonrpc: Option<Cow<'a, str>>,
    /// Present-but-null must stay distinguishable from absent (a request
    /// with `"id": null` is invalid, not a notification).
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    result: Option<&'a RawValue>,
    #[serde(borrow)]
    error: Option<&'a RawValue>,
    #[serde(borrow, rename = "params")]
    _params: Option<&'a RawValue>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// Why bytes are not a usable JSON-RPC message; each maps to a JSON-RPC error.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("Parse error: the body is not valid JSON ({0})")]
    Json(String),
    #[error("Invalid Request: {0}")]
    Invalid(&'static str),
}

impl ParseError {
    pub fn code(&self) -> i64 {
        match self {
            ParseError::Json(_) => codes::PARSE_ERROR,
            ParseError::Invalid(_) => codes::INVALID_REQUEST,
        }
    }

    /// `data.reason` of the error answer.
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::Json(_) => "parse_error",
            ParseError::Invalid(_) => "invalid_request",
        }
    }
}

impl Message {
    /// Parse one JSON-RPC message (not a batch).
    pub fn parse(bytes: Bytes) -> Result<Message, (ParseError, Option<RequestId>)> {
        let env: Envelope<'_> = match serde_json::from_slice(&bytes) {
            Ok(env) => env,
            Err(e) if e.is_data() => {
                return Err((
                    ParseError::Invalid(
                        "a JSON-RPC message must be an object with valid member types",
                    ),
                    None,
                ))
            }
            Err(e) => return Err((ParseError::Json(e.to_string()), None)),
        };
        let id = match env.id {
            Some(raw) => {
                let text = raw.get();
                let first = text.as_bytes().first().copied();
                // JSON-RPC ids are strings or numbers; MCP forbids null.
                if !matches!(first, Some(b'"' | b'-' | b'0'..=b'9')) {
                    return Err((
                        ParseError::Invalid("`id` must be a string or an integer"),
                        None,
                    ));
                }
                // MCP ids are strings or integers; many servers (JavaScript)
                // lose integers past 2^53, and would never answer.
                if first != Some(b'"') && !is_safe_integer(text) {
                    let why = "a numeric `id` must be an integer between -(2^53-1) and 2^53-1";
                    return Err((ParseError::Invalid(why), None));
                }
                Some(RequestId::from_raw(text).ok_or((
                    ParseError::Invalid("`id` must be a string or an integer"),
                    None,
                ))?)
            }
            None => None,
        };
        if env.jsonrpc.as_deref() != Some("2.0") {
            return Err((ParseError::Invalid("`jsonrpc` must be \"2.0\""), id));
        }
        let kind = match (
            &env.method,
            &id,
            env.result.is_some() || env.error.is_some(),
        ) {
            (Some(_), Some(_), false) => Kind::Request,
            (Some(_), None, false) => Kind::Notification,
            (None, Some(_), true) => Kind::Response,
            _ => {
                return Err((
                    ParseError::Invalid("not a request, notification or response"),
                    id,
                ))
            }
        };
        let method = env.method.map(|m| Box::<str>::from(m.as_ref()));
        let is_error = env.error.is_some();
        // The raw id is a slice of `bytes` (serde_json borrows it): its offset.
        let id_span = env.id.map(|raw| {
            let start = raw.get().as_ptr() as usize - bytes.as_ptr() as usize;
            (start, start + raw.get().len())
        });
        Ok(Message {
            bytes,
            kind,
            id,
            method,
            is_error,
            id_span,
        })
    }

    /// A message the facade wrote (no id span: it was never read).
    pub fn written(
        bytes: Bytes,
        kind: Kind,
        id: Option<RequestId>,
        method: Option<Box<str>>,
    ) -> Message {
        Message {
            bytes,
            kind,
            id,
            method,
            is_error: false,
            id_span: None,
        }
    }

    pub fn method(&self) -> &str {
        self.method.as_deref().unwrap_or("")
    }

    /// Parse the message into a generic value, for the few places that must
    /// look inside `params` or `result` (policy layers, initialize).
    pub fn to_value(&self) -> serde_json::Value {
        self.try_value().unwrap_or(serde_json::Value::Null)
    }

    /// Like [`Message::to_value`], but says why a message that is valid
    /// JSON-RPC cannot become a value (e.g. a lone UTF-16 surrogate escape).
    pub fn try_value(&self) -> Result<serde_json::Value, String> {
        serde_json::from_slice(&self.bytes).map_err(|e| e.to_string())
    }

    /// Whether the message may hold `needle` once read as JSON: a cheap
    /// pre-check before parsing deeper (e.g. for `progressToken`). `false`
    /// only when it certainly does not: a JSON string may spell any
    /// character with a `\u` escape and a few with a short one (`\/` for
    /// `/`), and whoever reads the message next reads the unescaped key, so
    /// a fast path that skips on `false` must never miss a spelling.
    pub fn mentions(&self, needle: &[u8]) -> bool {
        let has = |n: &[u8]| memchr::memmem::find(&self.bytes, n).is_some();
        if has(needle) || has(b"\\u") {
            return true;
        }
        const SHORT: [(u8, u8); 8] = [
            (b'"', b'"'),
            (b'\\', b'\\'),
            (b'/', b'/'),
            (b'b', 0x08),
            (b'f', 0x0c),
            (b'n', b'\n'),
            (b'r', b'\r'),
            (b't', b'\t'),
        ];
        SHORT
            .iter()
            .any(|&(escape, spelled)| needle.contains(&spelled) && has(&[b'\\', escape]))
    }
}

fn is_safe_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.len() <= 16
        && digits.parse::<u64>().is_ok_and(|n| n < (1u64 << 53))
}

/// Split a body into its messages: one object, or (for protocol versions that
/// allow it) a batch array. Returns the raw element slices.
pub fn split_batch(body: &Bytes) -> Result<Option<Vec<Bytes>>, ParseError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first != Some(b'[') {
        return Ok(None);
    }
    let elements: Vec<&RawValue> =
        serde_json::from_slice(body).map_err(|e| ParseError::Json(e.to_string()))?;
    if elements.is_empty() {
        return Err(ParseError::Invalid("an empty batch is not a valid request"));
    }
    Ok(Some(
        elements
            .iter()
            .map(|raw| body.slice_ref(raw.get().as_bytes()))
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_never_misses_a_key_spelled_with_an_escape() {
        let msg = |text: &str| Message::parse(Bytes::from(text.to_string())).unwrap();
        let plain = msg(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a\nb":"c\"d"}}"#);
        assert!(plain.mentions(b"params"));
        // Nothing that could spell it: a fast path may skip.
        assert!(!plain.mentions(b"requestState"));
        assert!(!plain.mentions(b"io.modelcontextprotocol/clientCapabilities"));
        for (text, needle) in [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"request\u0053tate":"s"}}"#,
                "requestState",
            ),
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol\/clientCapabilities":{}}}}"#,
                "io.modelcontextprotocol/clientCapabilities",
            ),
        ] {
            let m = msg(text);
            let read = serde_json::to_string(&m.to_value()).unwrap();
            assert!(read.contains(needle), "the reader sees {needle}: {read}");
            assert!(m.mentions(needle.as_bytes()), "{text}");
        }
    }

    fn parse(s: &str) -> Result<Message, (ParseError, Option<RequestId>)> {
        Message::parse(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn classifies_the_three_kinds() {
        let req = parse(r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}"#).unwrap();
        assert_eq!(
            (req.kind, req.id.as_ref().unwrap().as_json(), req.method()),
            (Kind::Request, "7", "tools/list")
        );
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert_eq!(note.kind, Kind::Notification);
        let resp = parse(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#).unwrap();
        assert_eq!(
            (resp.kind, resp.id.unwrap().as_json()),
            (Kind::Response, "\"a\"")
        );
    }

    #[test]
    fn keeps_unknown_fields_and_bytes_untouched() {
        let text =
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"_meta":{"k":1}},"extra":true}"#;
        assert_eq!(&parse(text).unwrap().bytes[..], text.as_bytes());
    }

    #[test]
    fn rejects_malformed_input_with_the_right_code() {
        assert_eq!(parse("{nope").unwrap_err().0.code(), codes::PARSE_ERROR);
        assert_eq!(parse("[]").unwrap_err().0.code(), codes::INVALID_REQUEST);
        assert_eq!(parse("42").unwrap_err().0.code(), codes::INVALID_REQUEST);
        assert_eq!(
            parse(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#)
                .unwrap_err()
                .0
                .code(),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#)
                .unwrap_err()
                .0
                .code(),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)
                .unwrap_err()
                .0
                .code(),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","method":5}"#)
                .unwrap_err()
                .0
                .code(),
            codes::INVALID_REQUEST
        );
        assert_eq!(
            parse(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#)
                .unwrap_err()
                .0
                .code(),
            codes::INVALID_REQUEST
        );
        for id in ["1.5", "1e3", "9007199254740992"] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            assert_eq!(
                parse(&text).unwrap_err().0.code(),
                codes::INVALID_REQUEST,
                "{id}"
            );
        }
        assert!(parse(r#"{"jsonrpc":"2.0","id":-9007199254740991,"method":"x"}"#).is_ok());
    }

    #[test]
    fn invalid_request_keeps_the_id_when_it_can() {
        let (_, id) = parse(r#"{"jsonrpc":"1.0","id":9,"method":"x"}"#).unwrap_err();
        assert_eq!(id.unwrap().as_json(), "9");
    }

    #[test]
    fn builds_error_responses() {
        let id = RequestId::from_raw("3").unwrap();
        let v: serde_json::Value = serde_json::from_slice(&error_response(
            Some(&id),
            -32004,
            "blocked",
            Some(serde_json::json!({"reason":"r"})),
        ))
        .unwrap();
        assert_eq!(v["id"], 3);
        assert_eq!(v["error"]["code"], -32004);
        assert_eq!(v["error"]["data"]["reason"], "r");
    }

    #[test]
    fn splits_batches_without_copying() {
        let body = Bytes::from_static(
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"b"}]"#,
        );
        let parts = split_batch(&body).unwrap().unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parse(std::str::from_utf8(&parts[1]).unwrap())
                .unwrap()
                .method(),
            "b"
        );
        assert!(split_batch(&Bytes::from_static(b" {}")).unwrap().is_none());
        assert!(split_batch(&Bytes::from_static(b"[]")).is_err());
    }

    #[test]
    fn ids_are_canonical() {
        let id = |s: &str| RequestId::from_raw(s).unwrap();
        assert_eq!(id(r#""\u0031""#), id(r#""1""#));
        assert_eq!(id(r#""\u0031""#).as_json(), r#""1""#);
        assert_eq!(id(r#""mcp-w\u0061rden:1""#).as_json(), r#""mcp-warden:1""#);
        assert_eq!(id("-0"), id("0"));
        assert_ne!(id(r#""0""#), id("0"));
        assert_eq!(RequestId::number(7).as_number(), Some(7));
        assert_eq!(id(r#""7""#).as_number(), None);
        assert!(RequestId::from_raw("1.5").is_none() && RequestId::from_raw("{}").is_none());
    }

    #[test]
    fn the_id_is_spliced_in_place() {
        let m = parse("{\"result\":{\"x\":\"id\"},\"id\" : 17 ,\"jsonrpc\":\"2.0\"}").unwrap();
        let out = with_id(&m, &RequestId::from_raw("\"c\\u0031\"").unwrap()).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "{\"result\":{\"x\":\"id\"},\"id\" : \"c1\" ,\"jsonrpc\":\"2.0\"}"
        );
        let again = Message::parse(out).unwrap();
        assert_eq!(again.id.unwrap().as_json(), "\"c1\"");
    }

    #[test]
    fn editing_a_key_given_twice_leaves_one_copy() {
        let mut m = Members::parse(br#"{"name":"a","x":1,"name":"b"}"#).unwrap();
        m.set("name", raw_string("c"));
        assert_eq!(m.to_vec(), br#"{"name":"c","x":1}"#);
        let mut m = Members::parse(br#"{"auth":1,"x":1,"auth":2}"#).unwrap();
        assert_eq!(m.remove("auth").unwrap().get(), "1");
        assert_eq!(m.to_vec(), br#"{"x":1}"#);
    }

    #[test]
    fn rebuilding_replaces_the_id_and_keeps_the_rest_in_order() {
        let m = parse("{\"jsonrpc\":\"2.0\",\"id\":\"\\u0031\",\"method\":\"x\",\"params\":{\"b\":1e400,\"a\":\n-0},\"z\":[1]}").unwrap();
        let out = rebuild(&m, Some(&RequestId::number(9)), None).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"x\",\"params\":{\"b\":1e400,\"a\":\n-0},\"z\":[1]}"
        );
    }

    #[test]
    fn editing_params_keeps_every_other_byte_meaning() {
        let m = parse(r#"{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"a","arguments":{"n":123456789012345678901234567890,"z":-0}},"x":1}"#).unwrap();
        let edited = edit_params(&m, |p| {
            p.set("name", raw_string("b"));
        })
        .unwrap();
        let text = String::from_utf8(edited.bytes.to_vec()).unwrap();
        assert!(text.contains(r#""name":"b""#), "{text}");
        assert!(
            text.contains("123456789012345678901234567890") && text.contains(r#""z":-0"#),
            "{text}"
        );
        assert!(
            text.contains(r#""id":-0"#) && text.contains(r#""x":1"#),
            "{text}"
        );
    }
}
