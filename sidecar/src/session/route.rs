//! Server → client: what the server sends, filtered and routed to this
//! session's client (the [`super::channel::Channel`] decided it is for
//! this session).
//!
//! - A request (sampling, elicitation; a legacy server only) is allowed
//!   only if the method table says so; its params pass the output filter;
//!   it reaches the client under an id of the facade's own, mapped back
//!   when the client answers. `ping` the facade answers itself, and
//!   `roots/list` too, from the policy's roots (the client's answer could
//!   widen the server's scope); anything else is refused.
//! - A notification is allowed only if the table says so, and passes the
//!   output filter: log messages, progress (with the client's own token
//!   restored), resource updates only for resources the caller may read.
//!
//! Which stream: a message tied to a client request (it came with that
//! request, or names its progress token) goes to that request's stream;
//! list-changed and resource-updated notifications to the standalone
//! stream, else the newest request's; any other server message to the
//! newest request in flight (a stdio server cannot say what it relates
//! to), else the standalone stream; with nowhere to go, it waits in a
//! bounded backlog for the next GET.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::channel::{Channel, Era};
use super::{push_item, Session, State, ToClient, BACKLOG_DEPTH};
use crate::gates::methods::{self, ServerNotification};
use crate::gates::output;
use crate::gates::policy::LivePolicy;
use crate::jsonrpc::{self, codes, Message, RequestId};

impl Session {
    /// A request from the server, which the channel decided is for this
    /// session's client (`related`: the facade's request it came with).
    pub(super) async fn server_request(
        self: &Arc<Self>,
        channel: &Arc<Channel>,
        msg: Message,
        related: Option<u64>,
    ) {
        let server_id = msg.id.clone().expect("requests have ids");
        let refuse = |code, text: &str| jsonrpc::error_response(Some(&server_id), code, text, None);
        match methods::server_request(msg.method()) {
            None => {
                let text = "the facade does not pass this request to the client";
                return channel.send_later(refuse(codes::METHOD_NOT_FOUND, text));
            }
            Some(false) if msg.method() == "roots/list" => {
                let roots = self.app.roots();
                if roots.is_empty() {
                    let text = "the facade offers no roots (the policy names none)";
                    return channel.send_later(refuse(codes::METHOD_NOT_FOUND, text));
                }
                let result = serde_json::json!({ "roots": roots }).to_string();
                return channel.send_later(jsonrpc::result_response(&server_id, &result));
            }
            Some(false) => return channel.send_later(jsonrpc::result_response(&server_id, "{}")),
            Some(true) => {}
        }
        let policy = self.app.policy.load();
        let Some(params) = output::filter_params(&msg, &policy, &self.app.metrics) else {
            self.app.metrics.dropped("server_request");
            let text = "the facade did not pass this request to the client (over its size limit)";
            return channel.send_later(refuse(codes::INTERNAL_ERROR, text));
        };
        let client = related.and_then(|r| channel.origin(r)).and_then(|(_, c)| c);
        // A modern client is asked through its request's result.
        if self.client_era == Era::Modern {
            let client = client.or_else(|| self.newest_pending());
            let parked = client.is_some_and(|c| self.park(channel, &c, &msg, params));
            if !parked {
                let text = "the client cannot answer this request (it did not declare the capability, or no request of its is waiting)";
                channel.send_later(refuse(codes::METHOD_NOT_FOUND, text));
            }
            return;
        }
        let n = self.next_downstream.fetch_add(1, Ordering::Relaxed);
        let Some(bytes) = rebuild(&msg, Some(&RequestId::number(n)), params) else {
            return;
        };
        let mut st = self.state.lock().unwrap();
        let target = client
            .and_then(|c| st.pending.get(&c).map(|p| p.stream))
            .or_else(|| default_target(&st, msg.method()));
        st.to_client.insert(
            n,
            ToClient::Server {
                id: server_id,
                epoch: channel.epoch(),
                stream: target,
            },
        );
        deliver(self, &mut st, target, bytes, false);
    }

