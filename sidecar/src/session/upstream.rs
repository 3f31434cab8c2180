//! Facade → server: every request goes out under an id of the facade's own.
//!
//! A client's id never reaches the server: [`Session::forward`] writes the
//! request again under a fresh id (per channel, monotonic) and the server's
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

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::channel::{Channel, Outbound};
use super::Session;
use crate::jsonrpc::{self, Kind, Members, Message, ParamsEdit, RequestId};

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
    channel: Arc<Channel>,
    upstream: u64,
    answer: oneshot::Receiver<Result<Message, String>>,
}

impl Lingering {
    /// Wait (bounded by the cancel grace) until the server lets go of the
    /// request; past the grace, replace the server process.
    pub(crate) async fn settle(self) {
        let grace = self.channel.app.limits.cancel_grace;
        if tokio::time::timeout(grace, self.answer).await.is_err() {
            self.channel.unregister(self.upstream);
            self.channel.app.metrics.upstream_recycled.inc();
            tracing::warn!(
                grace_secs = grace.as_secs(),
                "the MCP server did not stop a cancelled request; recycling it"
            );
            self.channel.recycle();
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
        let channel = &self.channel;
        let n = channel.mint();
        let (tx, mut rx) = oneshot::channel();
        let (cancel_tx, mut cancel_rx) = oneshot::channel();
        let progress = {
            let mut st = self.state.lock().unwrap();
            let Some(p) = st.pending.get_mut(client_id) else {
                return Forwarded::Gone;
            };
            p.upstream = Some(n);
            p.progress_token.is_some()
        };
        channel.register(
            n,
            Outbound {
                answer: tx,
                session: Arc::downgrade(self),
                client: Some(client_id.clone()),
                cancelled: Some(cancel_tx),
            },
        );
        let id = RequestId::number(n);
        let bytes = match outgoing(msg, &id, progress, edit) {
            Ok(bytes) => bytes,
            Err(why) => {
                channel.unregister(n);
                return Forwarded::Failed(format!("the request cannot be forwarded: {why}"));
            }
        };
        let out = Message::written(bytes, Kind::Request, Some(id), msg.method.clone());
        let deadline = tokio::time::Instant::now() + limit;
        // The limit covers sending too: over HTTP the answer may come back
        // with the send itself.
        let sent = tokio::time::timeout_at(deadline, channel.send(out)).await;
        match sent {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => {
                channel.unregister(n);
                return Forwarded::Failed(reason);
            }
            Err(_) => {
                channel
                    .cancel(n, "mcp-warden: the request exceeded its time limit")
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
                channel.cancel(n, "mcp-warden: the request exceeded its time limit").await;
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
            channel: self.channel.clone(),
            upstream,
            answer,
        }
    }

    /// Send a message of the session's (a notification, an answer) on its channel.
    pub(super) async fn send_upstream(&self, msg: Message) -> Result<(), String> {
        self.channel.send(msg).await
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
