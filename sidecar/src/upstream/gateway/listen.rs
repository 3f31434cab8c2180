//! Callers' subscriptions (`subscriptions/listen`) through the gateway: one
//! caller's subscription is held at every backend, as that caller, under the
//! facade's id; what each backend sends on it (its acknowledgement, its list
//! changes) comes up as it came. The resources a caller subscribes to are
//! the gateway's URIs (`{backend}+{uri}`): each backend is asked for its own
//! URIs only, as it knows them, and its `notifications/resources/updated`
//! comes up under the gateway's URI again ([`super::pump`]). The gateway
//! acknowledges the subscription itself, once, not once per backend.
//!
//! Where it sits: part of the gateway link ([`super`]). A backend that goes
//! away ends its part of every subscription, but the caller's subscription
//! is the gateway's and lives on: each backend's part is held again (after
//! a pause that grows while the backend stays away) until the facade ends the
//! subscription ([`super::abort`]), so a backend that comes back reaches the
//! callers listening again. Meanwhile the health watcher ([`super::health`])
//! tells them the backend's names went and came back. A backend ends its
//! part when the assertion it was held with expires; it is held again with
//! a fresh one, but never past the caller's own credential: no assertion is
//! minted for a caller whose token has expired.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::assertion::Principal;
use super::names::Names;
use super::{http, State};
use tokio::sync::mpsc::error::TrySendError;

use crate::jsonrpc::{Message, RequestId};
use crate::upstream::{Credential, LinkEvent, UpstreamError};

/// The first pause before a backend's part is held again, and the longest.
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// The subscriptions callers hold, by the facade's id.
#[derive(Default)]
pub(super) struct Live(Mutex<HashSet<RequestId>>);

impl Live {
    pub(super) fn holds(&self, id: &RequestId) -> bool {
        self.0.lock().unwrap().contains(id)
    }

    pub(super) fn end(&self, id: &RequestId) {
        self.0.lock().unwrap().remove(id);
    }

    fn start(&self, id: RequestId) {
        self.0.lock().unwrap().insert(id);
    }
}

/// Hold `msg`, a caller's `subscriptions/listen`, at every backend. Nothing
/// is answered here: the subscription's stream is the answer.
pub(super) fn hold(
    state: &Arc<State>,
    msg: Message,
    credential: Option<&Credential>,
) -> Result<Option<Message>, UpstreamError> {
    let Some(id) = msg.id.clone() else {
        return Ok(None);
    };
    let who = credential.and_then(Credential::principal).cloned();
    let credential = credential.cloned();
    if credential.as_ref().is_some_and(|c| c.caller_expired(now())) {
        return Err(UpstreamError::Refused(
            "the caller's credential has expired".into(),
        ));
    }
    // A caller the gateway may not vouch for is refused at once, not at
    // every backend in turn.
    if let (Some(who), Some(signer)) = (&who, &state.gateway().signer) {
        let until = credential.as_ref().and_then(Credential::caller_expires_at);
        for backend in &state.gateway().backends {
            signer
                .mint(who, &backend.name, until)
                .map_err(UpstreamError::Refused)?;
        }
    }
    state.listening.start(id.clone());
    let params = msg
        .to_value()
        .get_mut("params")
        .map(Value::take)
        .unwrap_or_else(|| json!({}));
    // The subscription is the gateway's: it acknowledges it once, first on
    // the stream, with what it serves — every change type the caller asked
    // for, and the resources a backend of it serves (each backend's own
    // acknowledgement is dropped: [`super::pump`]).
    let ack = acknowledgement(&state.gateway().names.lock().unwrap(), &id, &params);
    let event = LinkEvent::Message {
        bytes: ack,
        related: Some(id.clone()),
    };
    if let Err(TrySendError::Full(event)) = state.up.try_send(event) {
        let up = state.up.clone();
        tokio::spawn(async move { up.send(event).await });
    }
    for b in 0..state.links.len() {
        let own = own_resources(&state.gateway().names.lock().unwrap(), b, &params);
        let msg = match own {
            Some(params) => super::with_params(&msg, &params).map_err(UpstreamError::Refused)?,
            None => msg.clone(),
        };
        let part = Part {
            state: Arc::downgrade(state),
            b,
            id: id.clone(),
            msg,
            who: who.clone(),
            credential: credential.clone(),
        };
        tokio::spawn(part.run());
    }
    Ok(None)
}

