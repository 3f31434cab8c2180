//! Upstream over Streamable HTTP: one upstream MCP session per link.
//!
//! Each client message becomes a POST, sent from the task that hands it over
//! on one of the link's own keep-alive connections ([`conn`]), which that
//! task drives itself: a call costs no hop to a connection task and back.
//! A plain JSON answer is returned to the caller directly; an SSE answer is
//! handed to a task that reports every event with `related` = the request's
//! id, so the router can deliver it on that request's downstream stream.
//! After the handshake a GET stream carries the server's unrelated messages;
//! it is attached before anything else is sent, so a server message that
//! belongs to no request is never lost for want of a stream. A POST stream
//! that the server closes before answering (SEP-1699 polling) is resumed
//! with GET and `Last-Event-ID` at once, then as the server's `retry` hint
//! paces. Dropping the link cancels everything and DELETEs the upstream
//! session.
//!
//! Some servers write an `application/json` answer as several JSON texts
//! ([`JsonStream`]): notifications, then the result. Such a body is relayed
//! message by message like an SSE answer; a `subscriptions/listen` is read
//! as it comes, since it never ends while the subscription lives.
//!
//! A modern server (2026-07-28, [`LinkMode::modern`]) has no session and no
//! GET stream: every POST carries `MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name` (for the tasks extension's requests: the task id) and the
//! tool's `Mcp-Param-*` headers, taken from the body the
//! facade sends (never from what a client sent), and a request is cancelled
//! by closing its stream ([`abort`]).
//!
//! The connections are the [`crate::net`] pool's: `https://` (TLS, HTTP/2
//! when the server offers it) or `http://` on loopback. A redirect is never
//! followed: to another host it is an egress refusal (audited), to the same
//! host an error that names the URL to configure. The upstream credential
//! ([`Credential`]) is a header on each request: the one the request was
//! sent with, or the link's own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, Request, StatusCode, Uri};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

mod streams;

use super::{Credential, HttpTarget, LinkEvent, LinkLimits, LinkMode, UpstreamError};
use crate::json_stream::JsonStream;
use crate::jsonrpc::{Kind, Message, RequestId};
use crate::net::pool::{Exchange, Pool};
use crate::net::{EgressRefusal, Endpoint};
use crate::sse;
pub use streams::hold;
use streams::{get_stream, read_json_stream, read_post_stream};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// How long the client's `notifications/initialized` waits for the GET
/// stream to attach before the link goes on without it (the stream keeps
/// attaching behind it). Servers that flush their SSE headers at once attach
/// in milliseconds; a server that sends no headers before its first event
/// (Node's `writeHead` without `flushHeaders`) never attaches early, and a
/// longer wait only made every legacy session through the facade start that
/// much later.
const GET_ATTACH_WAIT: Duration = Duration::from_secs(1);
/// How often a POST stream closed early may be resumed before the call fails.
const MAX_RESUMES: u32 = 1000;

/// One upstream MCP session: where it is, what it negotiated, its connections.
pub struct State {
    uri: Uri,
    host: HeaderValue,
    pool: Pool,
    session_id: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    max: usize,
    events: mpsc::Sender<LinkEvent>,
    cancel: CancellationToken,
    get_started: AtomicBool,
    mode: LinkMode,
    /// The credential of the link's own requests (see [`LinkMode::credential`]).
    credential: Mutex<Option<Credential>>,
    /// Requests on their way, by the facade's id: cancelling one closes its stream.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
}

/// Forgets a request's cancellation handle when its exchange ends.
struct InFlight {
    state: Arc<State>,
    id: RequestId,
    token: CancellationToken,
    /// Dropped with the exchange, however it ends: see [`hold`].
    ended: Option<tokio::sync::oneshot::Sender<()>>,
}

impl InFlight {
    fn start(state: &Arc<State>, id: &RequestId) -> InFlight {
        let token = state.cancel.child_token();
        state
            .in_flight
            .lock()
            .unwrap()
            .insert(id.clone(), token.clone());
        InFlight {
            state: state.clone(),
            id: id.clone(),
            token,
            ended: None,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.state.in_flight.lock().unwrap().remove(&self.id);
    }
}

/// Cancel request `id` by closing its stream: how a modern server is told.
/// `false` for a legacy server (it is told with `notifications/cancelled`)
/// or a request no longer on its way.
pub fn abort(state: &State, id: &RequestId) -> bool {
    if !state.mode.modern {
        return false;
    }
    match state.in_flight.lock().unwrap().remove(id) {
        Some(token) => {
            token.cancel();
            true
        }
        None => false,
    }
}

/// Cancels the link's tasks and ends the upstream session when dropped.
pub struct EndSession(Arc<State>);

impl Drop for EndSession {
    fn drop(&mut self) {
        self.0.cancel.cancel();
        let Some(session) = self.0.session_id.lock().unwrap().clone() else {
            return;
        };
        let state = self.0.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let req = state
                    .request(Method::DELETE, None, None)
                    .header(SESSION_HEADER, session)
                    .body(Full::new(Bytes::new()))
                    .expect("static request parts are valid");
                let delete = async {
                    if let Ok(Exchange { resp, mut conn }) = state.pool.send(req).await {
                        let _ = conn.drive(resp.into_body().collect()).await;
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(5), delete).await;
            });
        }
    }
}

