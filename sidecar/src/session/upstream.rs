//! Facade → server: every request goes out under an id of the facade's own.
//!
//! A client's id never reaches the server: [`Session::forward`] writes the
//! request again under a fresh id (per session, monotonic) and the server's
//! answer is matched by that id alone. So two client ids a parser reads as
//! one (`"\u0031"` and `"1"`), a client id equal to one of the facade's own
//! requests, or two sessions sharing a server can never cross answers. The
//! client's `_meta.progressToken` is replaced the same way (by the request's
//! facade id), so progress is routed by the facade's id too.
//!
//! The answer always comes back to the pipeline step that forwarded the
//! request, which filters it and answers the client. A request the client
//! cancels, or that runs past its limit, keeps the step waiting (and its
//! concurrency slot taken) until the server answers it or a grace period
//! ends, and then the server process is recycled: a server that ignores
//! cancellation cannot pile up work behind the budget's back.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::{Outbound, Session};
use crate::jsonrpc::{self, Kind, Members, Message, ParamsEdit, RequestId};
use crate::upstream::Link;

/// What became of a forwarded request.
pub(crate) enum Forwarded {
    /// The server's answer (under the facade's id: the step answers the
    /// client under the client's).
    Answer(Message),
    /// It could not be delivered, or the server went away: why.
    Failed(String),
    /// Past its limit: the server was told to cancel it. The step answers
    /// the client, then settles the server's side with [`Lingering::settle`].
    TimedOut(Lingering),
    /// The client cancelled it: nothing is owed; settle the server's side.
    Cancelled(Lingering),
    /// The session ended, or the client cancelled before it was sent.
    Gone,
}

/// A request the client no longer waits for, still on the server.
pub(crate) struct Lingering {
    session: Arc<Session>,
    upstream: u64,
    answer: oneshot::Receiver<Result<Message, String>>,
}

impl Lingering {
    /// Wait (bounded by the cancel grace) until the server lets go of the
    /// request; past the grace, replace the server process.
    pub(crate) async fn settle(self) {
        let grace = self.session.app.limits.cancel_grace;
        if tokio::time::timeout(grace, self.answer).await.is_err() {
            self.session
                .state
                .lock()
                .unwrap()
                .outbound
                .remove(&self.upstream);
            self.session.app.metrics.upstream_recycled.inc();
            tracing::warn!(session = %self.session.id, grace_secs = grace.as_secs(), "the MCP server did not stop a cancelled request; recycling it");
            self.session.recycle.notify_one();
        }
    }
}

