//! One downstream session and its private upstream link.
//!
//! Flow: a transport (HTTP or stdio) hands client messages to
//! [`Session::client_message`] with the stream their answers belong on; the
//! session forwards them over its link and routes everything the server sends
//! back ([`route`]): responses to the stream of their request, server requests
//! and notifications to the related stream or the standalone one. The
//! [`supervisor`] owns the link: it restarts a crashed server with backoff,
//! replays the client's handshake so the session survives, and answers every
//! request in flight with an error that says what happened.
//!
//! Invariant: every client request gets exactly one response, from the
//! server, from the facade's policy, or from the facade when the server fails
//! or the session ends. Only a request the client itself cancelled gets none,
//! as the MCP cancellation rules require.

pub mod ids;
pub mod manager;
mod route;
pub mod stream;
mod supervisor;
pub mod work;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::{oneshot, watch};

use crate::app::App;
use crate::jsonrpc::{self, codes, Kind, Message, RequestId};
use crate::pipeline::budget::SessionBudget;
use crate::pipeline::identity::Identity;
use crate::upstream::Link;
use stream::{Stream, StreamRx};

/// Server messages kept for a client that has no stream open yet.
const BACKLOG_DEPTH: usize = 256;
/// Finished streams kept for `Last-Event-ID` replay.
const FINISHED_STREAMS_KEPT: usize = 64;

/// A client request the session owes an answer. It is registered when the
/// request is taken, before anything else happens to it, so whoever removes
/// it (the server's answer, the pipeline, a crash, the session's end, the
/// client's cancellation) is the one who answers, exactly once.
#[derive(Debug)]
struct Pending {
    stream: u64,
    method: Box<str>,
    progress_token: Option<String>,
    started: Instant,
    route: AnswerRoute,
}

/// Where the answer to a pending request comes from.
#[derive(Debug)]
enum AnswerRoute {
    /// The facade's pipeline answers it (it is being policed, or the server
    /// already answered and the pipeline is filtering, or it timed out). A
    /// server "answer" to an id in this state is not accepted: the server
    /// was never asked, or is too late.
    Pipeline,
    /// Forwarded as is: the server's answer goes straight to the stream.
    Server,
    /// Forwarded by the pipeline, which wants the server's answer back.
    Intercept(oneshot::Sender<Message>),
}

impl AnswerRoute {
    fn is_upstream(&self) -> bool {
        !matches!(self, AnswerRoute::Pipeline)
    }
}

#[derive(Default)]
struct State {
    pending: HashMap<RequestId, Pending>,
    streams: HashMap<u64, Stream>,
    finished: VecDeque<u64>,
    standalone: Option<u64>,
    backlog: VecDeque<Bytes>,
    next_stream: u64,
    /// The client's `initialize` and whether it completed the handshake: both
    /// are replayed to a restarted server.
    initialize: Option<Bytes>,
    initialized: bool,
    protocol_version: Option<String>,
    /// Answers to requests the facade itself sent upstream.
    internal: HashMap<RequestId, oneshot::Sender<Message>>,
    /// Answers to requests the facade itself sent to the client.
    client_internal: HashMap<RequestId, oneshot::Sender<Message>>,
    /// The client declared the elicitation capability.
    client_elicits: bool,
    closed: bool,
}

/// Why a message could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("the session has ended")]
    Closed,
}

pub struct Session {
    pub id: Arc<str>,
    pub(crate) app: Arc<App>,
    state: Mutex<State>,
    link: watch::Sender<Option<Arc<Link>>>,
    /// Taken in turn by messages on their way to the server (see
    /// `send_upstream`).
    send_turn: tokio::sync::Mutex<()>,
    /// Milliseconds since `created` of the last client activity.
    last_activity: AtomicU64,
    created: Instant,
    next_internal: AtomicU64,
    pub(crate) budget: SessionBudget,
    /// Who opened the session; only they may use it.
    owner: Arc<Identity>,
}

impl Session {
    /// Create a session and start its upstream link.
    pub fn start(app: Arc<App>, id: Arc<str>, owner: Arc<Identity>) -> Arc<Session> {
        let (link, _) = watch::channel(None);
        let session = Arc::new(Session {
            id,
            app,
            state: Mutex::new(State::default()),
            link,
            send_turn: tokio::sync::Mutex::new(()),
            last_activity: AtomicU64::new(0),
            created: Instant::now(),
            next_internal: AtomicU64::new(1),
            budget: SessionBudget::default(),
            owner,
        });
        tokio::spawn(supervisor::run(session.clone()));
        session
    }