/// A new link to `target`. Nothing is connected until the first message.
pub fn connect(
    target: &HttpTarget,
    limits: &LinkLimits,
    mode: LinkMode,
) -> Result<(Arc<State>, EndSession, mpsc::Receiver<LinkEvent>), UpstreamError> {
    let (events_tx, events_rx) = mpsc::channel(limits.queue_depth);
    let endpoint = Endpoint::of(&target.uri).map_err(UpstreamError::BadUrl)?;
    let host = HeaderValue::from_str(&endpoint.authority)
        .map_err(|_| UpstreamError::BadUrl(format!("bad host in {}", target.uri)))?;
    let credential = Mutex::new(mode.credential.clone());
    let state = Arc::new(State {
        uri: target.uri.clone(),
        host,
        pool: Pool::new(target.client.clone(), endpoint),
        credential,
        session_id: Mutex::new(None),
        version: Mutex::new(None),
        max: limits.max_message_bytes,
        events: events_tx,
        cancel: CancellationToken::new(),
        get_started: AtomicBool::new(false),
        mode,
        in_flight: Mutex::new(HashMap::new()),
    });
    let guard = EndSession(state.clone());
    Ok((state, guard, events_rx))
}

impl State {
    fn request(
        &self,
        method: Method,
        body: Option<&Bytes>,
        credential: Option<&Credential>,
    ) -> hyper::http::request::Builder {
        let path = self
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, self.host.clone());
        if body.is_some() {
            req = req
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json, text/event-stream");
        } else {
            req = req.header(ACCEPT, "text/event-stream");
        }
        let own = self.credential.lock().unwrap().clone();
        if let Some((name, value)) = credential.or(own.as_ref()).and_then(Credential::header) {
            req = req.header(name, value.clone());
        }
        if self.mode.modern {
            return req.header(VERSION_HEADER, crate::era::LATEST_MODERN);
        }
        if let Some(id) = self.session_id.lock().unwrap().clone() {
            req = req.header(SESSION_HEADER, id);
        }
        if let Some(v) = self.version.lock().unwrap().clone() {
            req = req.header(VERSION_HEADER, v);
        }
        req
    }

    /// The standard headers of a modern request, from the body sent.
    fn standard_headers(
        &self,
        mut req: hyper::http::request::Builder,
        msg: &Message,
    ) -> hyper::http::request::Builder {
        let method = msg.method();
        if let Ok(v) = HeaderValue::from_str(&crate::era::encode_header_value(method)) {
            req = req.header(METHOD_HEADER, v);
        }
        let named = matches!(method, "tools/call" | "prompts/get" | "resources/read");
        // The tasks extension's requests carry the task id as `Mcp-Name`.
        // The name is read from the bytes: a value of the whole request
        // (arguments and all) is not needed for one member.
        let tasks = matches!(method, "tasks/get" | "tasks/update" | "tasks/cancel");
        if named || tasks {
            if let Some(name) = crate::era::mirrored_name_of(method, &msg.bytes) {
                if let Ok(v) = HeaderValue::from_str(&crate::era::encode_header_value(&name)) {
                    req = req.header(NAME_HEADER, v);
                }
            }
        }
        if named {
            if let Some(mirror) = &self.mode.param_headers {
                for (name, value) in mirror(msg) {
                    if let Ok(v) = HeaderValue::from_str(&value) {
                        req = req.header(name, v);
                    }
                }
            }
        }
        req
    }

    async fn report(&self, event: LinkEvent) {
        let _ = self.events.send(event).await;
    }

    async fn fail(&self, msg: &Message, reason: String) {
        match (&msg.kind, &msg.id) {
            (Kind::Request, Some(id)) => {
                self.report(LinkEvent::Failed {
                    id: id.clone(),
                    reason,
                })
                .await
            }
            _ => {
                tracing::warn!(method = msg.method(), %reason, "upstream did not accept a message")
            }
        }
    }

    /// Send one request on a pooled connection, unless the link is closing.
    /// A redirect is an error (never followed).
    async fn exchange(&self, req: Request<Full<Bytes>>) -> Option<Result<Exchange, String>> {
        let sent = tokio::select! {
            r = self.pool.send(req) => r,
            _ = self.cancel.cancelled() => return None,
        };
        Some(match sent {
            Ok(ex) if ex.resp.status().is_redirection() => Err(self.redirected(&ex)),
            Ok(ex) => Ok(ex),
            Err(e) => Err(e.to_string()),
        })
    }

    /// Why a redirect is not followed: to another host it is an egress
    /// refusal (reported to the observer: logged, counted, audited).
    fn redirected(&self, ex: &Exchange) -> String {
        let status = ex.resp.status();
        let location = ex
            .resp
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let here = self.pool.endpoint();
        let target = location
            .parse::<Uri>()
            .ok()
            .filter(|u| u.scheme().is_some())
            .and_then(|u| Endpoint::of(&u).ok());
        match target {
            Some(there) if !here.same_origin(&there) => {
                let shown: String = location.chars().take(200).collect();
                self.pool
                    .client()
                    .refuse(EgressRefusal {
                        reason: "redirect",
                        host: there.host.clone(),
                        address: None,
                        detail: format!(
                            "the upstream MCP server redirected (HTTP {}) to another host, {shown}; the facade never follows redirects",
                            status.as_u16()
                        ),
                    })
                    .to_string()
            }
            _ => format!(
                "the upstream MCP server answered with a redirect (HTTP {} to {}); the facade does not follow redirects: configure the URL it names",
                status.as_u16(),
                location.chars().take(200).collect::<String>()
            ),
        }
    }
}

