//! Server → facade on one channel: every message the server sends, taken
//! off the link and routed — an answer to the request it names, progress
//! and messages tied to a request to that request's session, the rest to
//! the channel's listeners — and what the link could not deliver, failed.
//!
//! Where it sits: under [`super::Channel`], fed by the supervisor's pump
//! ([`super::supervise`]); the sessions filter what it routes for their
//! clients ([`crate::session`]'s `route`).

use std::sync::{Arc, Weak};

use bytes::Bytes;
use serde_json::Value;

use super::{Channel, Era};
use crate::jsonrpc::{self, Kind, Message, RequestId};
use crate::session::Session;

impl Channel {
    /// The server's answer to one of the facade's requests: to whoever sent
    /// it. An id the facade did not send (or no longer waits for) is dropped.
    pub(super) fn server_response(&self, msg: Message) {
        let waiter = msg
            .id
            .as_ref()
            .and_then(RequestId::as_number)
            .and_then(|n| self.state.lock().unwrap().outbound.remove(&n));
        match waiter {
            Some(out) => {
                let _ = out.answer.send(Ok(msg));
            }
            None => {
                self.app.metrics.upstream_unmatched.inc();
                tracing::debug!(channel = %self.name, id = ?msg.id, "dropped an answer to no request of the facade's");
            }
        }
    }

    /// The link could not deliver request `id` (the facade's): it fails.
    pub(super) fn fail_request(&self, id: &RequestId, reason: &str) {
        let waiter = id
            .as_number()
            .and_then(|n| self.state.lock().unwrap().outbound.remove(&n));
        if let Some(out) = waiter {
            let _ = out.answer.send(Err(reason.to_string()));
        }
    }

    /// The server went away: every request it had fails with `reason` (the
    /// steps waiting for them answer their clients).
    pub(super) fn fail_in_flight(&self, reason: &str) {
        let outbound = std::mem::take(&mut self.state.lock().unwrap().outbound);
        for (_, out) in outbound {
            let _ = out.answer.send(Err(reason.to_string()));
        }
    }

    /// The live sessions that use this channel.
    pub(super) fn listeners(&self) -> Vec<Arc<Session>> {
        let mut st = self.state.lock().unwrap();
        st.listeners.retain(|w| w.strong_count() > 0);
        st.listeners.iter().filter_map(Weak::upgrade).collect()
    }

    /// Take one message from the server and route it. `related` is the
    /// facade's id of the request it came with, when the transport knows
    /// (HTTP).
    pub(super) async fn server_message(self: &Arc<Self>, bytes: Bytes, related: Option<RequestId>) {
        let msg = match Message::parse(bytes) {
            Ok(msg) => msg,
            Err((e, _)) => {
                self.app.metrics.upstream_invalid.inc();
                tracing::warn!(channel = %self.name, error = %e, "dropped a message from the MCP server that is not JSON-RPC");
                return;
            }
        };
        let related = related.and_then(|id| id.as_number());
        match msg.kind {
            Kind::Response => self.server_response(msg),
            Kind::Request => {
                // A modern server asks through its results, never with requests.
                let session = match self.era {
                    Era::Legacy => self.request_owner(related),
                    Era::Modern => None,
                };
                match session {
                    Some(session) => session.server_request(self, msg, related).await,
                    None => self.refuse_server_request(&msg),
                }
            }
            Kind::Notification => {
                if msg.method() == "notifications/tools/list_changed" {
                    // Re-check pins and drift before any client hears of it.
                    let channel = self.clone();
                    let owner = subscription_id(&msg).and_then(|n| self.origin(n));
                    tokio::spawn(async move {
                        channel.refresh_tools().await;
                        match owner {
                            Some((session, client)) => {
                                session.server_notification(&msg, client).await
                            }
                            None => {
                                for session in channel.listeners() {
                                    session.server_notification(&msg, None).await;
                                }
                            }
                        }
                    });
                    return;
                }
                // Tied to a request: it came with it (HTTP), names its
                // progress token, or its subscription (modern).
                let owner = related
                    .or_else(|| progress_token(&msg))
                    .or_else(|| subscription_id(&msg))
                    .and_then(|n| self.origin(n));
                match owner {
                    Some((session, client)) => session.server_notification(&msg, client).await,
                    None if msg.method() == "notifications/progress" => {
                        self.app.metrics.dropped("server_notification");
                    }
                    None => {
                        for session in self.listeners() {
                            session.server_notification(&msg, None).await;
                        }
                    }
                }
            }
        }
    }

    /// Which session a legacy server's request is for: the request it came
    /// with (HTTP), else the newest request in flight (a stdio server
    /// cannot say; the newest is the likely cause), else the channel's
    /// session.
    pub(super) fn request_owner(&self, related: Option<u64>) -> Option<Arc<Session>> {
        let st = self.state.lock().unwrap();
        let by_request = related
            .and_then(|n| st.outbound.get(&n))
            .or_else(|| {
                st.outbound
                    .iter()
                    .filter(|(_, o)| o.client.is_some())
                    .max_by_key(|(n, _)| **n)
                    .map(|(_, o)| o)
            })
            .and_then(|o| o.session.upgrade());
        by_request.or_else(|| st.listeners.iter().find_map(Weak::upgrade))
    }

    /// Answer a server request nobody may see with -32601.
    pub(super) fn refuse_server_request(self: &Arc<Self>, msg: &Message) {
        let id = msg.id.clone().expect("requests have ids");
        let text = "the facade does not pass this request to the client";
        let answer =
            jsonrpc::error_response(Some(&id), jsonrpc::codes::METHOD_NOT_FOUND, text, None);
        self.send_later(answer);
    }
}

/// The progress token of a server progress notification, as the facade's
/// request id it was set to.
fn progress_token(msg: &Message) -> Option<u64> {
    if msg.method() != "notifications/progress" {
        return None;
    }
    msg.to_value()
        .pointer("/params/progressToken")
        .and_then(Value::as_u64)
}

/// The subscription a modern server's notification belongs to: the
/// facade's id of the `subscriptions/listen` that opened it.
fn subscription_id(msg: &Message) -> Option<u64> {
    if !msg.mentions(b"subscriptionId") {
        return None;
    }
    msg.to_value()
        .pointer("/params/_meta")
        .and_then(|m| m.get(crate::era::meta::SUBSCRIPTION_ID))
        .and_then(Value::as_u64)
}