    /// A notification from the server for this session's client: tied to
    /// client request `client` when the channel could tell.
    pub(super) async fn server_notification(&self, msg: &Message, client: Option<RequestId>) {
        let Some(kind) = methods::server_notification(msg.method()) else {
            self.app.metrics.dropped("server_notification");
            return;
        };
        let policy = self.app.policy.load_full();
        let Some(params) = output::filter_params(msg, &policy, &self.app.metrics) else {
            self.app.metrics.dropped("server_notification");
            return;
        };
        if self.client_era == Era::Modern && kind != ServerNotification::Progress {
            return self.subscription_notification(msg, kind, client, params, &policy);
        }
        let mut params = params;
        if self.legacy_on_modern() {
            // The session's subscription is the facade's: its client hears
            // the notifications, not the acknowledgement or the tags.
            if super::local::is_acknowledgement(msg) {
                return;
            }
            if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
                meta.remove(crate::era::meta::SUBSCRIPTION_ID);
                if meta.is_empty() {
                    params.as_object_mut().map(|p| p.remove("_meta"));
                }
            }
        }
        match kind {
            ServerNotification::Filtered | ServerNotification::ToolsChanged => {
                self.deliver_notification(msg, client, params)
            }
            ServerNotification::Progress => self.server_progress(msg, client, params),
            ServerNotification::Cancelled => self.server_cancelled(msg),
            ServerNotification::ResourceUpdated => {
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or("");
                let role = self.owner().role(&policy.compiled);
                if policy.compiled.decide_resource(uri, role).is_err() {
                    self.app.metrics.dropped("server_notification");
                    return;
                }
                self.deliver_notification(msg, client, params)
            }
        }
    }

    /// A notification for a modern client: on the stream of the request it
    /// belongs to (a log message for a call), or of the subscriptions that
    /// asked for it, tagged with each one's id. A resource update only for a
    /// resource the caller may read.
    fn subscription_notification(
        &self,
        msg: &Message,
        kind: ServerNotification,
        client: Option<RequestId>,
        params: Value,
        policy: &LivePolicy,
    ) {
        let uri = params
            .get("uri")
            .and_then(Value::as_str)
            .map(str::to_string);
        if kind == ServerNotification::ResourceUpdated {
            let role = self.owner().role(&policy.compiled);
            let readable = uri
                .as_deref()
                .is_some_and(|u| policy.compiled.decide_resource(u, role).is_ok());
            if !readable {
                self.app.metrics.dropped("server_notification");
                return;
            }
        }
        let mut st = self.state.lock().unwrap();
        match msg.method() {
            // Removed in 2026-07-28.
            "notifications/elicitation/complete" | "notifications/subscriptions/acknowledged"
                if client.is_none() =>
            {
                return;
            }
            // Only for a request that asked for it, at or above its level.
            "notifications/message" => {
                let wanted = client
                    .as_ref()
                    .and_then(|c| st.pending.get(c))
                    .and_then(|p| p.log_level);
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .and_then(super::intake::log_severity);
                match (wanted, level) {
                    (Some(w), Some(l)) if l >= w => {}
                    _ => {
                        self.app.metrics.dropped("server_notification");
                        return;
                    }
                }
            }
            _ => {}
        }
        let targets: Vec<RequestId> = match client {
            Some(c) => vec![c],
            // Unprompted (a legacy server's change notification): every
            // subscription of this session that asked for it.
            None => st
                .subscriptions
                .iter()
                .filter(|(_, filter)| wants(filter, msg.method(), uri.as_deref()))
                .map(|(id, _)| id.clone())
                .collect(),
        };
        for target in targets {
            let Some(stream) = st.pending.get(&target).map(|p| p.stream) else {
                continue;
            };
            let mut params = params.clone();
            if st.subscriptions.contains_key(&target) {
                let tag: Value = serde_json::from_str(target.as_json()).unwrap_or(Value::Null);
                match params.get_mut("_meta").and_then(Value::as_object_mut) {
                    Some(meta) => {
                        meta.insert(crate::era::meta::SUBSCRIPTION_ID.into(), tag);
                    }
                    None => {
                        params["_meta"] =
                            serde_json::json!({ crate::era::meta::SUBSCRIPTION_ID: tag })
                    }
                }
            }
            if let Some(bytes) = rebuild(msg, None, params) {
                deliver(self, &mut st, Some(stream), bytes, true);
            }
        }
    }

    /// Deliver a (filtered) notification on the stream it belongs to.
    fn deliver_notification(&self, msg: &Message, client: Option<RequestId>, params: Value) {
        let Some(bytes) = rebuild(msg, None, params) else {
            return;
        };
        let mut st = self.state.lock().unwrap();
        let target = client
            .and_then(|c| st.pending.get(&c).map(|p| p.stream))
            .or_else(|| default_target(&st, msg.method()));
        deliver(self, &mut st, target, bytes, true);
    }

    /// Progress names the facade's id of the request (the token it sent);
    /// the client gets its own token back, on that request's stream.
    fn server_progress(&self, msg: &Message, client: Option<RequestId>, mut params: Value) {
        let mut st = self.state.lock().unwrap();
        let request = client.and_then(|c| st.pending.get(&c));
        let Some((stream, token)) =
            request.and_then(|p| Some((p.stream, p.progress_token.as_ref()?.get().to_string())))
        else {
            self.app.metrics.dropped("server_notification");
            return;
        };
        params["progressToken"] = serde_json::from_str(&token).unwrap_or(Value::Null);
        if let Some(bytes) = rebuild(msg, None, params) {
            deliver(self, &mut st, Some(stream), bytes, true);
        }
    }

    /// The server gave up on a request it sent the client: the client hears
    /// of it under the facade's id for that request.
    fn server_cancelled(&self, msg: &Message) {
        let value = msg.to_value();
        let Some(server_id) = value
            .pointer("/params/requestId")
            .and_then(|raw| RequestId::from_raw(&raw.to_string()))
        else {
            return;
        };
        let epoch = self.channel.epoch();
        let mut st = self.state.lock().unwrap();
        let found = st.to_client.iter().find_map(|(n, t)| match t {
            ToClient::Server {
                id,
                epoch: e,
                stream,
            } if *id == server_id && *e == epoch => Some((*n, *stream)),
            _ => None,
        });
        let Some((n, stream)) = found else { return };
        st.to_client.remove(&n);
        let params = serde_json::json!({
            "requestId": n,
            "reason": value.pointer("/params/reason").cloned().unwrap_or(Value::Null),
        });
        let bytes = jsonrpc::notification("notifications/cancelled", &params);
        deliver(self, &mut st, stream, bytes, true);
    }
}

