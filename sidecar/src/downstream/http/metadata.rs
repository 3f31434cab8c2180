//! The protected-resource metadata on the MCP port (RFC 9728): where a
//! client that got a 401 learns which authorization servers issue tokens
//! for this facade and which scopes to ask for.
//!
//! Public (it names no secret and no caller) and readable cross-origin, as
//! browser-based clients fetch it; one document per URL of the facade, the
//! one whose host the request names. A host that is not one of the
//! facade's URLs gets 404: a `resource` made up from the request's `Host`
//! would let whoever controls that header choose what clients log in for.

use hyper::header::{HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, ALLOW, CACHE_CONTROL};
use hyper::{Method, Request, Response, StatusCode};

use super::{host_of, json_error, json_response, ResponseBody};
use crate::app::App;
use crate::jsonrpc::codes;

pub(super) fn serve<B>(app: &App, req: &Request<B>) -> Response<ResponseBody> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut resp = json_error(
            StatusCode::METHOD_NOT_ALLOWED,
            codes::INVALID_REQUEST,
            "use GET on the protected-resource metadata",
        );
        resp.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    let policy = app.policy.load();
    let resource = &policy.auth.resource;
    let host = host_of(req);
    let Some(url) = resource.for_metadata_path(host.as_deref(), req.uri().path()) else {
        app.metrics
            .http_rejections
            .with_label_values(&["unknown_resource"])
            .inc();
        return json_error(
            StatusCode::NOT_FOUND,
            codes::INVALID_REQUEST,
            "Not Found: no protected resource of this facade has this host and path",
        );
    };
    let body = serde_json::to_vec(&resource.document(url)).expect("JSON serializes");
    let mut resp = json_response(StatusCode::OK, body.into());
    let headers = resp.headers_mut();
    headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    resp
}
