//! The transport's own answers: JSON-RPC errors with an HTTP status, the
//! 401 of a failed authentication (and its audit line), empty answers.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONNECTION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::{Response, StatusCode};

use super::ResponseBody;
use crate::app::App;
use crate::auth::AuthFailure;
use crate::gates::audit::{self, Record};
use crate::gates::refusal::Refusal;
use crate::jsonrpc::{self, codes};

pub fn json_response(status: StatusCode, bytes: Bytes) -> Response<ResponseBody> {
    let mut resp = Response::new(Full::new(bytes).boxed_unsync());
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The one JSON-RPC message of a POST body, or the 400 that answers a body
/// that is not one (counted as `invalid_message`): the same for both eras.
pub(super) fn one_message(
    app: &App,
    body: Bytes,
) -> Result<jsonrpc::Message, Response<ResponseBody>> {
    crate::downstream::take(body)
        .map(|(msg, _)| msg)
        .map_err(|(e, id)| {
            app.metrics
                .http_rejections
                .with_label_values(&["invalid_message"])
                .inc();
            json_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::error_response(id.as_ref(), e.code(), &e.to_string(), None),
            )
        })
}

pub fn json_error(status: StatusCode, code: i64, message: &str) -> Response<ResponseBody> {
    json_response(status, jsonrpc::error_response(None, code, message, None))
}

/// A refused POST may have left its body unread, and then the connection
/// cannot be reused: say so, or a client reusing it loses its next request.
pub(super) fn close_if_refused(mut resp: Response<ResponseBody>) -> Response<ResponseBody> {
    if resp.status().is_client_error() || resp.status().is_server_error() {
        resp.headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// A refused authentication: 401 with a -32001 body, or, for a valid token
/// without its issuer's required scopes, 403 with -32003 and
/// `insufficient_scope`. Why a token failed goes to the audit line only, so
/// a caller cannot tell an expired token from a forged one. The challenge
/// points to the metadata of the URL the request used (`host`), so a
/// client can find where to log in.
pub(super) fn unauthorized(
    app: &App,
    failure: AuthFailure,
    host: Option<&str>,
) -> Response<ResponseBody> {
    let label = match failure {
        AuthFailure::InsufficientScope(_) => "insufficient_scope",
        _ => "unauthenticated",
    };
    app.metrics
        .http_rejections
        .with_label_values(&[label])
        .inc();
    app.metrics
        .policy_denials
        .with_label_values(&["auth_required"])
        .inc();
    audit_auth_failure(app, failure.clone());
    let policy = app.policy.load();
    let resource = &policy.auth.resource;
    let challenge = resource.challenge(resource.for_host(host), &failure);
    let (status, refusal) = match failure {
        AuthFailure::InsufficientScope(scope) => (StatusCode::FORBIDDEN, Refusal::Scope { scope }),
        _ => (
            StatusCode::UNAUTHORIZED,
            Refusal::Auth {
                hint: "Send a valid bearer token in the Authorization header.",
            },
        ),
    };
    let mut resp = json_response(status, refusal.to_response(None));
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        resp.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    resp
}

/// The audit line of a refused authentication (reason, never the token).
pub fn audit_auth_failure(app: &App, failure: AuthFailure) {
    let record = Record {
        time: audit::now_rfc3339(),
        event: "auth_failure",
        decision: "deny",
        code: Some(crate::gates::refusal::AUTH_REQUIRED),
        reason: Some(failure.reason()),
        auth: "none",
        ..Default::default()
    };
    app.audit.write(&record, &app.metrics);
}

pub(super) fn reject(
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
