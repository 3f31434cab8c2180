//! POST from a modern client (MCP 2026-07-28): every request stands alone.
//!
//! Where it sits: [`super::post`] hands over a POST without
//! `Mcp-Session-Id` whose version (header or `_meta`) is modern. Per
//! request, in order: the standard headers checked against the body
//! ([`check_headers`]: a header that disagrees with the body, or is missing,
//! is the spec's 400 `HeaderMismatch`; the policy only ever reads the body)
//! → the caller's channel (the modern server's hub, or the caller's bridge
//! to a legacy server) → a session for this one request → its answer as
//! JSON or SSE. Closing the stream before the answer cancels the request,
//! as the transport spec says.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use hyper::header::HeaderMap;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::reply::{empty, json_response, one_message, reject};
use super::streams::{sse, SseBody};
use super::{ResponseBody, VERSION_HEADER};
use crate::app::App;
use crate::auth::identity::{AuthMethod, Identity};
use crate::era;
use crate::gates::methods;
use crate::gates::refusal::Refusal;
use crate::jsonrpc::{codes, Kind, Message, RequestId};
use crate::router::ChannelError;
use crate::session::channel::Era;
use crate::session::stream::StreamRx;
use crate::session::work::Work;
use crate::session::Session;

const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
const PARAM_HEADER_PREFIX: &str = "mcp-param-";

/// Whether a POST without a session is a modern client's: its
/// `MCP-Protocol-Version` names a revision that is not legacy (a legacy
/// client sends none before it has a session), or its body's `_meta` states
/// a modern version.
pub(super) fn wants(headers: &HeaderMap, body: &[u8]) -> bool {
    match headers
        .get(VERSION_HEADER)
        .map(|v| v.to_str().unwrap_or(""))
    {
        Some(v) if era::is_modern(v) => true,
        Some(v) if era::LEGACY_VERSIONS.contains(&v) => body_is_modern(body),
        // An unknown version: modern unless it opens a legacy session.
        Some(_) => !is_initialize(body),
        None => body_is_modern(body),
    }
}

fn body_is_modern(body: &[u8]) -> bool {
    memchr::memmem::find(body, era::meta::PROTOCOL_VERSION.as_bytes()).is_some()
        && serde_json::from_slice::<Value>(body)
            .ok()
            .is_some_and(|v| era::request_version(&v).is_some_and(era::is_modern))
}

fn is_initialize(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .is_some_and(|v| v.get("method").and_then(Value::as_str) == Some("initialize"))
}

/// Serve one modern POST.
pub(super) async fn serve(
    app: Arc<App>,
    headers: &HeaderMap,
    body: Bytes,
    caller: Arc<Identity>,
    peer: Option<IpAddr>,
) -> Response<ResponseBody> {
    let msg = match one_message(&app, body) {
        Ok(msg) => msg,
        Err(refused) => return refused,
    };
    match msg.kind {
        Kind::Request => {}
        // No client notification means anything here: a request is
        // cancelled by closing its stream. Accepted and dropped.
        Kind::Notification => {
            app.metrics.dropped("client_notification");
            return empty(StatusCode::ACCEPTED);
        }
        Kind::Response => {
            return reject(
                &app,
                "unexpected_response",
                StatusCode::BAD_REQUEST,
                "Bad Request: a client of this protocol version sends no responses; answer input requests by retrying the request with inputResponses",
            )
        }
    }
    let id = msg.id.clone().expect("requests have ids");
    // A retry of a call another replica holds, or a request for a task
    // another replica keeps, goes to that replica (which checks the rest).
    if let Some(owner) = parked_elsewhere(&app, &msg) {
        let mut builder = hyper::Request::builder()
            .method(hyper::Method::POST)
            .uri("/mcp");
        if let Some(h) = builder.headers_mut() {
            *h = headers.clone();
        }
        let (parts, ()) = builder
            .body(())
            .expect("request parts are valid")
            .into_parts();
        return crate::downstream::forward::relay(&app, &owner, parts, msg.bytes.clone()).await;
    }
    // A caller without a role is refused before a legacy server's bridge
    // is started for them (a server process per caller, and the idlest
    // caller's evicted at the cap); the session's intake would refuse the
    // request only once the bridge was there. A method the facade does not
    // serve is no way around it: nothing is held for such a caller either.
    let gateway_itself = caller.method == AuthMethod::GatewayItself;
    let own = caller.role(&app.policy.load().compiled);
    let served = match methods::client_request(msg.method(), true) {
        Some(gates) => methods::serving_role(gates, own, gateway_itself).is_ok(),
        None => own.is_some(),
    };
    if !served {
        return super::post::no_role(&app, &msg, &caller, StatusCode::OK);
    }
    let quota_key = caller.quota_key(peer);
    let channel = match app.modern_channel(&quota_key, &caller).await {
        Ok(channel) => channel,
        Err(e @ ChannelError::NotReady) => {
            return reject(
                &app,
                "not_ready",
                StatusCode::SERVICE_UNAVAILABLE,
                &e.to_string(),
            )
        }
        Err(e @ ChannelError::TooMany(_)) => {
            return reject(
                &app,
                "too_many_sessions",
                StatusCode::SERVICE_UNAVAILABLE,
                &e.to_string(),
            )
        }
    };
    // The tools' header annotations are known before a call is checked.
    if msg.method() == "tools/call" && app.registry.is_empty() {
        channel.refresh_tools().await;
    }
    if let Err(refusal) = check_headers(&app, headers, &msg) {
        app.metrics
            .http_rejections
            .with_label_values(&[refusal.reason()])
            .inc();
        return json_response(StatusCode::BAD_REQUEST, refusal.to_response(Some(&id)));
    }
    // One request, one session: its id is the request's correlation (the
    // caller and the request id), which the audit line carries.
    let name: Arc<str> = format!("{}:{}", caller.state_hash(), id.as_json()).into();
    let session = Session::on_channel(
        app.ctx.clone(),
        name,
        caller.clone(),
        quota_key,
        channel,
        Era::Modern,
    );
    let (stream, rx) = session.open_stream(1);
    let guard = CancelOnDrop {
        session: session.clone(),
        id: id.clone(),
    };
    let work = Work::new(&session, msg, stream, &caller);
    respond(rx, stream, work, guard).await
}

