//! The admin port: `/healthz` (the process serves), `/readyz` (the upstream
//! answered `initialize` and the facade is not draining), `/metrics`,
//! `/tools` (every upstream tool with its definition hash, state, reason and
//! findings, which the operator publishes in `MCPServer.status.tools`; and
//! the upstream server's name, version and era, for `status.server`), and
//! `/approvals` (`GET`: the calls waiting for an out-of-band approval;
//! `POST /approvals/<id>` with `{"decision": "approve"|"deny", "approver":
//! "<who>"}` decides one). `/tools` shows hidden tools and full definitions
//! and `/approvals` lets a call through, so both need the admin token (from
//! `--admin-token-file`); without a token file they answer only on a
//! loopback admin listener. Probes and metrics stay open: the kubelet and
//! the scraper have no token.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;

use crate::app::App;
use crate::approvals::Verdict;
use crate::downstream::http::ResponseBody;

pub async fn handle(app: Arc<App>, req: Request<Incoming>) -> Response<ResponseBody> {
    let path = req.uri().path().to_owned();
    match path.as_str() {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            if app.draining.load(Ordering::Relaxed) {
                text(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
            } else if app.ready.load(Ordering::Relaxed) {
                text(StatusCode::OK, "ready\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "waiting for the MCP server to answer initialize\n",
                )
            }
        }
        "/tools" => {
            if let Some(denied) = unauthorized(&app, &req, "/tools") {
                return denied;
            }
            let policy = app.policy.load_full();
            let mut doc = app.registry.snapshot(&policy);
            doc["server"] = server_identity(&app);
            json(
                StatusCode::OK,
                serde_json::to_vec(&doc).expect("values serialize"),
            )
        }
        "/approvals" => {
            if let Some(denied) = unauthorized(&app, &req, "/approvals") {
                return denied;
            }
            if req.method() != Method::GET {
                return text(StatusCode::METHOD_NOT_ALLOWED, "GET /approvals lists the calls waiting for approval; POST /approvals/<id> decides one\n");
            }
            let body = serde_json::json!({ "approvals": app.approvals.list() });
            json(
                StatusCode::OK,
                serde_json::to_vec(&body).expect("values serialize"),
            )
        }
        path if path.starts_with("/approvals/") => {
            if let Some(denied) = unauthorized(&app, &req, "/approvals") {
                return denied;
            }
            let id = path["/approvals/".len()..].to_string();
            if req.method() != Method::POST {
                return text(StatusCode::METHOD_NOT_ALLOWED, "POST /approvals/<id> with {\"decision\": \"approve\" | \"deny\", \"approver\": \"<who>\"}\n");
            }
            decide(&app, &id, req.into_body()).await
        }
        "/metrics" => {
            app.metrics
                .calls_in_flight
                .set(app.global_calls.current() as i64);
            let (waiting, oldest) = app.approvals.waiting();
            app.metrics.approvals_pending.set(waiting as i64);
            app.metrics
                .approval_oldest_pending
                .set(oldest.map_or(0.0, |d| d.as_secs_f64()));
            let mut resp =
                Response::new(Full::new(Bytes::from(app.metrics.render())).boxed_unsync());
            resp.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            resp
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /healthz, /readyz, /metrics, /tools or /approvals\n",
        ),
    }
}

/// `None` when the request may use an admin-only endpoint, else the 401.
fn unauthorized(app: &App, req: &Request<Incoming>, what: &str) -> Option<Response<ResponseBody>> {
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if app.admin.allows(header) {
        return None;
    }
    let mut resp = text_owned(
        StatusCode::UNAUTHORIZED,
        format!("{what} needs the admin token: Authorization: Bearer <the --admin-token-file's token>\n"),
    );
    resp.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"mcp-warden-admin\""),
    );
    Some(resp)
}

/// The body of `POST /approvals/<id>`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    decision: String,
    approver: String,
}

/// Largest decision body.
const MAX_DECISION_BYTES: usize = 4096;

/// Decide a pending call: 200 with the call, 400 for a bad body, 404 for
/// an id that is not pending (decided, expired, withdrawn, never asked).
async fn decide(app: &App, id: &str, body: Incoming) -> Response<ResponseBody> {
    let bytes = match Limited::new(body, MAX_DECISION_BYTES).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the decision body is too large\n",
            )
        }
    };
    let d: Decision = match serde_json::from_slice(&bytes) {
        Ok(d) => d,
        Err(e) => {
            return text_owned(
                StatusCode::BAD_REQUEST,
                format!(
                    "send {{\"decision\": \"approve\" | \"deny\", \"approver\": \"<who>\"}}: {e}\n"
                ),
            )
        }
    };
    let approver = d.approver.trim();
    let approved = match d.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => {
            return text(
                StatusCode::BAD_REQUEST,
                "decision must be \"approve\" or \"deny\"\n",
            )
        }
    };
    if approver.is_empty() || approver.len() > 256 || approver.chars().any(char::is_control) {
        return text(
            StatusCode::BAD_REQUEST,
            "approver must name who decided (1-256 characters, no control characters)\n",
        );
    }
    let verdict = Verdict {
        approved,
        approver: approver.to_string(),
    };
    match app.approvals.decide(id, verdict) {
        Ok(call) => {
            tracing::info!(id, tool = %call.tool, approver, approved, "out-of-band approval decided");
            let body = serde_json::json!({
                "id": call.id, "tool": call.tool, "decision": d.decision, "approver": approver,
            });
            json(
                StatusCode::OK,
                serde_json::to_vec(&body).expect("values serialize"),
            )
        }
        Err(e) => text_owned(StatusCode::NOT_FOUND, format!("{e}\n")),
    }
}

fn json(status: StatusCode, body: Vec<u8>) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn text_owned(status: StatusCode, body: String) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

fn text(status: StatusCode, body: &'static str) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

/// The upstream server as the readiness probe found it (`serverInfo` of
/// `server/discover` or `initialize`, and the era): what the operator shows
/// in `status.server`. `null` until the probe has an answer.
fn server_identity(app: &App) -> serde_json::Value {
    let Some(info) = app.upstream.get() else {
        return serde_json::Value::Null;
    };
    let text = |key: &str| info.server_info.get(key).and_then(|v| v.as_str());
    serde_json::json!({
        "name": text("name"),
        "title": text("title"),
        "version": text("version"),
        "era": match info.era {
            crate::session::channel::Era::Legacy => "legacy",
            crate::session::channel::Era::Modern => "modern",
        },
    })
}
