//! One upstream connection — a link the facade restarts when it fails — and
//! the facade's requests on it.
//!
//! A channel is what sessions send through. A legacy server gets a channel
//! per client session (its state is the session's); a modern server, which
//! answers every request on its own, gets one channel that every caller
//! shares. So the facade's ids, and the table of requests waiting for the
//! server's answers, live here, per channel: an id names one request on
//! one server, whoever sent it.
//!
//! What the server sends is routed from here: an answer to the request it
//! names (and from there to the session that sent it); progress and
//! messages tied to a request to that request's session; what belongs to no
//! request to the channel's listeners (the sessions that use it). The
//! sessions filter it for their clients ([`super::route`]).
//!
//! The supervisor (in [`Channel::start`]) connects, pumps the link's events,
//! and on a crash fails every request in flight, backs off, restarts and
//! replays the handshake the channel's session made (legacy), so the
//! sessions carry on. A server that would not let go of a cancelled call is
//! recycled the same way (at once, and without spending the restart budget).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::{oneshot, watch, Notify};

mod inbound;
mod supervise;

use super::Session;
use crate::jsonrpc::{self, Message, RequestId};
use crate::session::context::Context;
use crate::upstream::{Credential, Link};

/// Which revision of MCP the server behind a channel speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` and a session per client (2025-11-25 and earlier).
    Legacy,
    /// Stateless: every request carries its version and capabilities (2026-07-28).
    Modern,
}

/// A request on the server, by the facade's id for it.
pub(super) struct Outbound {
    /// Where the answer goes (the step that sent it); `Err` when the server
    /// went away first.
    pub(super) answer: oneshot::Sender<Result<Message, String>>,
    /// The session that sent it (none for the channel's own requests).
    pub(super) session: Weak<Session>,
    /// The client request it carries, in that session.
    pub(super) client: Option<RequestId>,
    /// Told when the client cancels it.
    pub(super) cancelled: Option<oneshot::Sender<()>>,
}

/// The facade's own identity, for requests it makes itself.
pub fn client_info() -> Value {
    serde_json::json!({ "name": "mcp-warden", "version": env!("CARGO_PKG_VERSION") })
}

#[derive(Default)]
struct State {
    outbound: HashMap<u64, Outbound>,
    /// Counts the links: a request from an earlier server cannot be
    /// answered into a later one.
    epoch: u64,
    /// The `initialize` params a legacy server got, and whether the
    /// handshake completed: both replayed to a restarted server.
    handshake: Option<Value>,
    initialized: bool,
    closed: bool,
    /// The sessions that use this channel: they hear what belongs to no request.
    listeners: Vec<Weak<Session>>,
}

pub struct Channel {
    pub(crate) app: Arc<Context>,
    pub era: Era,
    /// For logs: the session it serves, or `shared`.
    name: Arc<str>,
    link: watch::Sender<Option<Arc<Link>>>,
    /// Taken in turn by messages on their way to the server (see `send`).
    send_turn: tokio::sync::Mutex<()>,
    /// The facade's ids for requests on this channel (monotonic).
    next_id: AtomicU64,
    state: Mutex<State>,
    /// Wakes the supervisor to replace a server that would not let go of a
    /// cancelled call.
    recycle: Notify,
    /// Whether the first link comes from the pool of pre-started servers.
    spare: bool,
    /// The facade makes the handshake itself, on every link (a bridge: a
    /// legacy server's session the facade holds for modern callers).
    own_handshake: bool,
    /// A channel of one caller (a legacy session, a bridge): the upstream
    /// credential of that caller's latest request, which the channel's own
    /// requests (handshake replay, notifications) carry too. The shared
    /// channel of a modern server keeps none: its own requests carry the
    /// facade's credential.
    credential: Mutex<Option<Credential>>,
}

