//! Writing JSON-RPC for the next hop: an object's members kept in the order
//! and the bytes they were written in ([`Members`]), a message rebuilt under
//! another id or with other `params` ([`rebuild`]), and the responses,
//! requests and notifications the facade makes itself.
//!
//! Where it sits: the other half of [`super`], which reads messages; every
//! message that leaves the facade is written here.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::{Message, RequestId};

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
