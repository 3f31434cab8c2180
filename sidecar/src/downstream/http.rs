//! Downstream Streamable HTTP on `/mcp`: the way clients reach the facade.
//!
//! Per request, in order: Host/Origin guard (DNS rebinding) → method routing
//! (POST sends messages, GET opens or resumes a server stream, DELETE ends a
//! session) → header checks (`Accept`, `Content-Type`, `Mcp-Session-Id`,
//! `MCP-Protocol-Version`) → bounded body → JSON-RPC parse → the session.
//!
//! A POST that carries a request is answered with plain JSON when the first
//! thing the server sends for it is the answer (the common, cheapest case),
//! and with an SSE stream as soon as anything comes first (progress,
//! elicitation, logging). SSE events carry ids (`<stream>-<seq>`) so a client
//! can resume with `Last-Event-ID`.

// Checks return the early response as their error: it is the handler's
// answer, built once per rejected request, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{
    HeaderMap, HeaderValue, ACCEPT, ALLOW, AUTHORIZATION, CACHE_CONTROL, CONNECTION, CONTENT_TYPE,
    HOST, ORIGIN, WWW_AUTHENTICATE,
};
use hyper::{Method, Request, Response, StatusCode};

use super::forward;
use crate::app::App;
use crate::auth::{self, AuthFailure};
use crate::jsonrpc::{self, codes, split_batch, Kind, Message};
use crate::pipeline::audit::{self, Record};
use crate::pipeline::identity::Identity;
use crate::pipeline::refusal::Refusal;
use crate::session::ids::Owner;
use crate::session::stream::{Out, StreamRx};
use crate::session::work::Work;
use crate::session::Session;
use crate::sse;

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
pub const LAST_EVENT_HEADER: &str = "last-event-id";

/// Protocol versions accepted in `MCP-Protocol-Version` (besides whatever the
/// session negotiated with the server, so newer servers keep working).
pub const SUPPORTED_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Versions that allow JSON-RPC batches.
const BATCH_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26"];
/// Versions whose SSE streams start with a SEP-1699 priming event.
const PRIMING_FROM: &str = "2025-11-25";
/// Reconnection delay advertised in priming events.
const RETRY_MS: u64 = 1000;

pub type ResponseBody = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// Handle one HTTP request to the MCP endpoint.
pub async fn handle(app: Arc<App>, req: Request<Incoming>) -> Response<ResponseBody> {
    // A POST refused before its body was read (wrong Host, unknown path,
    // bad token) leaves the connection unusable; the client must know it
    // closes, or its next request on it races the close and is lost.
    let post = req.method() == Method::POST;
    let resp = route(app, req).await;
    if post {
        close_if_refused(resp)
    } else {
        resp
    }
}

async fn route(app: Arc<App>, req: Request<Incoming>) -> Response<ResponseBody> {
    if req.uri().path() != "/mcp" {
        return json_error(
            StatusCode::NOT_FOUND,
            codes::INVALID_REQUEST,
            "Not Found: the MCP endpoint is /mcp",
        );
    }
    if let Err(reason) = check_host_and_origin(&app, req.headers()) {
        app.metrics
            .http_rejections
            .with_label_values(&["host_or_origin"])
            .inc();
        return json_error(StatusCode::FORBIDDEN, codes::INVALID_REQUEST, &reason);
    }
    // Authenticate every request: a session id is not a credential.
    let token = auth::bearer(
        req.headers()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok()),
    );
    let caller = match app.policy.load().auth.authenticate(token) {
        Ok(identity) => Arc::new(identity),
        Err(failure) => return unauthorized(&app, failure),
    };
    // Another replica's session: relay it there (forged ids answer 404).
    let owner = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|id| app.session_ids.owner(id));
    match owner {
        Some(Owner::Peer(peer)) => return forward::to_peer(&app, &peer, req).await,
        Some(Owner::Forged) => {
            return close_if_refused(reject(
                &app,
                "forged_session",
                StatusCode::NOT_FOUND,
                "Not Found: the session does not exist or has ended; initialize a new one",
            ))
        }
        _ => {}
    }
    match *req.method() {
        Method::POST => post(app, req, caller).await,
        Method::GET => get(app, req, &caller),
        Method::DELETE => delete(app, req, &caller),
        _ => {
            let mut resp = json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                codes::INVALID_REQUEST,
                "use POST, GET or DELETE on /mcp",
            );
            resp.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            resp
        }
    }
}

