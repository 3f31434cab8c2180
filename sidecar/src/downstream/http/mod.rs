//! Downstream Streamable HTTP on `/mcp`: the way clients reach the facade.
//!
//! Per request, in order ([`handle`]): Host/Origin guard (DNS rebinding) →
//! authentication (every request: a session id is not a credential) →
//! relay to the replica that owns the session → method routing: POST sends
//! messages ([`post`]), GET opens or resumes a server stream and DELETE
//! ends a session ([`streams`]) → header checks ([`checks`]: `Accept`,
//! `Content-Type`, `Mcp-Session-Id`, `MCP-Protocol-Version`) → bounded body
//! → JSON-RPC parse → the session. Early refusals are built in [`reply`].
//!
//! A POST that carries a request is answered with plain JSON when the first
//! thing the server sends for it is the answer (the common, cheapest case),
//! and with an SSE stream as soon as anything comes first (progress,
//! elicitation, logging). SSE events carry ids (`<stream>-<seq>`) so a client
//! can resume with `Last-Event-ID`.
//!
//! A POST without a session from a modern client (2026-07-28) stands alone
//! ([`modern`]): its headers are checked against its body, and it is
//! answered on its own stream; GET and DELETE are the legacy revisions'.
//!
//! The protected-resource metadata (`/.well-known/oauth-protected-resource`
//! and its path-suffixed forms, [`metadata`]) shares the listener: public,
//! answered for the facade's own URLs only.
//!
//! One other path shares the listener, with peers configured only: another
//! replica's signed ask for a call of an identity budget this replica
//! counts (`gates::shared_budget::ASK_PATH`, answered by
//! [`forward::answer_ask`]).

// Checks return the early response as their error: it is the handler's
// answer, built once per rejected request, so boxing it would buy nothing.
#![allow(clippy::result_large_err)]

mod checks;
mod metadata;
mod modern;
mod post;
mod reply;
mod streams;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION};
use hyper::{Method, Request, Response, StatusCode};

use super::forward;
use crate::app::App;
use crate::auth;
use crate::auth::resource::ProtectedResource;
use crate::jsonrpc::codes;
use crate::session::ids::Owner;

pub use reply::{audit_auth_failure, empty, json_error, json_response};
use reply::{close_if_refused, reject, unauthorized};

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
pub const LAST_EVENT_HEADER: &str = "last-event-id";

/// Protocol versions accepted in `MCP-Protocol-Version` (besides whatever the
/// session negotiated with the server, so newer servers keep working).
pub const SUPPORTED_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Versions whose SSE streams start with a SEP-1699 priming event.
pub(crate) const PRIMING_FROM: &str = "2025-11-25";
/// Reconnection delay advertised in priming events.
pub(crate) const RETRY_MS: u64 = 1000;

pub type ResponseBody = http_body_util::combinators::UnsyncBoxBody<Bytes, Infallible>;

/// The client's address, put on each request by the accept loop (per-caller
/// session quotas count anonymous callers by it).
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

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
    // Another replica asking for a unit of an identity budget this one
    // counts. Only with peers configured (else it is an unknown path), and
    // only a POST signed with the peers' key is answered: no Host check (a
    // browser cannot sign) and no bearer token (the caller's was checked
    // on the replica that asks).
    if req.uri().path() == crate::gates::shared_budget::ASK_PATH
        && req.method() == Method::POST
        && app.identity_budgets.shared()
    {
        return forward::answer_ask(&app, req).await;
    }
    // Where to log in (RFC 9728): public, for the URL the Host names.
    if ProtectedResource::is_metadata_path(req.uri().path()) {
        return metadata::serve(&app, &req);
    }
    if req.uri().path() != "/mcp" {
        return json_error(
            StatusCode::NOT_FOUND,
            codes::INVALID_REQUEST,
            "Not Found: the MCP endpoint is /mcp",
        );
    }
    if let Err(reason) = app.hosts.check(req.headers()) {
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
        Err(failure) => return unauthorized(&app, failure, host_of(&req).as_deref()),
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
        Method::POST => post::post(app, req, caller).await,
        Method::GET => streams::get(app, req, &caller),
        Method::DELETE => streams::delete(app, req, &caller),
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

/// The host a request names: `Host`, or the HTTP/2 authority.
fn host_of<B>(req: &Request<B>) -> Option<String> {
    req.headers()
        .get(hyper::header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()))
}
