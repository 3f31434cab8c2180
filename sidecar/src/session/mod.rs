//! One downstream session: a client conversation and where its answers go.
//!
//! A transport (HTTP or stdio) hands client messages to
//! [`Session::client_message`] with the stream their answers belong on. A
//! session sends through a [`channel::Channel`]: its own for a legacy
//! server (the server's state is the session's), or one shared by every
//! caller for a modern server. The session's work is split by direction:
//! - [`intake`]: client → facade: the method table, the role gate, and the
//!   step that answers each request;
//! - [`upstream`]: facade → server: every request goes out under an id of
//!   the facade's own (per channel, monotonic), and the server's answer
//!   comes back to the step that sent it, never straight to the client;
//! - [`route`]: server → client: notifications and server requests pass the
//!   output filter, server request ids are mapped to the facade's own, and
//!   each message goes to the stream it belongs on;
//! - [`channel`]: the upstream connection's life: restarts with backoff,
//!   the handshake replayed, recycling a server that would not stop a call,
//!   and which session each server message is for;
//! - [`mrtr`]: asking a client for input across eras (multi round-trip
//!   requests for modern clients, server requests for legacy ones), and the
//!   signed `requestState` of a retry;
//! - [`local`]: what the facade answers itself for a legacy client in front
//!   of a modern server (`ping`, the log level, resource subscriptions);
//! - [`steps`]: the step that answers each request (tools/call, tools/list,
//!   the catalog, …), composed from the gates ([`crate::gates`]) and this
//!   session's forwarding;
//! - [`context`]: what every session shares (limits, policy, registry,
//!   audit, metrics), handed down by the application.
//!
//! Where it sits: above the gates and the transports, below the router
//! (which finds or makes a session and gives it its channel) and the
//! application.
//!
//! A modern client has no session: each of its requests gets a session of
//! its own (HTTP), or its connection does (stdio); either way on the shared
//! channel of a modern server or the caller's bridge to a legacy one.
//!
//! Invariant: every client request gets exactly one response, from the
//! step that took it, or from the facade when the session ends.
//! Only a request the client itself cancelled gets none, as the MCP
//! cancellation rules require. A request is registered when it is taken;
//! whoever removes it from `pending` answers it.

pub mod channel;
pub mod context;
pub mod ids;
mod intake;
mod local;
mod mrtr;
mod route;
pub mod steps;
pub mod stream;
mod task_watch;
pub mod tasks;
mod upstream;
pub mod work;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use crate::auth::identity::Identity;
use crate::gates::budget::SessionBudget;
use crate::jsonrpc::{self, codes, Message, RequestId};
use crate::session::context::Context;
use channel::{Channel, Era};
use stream::{Stream, StreamRx};

pub(crate) use intake::log_severity;
pub(crate) use local::initialize_result;
pub(crate) use mrtr::approval_request;
pub use mrtr::Parked;
pub(crate) use upstream::Forwarded;

/// Server messages kept for a client that has no stream open yet.
const BACKLOG_DEPTH: usize = 256;
/// Finished streams kept for `Last-Event-ID` replay.
const FINISHED_STREAMS_KEPT: usize = 64;

/// A client request the session owes an answer, by the client's id.
#[derive(Debug)]
struct Pending {
    stream: u64,
    method: Box<str>,
    started: Instant,
    /// The client's `_meta.progressToken`: the server sees the facade's id
    /// instead, and progress goes back with this one restored.
    progress_token: Option<Box<RawValue>>,
    /// The facade's id for it on the server, once sent.
    upstream: Option<u64>,
    /// A modern client's request that may ask for input: what a retry must
    /// repeat, and what the retry carried.
    mrtr: Option<mrtr::Round>,
    /// A modern client's `_meta` log level for this request (log messages
    /// reach it only at or above this level; none without it).
    log_level: Option<u8>,
    /// Who sent it: its upstream credential is chosen by this identity.
    caller: Arc<Identity>,
    /// The request's span (tracing on): exchanges with the server are its
    /// children.
    trace: Option<mcp_warden_telemetry::opentelemetry::Context>,
}