/// The replica holding the call a retry continues, or the approval it
/// spends, or the task a task request names, if not this one.
fn parked_elsewhere(app: &App, msg: &Message) -> Option<String> {
    use crate::request_state::StateKind;
    let task = crate::session::steps::task::TASK_METHODS[1..].contains(&msg.method());
    let pointer = if task {
        "/params/taskId"
    } else if era::INPUT_REQUIRED_METHODS.contains(&msg.method()) && msg.mentions(b"requestState") {
        "/params/requestState"
    } else {
        return None;
    };
    let value = msg.to_value();
    let sealed = value.pointer(pointer)?.as_str()?;
    let claims = app.state_seal.peek(sealed)?;
    let relayed = if task {
        claims.kind == StateKind::Task
    } else {
        claims.kind == StateKind::Parked || claims.carries_approval()
    };
    let owner = claims.owner?;
    (relayed && Some(owner.as_str()) != app.session_ids.me()).then_some(owner)
}

/// Cancels the request if the client goes before its answer (the
/// transport's cancellation).
struct CancelOnDrop {
    session: Arc<Session>,
    id: RequestId,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if !self.session.is_pending(&self.id) {
            return;
        }
        let (session, id) = (self.session.clone(), self.id.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                session
                    .cancel_request(&id, "the client closed the request's stream")
                    .await
            });
        }
    }
}

/// Plain JSON when the answer is the first thing the request produces,
/// else SSE (progress, log messages first); no event ids (modern streams
/// are not resumable).
async fn respond(
    mut rx: StreamRx,
    stream: u64,
    mut work: Work,
    guard: CancelOnDrop,
) -> Response<ResponseBody> {
    let first = loop {
        tokio::select! {
            biased;
            out = rx.recv() => break out,
            () = &mut work, if !work.is_done() => {}
        }
    };
    match first {
        Some(out) if out.last => {
            let status = status_of(&out.bytes);
            drop(guard);
            json_response(status, out.bytes)
        }
        first => {
            let mut pending = std::collections::VecDeque::new();
            if let Some(out) = first {
                pending.push_back(crate::sse::encode_message(None, &out.bytes));
            }
            sse(SseBody {
                rx,
                stream,
                pending,
                work: Some(work),
                ids: false,
                _guard: Some(Box::new(guard)),
            })
        }
    }
}