async fn post(
    app: Arc<App>,
    req: Request<Incoming>,
    caller: Arc<Identity>,
) -> Response<ResponseBody> {
    let (parts, body) = req.into_parts();
    if !accepts(&parts.headers, "application/json") || !accepts(&parts.headers, "text/event-stream")
    {
        return reject(
            &app,
            "not_acceptable",
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: the client must accept both application/json and text/event-stream",
        );
    }
    let content_type = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !content_type
        .to_ascii_lowercase()
        .starts_with("application/json")
    {
        return reject(
            &app,
            "content_type",
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Unsupported Media Type: the body must be application/json",
        );
    }
    let session = match session_of(&app, &parts.headers, &caller) {
        Ok(session) => session,
        Err(resp) => return resp,
    };
    if let Some(session) = &session {
        if let Err(resp) = check_version(&app, &parts.headers, session) {
            return resp;
        }
    }
    let body = match tokio::time::timeout(
        app.limits.body_read_timeout,
        read_body(body, app.limits.max_body_bytes),
    )
    .await
    {
        Ok(Ok(body)) => body,
        Ok(Err(BodyError::TooLarge)) => {
            let text = format!(
                "the message is larger than the {}-byte limit",
                app.limits.max_body_bytes
            );
            return reject(&app, "body_too_large", StatusCode::PAYLOAD_TOO_LARGE, &text);
        }
        Ok(Err(BodyError::Read)) => {
            return reject(
                &app,
                "body_read",
                StatusCode::BAD_REQUEST,
                "the request body could not be read",
            )
        }
        Err(_) => {
            let text = format!(
                "the request body did not arrive within {} s",
                app.limits.body_read_timeout.as_secs()
            );
            return reject(&app, "body_timeout", StatusCode::REQUEST_TIMEOUT, &text);
        }
    };
    match split_batch(&body) {
        Err(e) => json_error(StatusCode::BAD_REQUEST, e.code(), &e.to_string()),
        Ok(Some(elements)) => batch(app, session, elements, caller).await,
        Ok(None) => single(app, session, body, caller).await,
    }
}

enum BodyError {
    TooLarge,
    Read,
}

/// Read a body of at most `max` bytes. An oversized body is still drained
/// (up to 4x the limit) before the 413: answering while the client is
/// still sending makes its TCP stack drop the answer with the connection.
async fn read_body(mut body: Incoming, max: usize) -> Result<Bytes, BodyError> {
    let mut buf = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| BodyError::Read)?.into_data() else {
            continue;
        };
        seen += data.len();
        if seen > max.saturating_mul(4) {
            return Err(BodyError::TooLarge);
        }
        if seen <= max {
            buf.extend_from_slice(&data);
        }
    }
    if seen > max {
        return Err(BodyError::TooLarge);
    }
    Ok(buf.freeze())
}

async fn single(
    app: Arc<App>,
    session: Option<Arc<Session>>,
    body: Bytes,
    caller: Arc<Identity>,
) -> Response<ResponseBody> {
    let msg = match Message::parse(body) {
        // `params.auth` is the stdio transport's credential; it never goes upstream.
        Ok(msg) => auth::strip_params_auth(msg).0,
        Err((e, id)) => {
            app.metrics
                .http_rejections
                .with_label_values(&["invalid_message"])
                .inc();
            return json_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(id.as_ref(), e.code(), &e.to_string(), None),
            );
        }
    };
    let is_initialize = msg.kind == Kind::Request && msg.method() == "initialize";
    let (session, new_session) = match (session, is_initialize) {
        (Some(_), true) => {
            let text = "Invalid Request: this session is already initialized; send initialize without Mcp-Session-Id to start a new one";
            return json_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(msg.id.as_ref(), codes::INVALID_REQUEST, text, None),
            );
        }
        (Some(session), false) => (session, false),
        (None, false) => {
            return reject(
                &app,
                "missing_session",
                StatusCode::BAD_REQUEST,
                "Bad Request: Mcp-Session-Id header is required (initialize first)",
            );
        }
        (None, true) => {
            if app.draining.load(Ordering::Relaxed) {
                return reject(
                    &app,
                    "draining",
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the facade is shutting down; connect again to reach another replica",
                );
            }
            match app.sessions.create(&app, caller.clone()) {
                Ok(session) => (session, true),
                Err(e) => {
                    return reject(
                        &app,
                        "too_many_sessions",
                        StatusCode::SERVICE_UNAVAILABLE,
                        &e.to_string(),
                    )
                }
            }
        }
    };
    if msg.kind != Kind::Request {
        session.client_message(msg, 0, &caller).await;
        return empty(StatusCode::ACCEPTED);
    }
    // Tool calls can run long: give 2025-11-25 clients a resumable stream
    // from the start (priming event + retry), as SDK servers do.
    let resumable = msg.method() == "tools/call" && priming_version(&session);
    let id = msg.id.clone();
    let (stream, rx) = session.open_stream(1);
    let work = Work::new(&session, msg, stream, &caller);
    let mut resp = answer(rx, stream, &session, resumable, id.as_ref(), work).await;
    if new_session {
        if resp.status() != StatusCode::OK || session.protocol_version().is_none() {
            // The server refused initialize: no session was established.
            app.sessions.remove(&app, &session.id, "initialize failed");
        } else if let Ok(v) = HeaderValue::from_str(&session.id) {
            resp.headers_mut().insert(SESSION_HEADER, v);
        }
    }
    resp
}