/// A request on the client, by the facade's id for it.
enum ToClient {
    /// The facade's own (an approval elicitation).
    Facade(oneshot::Sender<Message>),
    /// The server's, under the server's id, from the channel's link of this epoch.
    Server {
        id: RequestId,
        epoch: u64,
        /// Where it went (`None`: the backlog).
        stream: Option<u64>,
    },
}

#[derive(Default)]
struct State {
    pending: HashMap<RequestId, Pending>,
    to_client: HashMap<u64, ToClient>,
    streams: HashMap<u64, Stream>,
    finished: VecDeque<u64>,
    standalone: Option<u64>,
    backlog: VecDeque<Bytes>,
    next_stream: u64,
    protocol_version: Option<String>,
    /// The client declared the elicitation capability.
    client_elicits: bool,
    /// The client asked for planning mode when it opened the session.
    planning: bool,
    closed: bool,
    /// A modern client's open subscriptions: its `subscriptions/listen`
    /// request id → the filter it may have.
    subscriptions: HashMap<RequestId, serde_json::Value>,
    /// Requests answered with `input_required` while the server still works
    /// on them (a legacy server's question): where their answer goes once
    /// the client's retry arrives.
    handovers: HashMap<RequestId, mrtr::Handover>,
    /// A legacy client in front of a modern server: what the facade tells
    /// the server on the client's behalf.
    legacy: local::LegacyClient,
}

/// Why a message could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("the session has ended")]
    Closed,
}

pub struct Session {
    pub id: Arc<str>,
    pub(crate) app: Arc<Context>,
    state: Mutex<State>,
    /// Where the session's requests go.
    pub(crate) channel: Arc<Channel>,
    /// Whether the channel is the session's alone (it ends with the session).
    owns_channel: bool,
    /// Which revision the client speaks: legacy (it opened the session with
    /// `initialize`) or modern (each request stands alone).
    pub(crate) client_era: Era,
    /// Milliseconds since `created` of the last client activity.
    last_activity: AtomicU64,
    created: Instant,
    /// The facade's ids for requests it sends the client.
    next_downstream: AtomicU64,
    pub(crate) budget: Arc<SessionBudget>,
    /// Who opened the session; only they may use it.
    owner: Arc<Identity>,
    /// What per-identity session quotas count this session as.
    pub(crate) quota_key: String,
    /// Woken whenever a pending request goes (answered, cancelled, ended).
    pending_gone: tokio::sync::Notify,
    /// The facade read the server's tool list on this session's channel.
    listed: std::sync::atomic::AtomicBool,
}

impl Session {
    /// Create a session with a channel of its own to the server (a legacy
    /// server: a process, or an upstream session, per client session).
    pub fn start(
        app: Arc<Context>,
        id: Arc<str>,
        owner: Arc<Identity>,
        quota_key: String,
    ) -> Arc<Session> {
        let channel = Channel::start(app.clone(), Era::Legacy, id.clone(), true);
        let budget = Arc::new(SessionBudget::default());
        Session::with_channel(
            app,
            id,
            owner,
            quota_key,
            (channel, true),
            Era::Legacy,
            budget,
        )
    }

    /// A session on a channel it shares with other sessions (a modern
    /// server's, or a legacy server's the facade opened for a modern caller).
    pub fn on_channel(
        app: Arc<Context>,
        id: Arc<str>,
        owner: Arc<Identity>,
        quota_key: String,
        channel: Arc<Channel>,
        client_era: Era,
    ) -> Arc<Session> {
        // A legacy client has a session: its budget is the session's. A
        // modern client has none: its budget is its caller's on this replica.
        let budget = match client_era {
            Era::Legacy => Arc::new(SessionBudget::default()),
            Era::Modern => app.budget_for(&quota_key),
        };
        Session::with_channel(
            app,
            id,
            owner,
            quota_key,
            (channel, false),
            client_era,
            budget,
        )
    }