impl Session {
    /// Forward client request `client_id` (taken as `msg`) under a new id of
    /// the facade's own, with `edit` applied to its params, and wait up to
    /// `limit` for the server's answer.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        client_id: &RequestId,
        msg: &Message,
        edit: Option<ParamsEdit<'_>>,
        limit: Duration,
    ) -> Forwarded {
        let n = self.next_upstream.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        let (cancel_tx, mut cancel_rx) = oneshot::channel();
        let progress = {
            let mut st = self.state.lock().unwrap();
            let Some(p) = st.pending.get_mut(client_id) else {
                return Forwarded::Gone;
            };
            p.upstream = Some(n);
            let progress = p.progress_token.is_some();
            st.outbound.insert(
                n,
                Outbound {
                    answer: tx,
                    client: Some(client_id.clone()),
                    cancelled: Some(cancel_tx),
                },
            );
            progress
        };
        let id = RequestId::number(n);
        let bytes = match outgoing(msg, &id, progress, edit) {
            Ok(bytes) => bytes,
            Err(why) => {
                self.state.lock().unwrap().outbound.remove(&n);
                return Forwarded::Failed(format!("the request cannot be forwarded: {why}"));
            }
        };
        let out = Message::written(bytes, Kind::Request, Some(id), msg.method.clone());
        let deadline = tokio::time::Instant::now() + limit;
        // The limit covers sending too: over HTTP the answer may come back
        // with the send itself.
        let sent = tokio::time::timeout_at(deadline, self.send_upstream(out)).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => {
                self.state.lock().unwrap().outbound.remove(&n);
                return Forwarded::Failed(reason);
            }
            Err(_) => {
                self.cancel_upstream(n, "mcp-warden: the request exceeded its time limit")
                    .await;
                return Forwarded::TimedOut(self.lingering(n, rx));
            }
        }
        tokio::select! {
            answer = &mut rx => match answer {
                Ok(Ok(answer)) => Forwarded::Answer(answer),
                Ok(Err(reason)) => Forwarded::Failed(reason),
                Err(_) => Forwarded::Gone,
            },
            () = tokio::time::sleep_until(deadline) => {
                self.cancel_upstream(n, "mcp-warden: the request exceeded its time limit").await;
                Forwarded::TimedOut(self.lingering(n, rx))
            }
            Ok(()) = &mut cancel_rx => {
                // The client's cancellation was passed on when it came in.
                Forwarded::Cancelled(self.lingering(n, rx))
            }
        }
    }

    fn lingering(
        self: &Arc<Self>,
        upstream: u64,
        answer: oneshot::Receiver<Result<Message, String>>,
    ) -> Lingering {
        Lingering {
            session: self.clone(),
            upstream,
            answer,
        }
    }

    /// Send to the current link, waiting (bounded) while it restarts. An
    /// answer the link hands back directly (HTTP) is routed like any other.
    ///
    /// Messages leave in the order they were handed over: each takes a turn
    /// (a fair lock, so first come, first served) until it is queued on the
    /// link, which is what keeps `initialize`, `notifications/initialized`
    /// and what follows in order while a server starts or restarts. An HTTP
    /// exchange gives the turn back as soon as it starts (concurrent POSTs
    /// have no order), except for the handshake.
    pub(super) async fn send_upstream(&self, msg: Message) -> Result<(), String> {
        let turn = self.send_turn.lock().await;
        let mut rx = self.link.subscribe();
        let wait =
            tokio::time::timeout(self.app.limits.upstream_wait, rx.wait_for(|l| l.is_some()));
        let link =
            match wait.await {
                Ok(Ok(link)) => link.clone().expect("waited for Some"),
                Ok(Err(_)) => return Err("the session has ended".into()),
                Err(_) => return Err(
                    "the MCP server is not available (it is starting or restarting); retry shortly"
                        .into(),
                ),
            };
        drop(rx);
        let handshake = matches!(msg.method(), "initialize" | "notifications/initialized");
        let sent = if link.is_queued() || handshake {
            link.send(msg).await
        } else {
            drop(turn);
            link.send(msg).await
        };
        match sent {
            Ok(Some(answer)) => {
                self.server_response(answer);
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Tell the server to stop working on request `upstream` (its facade id).
    pub(super) async fn cancel_upstream(&self, upstream: u64, reason: &str) {
        let params = serde_json::json!({ "requestId": upstream, "reason": reason });
        if let Ok(cancel) =
            Message::parse(jsonrpc::notification("notifications/cancelled", &params))
        {
            let _ = self.send_upstream(cancel).await;
        }
    }

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
                tracing::debug!(session = %self.id, id = ?msg.id, "dropped an answer to no request of the facade's");
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

    /// A request of the facade's own to the server, on `link` directly (the
    /// handshake replay, before the link is published), else on the current
    /// link in turn (so it never overtakes the client's handshake).
    pub(crate) async fn internal_request(
        &self,
        link: Option<&Link>,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<Message, String> {
        let n = self.next_upstream.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.state.lock().unwrap().outbound.insert(
            n,
            Outbound {
                answer: tx,
                client: None,
                cancelled: None,
            },
        );
        let msg = Message::parse(jsonrpc::request(&RequestId::number(n), method, params))
            .map_err(|_| "internal request".to_string())?;
        let sent = match link {
            Some(link) => match link.send(msg).await {
                Ok(Some(answer)) => {
                    self.server_response(answer);
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e.to_string()),
            },
            None => self.send_upstream(msg).await,
        };
        if let Err(e) = sent {
            self.state.lock().unwrap().outbound.remove(&n);
            return Err(e);
        }
        let answer = tokio::time::timeout(self.app.limits.upstream_wait, rx).await;
        self.state.lock().unwrap().outbound.remove(&n);
        match answer {
            Ok(Ok(Ok(answer))) => Ok(answer),
            Ok(Ok(Err(reason))) => Err(reason),
            _ => Err(format!("the MCP server did not answer `{method}`")),
        }
    }
}

/// The request as the server gets it: the facade's id, the progress token
/// (when the client asked for progress) replaced by that id, `edit` applied.
fn outgoing(
    msg: &Message,
    id: &RequestId,
    progress: bool,
    edit: Option<ParamsEdit<'_>>,
) -> Result<Bytes, String> {
    if !progress && edit.is_none() {
        return jsonrpc::with_id(msg, id);
    }
    let mut edit = edit;
    let mut failed = None;
    let mut apply = |params: &mut Members<'_>| {
        if let Some(edit) = edit.as_mut() {
            edit(params);
        }
        if progress {
            let meta = params
                .get("_meta")
                .map(|m| Members::parse(m.get().as_bytes()))
                .transpose();
            match meta {
                Ok(meta) => {
                    let mut meta = meta.unwrap_or_default();
                    let token =
                        RawValue::from_string(id.as_json().to_string()).expect("an id is JSON");
                    meta.set("progressToken", token);
                    params.set("_meta", meta.to_raw());
                }
                Err(e) => failed = Some(e),
            }
        }
    };
    let bytes = jsonrpc::rebuild(msg, Some(id), Some(&mut apply))?;
    match failed {
        Some(e) => Err(e),
        None => Ok(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Message {
        Message::parse(Bytes::copy_from_slice(text.as_bytes())).unwrap()
    }

    #[test]
    fn the_server_sees_the_facades_id_and_token_and_everything_else_as_sent() {
        let msg = parse(
            r#"{"jsonrpc":"2.0","id":"\u0031","method":"tools/call","params":{"name":"x","_meta":{"progressToken":"client-token","traceparent":"00-a-b-01"},"arguments":{"n":1e400}}}"#,
        );
        let out = outgoing(&msg, &RequestId::number(42), true, None).unwrap();
        let text = std::str::from_utf8(&out).unwrap();
        assert_eq!(
            text,
            r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":42,"traceparent":"00-a-b-01"},"arguments":{"n":1e400}}}"#
        );
        assert!(!text.contains("client-token"));
    }

    #[test]
    fn edits_apply_and_a_request_without_progress_keeps_its_meta() {
        let msg = parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alias","_meta":{"k":1}}}"#,
        );
        let mut rename = |p: &mut Members| p.set("name", jsonrpc::raw_string("upstream"));
        let out = outgoing(&msg, &RequestId::number(1), false, Some(&mut rename)).unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upstream","_meta":{"k":1}}}"#
        );
    }
}