impl Channel {
    /// A channel to the configured upstream, connecting in the background.
    pub fn start(app: Arc<Context>, era: Era, name: Arc<str>, spare: bool) -> Arc<Channel> {
        Channel::launch(app, era, name, spare, None, None)
    }

    /// A legacy server's session for modern callers: the facade makes the
    /// handshake (declaring that it can relay elicitation and sampling,
    /// which it turns into `input_required` results) on every link.
    pub fn start_bridge(
        app: Arc<Context>,
        name: Arc<str>,
        credential: Option<Credential>,
    ) -> Arc<Channel> {
        let mut capabilities =
            serde_json::json!({ "elicitation": { "form": {}, "url": {} }, "sampling": {} });
        if let Some(caps) = capabilities.as_object_mut() {
            app.fit_client_capabilities(caps);
        }
        let params = serde_json::json!({
            "protocolVersion": crate::era::LATEST_LEGACY,
            "capabilities": capabilities,
            "clientInfo": client_info(),
        });
        Channel::launch(app, Era::Legacy, name, true, Some(params), credential)
    }

    fn launch(
        app: Arc<Context>,
        era: Era,
        name: Arc<str>,
        spare: bool,
        handshake: Option<Value>,
        credential: Option<Credential>,
    ) -> Arc<Channel> {
        let (link, _) = watch::channel(None);
        let own_handshake = handshake.is_some();
        let state = State {
            initialized: own_handshake,
            handshake,
            ..State::default()
        };
        let channel = Arc::new(Channel {
            app,
            era,
            name,
            link,
            send_turn: tokio::sync::Mutex::new(()),
            next_id: AtomicU64::new(1),
            state: Mutex::new(state),
            recycle: Notify::new(),
            spare,
            own_handshake,
            credential: Mutex::new(credential),
        });
        tokio::spawn(supervise::supervise(channel.clone()));
        channel
    }

    /// Whether anything uses the channel: a request waiting for the server,
    /// or a live session (a request in progress, an open subscription).
    pub(crate) fn in_use(&self) -> bool {
        let mut st = self.state.lock().unwrap();
        st.listeners.retain(|w| w.strong_count() > 0);
        !st.outbound.is_empty() || !st.listeners.is_empty()
    }

    /// `session` uses this channel: it hears what belongs to no request.
    pub(super) fn add_listener(&self, session: &Arc<Session>) {
        let mut st = self.state.lock().unwrap();
        st.listeners.retain(|w| w.strong_count() > 0);
        st.listeners.push(Arc::downgrade(session));
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.lock().unwrap().closed
    }

    /// Stop the server (the link is dropped) and fail what was in flight.
    pub(crate) fn close(&self) {
        self.state.lock().unwrap().closed = true;
        self.fail_in_flight("the session has ended");
        self.link.send_replace(None);
    }

    /// The link's generation (bumped on every restart).
    pub(crate) fn epoch(&self) -> u64 {
        self.state.lock().unwrap().epoch
    }

    /// Remember the client's `initialize` (legacy): replayed on restart.
    pub(super) fn set_handshake(&self, params: Value) {
        self.state.lock().unwrap().handshake = Some(params);
    }

    pub(super) fn set_initialized(&self) {
        self.state.lock().unwrap().initialized = true;
    }