    fn with_channel(
        app: Arc<Context>,
        id: Arc<str>,
        owner: Arc<Identity>,
        quota_key: String,
        (channel, owns_channel): (Arc<Channel>, bool),
        client_era: Era,
        budget: Arc<SessionBudget>,
    ) -> Arc<Session> {
        let session = Arc::new(Session {
            id,
            app,
            state: Mutex::new(State::default()),
            channel,
            owns_channel,
            client_era,
            last_activity: AtomicU64::new(0),
            created: Instant::now(),
            next_downstream: AtomicU64::new(1),
            budget,
            owner,
            quota_key,
            pending_gone: tokio::sync::Notify::new(),
            listed: std::sync::atomic::AtomicBool::new(false),
        });
        session.channel.add_listener(&session);
        session
    }

    /// Whether this is the first time the facade lists tools for this
    /// session (and from now on it is not).
    pub(crate) fn first_listing(&self) -> bool {
        !self.listed.swap(true, Ordering::Relaxed)
    }

    pub fn protocol_version(&self) -> Option<String> {
        self.state.lock().unwrap().protocol_version.clone()
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().unwrap().closed
    }

    /// Whether request `id` still waits for its answer.
    pub fn is_pending(&self, id: &RequestId) -> bool {
        self.state.lock().unwrap().pending.contains_key(id)
    }

    pub fn in_flight(&self) -> usize {
        self.state.lock().unwrap().pending.len()
    }

    /// Whether `caller` is the identity that opened this session (a
    /// session id is not a credential: another caller gets 404).
    pub fn owned_by(&self, caller: &Identity) -> bool {
        self.owner.same_caller(caller)
    }

