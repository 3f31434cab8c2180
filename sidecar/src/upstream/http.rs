//! Upstream over Streamable HTTP: one upstream MCP session per link.
//!
//! Each client message becomes a POST; a JSON answer or every event of an SSE
//! answer is reported with `related` = the request's id, so the router can
//! deliver it on that request's downstream stream. After the handshake a GET
//! stream carries the server's unrelated messages. A POST stream that the
//! server closes before answering (SEP-1699 polling) is resumed with GET and
//! `Last-Event-ID`. Dropping the link cancels everything and DELETEs the
//! upstream session.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Link, LinkEvent, LinkLimits};
use crate::jsonrpc::{Kind, Message, RequestId};
use crate::sse;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";
/// How often a POST stream closed early may be resumed before the call fails.
const MAX_RESUMES: u32 = 1000;

type HttpClient = Client<HttpConnector, http_body_util::Either<Full<Bytes>, Empty<Bytes>>>;

fn client() -> &'static HttpClient {
    static CLIENT: OnceLock<HttpClient> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector)
    })
}

struct State {
    uri: Uri,
    session_id: Mutex<Option<HeaderValue>>,
    version: Mutex<Option<HeaderValue>>,
    max: usize,
    events: mpsc::Sender<LinkEvent>,
    cancel: CancellationToken,
    get_started: AtomicBool,
}

/// Cancels the link's tasks and ends the upstream session when dropped.
struct EndSession(Arc<State>);

impl Drop for EndSession {
    fn drop(&mut self) {
        self.0.cancel.cancel();
        let Some(session) = self.0.session_id.lock().unwrap().clone() else {
            return;
        };
        let uri = self.0.uri.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let req = Request::delete(uri)
                    .header(SESSION_HEADER, session)
                    .body(http_body_util::Either::Right(Empty::new()))
                    .expect("static request parts are valid");
                let _ = tokio::time::timeout(Duration::from_secs(5), client().request(req)).await;
            });
        }
    }
}

pub fn connect(uri: Uri, limits: &LinkLimits) -> (Link, mpsc::Receiver<LinkEvent>) {
    let (tx, mut rx) = mpsc::channel::<Message>(limits.queue_depth);
    let (events_tx, events_rx) = mpsc::channel(limits.queue_depth);
    let state = Arc::new(State {
        uri,
        session_id: Mutex::new(None),
        version: Mutex::new(None),
        max: limits.max_message_bytes,
        events: events_tx,
        cancel: CancellationToken::new(),
        get_started: AtomicBool::new(false),
    });
    let guard = EndSession(state.clone());
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            tokio::spawn(post(state.clone(), msg));
        }
    });
    (
        Link {
            tx,
            _guard: Some(Box::new(guard)),
        },
        events_rx,
    )
}

impl State {
    fn request(&self, method: Method, body: Option<Bytes>) -> hyper::http::request::Builder {
        let mut req = Request::builder().method(method).uri(self.uri.clone());
        if body.is_some() {
            req = req
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, "application/json, text/event-stream");
        } else {
            req = req.header(ACCEPT, "text/event-stream");
        }
        if let Some(id) = self.session_id.lock().unwrap().clone() {
            req = req.header(SESSION_HEADER, id);
        }
        if let Some(v) = self.version.lock().unwrap().clone() {
            req = req.header(VERSION_HEADER, v);
        }
        req
    }

    async fn send(
        &self,
        req: Request<http_body_util::Either<Full<Bytes>, Empty<Bytes>>>,
    ) -> Option<Result<Response<Incoming>, String>> {
        tokio::select! {
            r = client().request(req) => Some(r.map_err(|e| error_chain(&e))),
            _ = self.cancel.cancelled() => None,
        }
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
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

async fn post(state: Arc<State>, msg: Message) {
    let req = state
        .request(Method::POST, Some(msg.bytes.clone()))
        .body(http_body_util::Either::Left(Full::new(msg.bytes.clone())))
        .expect("request parts are valid");
    let resp = match state.send(req).await {
        None => return,
        Some(Err(e)) => {
            return state
                .fail(&msg, format!("cannot reach the upstream MCP server: {e}"))
                .await
        }
        Some(Ok(resp)) => resp,
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
        return state.report(LinkEvent::Closed { reason }).await;
    }
    if msg.kind != Kind::Request {
        if msg.method() == "notifications/initialized"
            && status.is_success()
            && !state.get_started.swap(true, Ordering::SeqCst)
        {
            tokio::spawn(get_stream(state.clone()));
        }
        if !status.is_success() {
            state
                .fail(&msg, format!("upstream answered HTTP {status}"))
                .await;
        }
        return;
    }
    let related = msg.id.clone();
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if content_type.starts_with("text/event-stream") {
        return read_post_stream(&state, &msg, resp.into_body()).await;
    }
    let body = match Limited::new(resp.into_body(), state.max).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) => {
            return state
                .fail(&msg, format!("reading the upstream answer failed: {e}"))
                .await
        }
    };
    // Some servers answer errors with a JSON-RPC body and a 4xx status:
    // forward whatever parses as the answer to this request.
    match Message::parse(body.clone()) {
        Ok(answer) if answer.kind == Kind::Response && answer.id == related => {
            if is_initialize {
                remember_version(&state, &answer);
            }
            state
                .report(LinkEvent::Message {
                    bytes: answer.bytes,
                    related,
                })
                .await;
        }
        _ => {
            let snippet = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
            state
                .fail(&msg, format!("upstream answered HTTP {status}: {snippet}"))
                .await;
        }
    }
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

