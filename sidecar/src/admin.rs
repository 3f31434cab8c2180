//! The admin port: `/healthz` (the process serves), `/readyz` (the upstream
//! answered `initialize` and the facade is not draining), `/metrics`, and
//! `/tools` (every upstream tool with its definition hash, state and reason,
//! which the operator publishes in `MCPServer.status.tools`). `/tools` shows
//! hidden tools and full definitions, so it needs the admin token (the
//! operator's, from `--admin-token-file`); without a token file it answers
//! only on a loopback admin listener. Probes and metrics stay open: the
//! kubelet and the scraper have no token.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};

use crate::app::App;
use crate::downstream::http::ResponseBody;

pub async fn handle(app: Arc<App>, req: Request<Incoming>) -> Response<ResponseBody> {
    match req.uri().path() {
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
            let header = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok());
            if !app.admin.allows(header) {
                let mut resp = text(
                    StatusCode::UNAUTHORIZED,
                    "/tools needs the admin token: Authorization: Bearer <the --admin-token-file's token>\n",
                );
                resp.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"mcp-warden-admin\""),
                );
                return resp;
            }
            let policy = app.policy.load_full();
            let body =
                serde_json::to_vec(&app.registry.snapshot(&policy)).expect("values serialize");
            let mut resp = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp
        }
        "/metrics" => {
            app.metrics
                .calls_in_flight
                .set(app.global_calls.current() as i64);
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
            "not found: try /healthz, /readyz, /metrics or /tools\n",
        ),
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}
