//! Server → client routing: which stream each server message goes on.
//!
//! - A response goes to the stream of its request (and ends the request).
//! - A message the transport tied to a request (HTTP upstream: it came on that
//!   request's SSE stream) goes to that request's stream.
//! - `notifications/progress` goes to the request that set its progress token.
//! - List-changed and resource-updated notifications belong to no request:
//!   the standalone stream, else the newest request's stream.
//! - Any other server request or notification (elicitation, sampling, roots,
//!   logging): a stdio server cannot say what it relates to, so it goes to the
//!   newest request in flight (the likely cause), else the standalone stream.
//! - With nowhere to go, it waits in a bounded backlog for the next GET.

use std::sync::Arc;

use bytes::Bytes;

use super::{push, push_item, AnswerRoute, Session, State, BACKLOG_DEPTH};
use crate::jsonrpc::{codes, Kind, Message, RequestId};

impl Session {
    /// Take one message from the server.
    pub(super) async fn server_message(self: &Arc<Self>, bytes: Bytes, related: Option<RequestId>) {
        let msg = match Message::parse(bytes) {
            Ok(msg) => msg,
            Err((e, _)) => {
                self.app.metrics.upstream_invalid.inc();
                tracing::warn!(session = %self.id, error = %e, "dropped a message from the MCP server that is not JSON-RPC");
                return;
            }
        };
        match msg.kind {
            Kind::Response => self.server_response(msg),
            Kind::Request if msg.id.as_ref().is_some_and(RequestId::is_reserved) => {
                let id = msg.id.clone().expect("checked");
                let bytes = crate::jsonrpc::error_response(
                    Some(&id),
                    codes::INVALID_REQUEST,
                    "reserved request id",
                    None,
                );
                // Not from this task: it pumps the answers a send in turn may be waiting for.
                if let Ok(answer) = Message::parse(bytes) {
                    let session = self.clone();
                    tokio::spawn(async move {
                        let _ = session.send_upstream(answer).await;
                    });
                }
            }
            Kind::Notification if msg.method() == "notifications/tools/list_changed" => {
                // Re-check pins and drift before the client hears of it.
                let session = self.clone();
                tokio::spawn(async move {
                    session.refresh_tools().await;
                    session.server_initiated(msg, related);
                });
            }
            _ => self.server_initiated(msg, related),
        }
    }

    pub(super) fn server_response(&self, msg: Message) {
        let id = msg.id.clone().expect("responses have ids");
        let mut st = self.state.lock().unwrap();
        if id.is_reserved() {
            if let Some(tx) = st.internal.remove(&id) {
                let _ = tx.send(msg);
            }
            return;
        }
        let route = st.pending.get_mut(&id).map(|p| &mut p.route);
        match route {
            Some(AnswerRoute::Server) => {}
            Some(route @ AnswerRoute::Intercept(_)) => {
                // The pipeline filters it and answers (and records the metrics).
                let AnswerRoute::Intercept(tx) = std::mem::replace(route, AnswerRoute::Pipeline)
                else {
                    unreachable!("matched above")
                };
                let _ = tx.send(msg);
                return;
            }
            // Cancelled by the client, never sent to the server (still in the
            // pipeline), timed out, or an id the server made up.
            Some(AnswerRoute::Pipeline) | None => {
                self.app.metrics.upstream_unmatched.inc();
                tracing::debug!(session = %self.id, ?id, "dropped a response nobody is waiting for");
                return;
            }
        }
        let p = st.pending.remove(&id).expect("matched above");
        if &*p.method == "initialize" && !msg.is_error {
            let value = msg.to_value();
            st.protocol_version = value
                .pointer("/result/protocolVersion")
                .and_then(|v| v.as_str())
                .map(str::to_string);
        }
        let outcome = if msg.is_error { "error" } else { "ok" };
        self.app
            .metrics
            .observe_request(&p.method, outcome, p.started.elapsed());
        push(&mut st, p.stream, msg.bytes, true);
    }

    fn server_initiated(&self, msg: Message, related: Option<RequestId>) {
        let mut st = self.state.lock().unwrap();
        let target = related
            .and_then(|id| st.pending.get(&id).map(|p| p.stream))
            .or_else(|| progress_target(&st, &msg))
            .or_else(|| match msg.method() {
                m if m.ends_with("/list_changed") || m == "notifications/resources/updated" => {
                    live_standalone(&st).or_else(|| newest_request(&st))
                }
                _ => newest_request(&st).or_else(|| live_standalone(&st)),
            });
        match target {
            Some(stream) => {
                let droppable = msg.kind == Kind::Notification;
                if !push_item(&mut st, stream, msg.bytes, false, droppable) {
                    self.app.metrics.notifications_dropped.inc();
                }
            }
            None => {
                if st.backlog.len() == BACKLOG_DEPTH {
                    st.backlog.pop_front();
                    self.app.metrics.backlog_dropped.inc();
                }
                st.backlog.push_back(msg.bytes);
            }
        }
    }
}

fn progress_target(st: &State, msg: &Message) -> Option<u64> {
    if msg.method() != "notifications/progress" {
        return None;
    }
    let token = msg
        .to_value()
        .pointer("/params/progressToken")
        .map(|t| t.to_string())?;
    st.pending
        .values()
        .find(|p| p.progress_token.as_deref() == Some(token.as_str()))
        .map(|p| p.stream)
}

fn newest_request(st: &State) -> Option<u64> {
    st.pending
        .values()
        .filter(|p| st.streams.contains_key(&p.stream))
        .max_by_key(|p| p.started)
        .map(|p| p.stream)
}

fn live_standalone(st: &State) -> Option<u64> {
    st.standalone
        .filter(|id| st.streams.get(id).is_some_and(|s| s.has_live()))
}