/// Seconds since the epoch.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `params` of a listen with the resource subscriptions cut to backend
/// `b`'s, as `b` knows them (`None`: the listen names no resources).
fn own_resources(names: &Names, b: usize, params: &Value) -> Option<Value> {
    let uris = params
        .pointer("/notifications/resourceSubscriptions")?
        .as_array()?;
    let own: Vec<Value> = uris
        .iter()
        .filter_map(Value::as_str)
        .filter_map(|u| names.route_uri(u))
        .filter(|(to, _)| *to == b)
        .map(|(_, own)| Value::String(own))
        .collect();
    let mut params = params.clone();
    let filter = params.pointer_mut("/notifications")?.as_object_mut()?;
    if own.is_empty() {
        filter.remove("resourceSubscriptions");
    } else {
        filter.insert("resourceSubscriptions".into(), Value::Array(own));
    }
    Some(params)
}

/// The gateway's acknowledgement of subscription `id` with `params`: the
/// change types asked for, and the resources that name one of its backends.
fn acknowledgement(names: &Names, id: &RequestId, params: &Value) -> bytes::Bytes {
    let asked = params.get("notifications");
    let mut honored = serde_json::Map::new();
    for key in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if asked.and_then(|a| a.get(key)).and_then(Value::as_bool) == Some(true) {
            honored.insert(key.into(), Value::Bool(true));
        }
    }
    let uris: Vec<Value> = asked
        .and_then(|a| a.get("resourceSubscriptions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|u| u.as_str().is_some_and(|u| names.route_uri(u).is_some()))
        .cloned()
        .collect();
    if !uris.is_empty() {
        honored.insert("resourceSubscriptions".into(), Value::Array(uris));
    }
    let tag: Value = serde_json::from_str(id.as_json()).unwrap_or(Value::Null);
    let params = json!({
        "notifications": honored,
        "_meta": { crate::era::meta::SUBSCRIPTION_ID: tag },
    });
    crate::jsonrpc::notification("notifications/subscriptions/acknowledged", &params)
}

/// Backend `b`'s `notifications/resources/updated` under the gateway's URI
/// (`None`: it names no URI; the facade's filter drops it).
pub(super) fn gateway_uri(names: &Names, b: usize, msg: &Message) -> Option<bytes::Bytes> {
    let mut value = msg.to_value();
    let uri = value.pointer("/params/uri")?.as_str()?;
    value["params"]["uri"] = Value::String(names.exposed_uri(b, uri));
    Some(bytes::Bytes::from(value.to_string()))
}

/// One backend's part of one subscription.
struct Part {
    state: Weak<State>,
    b: usize,
    id: RequestId,
    msg: Message,
    who: Option<Principal>,
    /// The caller's: when it expires, nothing more is minted for the part.
    credential: Option<Credential>,
}

impl Part {
    async fn run(self) {
        let mut pause = FIRST_PAUSE;
        loop {
            let Some((link, minted, name)) = self.next() else {
                return;
            };
            let started = Instant::now();
            match http::hold(&link, self.msg.clone(), minted.as_ref()).await {
                // A backend that refuses holds no subscription, now or later.
                Ok(Some(answer)) if answer.is_error => {
                    tracing::debug!(backend = %name, "gateway: a backend refused subscriptions/listen");
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::debug!(backend = %name, error = %e, "gateway: subscriptions/listen at a backend ended")
                }
            }
            drop(link);
            // The part's stream has ended (`hold` waits for that). One held
            // for a while ended because its backend went or its assertion
            // expired: hold it again soon; one that keeps failing, less and
            // less often.
            if started.elapsed() > LONGEST_PAUSE {
                pause = FIRST_PAUSE;
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(LONGEST_PAUSE);
        }
    }

    /// The link, a fresh assertion and the backend's name, while the
    /// subscription is live, the caller's credential good and the gateway
    /// link up.
    fn next(&self) -> Option<(Arc<http::State>, Option<Credential>, String)> {
        let state = self.state.upgrade()?;
        if !state.listening.holds(&self.id) {
            return None;
        }
        if self
            .credential
            .as_ref()
            .is_some_and(|c| c.caller_expired(now()))
        {
            tracing::debug!(
                "gateway: a caller's credential expired; its subscription is not held again"
            );
            return None;
        }
        let gateway = state.gateway();
        let name = gateway.backends[self.b].name.clone();
        let minted = match (&self.who, &gateway.signer) {
            (Some(who), Some(signer)) => {
                let until = self
                    .credential
                    .as_ref()
                    .and_then(Credential::caller_expires_at);
                Some(signer.mint(who, &name, until).ok()?)
            }
            _ => None,
        };
        Some((state.links[self.b].clone(), minted, name))
    }
}

#[cfg(test)]
#[path = "listen_tests.rs"]
mod tests;
