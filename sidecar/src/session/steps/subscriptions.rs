//! `subscriptions/listen` (modern clients): a long-lived stream of the change
//! notifications a client asked for, each one something this caller may see.
//!
//! The filter is cut first: list-change types pass as asked; resource
//! subscriptions keep only the URIs the resource rules let this caller read.
//! Then:
//! - a modern server gets the cut filter as its own `subscriptions/listen`
//!   (under the facade's id); its acknowledgment and notifications come back
//!   tagged with that id, are filtered again (`route`), and reach the client
//!   tagged with the client's own subscription id;
//! - a legacy server has no subscriptions: the facade acknowledges itself
//!   (the types the server's capabilities can produce) and passes on the
//!   change notifications the server sends unprompted, filtered the same way.
//!
//! The stream ends when the client goes (the server's subscription is
//! cancelled with it), the server ends the subscription (its final result
//! is the client's), the credential the caller opened it with expires (a
//! caller whose token is no longer good must hear nothing more), or the
//! facade stops after its drain. In the last two the facade ends it as a
//! server does (the spec's graceful closure: a `complete` result under the
//! subscription's id) and counts and audits the end; on expiry it cancels
//! the server's side, and the client listens again with a fresh token; on
//! a stop the client listens again through another replica. A credential
//! without an expiry (a static token) holds it as long as the rest allows.
//! A cancelled listen waits for no answer from the server (a cancelled
//! request gets none), so the server is never recycled for it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::era;
use crate::gates::Request;
use crate::jsonrpc::{self, Members};
use crate::metrics::{HeldStream, StreamEnd};
use crate::session::channel::Era;
use crate::session::{Forwarded, Session};

/// How long a subscription may stay open (a client that wants longer opens a new one).
const LONGEST: Duration = Duration::from_secs(24 * 3600);

pub async fn listen(session: &Arc<Session>, req: Request) {
    let asked = req
        .params()
        .get("notifications")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let filter = cut_filter(&asked, |uri| {
        req.policy.compiled.decide_resource(uri, req.role).is_ok()
    });
    session.start_subscription(&req.id, filter.clone());
    let (limit, expires) = held_for(req.caller.credential_left());
    match session.channel.era {
        Era::Modern => {
            let raw = serde_json::value::to_raw_value(&filter).expect("values serialize");
            let mut edit = |p: &mut Members<'_>| p.set("notifications", raw.clone());
            let forward = session.forward(&req.id, &req.msg, Some(&mut edit), limit);
            let ended = tokio::select! {
                ended = forward => ended,
                // The facade stops: the client hears a graceful end and
                // listens again elsewhere; the server's side goes with the
                // facade's link to it.
                () = session.app.stopping.cancelled() => {
                    return end_gracefully(session, &req, StreamEnd::Shutdown);
                }
            };
            match ended {
                // Past the caller's credential: the server was told to
                // cancel its side; the client hears the subscription end.
                // A listen is no work to wait out: the server owes no answer
                // once told (a stdio server told with notifications/cancelled
                // sends none), and one shared by every caller must not be
                // recycled for keeping quiet.
                Forwarded::TimedOut(lingering) if expires => {
                    end_gracefully(session, &req, StreamEnd::CredentialExpired);
                    lingering.release()
                }
                Forwarded::Answer(answer) => {
                    // The server ended the subscription: its result is ours,
                    // under the client's subscription id.
                    let bytes = jsonrpc::with_id(&answer, &req.id)
                        .ok()
                        .and_then(|b| retag_result(&b, &req.id))
                        .unwrap_or(answer.bytes);
                    session.answer_call(&req.id, bytes);
                }
                Forwarded::Failed(reason) => {
                    session.answer_call(&req.id, super::forward::upstream_failed(&req, &reason))
                }
                Forwarded::TimedOut(lingering) | Forwarded::Cancelled(lingering) => {
                    lingering.release()
                }
                Forwarded::Gone => {}
            }
        }
        Era::Legacy => {
            // The facade is the subscription: acknowledge what a legacy
            // server can produce, then wait until the client goes. The
            // bridge's session subscribes to the resources asked for (and
            // stays subscribed while the bridge lives: other subscriptions
            // of the caller's may share them).
            let served = legacy_served(&filter, session);
            if let Some(uris) = served
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
            {
                for uri in uris {
                    let params = json!({ "uri": uri });
                    if let Err(e) = session
                        .channel
                        .internal_request(None, "resources/subscribe", &params)
                        .await
                    {
                        tracing::info!(error = %e, "the legacy MCP server did not take a resource subscription");
                    }
                }
            }
            session.acknowledge_subscription(&req.id, served);
            let until = session.wait_until_answered(&req.id);
            let expiry = async {
                if expires {
                    tokio::time::sleep(limit).await
                } else {
                    std::future::pending().await
                }
            };
            tokio::select! {
                () = until => {}
                () = expiry => end_gracefully(session, &req, StreamEnd::CredentialExpired),
                () = session.app.stopping.cancelled() => {
                    end_gracefully(session, &req, StreamEnd::Shutdown)
                }
            }
        }
    }
    session.observe("subscriptions/listen", "ok", req.started);
}