    fn touch(&self) {
        self.last_activity
            .store(self.created.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// Time since the client last did anything, if nothing is in flight and no
    /// stream is connected (only such sessions count as idle).
    pub fn idle_for(&self) -> Option<std::time::Duration> {
        let st = self.state.lock().unwrap();
        if !st.pending.is_empty() || st.streams.values().any(Stream::has_live) {
            return None;
        }
        let last = std::time::Duration::from_millis(self.last_activity.load(Ordering::Relaxed));
        Some(self.created.elapsed().saturating_sub(last))
    }

    /// Open a stream that owes `responses` answers (`usize::MAX`: open-ended,
    /// as for the stdio transport). Returns its id and the live receiver.
    pub fn open_stream(&self, responses: usize) -> (u64, StreamRx) {
        let (tx, rx) = stream::channel(self.app.limits.stream_queue_depth);
        let mut st = self.state.lock().unwrap();
        st.next_stream += 1;
        let id = st.next_stream;
        st.streams.insert(id, Stream::new(responses, tx));
        (id, rx)
    }

    /// Open the standalone stream (GET), delivering the backlog first.
    /// `None` when one is already connected.
    pub fn open_standalone(&self) -> Option<(u64, StreamRx)> {
        self.touch();
        let (tx, rx) = stream::channel(self.app.limits.stream_queue_depth);
        let mut st = self.state.lock().unwrap();
        if let Some(old) = st.standalone {
            if st.streams.get(&old).is_some_and(Stream::has_live) {
                return None;
            }
            st.streams.remove(&old);
        }
        st.next_stream += 1;
        let id = st.next_stream;
        let mut stream = Stream::new(usize::MAX, tx);
        for bytes in std::mem::take(&mut st.backlog) {
            stream.push(bytes, false, false);
        }
        st.streams.insert(id, stream);
        st.standalone = Some(id);
        Some((id, rx))
    }

    /// Reattach to a stream after `Last-Event-ID` `<stream>-<seq>`.
    pub fn resume(&self, last_event_id: &str) -> Option<(u64, StreamRx)> {
        self.touch();
        let (stream, seq) = last_event_id.split_once('-')?;
        let (stream, seq): (u64, u64) = (stream.parse().ok()?, seq.parse().ok()?);
        let (tx, rx) = stream::channel(self.app.limits.stream_queue_depth.max(1024));
        let mut st = self.state.lock().unwrap();
        st.streams
            .get_mut(&stream)?
            .resume(seq, tx)
            .then_some((stream, rx))
    }

    /// A pipeline step's answer to a client request: delivered unless the
    /// request was answered already (the session ended) or the client
    /// cancelled it. The one way a step answers.
    pub(crate) fn answer_call(&self, id: &RequestId, bytes: Bytes) {
        let mut st = self.state.lock().unwrap();
        match st.pending.remove(id) {
            Some(p) => {
                let bytes = match self.client_era {
                    // A modern client reads `resultType` and the caching
                    // hints, and gets a state of the facade's to retry with.
                    Era::Modern => {
                        let bytes = match &p.mrtr {
                            Some(round) => mrtr::seal_answer(&self.app, round, bytes),
                            None => bytes,
                        };
                        crate::era::decorate_result(&bytes, &p.method).unwrap_or(bytes)
                    }
                    Era::Legacy => bytes,
                };
                push(&mut st, p.stream, bytes, true);
                st.subscriptions.remove(id);
            }
            // Answered with `input_required` already: the answer goes to the
            // retry that continues it.
            None => {
                if let Some(handover) = st.handovers.remove(id) {
                    drop(st);
                    handover.deliver(&self.app, bytes);
                    return;
                }
            }
        }
        drop(st);
        self.pending_gone.notify_waiters();
    }

    /// Open subscription `id` (a modern client's `subscriptions/listen`)
    /// with the filter the caller may have.
    pub(crate) fn start_subscription(&self, id: &RequestId, filter: serde_json::Value) {
        self.state
            .lock()
            .unwrap()
            .subscriptions
            .insert(id.clone(), filter);
    }

    /// Tell the client its subscription `id` is open, for `served`.
    pub(crate) fn acknowledge_subscription(&self, id: &RequestId, served: serde_json::Value) {
        let mut st = self.state.lock().unwrap();
        let Some(stream) = st.pending.get(id).map(|p| p.stream) else {
            return;
        };
        let subscription: serde_json::Value =
            serde_json::from_str(id.as_json()).unwrap_or_default();
        let params = serde_json::json!({
            "_meta": { crate::era::meta::SUBSCRIPTION_ID: subscription },
            "notifications": served,
        });
        let bytes = jsonrpc::notification("notifications/subscriptions/acknowledged", &params);
        push(&mut st, stream, bytes, false);
    }

    /// Wait until request `id` is no longer pending (the client went away,
    /// cancelled it, or the session ended).
    pub(crate) async fn wait_until_answered(&self, id: &RequestId) {
        loop {
            let gone = self.pending_gone.notified();
            if !self.state.lock().unwrap().pending.contains_key(id) {
                return;
            }
            gone.await;
        }
    }

    /// Record the metrics of a request the step answered (or not).
    pub(crate) fn observe(&self, method: &str, outcome: &'static str, started: Instant) {
        self.app
            .metrics
            .observe_request(method, outcome, started.elapsed());
    }

    /// Answer a request the transport could not even parse.
    pub fn answer_error(&self, stream: u64, bytes: Bytes) {
        let mut st = self.state.lock().unwrap();
        push(&mut st, stream, bytes, true);
    }

    /// The client's `initialize` params (replayed to a restarted server;
    /// the `_meta` the facade sends a modern server on its behalf) and
    /// whether it can answer elicitations.
    pub(crate) fn record_initialize(&self, params: serde_json::Value, elicits: bool) {
        {
            let mut st = self.state.lock().unwrap();
            st.client_elicits = elicits;
            st.legacy.record(&params);
        }
        if self.owns_channel {
            self.channel.set_handshake(params);
        }
    }

    /// A legacy client in front of a modern server: the facade makes the
    /// handshake and speaks modern on the client's behalf.
    pub(crate) fn legacy_on_modern(&self) -> bool {
        self.client_era == Era::Legacy && self.channel.era == Era::Modern
    }

    /// The protocol version the server agreed to.
    pub(crate) fn set_protocol_version(&self, version: String) {
        self.state.lock().unwrap().protocol_version = Some(version);
    }

    /// Whether the client can answer an elicitation.
    /// What the audit needs of this session.
    pub(crate) fn trail(&self) -> crate::gates::audit::Trail<'_> {
        crate::gates::audit::Trail {
            audit: &self.app.audit,
            metrics: &self.app.metrics,
            session: &self.id,
        }
    }

    pub(crate) fn client_can_elicit(&self) -> bool {
        self.state.lock().unwrap().client_elicits
    }

    /// The identity that opened the session.
    pub(crate) fn owner(&self) -> &Identity {
        &self.owner
    }

    /// The upstream credential of `caller`'s requests (none unless the
    /// upstream is HTTP(S) and the policy has `upstreamAuth`).
    pub(crate) async fn upstream_credential(
        &self,
        caller: &Identity,
    ) -> Result<Option<crate::upstream::Credential>, String> {
        if !self.app.has_upstream_credentials() {
            return Ok(None);
        }
        self.app.credential_for(caller).await
    }

    /// Ask the client something (on `stream`) and wait for its answer.
    pub(crate) async fn ask_client(
        &self,
        stream: u64,
        method: &str,
        params: serde_json::Value,
        timeout: std::time::Duration,
    ) -> Result<serde_json::Value, ()> {
        let n = self.next_downstream.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock().unwrap();
            st.to_client.insert(n, ToClient::Facade(tx));
            let request = jsonrpc::request(&RequestId::number(n), method, &params);
            push(&mut st, stream, request, false);
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.state.lock().unwrap().to_client.remove(&n);
        match answer {
            Ok(Ok(msg)) => Ok(msg.to_value()),
            _ => Err(()),
        }
    }

    /// End the session: answer everything owed, close the streams that owe
    /// nothing more, drop the link (which stops the server process or ends
    /// the upstream session). All under one lock, so no request can slip in
    /// between the answers and the streams closing: one taken later sees
    /// `closed` and is answered on its stream, which is still open.
    pub fn close(&self, reason: &str) {
        {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                return;
            }
            st.closed = true;
            self.fail_pending(&mut st, reason, "session_closed");
            st.to_client.clear();
            st.subscriptions.clear();
            st.handovers.clear();
            if let Some(n) = st.legacy.listen.take() {
                self.channel.unregister(n);
                let channel = self.channel.clone();
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move { channel.cancel(n, "the session has ended").await });
                }
            }
            for s in st.streams.values_mut() {
                if s.open_ended() {
                    s.detach();
                }
            }
        }
        self.pending_gone.notify_waiters();
        if self.owns_channel {
            self.channel.close();
        }
    }

    /// Answer every pending request with an error (the session is ending).
    fn fail_pending(&self, st: &mut State, text: &str, reason: &str) {
        for (id, p) in std::mem::take(&mut st.pending) {
            self.app
                .metrics
                .observe_request(&p.method, "failed", p.started.elapsed());
            push(
                st,
                p.stream,
                error(&id, codes::INTERNAL_ERROR, text, reason),
                true,
            );
        }
    }
}

/// Queue on a stream; forget finished streams beyond the replay window.
/// Returns false when a notification was shed (the client is not reading).
fn push(st: &mut State, stream: u64, bytes: Bytes, response: bool) -> bool {
    push_item(st, stream, bytes, response, false)
}

fn push_item(st: &mut State, stream: u64, bytes: Bytes, response: bool, droppable: bool) -> bool {
    let Some(s) = st.streams.get_mut(&stream) else {
        return true;
    };
    let delivered = s.push(bytes, response, droppable);
    if s.finished() {
        st.finished.push_back(stream);
        while st.finished.len() > FINISHED_STREAMS_KEPT {
            if let Some(old) = st.finished.pop_front() {
                st.streams.remove(&old);
            }
        }
    }
    delivered
}

fn error(id: &RequestId, code: i64, message: &str, reason: &str) -> Bytes {
    jsonrpc::error_response(
        Some(id),
        code,
        message,
        Some(serde_json::json!({ "reason": reason })),
    )
}