    pub fn protocol_version(&self) -> Option<String> {
        self.state.lock().unwrap().protocol_version.clone()
    }

    pub fn is_closed(&self) -> bool {
        self.state.lock().unwrap().closed
    }

    pub fn in_flight(&self) -> usize {
        self.state.lock().unwrap().pending.len()
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

    /// A client answer: to the facade's own request (elicitation), or to
    /// the server's.
    async fn client_response(&self, msg: Message) {
        if msg.id.as_ref().is_some_and(RequestId::is_reserved) {
            let waiter = self
                .state
                .lock()
                .unwrap()
                .client_internal
                .remove(msg.id.as_ref().expect("checked"));
            if let Some(tx) = waiter {
                let _ = tx.send(msg);
            }
            return;
        }
        let _ = self.send_upstream(msg).await;
    }

    /// Whether `caller` is the identity that opened this session (a
    /// session id is not a credential: another caller gets 404).
    pub fn owned_by(&self, caller: &Identity) -> bool {
        self.owner.subject == caller.subject && self.owner.method == caller.method
    }

    async fn client_request(self: &Arc<Self>, msg: Message, stream: u64, caller: &Arc<Identity>) {
        let id = msg.id.clone().expect("requests have ids");
        if id.is_reserved() {
            let text = format!(
                "request ids starting with \"{}\" are reserved by the facade",
                jsonrpc::RESERVED_ID_PREFIX
            );
            return self.answer(
                stream,
                error(&id, codes::INVALID_REQUEST, &text, "reserved_id"),
            );
        }
        let progress_token = if msg.mentions(b"progressToken") {
            progress_token_of(&msg)
        } else {
            None
        };
        let policed = matches!(msg.method(), "tools/call" | "tools/list");
        {
            let mut st = self.state.lock().unwrap();
            if st.closed {
                drop(st);
                return self.answer(
                    stream,
                    error(
                        &id,
                        codes::INTERNAL_ERROR,
                        "the session has ended; start a new one",
                        "session_closed",
                    ),
                );
            }
            if st.pending.contains_key(&id) {
                drop(st);
                let text = "a request with this id is still in flight; use a new id";
                return self.answer(
                    stream,
                    error(&id, codes::INVALID_REQUEST, text, "duplicate_id"),
                );
            }
            if msg.method() == "initialize" {
                st.initialize = Some(msg.bytes.clone());
                st.client_elicits = msg
                    .to_value()
                    .pointer("/params/capabilities/elicitation")
                    .is_some();
            }
            let pending = Pending {
                stream,
                method: msg.method.clone().unwrap_or_default(),
                progress_token,
                started: Instant::now(),
                route: if policed {
                    AnswerRoute::Pipeline
                } else {
                    AnswerRoute::Server
                },
            };
            st.pending.insert(id.clone(), pending);
        }
        match msg.method() {
            "tools/call" => self.clone().tools_call(msg, stream, caller.clone()).await,
            "tools/list" => self.clone().tools_list(msg, caller.clone()).await,
            _ => {
                let limit = self.app.limits.request_timeout;
                match tokio::time::timeout(limit, self.send_upstream(msg)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(reason)) => self.fail_request(&id, &reason),
                    Err(_) => self.time_out(vec![id]).await,
                }
            }
        }
    }

    async fn client_notification(self: &Arc<Self>, msg: Message) {
        match msg.method() {
            "notifications/initialized" => self.state.lock().unwrap().initialized = true,
            "notifications/cancelled" => self.client_cancelled(&msg),
            _ => {}
        }
        let _ = self.send_upstream(msg).await;
    }