/// Whether a subscription with `filter` asked for a notification `method`
/// (about `uri`).
fn wants(filter: &Value, method: &str, uri: Option<&str>) -> bool {
    let flag = |key: &str| filter.get(key).and_then(Value::as_bool) == Some(true);
    match method {
        "notifications/tools/list_changed" => flag("toolsListChanged"),
        "notifications/prompts/list_changed" => flag("promptsListChanged"),
        "notifications/resources/list_changed" => flag("resourcesListChanged"),
        "notifications/resources/updated" => filter
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .is_some_and(|uris| uris.iter().any(|u| u.as_str() == uri)),
        _ => false,
    }
}

/// The message under `id` (when given) with the filtered `params` written in.
fn rebuild(msg: &Message, id: Option<&RequestId>, params: Value) -> Option<Bytes> {
    if params.is_null() {
        return jsonrpc::rebuild(msg, id, None).ok();
    }
    let raw = serde_json::value::to_raw_value(&params).ok()?;
    jsonrpc::with_params(msg, id, raw).ok()
}

/// Queue on `target`, or in the backlog when there is none.
fn deliver(session: &Session, st: &mut State, target: Option<u64>, bytes: Bytes, droppable: bool) {
    match target {
        Some(stream) => {
            if !push_item(st, stream, bytes, false, droppable) {
                session.app.metrics.notifications_dropped.inc();
            }
        }
        None => {
            if st.backlog.len() == BACKLOG_DEPTH {
                st.backlog.pop_front();
                session.app.metrics.backlog_dropped.inc();
            }
            st.backlog.push_back(bytes);
        }
    }
}

fn default_target(st: &State, method: &str) -> Option<u64> {
    if method.ends_with("/list_changed") || method == "notifications/resources/updated" {
        live_standalone(st).or_else(|| newest_request(st))
    } else {
        newest_request(st).or_else(|| live_standalone(st))
    }
}

impl Session {
    /// The client request in flight that came in last.
    fn newest_pending(&self) -> Option<RequestId> {
        let st = self.state.lock().unwrap();
        st.pending
            .iter()
            .max_by_key(|(_, p)| p.started)
            .map(|(id, _)| id.clone())
    }
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