/// Tracing on: the trace context a request carries in `_meta` (the
/// facade's span, put there by the session) goes in the W3C headers too,
/// for servers and gateways that read them there.
fn trace_headers(
    mut req: hyper::http::request::Builder,
    msg: &Message,
) -> hyper::http::request::Builder {
    if msg.kind != Kind::Request || !msg.mentions(b"traceparent") {
        return req;
    }
    let value = msg.to_value();
    let Some(meta) = value.pointer("/params/_meta") else {
        return req;
    };
    for key in ["traceparent", "tracestate", "baggage"] {
        if let Some(v) = meta.get(key).and_then(serde_json::Value::as_str) {
            if let Ok(v) = HeaderValue::from_str(v) {
                req = req.header(key, v);
            }
        }
    }
    req
}

/// Deliver one client message as a POST. Returns the server's answer when it
/// came back as plain JSON; an SSE answer goes on through the link's events.
/// A request that cannot be delivered is an error the caller answers.
pub async fn post(
    state: &Arc<State>,
    msg: Message,
    credential: Option<&Credential>,
) -> Result<Option<Message>, UpstreamError> {
    post_tracked(state, msg, credential, None).await
}

async fn post_tracked(
    state: &Arc<State>,
    msg: Message,
    credential: Option<&Credential>,
    ended: Option<tokio::sync::oneshot::Sender<()>>,
) -> Result<Option<Message>, UpstreamError> {
    if state.mode.modern && msg.kind != Kind::Request {
        // Stateless HTTP has no client notifications (a cancellation is the
        // stream closing) and the server sends the facade no requests.
        return Ok(None);
    }
    if let (Some(c), false) = (credential, state.mode.modern) {
        // A legacy link is one caller's session: its own requests (GET
        // stream, resumption, DELETE) carry that caller's latest credential.
        // A modern link serves every caller and keeps none of theirs.
        *state.credential.lock().unwrap() = Some(c.clone());
    }
    match (&msg.kind, &msg.id) {
        (Kind::Request, Some(id)) => {
            let mut in_flight = InFlight::start(state, id);
            in_flight.ended = ended;
            let token = in_flight.token.clone();
            tokio::select! {
                sent = post_message(state, msg, Some(in_flight), credential) => sent,
                () = token.cancelled() => Err(UpstreamError::Refused("the request was cancelled".into())),
            }
        }
        _ => post_message(state, msg, None, credential).await,
    }
}