    /// The client gave up on a request: no answer is owed any more, and a late
    /// one from the server is dropped.
    fn client_cancelled(&self, msg: &Message) {
        let value = msg.to_value();
        let Some(raw) = value.pointer("/params/requestId") else {
            return;
        };
        let id = RequestId::from_raw(&raw.to_string());
        let mut st = self.state.lock().unwrap();
        if let Some(p) = st.pending.remove(&id) {
            if let Some(s) = st.streams.get_mut(&p.stream) {
                s.forgo_response();
            }
            self.app
                .metrics
                .observe_request(&p.method, "cancelled", p.started.elapsed());
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
    async fn send_upstream(&self, msg: Message) -> Result<(), String> {
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

    /// Forward a policed request and wait (bounded) for its answer, which
    /// comes back here instead of going to the stream. `Ok(None)`: the
    /// request was answered another way (server gone, session ended, client
    /// cancelled). `Err(())`: it timed out; the server was told to cancel it
    /// and the pipeline still owes the answer.
    pub(crate) async fn forward_and_wait(
        &self,
        msg: Message,
        timeout: std::time::Duration,
    ) -> Result<Option<Message>, ()> {
        let id = msg.id.clone().expect("requests have ids");
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock().unwrap();
            match st.pending.get_mut(&id) {
                Some(p) if !p.route.is_upstream() => {
                    p.route = AnswerRoute::Intercept(tx);
                    p.started = Instant::now();
                }
                _ => return Ok(None),
            }
        }
        // The limit covers sending too: over HTTP the answer may come back
        // with the send itself.
        let exchange = async {
            if let Err(reason) = self.send_upstream(msg).await {
                self.fail_request(&id, &reason);
                return None;
            }
            rx.await.ok()
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(answer) => Ok(answer),
            Err(_) => {
                {
                    let mut st = self.state.lock().unwrap();
                    match st.pending.get_mut(&id) {
                        // Back to the pipeline, which answers with the
                        // timeout; a late server answer is dropped.
                        Some(p) if p.route.is_upstream() => p.route = AnswerRoute::Pipeline,
                        _ => return Ok(None),
                    }
                }
                self.cancel_upstream(&id, "mcp-warden: the call exceeded its time limit")
                    .await;
                Err(())
            }
        }
    }

    /// Fail forwarded requests the server has not answered within the
    /// request timeout (the pipeline times tools/call itself).
    pub async fn expire_requests(&self) {
        let limit = self.app.limits.request_timeout;
        let expired: Vec<RequestId> = self
            .state
            .lock()
            .unwrap()
            .pending
            .iter()
            .filter(|(_, p)| matches!(p.route, AnswerRoute::Server) && p.started.elapsed() > limit)
            .map(|(id, _)| id.clone())
            .collect();
        if !expired.is_empty() {
            self.time_out(expired).await;
        }
    }

    /// Answer forwarded requests with -32007 and tell the server to stop
    /// working on them.
    async fn time_out(&self, ids: Vec<RequestId>) {
        let limit = self.app.limits.request_timeout;
        let mut cancelled = Vec::new();
        {
            let mut st = self.state.lock().unwrap();
            for id in ids {
                let Some(p) = st.pending.remove(&id) else {
                    continue; // answered meanwhile
                };
                self.app
                    .metrics
                    .observe_request(&p.method, "timeout", p.started.elapsed());
                let text = format!(
                    "the MCP server did not answer `{}` within {} s",
                    p.method,
                    limit.as_secs()
                );
                let bytes = jsonrpc::error_response(
                    Some(&id),
                    crate::pipeline::refusal::TIMEOUT,
                    &text,
                    Some(serde_json::json!({ "reason": "timeout", "limit": limit.as_secs() })),
                );
                push(&mut st, p.stream, bytes, true);
                cancelled.push(id);
            }
        }
        for id in cancelled {
            self.cancel_upstream(&id, "mcp-warden: the request exceeded its time limit")
                .await;
        }
    }

    /// Tell the server to stop working on a request nobody waits for any more.
    async fn cancel_upstream(&self, id: &RequestId, reason: &str) {
        let params = serde_json::json!({
            "requestId": serde_json::from_str::<serde_json::Value>(id.as_json()).unwrap_or_default(),
            "reason": reason,
        });
        if let Ok(cancel) =
            Message::parse(jsonrpc::notification("notifications/cancelled", &params))
        {
            let _ = self.send_upstream(cancel).await;
        }
    }

    /// The pipeline's answer to a policed request: delivered unless the
    /// request was answered already (the session ended, the server crashed
    /// while it was in flight) or the client cancelled it.
    pub(crate) fn answer_call(&self, id: &RequestId, bytes: Bytes) {
        let mut st = self.state.lock().unwrap();
        if let Some(p) = st.pending.remove(id) {
            push(&mut st, p.stream, bytes, true);
        }
    }

    /// A request of the facade's own to the server, on the current link.
    pub(crate) async fn upstream_request(
        &self,
        method: &str,
        params: serde_json::Value,
    ) -> Result<Message, String> {
        // Through the same ordered hand-over as the client's messages: a
        // request of the facade's own never overtakes the client's handshake.
        self.internal_request(None, method, &params).await
    }

    /// Whether the client can answer an elicitation.
    pub(crate) fn client_can_elicit(&self) -> bool {
        self.state.lock().unwrap().client_elicits
    }

    /// Ask the client something (on `stream`) and wait for its answer.
    pub(crate) async fn ask_client(
        &self,
        stream: u64,
        method: &str,
        params: serde_json::Value,
        timeout: std::time::Duration,
    ) -> Result<serde_json::Value, ()> {
        let id = RequestId::internal(self.next_internal.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.state.lock().unwrap();
            st.client_internal.insert(id.clone(), tx);
            push(
                &mut st,
                stream,
                jsonrpc::request(&id, method, &params),
                false,
            );
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.state.lock().unwrap().client_internal.remove(&id);
        match answer {
            Ok(Ok(msg)) => Ok(msg.to_value()),
            _ => Err(()),
        }
    }

    /// Answer a request the transport could not even parse.
    pub fn answer_error(&self, stream: u64, bytes: Bytes) {
        self.answer(stream, bytes)
    }

    /// Put a facade-made answer on a stream.
    fn answer(&self, stream: u64, bytes: Bytes) {
        let mut st = self.state.lock().unwrap();
        push(&mut st, stream, bytes, true);
    }

    /// Answer a pending request with an upstream failure.
    fn fail_request(&self, id: &RequestId, reason: &str) {
        let mut st = self.state.lock().unwrap();
        if let Some(p) = st.pending.remove(id) {
            self.app
                .metrics
                .observe_request(&p.method, "failed", p.started.elapsed());
            let bytes = error(id, codes::INTERNAL_ERROR, reason, "upstream_failed");
            push(&mut st, p.stream, bytes, true);
        }
    }

    /// The server went away: answer every request it had. Requests still in
    /// the pipeline are not lost with it; they go to the next server.
    fn fail_in_flight(&self, reason: &str) {
        let mut st = self.state.lock().unwrap();
        self.fail_pending(&mut st, reason, "upstream_failed", AnswerRoute::is_upstream);
        st.internal.clear();
    }

    fn fail_pending(
        &self,
        st: &mut State,
        text: &str,
        reason: &str,
        which: impl Fn(&AnswerRoute) -> bool,
    ) {
        let ids: Vec<RequestId> = st
            .pending
            .iter()
            .filter(|(_, p)| which(&p.route))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            let p = st.pending.remove(&id).expect("listed above");
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
            self.fail_pending(&mut st, reason, "session_closed", |_| true);
            st.internal.clear();
            st.client_internal.clear();
            for s in st.streams.values_mut() {
                if s.open_ended() {
                    s.detach();
                }
            }
        }
        self.link.send_replace(None);
    }

    /// Send a request of the facade's own and wait for its answer.
    /// On `link` directly (the handshake replay, before the link is
    /// published), else on the current link in turn.
    async fn internal_request(
        &self,
        link: Option<&Link>,
        method: &str,
        params: &serde_json::Value,
    ) -> Result<Message, String> {
        let id = RequestId::internal(self.next_internal.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.state.lock().unwrap().internal.insert(id.clone(), tx);
        let msg = Message::parse(jsonrpc::request(&id, method, params))
            .map_err(|_| "internal request".to_string())?;
        match link {
            Some(link) => {
                if let Some(answer) = link.send(msg).await.map_err(|e| e.to_string())? {
                    self.server_response(answer);
                }
            }
            None => self.send_upstream(msg).await?,
        }
        match tokio::time::timeout(self.app.limits.upstream_wait, rx).await {
            Ok(Ok(answer)) => Ok(answer),
            _ => Err(format!("the MCP server did not answer `{method}`")),
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

fn progress_token_of(msg: &Message) -> Option<String> {
    let value = msg.to_value();
    value
        .pointer("/params/_meta/progressToken")
        .map(|t| t.to_string())
}