    /// A fresh id of the facade's own on this channel.
    pub(super) fn mint(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn register(&self, id: u64, outbound: Outbound) {
        self.state.lock().unwrap().outbound.insert(id, outbound);
    }

    pub(super) fn unregister(&self, id: u64) {
        self.state.lock().unwrap().outbound.remove(&id);
    }

    /// Tell the step waiting for request `id` that its client cancelled it.
    pub(crate) fn client_cancelled(&self, id: u64) -> bool {
        let tell = self
            .state
            .lock()
            .unwrap()
            .outbound
            .get_mut(&id)
            .and_then(|o| o.cancelled.take());
        tell.is_some_and(|tx| tx.send(()).is_ok())
    }

    /// Request `id` now belongs to `session`'s request `client` (a retry
    /// continues it): what the server sends for it goes there.
    pub(super) fn repoint(&self, id: u64, session: &Arc<Session>, client: &RequestId) {
        if let Some(out) = self.state.lock().unwrap().outbound.get_mut(&id) {
            out.session = Arc::downgrade(session);
            out.client = Some(client.clone());
        }
    }

    /// The session and client request behind the facade's request `id`.
    pub(super) fn origin(&self, id: u64) -> Option<(Arc<Session>, Option<RequestId>)> {
        let st = self.state.lock().unwrap();
        let out = st.outbound.get(&id)?;
        Some((out.session.upgrade()?, out.client.clone()))
    }

    /// Replace the server process (it did not let go of a cancelled call).
    pub(super) fn recycle(&self) {
        self.recycle.notify_one();
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
    pub(super) async fn send(&self, msg: Message) -> Result<(), String> {
        self.send_as(msg, None).await
    }

    /// [`Channel::send`] with the upstream credential of the caller the
    /// message is for; `None`: the channel's own (see `credential`).
    pub(super) async fn send_as(
        &self,
        msg: Message,
        credential: Option<Credential>,
    ) -> Result<(), String> {
        let credential = match credential {
            Some(c) => {
                if self.era == Era::Legacy {
                    *self.credential.lock().unwrap() = Some(c.clone());
                }
                Some(c)
            }
            None => self.own_credential().await?,
        };
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
            link.send_as(msg, credential.as_ref()).await
        } else {
            drop(turn);
            link.send_as(msg, credential.as_ref()).await
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

    /// The credential of the channel's own messages: the facade's on a
    /// modern server's shared channel, else the channel's caller's latest.
    async fn own_credential(&self) -> Result<Option<Credential>, String> {
        if !self.app.has_upstream_credentials() {
            return Ok(None);
        }
        match self.era {
            Era::Modern => self.app.facade_credential().await,
            Era::Legacy => Ok(self.credential.lock().unwrap().clone()),
        }
    }

    /// Tell the server to stop working on request `id` (the facade's id):
    /// a modern HTTP server by closing the request's stream, any other with
    /// `notifications/cancelled`.
    pub(crate) async fn cancel(&self, id: u64, reason: &str) {
        let link = self.link.borrow().clone();
        if link.is_some_and(|l| l.abort(&RequestId::number(id))) {
            return;
        }
        let params = serde_json::json!({ "requestId": id, "reason": reason });
        if let Ok(cancel) =
            Message::parse(jsonrpc::notification("notifications/cancelled", &params))
        {
            let _ = self.send(cancel).await;
        }
    }

    /// A request of the facade's own, on `link` directly (the handshake
    /// replay, before the link is published), else on the current link in
    /// turn (so it never overtakes a client's handshake).
    pub(crate) async fn internal_request(
        &self,
        link: Option<&Link>,
        method: &str,
        params: &Value,
    ) -> Result<Message, String> {
        self.internal_request_as(link, method, params, &serde_json::json!({}))
            .await
    }

    /// [`Channel::internal_request`], declaring `capabilities` to a modern
    /// server (the facade's own polls of a task declare the tasks extension).
    pub(crate) async fn internal_request_as(
        &self,
        link: Option<&Link>,
        method: &str,
        params: &Value,
        capabilities: &Value,
    ) -> Result<Message, String> {
        self.internal_request_for(link, method, params, capabilities, None)
            .await
    }

    /// [`Channel::internal_request_as`] with `caller`'s upstream credential
    /// instead of the channel's own (`None`: the channel's own).
    pub(crate) async fn internal_request_for(
        &self,
        link: Option<&Link>,
        method: &str,
        params: &Value,
        capabilities: &Value,
        caller: Option<Credential>,
    ) -> Result<Message, String> {
        // On the current link, `send` finds the credential itself.
        let credential = match (link, caller) {
            (_, Some(caller)) => Some(caller),
            (Some(_), None) => self.own_credential().await?,
            (None, None) => None,
        };
        let n = self.mint();
        let (tx, rx) = oneshot::channel();
        self.register(
            n,
            Outbound {
                answer: tx,
                session: Weak::new(),
                client: None,
                cancelled: None,
            },
        );
        // A modern server reads every request's version and capabilities
        // from `_meta`: the facade's own requests carry its own.
        let with_meta;
        let params = match (self.era, params) {
            (Era::Modern, Value::Object(p)) => {
                let mut p = p.clone();
                let meta = crate::era::modern_meta(capabilities, &client_info());
                p.insert("_meta".into(), Value::Object(meta));
                with_meta = Value::Object(p);
                &with_meta
            }
            _ => params,
        };
        let msg = Message::parse(jsonrpc::request(&RequestId::number(n), method, params))
            .map_err(|_| "internal request".to_string())?;
        let sent = match link {
            Some(link) => match link.send_as(msg, credential.as_ref()).await {
                Ok(Some(answer)) => {
                    self.server_response(answer);
                    Ok(())
                }
                Ok(None) => Ok(()),
                Err(e) => Err(e.to_string()),
            },
            None => self.send_as(msg, credential).await,
        };
        if let Err(e) = sent {
            self.unregister(n);
            return Err(e);
        }
        let answer = tokio::time::timeout(self.app.limits.upstream_wait, rx).await;
        self.unregister(n);
        match answer {
            Ok(Ok(Ok(answer))) => Ok(answer),
            Ok(Ok(Err(reason))) => Err(reason),
            _ => Err(format!("the MCP server did not answer `{method}`")),
        }
    }

    /// Send from a task of its own: the pump that calls this may be what a
    /// send in turn is waiting for.
    pub(super) fn send_later(self: &Arc<Self>, bytes: Bytes) {
        if let Ok(msg) = Message::parse(bytes) {
            let channel = self.clone();
            tokio::spawn(async move {
                let _ = channel.send(msg).await;
            });
        }
    }

    /// Read the whole upstream tool list into the registry (the facade's own
    /// request; nothing reaches a client).
    pub(crate) async fn refresh_tools(&self) {
        let Ok(answer) = self
            .internal_request(None, "tools/list", &serde_json::json!({}))
            .await
        else {
            return;
        };
        let mut value = answer.to_value();
        if value.get("error").is_some() {
            return;
        }
        if let Ok(defs) = self.collect_pages(&mut value).await {
            let policy = self.app.policy.load_full();
            self.app.registry.observe(defs, &policy, &self.app.metrics);
        }
    }

    /// The `tools` of the first page plus every further page.
    pub(crate) async fn collect_pages(&self, first: &mut Value) -> Result<Vec<Value>, String> {
        /// Upstream pages followed at most, so a server cannot loop the facade.
        const MAX_PAGES: usize = 100;
        let mut tools = take_tools(first);
        let mut cursor = first.pointer("/result/nextCursor").cloned();
        for _ in 0..MAX_PAGES {
            let Some(c) = cursor.take().filter(|c| !c.is_null()) else {
                return Ok(tools);
            };
            let mut page = self
                .internal_request(None, "tools/list", &serde_json::json!({ "cursor": c }))
                .await?
                .to_value();
            if page.get("error").is_some() {
                return Err("the MCP server refused a tools/list page".into());
            }
            tools.extend(take_tools(&mut page));
            cursor = page.pointer("/result/nextCursor").cloned();
        }
        Err(format!(
            "the MCP server's tool list has more than {MAX_PAGES} pages"
        ))
    }
}

fn take_tools(page: &mut Value) -> Vec<Value> {
    match page.pointer_mut("/result/tools").map(Value::take) {
        Some(Value::Array(tools)) => tools,
        _ => Vec::new(),
    }
}
