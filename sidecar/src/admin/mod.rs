//! The admin port: `/healthz` (the process serves), `/readyz` (the upstream
//! answered `initialize` and the facade is not draining), `/metrics`,
//! `/tools` (every upstream tool with its definition hash, state, reason and
//! findings, which the operator publishes in `MCPServer.status.tools`; and
//! the upstream server's name, version and era, for `status.server`), and
//! `/approvals` (`GET`: the calls waiting for an out-of-band approval;
//! `POST /approvals/<id>` with `{"decision": "approve"|"deny"}` decides one).
//!
//! The admin plane is never open. `/tools` shows hidden tools and full
//! definitions and `/approvals` lets a call through, so per request, in
//! order: `Host`/`Origin` (DNS rebinding, the check `/mcp` uses, with the
//! admin port's own host list) → a bearer token → who it is:
//! - the admin token (the operator's `--admin-token-file`, or the one the
//!   facade generated at start into a 0600 file) **reads** `/tools` and
//!   `/approvals` and decides nothing: it names no person;
//! - any token the MCP port accepts (static, JWT, service account — the
//!   policy's own authenticators) is a person; one whose role the policy
//!   lists in `approval.approverRoles` reads both and decides approvals.
//!   The approver recorded (audit line, the answer) is that identity,
//!   never a name in the body, and the caller whose call waits can never
//!   decide it.
//!
//! In gateway mode, `/gateway` (the same access as `/tools`) lists each
//! backend with how many of its tools route and whether it answered its
//! last list, and every name the gateway
//! withholds (a collision between backends, confusable names, a shadowing
//! definition) with the backends involved.
//!
//! A decision is `application/json` (a browser's `text/plain` form post
//! is refused). `/healthz`, `/readyz` and `/metrics` stay open: the kubelet
//! and the scraper have no token, and they reveal no tool or call.

pub mod token;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;