/// JSON-RPC batches: only for the protocol versions that had them.
async fn batch(
    app: Arc<App>,
    session: Option<Arc<Session>>,
    elements: Vec<Bytes>,
    caller: Arc<Identity>,
) -> Response<ResponseBody> {
    let version = session.as_ref().and_then(|s| s.protocol_version());
    let Some(session) = session.filter(|_| {
        version
            .as_deref()
            .is_some_and(|v| BATCH_VERSIONS.contains(&v))
    }) else {
        let text = match version {
            Some(v) => format!("Invalid Request: protocol version {v} does not allow JSON-RPC batches; send one message per POST"),
            None => "Invalid Request: a batch cannot initialize a session; send initialize alone".to_string(),
        };
        return reject(&app, "batch_not_allowed", StatusCode::BAD_REQUEST, &text);
    };
    let parsed: Vec<_> = elements.into_iter().map(Message::parse).collect();
    let owed = parsed
        .iter()
        .filter(|m| !matches!(m, Ok(m) if m.kind != Kind::Request))
        .count();
    if owed == 0 {
        for msg in parsed.into_iter().flatten() {
            session.client_message(msg, 0, &caller).await;
        }
        return empty(StatusCode::ACCEPTED);
    }
    let (stream, rx) = session.open_stream(owed);
    for item in parsed {
        match item {
            Ok(msg) => Work::new(&session, msg, stream, &caller).start(),
            Err((e, id)) => session.answer_error(
                stream,
                jsonrpc::error_response(id.as_ref(), e.code(), &e.to_string(), None),
            ),
        }
    }
    sse_response(rx, Some(stream))
}

/// Run the request's work until the first item of its stream, then choose:
/// plain JSON when that item is the answer, else SSE (which carries the
/// rest of the work along, so no other task is involved either way).
async fn answer(
    mut rx: StreamRx,
    stream: u64,
    session: &Session,
    resumable: bool,
    id: Option<&jsonrpc::RequestId>,
    mut work: Work,
) -> Response<ResponseBody> {
    if resumable {
        let priming = sse::encode_priming(&format!("{stream}-0"), RETRY_MS);
        return sse(SseBody {
            rx,
            stream,
            pending: [priming].into(),
            work: Some(work),
        });
    }
    let first = loop {
        tokio::select! {
            biased;
            out = rx.recv() => break out,
            () = &mut work, if !work.is_done() => {}
        }
    };
    match first {
        // The client cancelled the request: it gets no answer.
        None if !session.is_closed() => sse_response(rx, Some(stream)),
        // The session owes every request an answer before its streams close;
        // should that ever fail, the client still gets one, not an empty body.
        None => {
            tracing::error!(session = %session.id, "a request's stream ended without its answer");
            json_response(
                StatusCode::OK,
                jsonrpc::error_response(
                    id,
                    codes::INTERNAL_ERROR,
                    "the session ended before this request was answered; start a new session",
                    Some(serde_json::json!({ "reason": "session_closed" })),
                ),
            )
        }
        // Whatever work remains (bookkeeping) finishes on its own task.
        Some(out) if out.last => json_response(StatusCode::OK, out.bytes),
        Some(out) => {
            let mut first = std::collections::VecDeque::new();
            if priming_version(session) {
                first.push_back(sse::encode_priming(&format!("{stream}-0"), RETRY_MS));
            }
            first.push_back(encode(stream, &out));
            sse(SseBody {
                rx,
                stream,
                pending: first,
                work: Some(work),
            })
        }
    }
}

/// Whether the session's protocol version starts SSE streams with a priming event.
fn priming_version(session: &Session) -> bool {
    session
        .protocol_version()
        .is_some_and(|v| v.as_str() >= PRIMING_FROM)
}

