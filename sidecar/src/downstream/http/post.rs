//! POST on `/mcp`: one message or a batch, taken into a session (a new one
//! for `initialize`), answered with JSON or a stream.

use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};

use super::checks::{accepts, check_version, priming_version, session_of};
use super::reply::{empty, json_error, json_response, one_message, reject};
use super::streams::{encode, sse, sse_response, SseBody};
use super::{Peer, ResponseBody, RETRY_MS, SESSION_HEADER};
use crate::app::App;
use crate::auth::identity::Identity;
use crate::downstream::take;
use crate::gates::audit;
use crate::gates::refusal::Refusal;
use crate::jsonrpc::{self, codes, split_batch, Kind, Message};
use crate::router::sessions::CreateError;
use crate::session::stream::StreamRx;
use crate::session::work::Work;
use crate::session::Session;
use crate::sse;
use mcp_warden_policy::Denial;

/// Versions that allow JSON-RPC batches.
const BATCH_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26"];

pub(super) async fn post(
    app: Arc<App>,
    req: Request<Incoming>,
    caller: Arc<Identity>,
) -> Response<ResponseBody> {
    let peer = req.extensions().get::<Peer>().map(|p| p.0.ip());
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
    let parent = crate::spans::header_parent(&parts.headers);
    // A caller asking for planning mode by header: every request of this
    // POST is judged in it (see gates::planning).
    let planning = crate::gates::planning::header_asks(&parts.headers);
    let dispatch = async move {
        if session.is_none() && super::modern::wants(&parts.headers, &body) {
            return super::modern::serve(app, &parts.headers, body, caller, peer).await;
        }
        match split_batch(&body) {
            Err(e) => json_error(StatusCode::BAD_REQUEST, e.code(), &e.to_string()),
            Ok(Some(elements)) => batch(app, session, elements, caller).await,
            Ok(None) => single(app, session, body, caller, peer).await,
        }
    };
    let dispatch = crate::gates::planning::HEADER_ASKS.scope(planning, dispatch);
    // Tracing on and a `traceparent` header: requests without trace
    // context in `_meta` continue the header's trace.
    match parent {
        Some(parent) => crate::spans::HEADER_PARENT.scope(parent, dispatch).await,
        None => dispatch.await,
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
    peer: Option<IpAddr>,
) -> Response<ResponseBody> {
    let msg = match one_message(&app, body) {
        Ok(msg) => msg,
        Err(refused) => return refused,
    };
    let is_initialize = msg.kind == Kind::Request && msg.method() == "initialize";
    let (session, new_session) = match (session, is_initialize) {
        (Some(_), true) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(
                    msg.id.as_ref(),
                    codes::INVALID_REQUEST,
                    ALREADY_INITIALIZED,
                    None,
                ),
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
            // A caller without a role may not open a session: it could do
            // nothing in it, and each session holds a server process.
            if caller.role(&app.policy.load().compiled).is_none() {
                return no_role(&app, &msg, &caller, StatusCode::FORBIDDEN);
            }
            // How the session is served depends on the server's era.
            if app.upstream_info().await.is_none() {
                return reject(
                    &app,
                    "not_ready",
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the MCP server has not answered yet; retry shortly",
                );
            }
            match app
                .create_session(caller.clone(), caller.quota_key(peer))
                .await
            {
                Ok(session) => (session, true),
                Err(e @ CreateError::TooManyForCaller(_)) => {
                    return reject(
                        &app,
                        "too_many_sessions_for_caller",
                        StatusCode::TOO_MANY_REQUESTS,
                        &e.to_string(),
                    )
                }
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
            app.router
                .sessions
                .remove(&app, &session.id, "initialize failed");
        } else if let Ok(v) = HeaderValue::from_str(&session.id) {
            resp.headers_mut().insert(SESSION_HEADER, v);
        }
    }
    resp
}

/// The answer to `initialize` in a session that has had its handshake,
/// alone or inside a batch.
const ALREADY_INITIALIZED: &str = "Invalid Request: this session is already initialized; send initialize without Mcp-Session-Id to start a new one";

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
    // One POST must not make the facade hold, or the server answer, more
    // than a few requests' worth: the batch is bounded, and below the bound
    // each element is a request of its own for every budget and limit.
    let limit = app.limits.max_batch_size;
    if elements.len() > limit {
        app.metrics
            .http_rejections
            .with_label_values(&["batch_too_large"])
            .inc();
        let message = format!(
            "Invalid Request: a batch of {} messages is over the limit of {limit}; send at most {limit} per POST",
            elements.len()
        );
        let data = serde_json::json!({
            "reason": "batch_too_large",
            "limit": limit,
            "observed": elements.len(),
            "hint": "split the batch, or send one message per POST",
        });
        return json_response(
            StatusCode::BAD_REQUEST,
            jsonrpc::error_response(None, codes::INVALID_REQUEST, &message, Some(data)),
        );
    }
    let parsed: Vec<_> = elements
        .into_iter()
        .map(|e| take(e).map(|(msg, _)| msg))
        .collect();
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
            // The handshake is the session's first message, alone, as on
            // its own POST: inside a batch it would redo the session's
            // handshake (what the server is replayed after a restart).
            Ok(msg) if msg.kind == Kind::Request && msg.method() == "initialize" => session
                .answer_error(
                    stream,
                    jsonrpc::error_response(
                        msg.id.as_ref(),
                        codes::INVALID_REQUEST,
                        ALREADY_INITIALIZED,
                        None,
                    ),
                ),
            Ok(msg) => Work::new(&session, msg, stream, &caller).start(),
            Err((e, id)) => session.answer_error(
                stream,
                jsonrpc::error_response(id.as_ref(), e.code(), &e.to_string(), None),
            ),
        }
    }
    sse_response(rx, Some(stream))
}

/// The -32003 of a caller without a role, refused before the facade holds
/// anything for them, answered with `status`: 403 for a session's
/// `initialize`, 200 for a modern request (whose refusals are JSON-RPC
/// errors, as a gateway reading a backend's answer expects).
pub(super) fn no_role(
    app: &App,
    msg: &Message,
    caller: &Identity,
    status: StatusCode,
) -> Response<ResponseBody> {
    let refusal = Refusal::Policy(Denial::NoRole);
    app.metrics
        .http_rejections
        .with_label_values(&["no_role"])
        .inc();
    app.metrics
        .policy_denials
        .with_label_values(&[refusal.reason()])
        .inc();
    let record = audit::Record {
        time: audit::now_rfc3339(),
        event: "request_denied",
        method: Some(crate::metrics::method_label(msg.method())),
        issuer: caller.issuer.as_deref(),
        subject: caller.subject.as_deref(),
        auth: caller.method.as_str(),
        decision: "deny",
        code: Some(refusal.code()),
        reason: Some(refusal.reason()),
        ..Default::default()
    };
    app.audit.write(&record, &app.metrics);
    json_response(status, refusal.to_response(msg.id.as_ref()))
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
            ids: true,
            _guard: None,
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
                ids: true,
                _guard: None,
            })
        }
    }
}
