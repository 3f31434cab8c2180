//! Client → facade: every message a client sends, by kind.
//!
//! - A request is registered (it is owed one answer from here on), looked
//!   up in the method table ([`crate::pipeline::methods`]; unknown methods
//!   are refused), read strictly (a key given twice, or params a parser
//!   cannot read, are refused: the facade and the server must read the same
//!   request), passed through the role gate, and handed to its pipeline
//!   step, which answers it.
//! - A notification is forwarded only if the table knows it, rebuilt (a
//!   cancellation names the facade's id of the request, not the client's).
//! - A response must answer a request the facade sent the client (under an
//!   id of its own); it goes to the server under the server's id.

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::Value;

use super::{Pending, Session, ToClient};
use crate::jsonrpc::{self, codes, Kind, Message, RequestId};
use crate::pipeline::identity::Identity;
use crate::pipeline::methods::{self, ClientNotification, Who};
use crate::pipeline::refusal::Refusal;

impl Session {
    /// Take one client message. Requests must name the stream their answer
    /// goes on; every request gets exactly one answer on it.
    pub async fn client_message(
        self: &Arc<Self>,
        msg: Message,
        stream: u64,
        caller: &Arc<Identity>,
    ) {
        self.touch();
        match msg.kind {
            Kind::Request => self.client_request(msg, stream, caller).await,
            Kind::Notification => self.client_notification(msg).await,
            Kind::Response => self.client_response(msg).await,
        }
    }

    async fn client_request(self: &Arc<Self>, msg: Message, stream: u64, caller: &Arc<Identity>) {
        let id = msg.id.clone().expect("requests have ids");
        let started = Instant::now();
        {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                drop(st);
                let text = "the session has ended; start a new one";
                return self.answer_error(
                    stream,
                    super::error(&id, codes::INTERNAL_ERROR, text, "session_closed"),
                );
            }
            if st.pending.contains_key(&id) {
                drop(st);
                let text = "a request with this id is still in flight; use a new id";
                return self.answer_error(
                    stream,
                    super::error(&id, codes::INVALID_REQUEST, text, "duplicate_id"),
                );
            }
            st.pending.insert(
                id.clone(),
                Pending {
                    stream,
                    method: msg.method.clone().unwrap_or_default(),
                    started,
                    progress_token: None,
                    upstream: None,
                },
            );
        }
        let refuse = |refusal: Refusal| {
            self.refused(&id, msg.method(), caller, &refusal, started);
            self.answer_call(&id, refusal.to_response(Some(&id)));
        };
        let Some(gates) = methods::client_request(msg.method()) else {
            return refuse(Refusal::MethodNotAllowed {
                method: msg.method().to_string(),
            });
        };
        let request = match crate::strict_json::from_slice(&msg.bytes) {
            Ok(request) => request,
            Err(e) => return refuse(Refusal::unreadable(&e)),
        };
        let policy = self.app.policy.load_full();
        let role = caller.role(&policy.compiled);
        if gates.who == Who::AnyRole && role.is_none() {
            return refuse(Refusal::Policy(mcp_warden_policy::Denial::NoRole));
        }
        if let Some(token) = request.pointer("/params/_meta/progressToken") {
            if let Some(p) = self.state.lock().unwrap().pending.get_mut(&id) {
                p.progress_token = RawValue::from_string(token.to_string()).ok();
            }
        }
        let ctx = crate::pipeline::Request {
            id,
            msg,
            value: request,
            stream,
            caller: caller.clone(),
            role,
            policy,
            started,
        };
        crate::pipeline::run(self.clone(), gates.step, ctx).await;
    }

    async fn client_notification(self: &Arc<Self>, msg: Message) {
        let Some(kind) = methods::client_notification(msg.method()) else {
            self.app.metrics.dropped("client_notification");
            return;
        };
        let forward = match kind {
            ClientNotification::Initialized => {
                if self.owns_channel {
                    self.channel.set_initialized();
                }
                true
            }
            ClientNotification::Cancelled => return self.client_cancelled(&msg).await,
            // Progress the client reports on a request the server sent it.
            ClientNotification::Progress => self
                .state
                .lock()
                .unwrap()
                .to_client
                .values()
                .any(|t| matches!(t, ToClient::Server { .. })),
            ClientNotification::Forward => true,
        };
        if !forward || crate::strict_json::from_slice(&msg.bytes).is_err() {
            self.app.metrics.dropped("client_notification");
            return;
        }
        if let Ok(bytes) = jsonrpc::rebuild(&msg, None, None) {
            let out = Message::written(bytes, Kind::Notification, None, msg.method.clone());
            let _ = self.send_upstream(out).await;
        }
    }

    /// The client gave up on a request: no answer is owed any more; the
    /// server is told by the facade's id for it, and the step that sent it
    /// keeps its slot until the server lets go (see `Lingering`).
    async fn client_cancelled(&self, msg: &Message) {
        let value = msg.to_value();
        let Some(id) = value
            .pointer("/params/requestId")
            .and_then(|raw| RequestId::from_raw(&raw.to_string()))
        else {
            return;
        };
        let upstream = {
            let mut st = self.state.lock().unwrap();
            let Some(p) = st.pending.remove(&id) else {
                return;
            };
            if let Some(s) = st.streams.get_mut(&p.stream) {
                s.forgo_response();
            }
            self.app
                .metrics
                .observe_request(&p.method, "cancelled", p.started.elapsed());
            p.upstream
        };
        if let Some(n) = upstream.filter(|n| self.channel.client_cancelled(*n)) {
            let reason = value
                .pointer("/params/reason")
                .and_then(Value::as_str)
                .map(|r| r.chars().take(200).collect::<String>())
                .unwrap_or_else(|| "cancelled by the client".into());
            self.channel.cancel(n, &reason).await;
        }
    }

    /// A client answer: to the facade's own request (an approval), or to a
    /// server request, which goes back under the server's id. Anything else
    /// answers a request nobody sent the client, and is dropped.
    async fn client_response(&self, msg: Message) {
        let epoch = self.channel.epoch();
        let target = {
            let mut st = self.state.lock().unwrap();
            let entry = msg
                .id
                .as_ref()
                .and_then(RequestId::as_number)
                .and_then(|n| st.to_client.remove(&n));
            match entry {
                Some(ToClient::Facade(tx)) => {
                    let _ = tx.send(msg);
                    return;
                }
                Some(ToClient::Server { id, epoch: e, .. }) if e == epoch => Some(id),
                _ => None,
            }
        };
        let Some(server_id) = target else {
            self.app.metrics.dropped("client_response");
            return;
        };
        match jsonrpc::with_id(&msg, &server_id) {
            Ok(bytes) => {
                let out = Message::written(bytes, Kind::Response, Some(server_id), None);
                let _ = self.send_upstream(out).await;
            }
            Err(_) => self.app.metrics.dropped("client_response"),
        }
    }

    /// Metrics and the audit line of a request refused before its step ran.
    fn refused(
        &self,
        id: &RequestId,
        method: &str,
        caller: &Identity,
        refusal: &Refusal,
        started: Instant,
    ) {
        let known = methods::client_request(method).is_some();
        self.app.metrics.observe_request(
            if known { method } else { "other" },
            "denied",
            started.elapsed(),
        );
        self.app
            .metrics
            .policy_denials
            .with_label_values(&[refusal.reason()])
            .inc();
        crate::pipeline::audit::denied(self, id, method, caller, refusal, started);
    }
}