fn get(app: Arc<App>, req: Request<Incoming>, caller: &Identity) -> Response<ResponseBody> {
    let headers = req.headers();
    if !accepts(headers, "text/event-stream") {
        return reject(
            &app,
            "not_acceptable",
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: GET must accept text/event-stream",
        );
    }
    let session = match session_of(&app, headers, caller) {
        Ok(Some(session)) => session,
        Ok(None) => {
            return reject(
                &app,
                "missing_session",
                StatusCode::BAD_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            )
        }
        Err(resp) => return resp,
    };
    if let Err(resp) = check_version(&app, headers, &session) {
        return resp;
    }
    if let Some(last) = headers.get(LAST_EVENT_HEADER).and_then(|v| v.to_str().ok()) {
        return match session.resume(last) {
            Some((stream, rx)) => sse_response(rx, Some(stream)),
            None => reject(
                &app,
                "unknown_event_id",
                StatusCode::BAD_REQUEST,
                "Bad Request: Last-Event-ID is unknown or no longer buffered; open a new stream",
            ),
        };
    }
    match session.open_standalone() {
        Some((stream, rx)) => sse_response(rx, Some(stream)),
        None => reject(
            &app,
            "stream_conflict",
            StatusCode::CONFLICT,
            "Conflict: this session already has an open GET stream",
        ),
    }
}

fn delete(app: Arc<App>, req: Request<Incoming>, caller: &Identity) -> Response<ResponseBody> {
    match session_of(&app, req.headers(), caller) {
        Ok(Some(session)) => {
            app.sessions
                .remove(&app, &session.id, "the client ended the session");
            empty(StatusCode::OK)
        }
        Ok(None) => reject(
            &app,
            "missing_session",
            StatusCode::BAD_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        ),
        Err(resp) => resp,
    }
}

/// The session named by `Mcp-Session-Id`: `Ok(None)` without the header,
/// 404 for an unknown or ended one (the client then re-initializes).
fn session_of(
    app: &App,
    headers: &HeaderMap,
    caller: &Identity,
) -> Result<Option<Arc<Session>>, Response<ResponseBody>> {
    let Some(value) = headers.get(SESSION_HEADER) else {
        return Ok(None);
    };
    // Someone else's session id answers exactly like an unknown one.
    match value
        .to_str()
        .ok()
        .and_then(|id| app.sessions.get(id))
        .filter(|s| s.owned_by(caller))
    {
        Some(session) => Ok(Some(session)),
        None => Err(reject(
            app,
            "unknown_session",
            StatusCode::NOT_FOUND,
            "Not Found: the session does not exist or has ended; initialize a new one",
        )),
    }
}

fn check_version(
    app: &App,
    headers: &HeaderMap,
    session: &Session,
) -> Result<(), Response<ResponseBody>> {
    let Some(value) = headers.get(VERSION_HEADER) else {
        return Ok(());
    };
    let v = value.to_str().unwrap_or("");
    if SUPPORTED_VERSIONS.contains(&v) || session.protocol_version().as_deref() == Some(v) {
        return Ok(());
    }
    let text = format!(
        "Bad Request: unsupported MCP-Protocol-Version {v:?}; supported: {}",
        SUPPORTED_VERSIONS.join(", ")
    );
    Err(reject(
        app,
        "protocol_version",
        StatusCode::BAD_REQUEST,
        &text,
    ))
}

/// DNS rebinding protection: the `Host` must be one we serve, and a browser
/// `Origin` must be allowed.
fn check_host_and_origin(app: &App, headers: &HeaderMap) -> Result<(), String> {
    let policy = &app.hosts;
    if !policy.hosts.is_empty() {
        let host = headers
            .get(HOST)
            .and_then(|v| v.to_str().ok())
            .map(host_without_port)
            .unwrap_or_default();
        if !policy.hosts.iter().any(|h| h.eq_ignore_ascii_case(&host)) {
            return Err(format!("Forbidden: Host {host:?} is not served here"));
        }
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().unwrap_or("");
        let allowed = if policy.origins.is_empty() {
            let host = origin
                .split_once("://")
                .map(|(_, rest)| host_without_port(rest))
                .unwrap_or_default();
            matches!(host.as_str(), "localhost" | "127.0.0.1" | "::1")
        } else {
            policy.origins.iter().any(|o| o == origin)
        };
        if !allowed {
            return Err(format!("Forbidden: Origin {origin:?} is not allowed"));
        }
    }
    Ok(())
}

