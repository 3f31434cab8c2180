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

    /// Whether the raw bytes contain `needle`: a cheap pre-check before
    /// parsing deeper (e.g. for `progressToken`).
    pub fn mentions(&self, needle: &[u8]) -> bool {
        memchr::memmem::find(&self.bytes, needle).is_some()
    }
}

fn is_safe_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && digits.len() <= 16
        && digits.parse::<u64>().is_ok_and(|n| n < (1u64 << 53))
}

/// The members of a JSON object in the order written, each value as its
/// raw JSON text, borrowed from the text it was read from (nothing is
/// copied until it is written out): edit one member and write the object
/// back with every other byte of meaning kept.
#[derive(Debug, Default)]
pub struct Members<'a>(Vec<(Cow<'a, str>, Val<'a>)>);

/// A member's value: as read, or replaced.
#[derive(Debug)]
enum Val<'a> {
    Read(&'a RawValue),
    Set(Box<RawValue>),
}

impl Val<'_> {
    fn raw(&self) -> &RawValue {
        match self {
            Val::Read(v) => v,
            Val::Set(v) => v,
        }
    }
}

/// Edits a message's `params` on its way to the next hop.
pub type ParamsEdit<'e> = &'e mut (dyn FnMut(&mut Members<'_>) + Send);

impl<'a> Members<'a> {
    pub fn parse(text: &'a [u8]) -> Result<Members<'a>, String> {
        serde_json::from_slice(text).map_err(|e| e.to_string())
    }

    pub fn get(&self, key: &str) -> Option<&RawValue> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.raw())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replace `key`'s value in place (every copy of the key, should the
    /// text hold it twice), or append it.
    pub fn set(&mut self, key: &str, value: Box<RawValue>) {
        match self.0.iter().position(|(k, _)| k == key) {
            Some(at) => {
                self.0[at].1 = Val::Set(value);
                let mut i = 0;
                self.0.retain(|(k, _)| {
                    i += 1;
                    i - 1 == at || k != key
                });
            }
            None => self.0.push((Cow::Owned(key.to_string()), Val::Set(value))),
        }
    }

    /// Take `key` out (every copy of it); the first copy's value.
    pub fn remove(&mut self, key: &str) -> Option<Box<RawValue>> {
        let at = self.0.iter().position(|(k, _)| k == key)?;
        let value = match self.0.remove(at).1 {
            Val::Read(v) => v.to_owned(),
            Val::Set(v) => v,
        };
        self.0.retain(|(k, _)| k != key);
        Some(value)
    }

    pub fn to_raw(&self) -> Box<RawValue> {
        RawValue::from_string(String::from_utf8(self.to_vec()).expect("JSON is UTF-8"))
            .expect("members make an object")
    }

    pub fn to_vec(&self) -> Vec<u8> {
        let len = self
            .0
            .iter()
            .map(|(k, v)| k.len() + v.raw().get().len() + 4)
            .sum::<usize>();
        let mut out = Vec::with_capacity(len + 2);
        out.push(b'{');
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut out, k.as_ref()).expect("strings serialize");
            out.push(b':');
            out.extend_from_slice(v.raw().get().as_bytes());
        }
        out.push(b'}');
        out
    }
}

/// An object key, borrowed when the text has no escapes in it.
struct Key<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push((k, Val::Read(v)));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Write `msg` again for the next hop: its `id` replaced by `id` (when
/// given), `params` edited by `edit` (when given), every other member as
/// it was, in its order.
pub fn rebuild(
    msg: &Message,
    id: Option<&RequestId>,
    edit: Option<ParamsEdit<'_>>,
) -> Result<Bytes, String> {
    rebuild_bytes(&msg.bytes, id, edit)
}

/// [`rebuild`] on the bytes of a message.
pub fn rebuild_bytes(
    bytes: &[u8],
    id: Option<&RequestId>,
    edit: Option<ParamsEdit<'_>>,
) -> Result<Bytes, String> {
    let mut top = Members::parse(bytes)?;
    if let Some(id) = id {
        top.set(
            "id",
            RawValue::from_string(id.as_json().to_string()).map_err(|e| e.to_string())?,
        );
    }
    if let Some(edit) = edit {
        let edited = {
            let mut params = match top.get("params") {
                Some(raw) => Members::parse(raw.get().as_bytes())?,
                None => Members::default(),
            };
            edit(&mut params);
            params.to_raw()
        };
        top.set("params", edited);
    }
    Ok(Bytes::from(top.to_vec()))
}

/// The message under `id`, everything else as it was: the id's bytes
/// spliced out and in (one copy, no second read), or, for a message the
/// facade wrote itself, [`rebuild`].
pub fn with_id(msg: &Message, id: &RequestId) -> Result<Bytes, String> {
    let Some((start, end)) = msg.id_span else {
        return rebuild(msg, Some(id), None);
    };
    let new = id.as_json().as_bytes();
    let mut out = Vec::with_capacity(msg.bytes.len() - (end - start) + new.len());
    out.extend_from_slice(&msg.bytes[..start]);
    out.extend_from_slice(new);
    out.extend_from_slice(&msg.bytes[end..]);
    Ok(Bytes::from(out))
}

/// The message with `params` replaced by `params` (raw JSON), and its `id`
/// by `id` when given.
pub fn with_params(
    msg: &Message,
    id: Option<&RequestId>,
    params: Box<RawValue>,
) -> Result<Bytes, String> {
    let mut top = Members::parse(&msg.bytes)?;
    if let Some(id) = id {
        top.set(
            "id",
            RawValue::from_string(id.as_json().to_string()).map_err(|e| e.to_string())?,
        );
    }
    top.set("params", params);
    Ok(Bytes::from(top.to_vec()))
}

/// Change `params` of a message without touching anything else: every other
/// member (and every value inside `params` not edited) keeps its exact text,
/// so numbers like `-0` or `1e400` reach the server as the client wrote them.
pub fn edit_params(
    msg: &Message,
    mut edit: impl FnMut(&mut Members<'_>) + Send,
) -> Result<Message, String> {
    let bytes = rebuild(msg, None, Some(&mut edit))?;
    Message::parse(bytes).map_err(|(e, _)| e.to_string())
}

/// A JSON string value as raw JSON.
pub fn raw_string(s: &str) -> Box<RawValue> {
    serde_json::value::to_raw_value(s).expect("strings serialize")
}

/// Build an error response. `id` is raw JSON (`null` when unknown).
pub fn error_response(
    id: Option<&RequestId>,
    code: i64,
    message: &str,
    data: Option<serde_json::Value>,
) -> Bytes {
    let mut error = serde_json::json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    let id_text = id.map(RequestId::as_json).unwrap_or("null");
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{id_text},"error":{error}}}"#
    ))
}

/// Build a success response from a raw `result` JSON text.
pub fn result_response(id: &RequestId, result: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#,
        id.as_json()
    ))
}

/// Build a request with an explicit raw id and params value.
pub fn request(id: &RequestId, method: &str, params: &serde_json::Value) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":{params}}}"#,
        id.as_json()
    ))
}

/// Build a notification.
pub fn notification(method: &str, params: &serde_json::Value) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","method":"{method}","params":{params}}}"#
    ))
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
