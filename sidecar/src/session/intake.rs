//! Client → facade: every message a client sends, by kind.
//!
//! - A request is registered (it is owed one answer from here on), looked
//!   up in the method table ([`crate::gates::methods`]; unknown methods
//!   are refused), read strictly (a key given twice, or params a parser
//!   cannot read, are refused: the facade and the server must read the same
//!   request), passed through the role gate, and handed to its pipeline
//!   step, which answers it.
//! - A notification is forwarded only if the table knows it, rebuilt (a
//!   cancellation names the facade's id of the request, not the client's).
//! - A response must answer a request the facade sent the client (under an
//!   id of its own); it goes to the server under the server's id, through
//!   the same filters as what the server says (size cap, redaction).
//!   `roots/list` never reaches the client (the facade answers it from the
//!   policy), nor does its `notifications/roots/list_changed` reach the
//!   server.

use std::sync::Arc;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::Value;

use super::channel::Era;
use super::{Pending, Session, ToClient};
use crate::auth::identity::{AuthMethod, Identity};
use crate::era;
use crate::gates::methods::{self, ClientNotification};
use crate::gates::refusal::Refusal;
use crate::jsonrpc::{self, codes, Kind, Message, RequestId};
use crate::spans::RequestSpan;
use mcp_warden_telemetry::opentelemetry::KeyValue;

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
                    mrtr: None,
                    log_level: None,
                    caller: caller.clone(),
                    trace: None,
                },
            );
        }
        // The request's span (nothing at all when tracing is off).
        let span = if self.app.telemetry.is_on() {
            self.request_span(&msg, &id, caller)
        } else {
            RequestSpan::NONE
        };
        let refuse = |refusal: Refusal| {
            span.refused(&refusal);
            self.refused(&id, msg.method(), caller, &refusal, started, &span);
            self.answer_call(&id, refusal.to_response(Some(&id)));
        };
        let modern = self.client_era == Era::Modern;
        let Some(gates) = methods::client_request(msg.method(), modern) else {
            return refuse(Refusal::MethodNotAllowed {
                method: msg.method().to_string(),
            });
        };
        let request = match crate::strict_json::from_slice(&msg.bytes) {
            Ok(request) => request,
            Err(e) => return refuse(Refusal::unreadable(&e)),
        };
        if modern {
            if let Err(refusal) = check_modern_meta(&request) {
                return refuse(refusal);
            }
            let level = request
                .get("params")
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get(era::meta::LOG_LEVEL))
                .and_then(Value::as_str)
                .and_then(log_severity);
            if let Some(p) = self.state.lock().unwrap().pending.get_mut(&id) {
                p.log_level = level;
            }
            // A request that may ask for input: its round, and the state of
            // a retry, opened before anything is decided.
            if era::INPUT_REQUIRED_METHODS.contains(&msg.method()) {
                match self.open_retry(&id, caller, msg.method(), &request).await {
                    Ok(super::mrtr::Retry::Step) => {}
                    Ok(super::mrtr::Retry::Resumed) => return,
                    Err(refusal) => return refuse(refusal),
                }
            }
        }
        let policy = self.app.policy.load_full();
        let gateway_itself = caller.method == AuthMethod::GatewayItself;
        let role = match methods::serving_role(gates, caller.role(&policy.compiled), gateway_itself)
        {
            Ok(role) => role,
            Err(denial) => return refuse(Refusal::Policy(denial)),
        };
        if let Some(role) = role.filter(|_| span.is_recording()) {
            span.set(vec![KeyValue::new(
                "mcpwarden.role",
                mcp_warden_policy::role_name(role),
            )]);
        }
        if let Some(token) = request
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"))
        {
            if let Some(p) = self.state.lock().unwrap().pending.get_mut(&id) {
                p.progress_token = RawValue::from_string(token.to_string()).ok();
            }
        }
        // Planning mode a caller asks for: on `initialize`, for the whole
        // session; on any request, for that request. Only ever turned on.
        let planning = {
            let asks = crate::gates::planning::asks(&request);
            let mut st = self.state.lock().unwrap();
            st.planning |= asks && msg.method() == "initialize";
            st.planning || asks
        };
        let denied = crate::gates::planning::asks_denied(&request);
        let ctx = crate::gates::Request {
            id,
            msg,
            value: request,
            stream,
            caller: caller.clone(),
            role,
            planning,
            denied,
            policy,
            started,
            span,
        };
        crate::session::steps::run(self.clone(), gates.step, ctx).await;
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
                // A modern server had no handshake: the facade made it, and
                // opens the session's subscription instead.
                if self.legacy_on_modern() {
                    let session = self.clone();
                    tokio::spawn(async move { session.legacy_listen().await });
                    return;
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
        };
        // A server other callers share hears no caller's notifications but
        // the cancellation of its own requests.
        let forward = forward && self.owns_channel;
        if !forward || crate::strict_json::from_slice(&msg.bytes).is_err() {
            self.app.metrics.dropped("client_notification");
            return;
        }
        if let Ok(bytes) = jsonrpc::rebuild(&msg, None, None) {
            let out = Message::written(bytes, Kind::Notification, None, msg.method.clone());
            let _ = self.send_upstream(out).await;
        }
    }

    /// The client gave up on a request (`notifications/cancelled`).
    async fn client_cancelled(&self, msg: &Message) {
        let value = msg.to_value();
        let Some(id) = value
            .pointer("/params/requestId")
            .and_then(|raw| RequestId::from_raw(&raw.to_string()))
        else {
            return;
        };
        let reason = value
            .pointer("/params/reason")
            .and_then(Value::as_str)
            .map(|r| r.chars().take(200).collect::<String>())
            .unwrap_or_else(|| "cancelled by the client".into());
        self.cancel_request(&id, &reason).await;
    }

    /// Request `id` is cancelled (the client said so, or, on modern HTTP,
    /// closed its stream): no answer is owed any more; the server is told by
    /// the facade's id for it, and the step that sent it keeps its slot
    /// until the server lets go (see `Lingering`).
    pub async fn cancel_request(&self, id: &RequestId, reason: &str) {
        let upstream = {
            let mut st = self.state.lock().unwrap();
            let Some(p) = st.pending.remove(id) else {
                return;
            };
            if let Some(s) = st.streams.get_mut(&p.stream) {
                s.forgo_response();
            }
            st.subscriptions.remove(id);
            self.app
                .metrics
                .observe_request(&p.method, "cancelled", p.started.elapsed());
            p.upstream
        };
        self.pending_gone.notify_waiters();
        if let Some(n) = upstream.filter(|n| self.channel.client_cancelled(*n)) {
            self.channel.cancel(n, reason).await;
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
        // The answer is content for the server: the same filters as what
        // the server says (cap, redaction).
        let policy = self.app.policy.load();
        let bytes = crate::gates::output::filter_client_answer(
            &msg,
            &server_id,
            &policy,
            &self.app.metrics,
        )
        .unwrap_or_else(|| {
            self.app.metrics.dropped("client_response");
            let text =
                "the client's answer did not pass the facade (over its size limit, or unreadable)";
            jsonrpc::error_response(Some(&server_id), codes::INTERNAL_ERROR, text, None)
        });
        let out = Message::written(bytes, Kind::Response, Some(server_id), None);
        let _ = self.send_upstream(out).await;
    }

    /// Metrics and the audit line of a request refused before its step ran.
    /// The SERVER span of request `id`, continuing the caller's trace
    /// (`_meta`, else the HTTP header); its context is kept with the
    /// pending request, for the exchanges with the server to be its children.
    fn request_span(&self, msg: &Message, id: &RequestId, caller: &Identity) -> RequestSpan {
        let value = msg
            .mentions(mcp_warden_telemetry::carrier::TRACEPARENT.as_bytes())
            .then(|| msg.to_value());
        let parent = crate::spans::parent_of(value.as_ref());
        let method = crate::metrics::method_label(msg.method());
        let span = self.app.telemetry.request(parent, method, || {
            let session = crate::gates::audit::hash_session(&self.id);
            let request_id = id.as_json().trim_matches('"');
            let mut kvs = vec![
                KeyValue::new(
                    "mcpwarden.call_id",
                    format!("{session}:{}", crate::gates::audit::bounded(request_id)),
                ),
                KeyValue::new("mcpwarden.session", session),
                KeyValue::new(
                    "jsonrpc.request.id",
                    crate::gates::audit::bounded(request_id).to_string(),
                ),
                KeyValue::new("mcpwarden.auth", caller.method.as_str()),
            ];
            if let Some(issuer) = &caller.issuer {
                kvs.push(KeyValue::new("mcpwarden.issuer", issuer.to_string()));
            }
            if let Some(subject) = &caller.subject {
                kvs.push(KeyValue::new("mcpwarden.subject", subject.to_string()));
            }
            kvs
        });
        if let Some(cx) = span.context() {
            if let Some(p) = self.state.lock().unwrap().pending.get_mut(id) {
                p.trace = Some(cx.clone());
            }
        }
        span
    }

    pub(crate) fn refused(
        &self,
        id: &RequestId,
        method: &str,
        caller: &Identity,
        refusal: &Refusal,
        started: Instant,
        span: &RequestSpan,
    ) {
        let known = methods::client_request(method, self.client_era == Era::Modern).is_some();
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
        crate::gates::audit::denied(self.trail(), id, method, caller, refusal, started, span);
    }
}

/// A log level's severity (RFC 5424 order, `debug` lowest).
pub(crate) fn log_severity(level: &str) -> Option<u8> {
    const LEVELS: &[&str] = &[
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    LEVELS.iter().position(|l| *l == level).map(|i| i as u8)
}

/// A modern request states its version and the client's capabilities in
/// `_meta` (every request stands alone): a version the facade does not
/// serve, or a missing field, is refused before anything else.
fn check_modern_meta(request: &Value) -> Result<(), Refusal> {
    let meta = request.get("params").and_then(|p| p.get("_meta"));
    let Some(version) = era::request_version(request) else {
        return Err(Refusal::MissingMeta {
            field: era::meta::PROTOCOL_VERSION,
        });
    };
    if !era::is_modern(version) {
        return Err(Refusal::UnsupportedVersion {
            requested: version.to_string(),
        });
    }
    let capabilities = meta.and_then(|m| m.get(era::meta::CLIENT_CAPABILITIES));
    if !capabilities.is_some_and(Value::is_object) {
        return Err(Refusal::MissingMeta {
            field: era::meta::CLIENT_CAPABILITIES,
        });
    }
    Ok(())
}