use crate::app::App;
use crate::approvals::{DecideError, Verdict};
use crate::auth::identity::{AuthMethod, Identity};
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
            if let Err(denied) = caller(&app, &req) {
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
        "/gateway" => {
            if let Err(denied) = caller(&app, &req) {
                return denied;
            }
            let crate::upstream::UpstreamTarget::Gateway(gateway) = &app.target else {
                return text(StatusCode::NOT_FOUND, "not a gateway: no --backend given\n");
            };
            json(
                StatusCode::OK,
                serde_json::to_vec(&gateway_view(gateway)).expect("values serialize"),
            )
        }
        "/approvals" => {
            if let Err(denied) = caller(&app, &req) {
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
            let approver = match caller(&app, &req) {
                Ok(AdminCaller::Person(identity)) => identity,
                Ok(AdminCaller::AdminToken) => {
                    return text(
                        StatusCode::FORBIDDEN,
                        "the admin token reads /tools and /approvals; deciding needs an approver's own token\n",
                    )
                }
                Err(denied) => return denied,
            };
            let id = path["/approvals/".len()..].to_string();
            if req.method() != Method::POST {
                return text(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "POST /approvals/<id> with {\"decision\": \"approve\" | \"deny\"}\n",
                );
            }
            if !is_json(&req) {
                return text(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send the decision as Content-Type: application/json\n",
                );
            }
            decide(&app, &id, &approver, req.into_body()).await
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

/// The gateway's backends and withheld names, as `/gateway` shows them.
fn gateway_view(gateway: &crate::upstream::gateway::GatewayTarget) -> serde_json::Value {
    let backends: Vec<_> = gateway
        .tool_counts()
        .into_iter()
        .map(|(name, tools, answering)| {
            serde_json::json!({ "name": name, "tools": tools, "answering": answering })
        })
        .collect();
    let conflicts: Vec<_> = gateway
        .conflicts()
        .into_iter()
        .map(|c| {
            serde_json::json!({
                "kind": c.kind.as_str(),
                "catalog": c.catalog.as_str(),
                "names": c.names,
                "backends": c.backends,
                "detail": c.detail,
                "resolved": c.resolved.map(|(name, backend)| {
                    serde_json::json!({ "name": name, "backend": backend })
                }),
            })
        })
        .collect();
    serde_json::json!({ "backends": backends, "conflicts": conflicts })
}

/// Who asks for an admin-only endpoint.
enum AdminCaller {
    /// The admin token: reads, decides nothing.
    AdminToken,
    /// A person whose role the policy names for approving.
    Person(Identity),
}

/// The caller of an admin-only endpoint, or the refusal: 403 for a foreign
/// `Host`/`Origin` or a person without an approver role, 401 without a
/// token the admin token or the policy's authenticators accept. (The
/// refusal is the handler's answer, built once per refused request: boxing
/// it would buy nothing, as in the `/mcp` transport's checks.)
#[allow(clippy::result_large_err)]
fn caller(app: &App, req: &Request<Incoming>) -> Result<AdminCaller, Response<ResponseBody>> {
    if let Err(reason) = app.admin.hosts.check(req.headers()) {
        app.metrics
            .http_rejections
            .with_label_values(&["host_or_origin"])
            .inc();
        return Err(text_owned(StatusCode::FORBIDDEN, format!("{reason}\n")));
    }
    let header = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if app.admin.is_admin_token(header) {
        return Ok(AdminCaller::AdminToken);
    }
    let policy = app.policy.load();
    // A token is required: an anonymous caller is nobody to record.
    let identity = crate::auth::bearer(header)
        .filter(|t| !t.is_empty())
        .and_then(|token| policy.auth.authenticate(Some(token)).ok())
        .filter(|identity| identity.method != AuthMethod::Anonymous && identity.subject.is_some());
    let Some(identity) = identity else {
        let mut resp = text(
            StatusCode::UNAUTHORIZED,
            "needs a token: the admin token (reads) or an approver's own bearer token\n",
        );
        resp.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"mcp-warden-admin\""),
        );
        return Err(resp);
    };
    let approver = identity
        .role(&policy.compiled)
        .is_some_and(|role| policy.doc.approval.approver_roles.contains(&role));
    if !approver {
        return Err(text(
            StatusCode::FORBIDDEN,
            "your role is not one the policy names for approving (approval.approverRoles)\n",
        ));
    }
    Ok(AdminCaller::Person(identity))
}

/// Whether the request's body is declared JSON.
fn is_json(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
}

/// How audit lines and answers name an approver: subject and issuer.
fn approver_name(identity: &Identity) -> String {
    format!(
        "{} ({})",
        identity.subject.as_deref().unwrap_or_default(),
        identity.issuer.as_deref().unwrap_or_default()
    )
}

/// The body of `POST /approvals/<id>`. There is no `approver` field: the
/// approver is who authenticated, so a body naming one is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    decision: String,
}

/// Largest decision body.
const MAX_DECISION_BYTES: usize = 4096;

/// Decide a pending call as `who`: 200 with the call, 400 for a bad body,
/// 403 for the caller's own call, 404 for an id that is not pending
/// (decided, expired, withdrawn, never asked).
async fn decide(app: &App, id: &str, who: &Identity, body: Incoming) -> Response<ResponseBody> {
    let read = Limited::new(body, MAX_DECISION_BYTES).collect();
    let bytes = match tokio::time::timeout(app.limits.body_read_timeout, read).await {
        Ok(Ok(b)) => b.to_bytes(),
        Err(_) => {
            return text_owned(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the decision body did not arrive within {} s; send it whole\n",
                    app.limits.body_read_timeout.as_secs()
                ),
            )
        }
        Ok(Err(_)) => {
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
                    "send {{\"decision\": \"approve\" | \"deny\"}} (the approver is who authenticated): {e}\n"
                ),
            )
        }
    };
    let approver = approver_name(who);
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
    let verdict = Verdict {
        approved,
        approver: approver.clone(),
    };
    match app.approvals.decide(id, &who.quota_key(None), verdict) {
        Ok(call) => {
            tracing::info!(id, tool = %call.tool, %approver, approved, "out-of-band approval decided");
            let body = serde_json::json!({
                "id": call.id, "tool": call.tool, "decision": d.decision, "approver": approver,
            });
            json(
                StatusCode::OK,
                serde_json::to_vec(&body).expect("values serialize"),
            )
        }
        Err(e @ DecideError::OwnCall) => text_owned(StatusCode::FORBIDDEN, format!("{e}\n")),
        Err(e @ DecideError::NotFound) => text_owned(StatusCode::NOT_FOUND, format!("{e}\n")),
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