/// Read a POST's SSE answer until the response arrives, resuming with GET +
/// `Last-Event-ID` if the server closes the stream first.
async fn read_post_stream(state: &Arc<State>, msg: &Message, body: Incoming) {
    let related = msg.id.clone();
    let is_initialize = msg.method() == "initialize";
    let mut parser = sse::Parser::new(state.max);
    let mut body = Some(body);
    for _ in 0..MAX_RESUMES {
        if let Some(b) = body.take() {
            match pump(state, &mut parser, b, related.clone(), is_initialize).await {
                Pumped::Answered | Pumped::Cancelled => return,
                Pumped::Failed(reason) => return state.fail(msg, reason).await,
                Pumped::Ended => {}
            }
        }
        let Some(last) = parser.last_event_id.clone() else {
            return state
                .fail(
                    msg,
                    "the upstream closed the response stream before answering".into(),
                )
                .await;
        };
        let delay = Duration::from_millis(parser.retry_ms.unwrap_or(100).min(30_000));
        tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = state.cancel.cancelled() => return }
        let req = state
            .request(Method::GET, None)
            .header(LAST_EVENT_HEADER, last)
            .body(http_body_util::Either::Right(Empty::new()))
            .expect("request parts are valid");
        match state.send(req).await {
            None => return,
            Some(Ok(resp)) if resp.status().is_success() => body = Some(resp.into_body()),
            Some(Ok(resp)) => {
                return state
                    .fail(
                        msg,
                        format!(
                            "resuming the upstream stream failed: HTTP {}",
                            resp.status()
                        ),
                    )
                    .await
            }
            Some(Err(e)) => {
                return state
                    .fail(msg, format!("resuming the upstream stream failed: {e}"))
                    .await
            }
        }
    }
    state
        .fail(
            msg,
            "the upstream kept closing the response stream without answering".into(),
        )
        .await
}

enum Pumped {
    Answered,
    Ended,
    Cancelled,
    Failed(String),
}

async fn pump(
    state: &State,
    parser: &mut sse::Parser,
    mut body: Incoming,
    related: Option<RequestId>,
    is_initialize: bool,
) -> Pumped {
    loop {
        let frame = tokio::select! {
            f = body.frame() => f,
            _ = state.cancel.cancelled() => return Pumped::Cancelled,
        };
        let chunk = match frame {
            None => return Pumped::Ended,
            Some(Err(_)) => return Pumped::Ended,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        let events = match parser.feed(&chunk) {
            Ok(events) => events,
            Err(e) => return Pumped::Failed(e.to_string()),
        };
        let mut answered = false;
        for ev in events {
            if ev.data.is_empty() {
                continue;
            }
            let bytes = Bytes::from(ev.data);
            if related.is_some() {
                if let Ok(m) = Message::parse(bytes.clone()) {
                    if m.kind == Kind::Response && m.id == related {
                        if is_initialize {
                            remember_version(state, &m);
                        }
                        answered = true;
                    }
                }
            }
            state
                .report(LinkEvent::Message {
                    bytes,
                    related: related.clone(),
                })
                .await;
        }
        if answered {
            return Pumped::Answered;
        }
    }
}

/// The standalone GET stream: server requests and notifications not tied to a
/// client request. Reconnects (with `Last-Event-ID`) while the link lives.
async fn get_stream(state: Arc<State>) {
    let mut parser = sse::Parser::new(state.max);
    let mut failures = 0u32;
    while !state.cancel.is_cancelled() && failures < 5 {
        let mut req = state.request(Method::GET, None);
        if let Some(last) = parser.last_event_id.clone() {
            req = req.header(LAST_EVENT_HEADER, last);
        }
        let req = req
            .body(http_body_util::Either::Right(Empty::new()))
            .expect("request parts are valid");
        match state.send(req).await {
            None => return,
            Some(Ok(resp)) if resp.status() == StatusCode::METHOD_NOT_ALLOWED => return,
            Some(Ok(resp)) if resp.status() == StatusCode::NOT_FOUND => {
                let reason =
                    "the upstream MCP server no longer knows this session (HTTP 404)".to_string();
                return state.report(LinkEvent::Closed { reason }).await;
            }
            Some(Ok(resp)) if resp.status().is_success() => {
                failures = 0;
                if let Pumped::Cancelled =
                    pump(&state, &mut parser, resp.into_body(), None, false).await
                {
                    return;
                }
            }
            _ => failures += 1,
        }
        let delay = Duration::from_millis(
            parser
                .retry_ms
                .unwrap_or(500 << failures.min(4))
                .min(30_000),
        );
        tokio::select! { _ = tokio::time::sleep(delay) => {}, _ = state.cancel.cancelled() => return }
    }
}