/// How long a subscription may stay open, given how long the caller's
/// credential is still good, and whether it is the credential that ends it.
fn held_for(credential_left: Option<Duration>) -> (Duration, bool) {
    match credential_left {
        Some(left) if left < LONGEST => (left, true),
        _ => (LONGEST, false),
    }
}

/// End subscription `req` on the facade's initiative (its caller's
/// credential expired, or the facade stops): the spec's graceful closure (a
/// `complete` result carrying the subscription's id), counted and audited
/// without content.
fn end_gracefully(session: &Session, req: &Request, why: StreamEnd) {
    let subscription: Value = serde_json::from_str(req.id.as_json()).unwrap_or_default();
    let result = json!({
        "resultType": "complete",
        "_meta": { era::meta::SUBSCRIPTION_ID: subscription },
    });
    session.answer_call(
        &req.id,
        jsonrpc::result_response(&req.id, &result.to_string()),
    );
    crate::gates::audit::stream_ended(
        session.trail(),
        HeldStream::Listen,
        Some(&req.id),
        &req.caller,
        why,
        req.started,
    );
}

/// The filter a caller may have: list-change types as asked, resource
/// subscriptions only for URIs `readable` allows.
fn cut_filter(asked: &Value, readable: impl Fn(&str) -> bool) -> Value {
    let mut out = Map::new();
    for key in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if asked.get(key).and_then(Value::as_bool) == Some(true) {
            out.insert(key.into(), json!(true));
        }
    }
    if let Some(uris) = asked.get("resourceSubscriptions").and_then(Value::as_array) {
        let kept: Vec<Value> = uris
            .iter()
            .filter(|u| u.as_str().is_some_and(&readable))
            .cloned()
            .collect();
        if !kept.is_empty() {
            out.insert("resourceSubscriptions".into(), Value::Array(kept));
        }
    }
    Value::Object(out)
}

/// What a legacy server can notify, per its capabilities.
fn legacy_served(filter: &Value, session: &Session) -> Value {
    let caps = session
        .app
        .upstream
        .get()
        .map(|i| i.capabilities.clone())
        .unwrap_or_default();
    let has = |path: &str| caps.pointer(path).and_then(Value::as_bool) == Some(true);
    let mut out = Map::new();
    for (key, path) in [
        ("toolsListChanged", "/tools/listChanged"),
        ("promptsListChanged", "/prompts/listChanged"),
        ("resourcesListChanged", "/resources/listChanged"),
    ] {
        if filter.get(key).is_some() && has(path) {
            out.insert(key.into(), json!(true));
        }
    }
    if let (Some(uris), true) = (
        filter.get("resourceSubscriptions"),
        has("/resources/subscribe"),
    ) {
        out.insert("resourceSubscriptions".into(), uris.clone());
    }
    Value::Object(out)
}

/// The server's final listen result under the client's subscription id.
fn retag_result(bytes: &[u8], client: &jsonrpc::RequestId) -> Option<bytes::Bytes> {
    let mut value: Value = serde_json::from_slice(bytes).ok()?;
    if let Some(meta) = value
        .pointer_mut("/result/_meta")
        .and_then(Value::as_object_mut)
    {
        let id: Value = serde_json::from_str(client.as_json()).ok()?;
        meta.insert(era::meta::SUBSCRIPTION_ID.into(), id);
    }
    serde_json::to_vec(&value).ok().map(bytes::Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiring_credential_bounds_the_subscription() {
        assert_eq!(held_for(None), (LONGEST, false));
        let soon = Duration::from_secs(5);
        assert_eq!(held_for(Some(soon)), (soon, true));
        assert_eq!(held_for(Some(Duration::ZERO)), (Duration::ZERO, true));
        // A credential good for longer than a subscription may last changes nothing.
        assert_eq!(held_for(Some(LONGEST * 2)), (LONGEST, false));
    }

    #[test]
    fn the_filter_keeps_only_what_the_caller_may_see() {
        let asked = json!({"toolsListChanged": true, "promptsListChanged": false,
            "resourceSubscriptions": ["note://public", "note://private", 7]});
        let cut = cut_filter(&asked, |u| u == "note://public");
        assert_eq!(
            cut,
            json!({"toolsListChanged": true, "resourceSubscriptions": ["note://public"]})
        );
    }
}