/// The HTTP status the spec gives a JSON-RPC answer: 404 for an unknown
/// method, 400 for the version and header errors, else 200.
fn status_of(bytes: &[u8]) -> StatusCode {
    if memchr::memmem::find(bytes, b"\"error\"").is_none() {
        return StatusCode::OK;
    }
    let error = serde_json::from_slice::<Value>(bytes).ok();
    let error = error.as_ref().and_then(|v| v.get("error"));
    let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64);
    let reason = error
        .and_then(|e| e.pointer("/data/reason"))
        .and_then(Value::as_str);
    match (code, reason) {
        (Some(codes::METHOD_NOT_FOUND), _) => StatusCode::NOT_FOUND,
        (
            Some(
                era::codes::UNSUPPORTED_VERSION
                | era::codes::HEADER_MISMATCH
                | era::codes::MISSING_CAPABILITY,
            ),
            _,
        )
        | (Some(codes::INVALID_PARAMS), Some("missing_meta")) => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

/// The spec's server validation: `MCP-Protocol-Version`, `Mcp-Method` and
/// (for calls, reads, gets and the tasks extension's requests, whose
/// `Mcp-Name` is the task id) `Mcp-Name` present and equal to the body,
/// and every `Mcp-Param-*` header the called tool's schema designates equal
/// to the argument it mirrors (present exactly when the argument is).
fn check_headers(app: &App, headers: &HeaderMap, msg: &Message) -> Result<(), Refusal> {
    let mismatch = |detail: String| Err(Refusal::HeaderMismatch { detail });
    let header = |name: &str| -> Result<Option<String>, Refusal> {
        match headers.get(name) {
            None => Ok(None),
            Some(v) => match v.to_str() {
                Ok(text) => Ok(Some(text.to_string())),
                Err(_) => Err(Refusal::HeaderMismatch {
                    detail: format!("{name} holds characters a header value may not"),
                }),
            },
        }
    };
    let body = msg.to_value();
    let Some(version) = header(VERSION_HEADER)? else {
        return mismatch("the MCP-Protocol-Version header is required".into());
    };
    if !era::is_modern(&version) {
        return Err(Refusal::UnsupportedVersion { requested: version });
    }
    if let Some(stated) = era::request_version(&body) {
        if stated != version {
            return mismatch(format!(
                "MCP-Protocol-Version {version:?} does not match the body's {stated:?}"
            ));
        }
    }
    match header(METHOD_HEADER)? {
        None => return mismatch("the Mcp-Method header is required".into()),
        Some(m) if m != msg.method() => {
            return mismatch(format!(
                "Mcp-Method {m:?} does not match the body's method {:?}",
                msg.method()
            ))
        }
        Some(_) => {}
    }
    let method = msg.method();
    if matches!(
        method,
        "tools/call"
            | "resources/read"
            | "prompts/get"
            | "tasks/get"
            | "tasks/update"
            | "tasks/cancel"
    ) {
        let named = era::mirrored_name(method, &body);
        let given = header(NAME_HEADER)?;
        let decoded = match given.as_deref().map(era::decode_header_value) {
            None => return mismatch("the Mcp-Name header is required for this method".into()),
            Some(None) => return mismatch("Mcp-Name is not valid base64 UTF-8".into()),
            Some(Some(d)) => d,
        };
        if named != Some(decoded.as_str()) {
            return mismatch(format!(
                "Mcp-Name {decoded:?} does not match the body's {:?}",
                named.unwrap_or("")
            ));
        }
    }
    if method == "tools/call" {
        check_param_headers(app, headers, &body)?;
    }
    Ok(())
}

fn check_param_headers(app: &App, headers: &HeaderMap, body: &Value) -> Result<(), Refusal> {
    let mismatch = |detail: String| Err(Refusal::HeaderMismatch { detail });
    let name = body
        .get("params")
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let policy = app.policy.load();
    let tool = policy
        .compiled
        .by_exposed(name)
        .upstream_name()
        .and_then(|n| app.registry.get(n));
    let annotated = tool
        .as_ref()
        .and_then(|t| t.definition.get("inputSchema"))
        .map(era::header_params)
        .transpose()
        .unwrap_or_default()
        .unwrap_or_default();
    let arguments = body
        .get("params")
        .and_then(|p| p.get("arguments"))
        .unwrap_or(&Value::Null);
    for (param, path) in &annotated {
        let header_name = format!("{PARAM_HEADER_PREFIX}{}", param.to_ascii_lowercase());
        let mut value = Some(arguments);
        for key in path {
            value = value.and_then(|v| v.get(key));
        }
        let value = value.filter(|v| !v.is_null());
        let given = headers.get(header_name.as_str()).map(|v| v.to_str());
        match (value, given) {
            (None, None) => {}
            (Some(_), None) => {
                return mismatch(format!(
                    "the Mcp-Param-{param} header is required: the argument it mirrors is set"
                ))
            }
            (None, Some(_)) => {
                return mismatch(format!(
                    "Mcp-Param-{param} is set but the argument it mirrors is not"
                ))
            }
            (Some(_), Some(Err(_))) => {
                return mismatch(format!(
                    "Mcp-Param-{param} holds characters a header value may not"
                ))
            }
            (Some(v), Some(Ok(text))) => match era::decode_header_value(text) {
                Some(decoded) if era::header_matches(&decoded, v) => {}
                _ => {
                    return mismatch(format!(
                        "Mcp-Param-{param} does not match the argument it mirrors"
                    ))
                }
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    #[test]
    fn modern_posts_are_told_apart_from_legacy_ones() {
        let mut h = HeaderMap::new();
        let modern_body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert!(wants(&h, modern_body));
        assert!(!wants(&h, init));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2026-07-28"));
        assert!(wants(&h, init));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2025-11-25"));
        assert!(!wants(&h, init) && wants(&h, modern_body));
        h.insert(VERSION_HEADER, HeaderValue::from_static("2099-01-01"));
        assert!(
            !wants(&h, init) && wants(&h, br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        );
    }

    #[test]
    fn statuses_follow_the_spec() {
        let e = |code: i64| {
            format!(r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":{code},"message":"m"}}}}"#)
        };
        assert_eq!(status_of(e(-32601).as_bytes()), StatusCode::NOT_FOUND);
        assert_eq!(status_of(e(-32022).as_bytes()), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(e(-32020).as_bytes()), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(e(-32003).as_bytes()), StatusCode::OK);
        assert_eq!(status_of(e(-32602).as_bytes()), StatusCode::OK);
        let missing = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"m","data":{"reason":"missing_meta"}}}"#;
        assert_eq!(status_of(missing.as_bytes()), StatusCode::BAD_REQUEST);
        assert_eq!(
            status_of(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            StatusCode::OK
        );
    }
}