async fn post_message(
    state: &Arc<State>,
    msg: Message,
    in_flight: Option<InFlight>,
    credential: Option<&Credential>,
) -> Result<Option<Message>, UpstreamError> {
    // An HTTP body may hold line breaks, but the server behind this URL may
    // be a gateway to a stdio server: send one line, as to every framed link.
    let body = match crate::framing::one_line(&msg.bytes) {
        std::borrow::Cow::Borrowed(_) => msg.bytes.clone(),
        std::borrow::Cow::Owned(line) => Bytes::from(line),
    };
    let mut req = state.request(Method::POST, Some(&body), credential);
    if state.mode.modern {
        req = state.standard_headers(req, &msg);
    }
    if crate::spans::enabled() {
        req = trace_headers(req, &msg);
    }
    let req = req.body(Full::new(body)).expect("request parts are valid");
    let Exchange { resp, mut conn } = match state.exchange(req).await {
        None => return Err(UpstreamError::Closed),
        Some(Err(e)) => {
            return refuse(
                state,
                &msg,
                format!("cannot reach the upstream MCP server: {e}"),
            )
            .await
        }
        Some(Ok(exchange)) => exchange,
    };
    let is_initialize = msg.kind == Kind::Request && msg.method() == "initialize";
    if is_initialize {
        if let Some(id) = resp.headers().get(SESSION_HEADER) {
            *state.session_id.lock().unwrap() = Some(id.clone());
        }
    }
    let status = resp.status();
    if status == StatusCode::NOT_FOUND
        && state.session_id.lock().unwrap().is_some()
        && !is_initialize
    {
        let reason = "the upstream MCP server no longer knows this session (HTTP 404)".to_string();
        state
            .report(LinkEvent::Closed {
                reason: reason.clone(),
            })
            .await;
        return Err(UpstreamError::Refused(reason));
    }
    if msg.kind != Kind::Request {
        let _ = conn.drive(resp.into_body().collect()).await;
        state.pool.release(conn);
        if msg.method() == "notifications/initialized"
            && status.is_success()
            && !state.get_started.swap(true, Ordering::SeqCst)
        {
            // Attached before this send returns: the channel sends nothing
            // else until then, so whatever the server says outside a request
            // after the handshake has a stream to arrive on.
            let (attached_tx, attached) = tokio::sync::oneshot::channel();
            tokio::spawn(get_stream(state.clone(), attached_tx));
            let _ = tokio::time::timeout(GET_ATTACH_WAIT, attached).await;
        }
        if !status.is_success() {
            state
                .fail(&msg, format!("upstream answered HTTP {status}"))
                .await;
        }
        return Ok(None);
    }
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        // The stream may last as long as the call: it keeps the connection.
        conn.detach();
        tokio::spawn(read_post_stream(
            state.clone(),
            msg,
            resp.into_body(),
            in_flight,
        ));
        return Ok(None);
    }
    if msg.method() == "subscriptions/listen" && status.is_success() {
        // A subscription written as JSON texts, one after another, for as
        // long as it lives: read it as it comes, never to its end.
        conn.detach();
        tokio::spawn(read_json_stream(
            state.clone(),
            msg,
            resp.into_body(),
            in_flight,
        ));
        return Ok(None);
    }
    let body = match conn
        .drive(Limited::new(resp.into_body(), state.max).collect())
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            return refuse(
                state,
                &msg,
                format!("reading the upstream answer failed: {e}"),
            )
            .await
        }
    };
    state.pool.release(conn);
    // Some servers answer errors with a JSON-RPC body and a 4xx status:
    // whatever parses as the answer to this request is the answer.
    match Message::parse(body.clone()) {
        Ok(answer) if answer.kind == Kind::Response && answer.id == msg.id => {
            if is_initialize {
                remember_version(state, &answer);
            }
            Ok(Some(answer))
        }
        _ if relay_json_texts(state, &msg, &body).await => Ok(None),
        _ => {
            let mut snippet = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            if let Some(c) = credential {
                snippet = c.scrub(&snippet);
            }
            refuse(
                state,
                &msg,
                format!("upstream answered HTTP {status}: {snippet}"),
            )
            .await
        }
    }
}

/// A JSON body of several texts, one after another (notifications, then
/// the answer), delivered as an SSE answer would be: each in order, related
/// to the request. `false` (nothing delivered) unless it holds the answer.
async fn relay_json_texts(state: &State, msg: &Message, body: &Bytes) -> bool {
    let Ok(texts) = JsonStream::new(state.max).feed(body) else {
        return false;
    };
    let answered = texts.iter().any(|bytes| {
        Message::parse(bytes.clone()).is_ok_and(|m| m.kind == Kind::Response && m.id == msg.id)
    });
    if !answered || texts.len() < 2 {
        return false;
    }
    for bytes in texts {
        state
            .report(LinkEvent::Message {
                bytes,
                related: msg.id.clone(),
            })
            .await;
    }
    true
}

/// A message the server did not take: requests fail with `reason`; anything
/// else is logged (nobody waits for it).
async fn refuse(
    state: &State,
    msg: &Message,
    reason: String,
) -> Result<Option<Message>, UpstreamError> {
    if msg.kind == Kind::Request {
        return Err(UpstreamError::Refused(reason));
    }
    state.fail(msg, reason).await;
    Ok(None)
}

fn remember_version(state: &State, answer: &Message) {
    let value = answer.to_value();
    if let Some(v) = value
        .pointer("/result/protocolVersion")
        .and_then(|v| v.as_str())
    {
        if let Ok(v) = HeaderValue::from_str(v) {
            *state.version.lock().unwrap() = Some(v);
        }
    }
}