fn host_without_port(host: &str) -> String {
    let host = host.trim();
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("").to_ascii_lowercase();
    }
    host.rsplit_once(':')
        .map(|(h, _)| h)
        .unwrap_or(host)
        .to_ascii_lowercase()
}

fn accepts(headers: &HeaderMap, media: &str) -> bool {
    headers
        .get_all(ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let m = item.split(';').next().unwrap_or("").trim();
            m.eq_ignore_ascii_case(media) || m == "*/*"
        })
}

fn encode(stream: u64, out: &Out) -> Bytes {
    sse::encode_message(Some(&format!("{stream}-{}", out.seq)), &out.bytes)
}

/// An SSE body fed by a session stream, driving the work that produces it.
struct SseBody {
    rx: StreamRx,
    stream: u64,
    pending: std::collections::VecDeque<Bytes>,
    work: Option<Work>,
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(work) = self.work.as_mut() {
            if Pin::new(work).poll(cx).is_ready() {
                self.work = None;
            }
        }
        if let Some(chunk) = self.pending.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        let stream = self.stream;
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(out)) => Poll::Ready(Some(Ok(Frame::data(encode(stream, &out))))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

fn sse_response(rx: StreamRx, stream: Option<u64>) -> Response<ResponseBody> {
    sse(SseBody {
        rx,
        stream: stream.unwrap_or(0),
        pending: Default::default(),
        work: None,
    })
}

fn sse(body: SseBody) -> Response<ResponseBody> {
    let mut resp = Response::new(body.boxed_unsync());
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    resp.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

pub fn json_response(status: StatusCode, bytes: Bytes) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(bytes).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

pub fn json_error(status: StatusCode, code: i64, message: &str) -> Response<ResponseBody> {
    json_response(status, jsonrpc::error_response(None, code, message, None))
}

/// A refused POST may have left its body unread, and then the connection
/// cannot be reused: say so, or a client reusing it loses its next request.
fn close_if_refused(mut resp: Response<ResponseBody>) -> Response<ResponseBody> {
    if resp.status().is_client_error() || resp.status().is_server_error() {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// 401 with a -32001 body. Why the token failed goes to the audit line
/// only, so a caller cannot tell an expired token from a forged one.
fn unauthorized(app: &App, failure: AuthFailure) -> Response<ResponseBody> {
    app.metrics
        .http_rejections
        .with_label_values(&["unauthenticated"])
        .inc();
    app.metrics
        .policy_denials
        .with_label_values(&["auth_required"])
        .inc();
    audit_auth_failure(app, failure);
    let refusal = Refusal::Auth {
        hint: "Send a valid bearer token in the Authorization header.",
    };
    let mut resp = json_response(StatusCode::UNAUTHORIZED, refusal.to_response(None));
    resp.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"mcp-warden\""),
    );
    resp
}

/// The audit line of a refused authentication (reason, never the token).
pub fn audit_auth_failure(app: &App, failure: AuthFailure) {
    let record = Record {
        time: audit::now_rfc3339(),
        event: "auth_failure",
        decision: "deny",
        code: Some(crate::pipeline::refusal::AUTH_REQUIRED),
        reason: Some(failure.reason()),
        auth: "none",
        ..Default::default()
    };
    app.audit.write(&record, &app.metrics);
}

fn reject(
    app: &App,
    reason: &'static str,
    status: StatusCode,
    message: &str,
) -> Response<ResponseBody> {
    app.metrics
        .http_rejections
        .with_label_values(&[reason])
        .inc();
    let code = if status == StatusCode::NOT_FOUND || status == StatusCode::SERVICE_UNAVAILABLE {
        -32000
    } else {
        codes::INVALID_REQUEST
    };
    json_error(status, code, message)
}

pub fn empty(status: StatusCode) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(Bytes::new()).boxed_unsync());
    *resp.status_mut() = status;
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_parsing_handles_ports_and_ipv6() {
        assert_eq!(host_without_port("LocalHost:8080"), "localhost");
        assert_eq!(host_without_port("[::1]:8080"), "::1");
        assert_eq!(host_without_port("example.svc"), "example.svc");
    }

    #[test]
    fn accept_header_matching() {
        let mut h = HeaderMap::new();
        h.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream;q=0.9"),
        );
        assert!(accepts(&h, "application/json") && accepts(&h, "text/event-stream"));
        h.insert(ACCEPT, HeaderValue::from_static("application/json"));
        assert!(!accepts(&h, "text/event-stream"));
    }
}
