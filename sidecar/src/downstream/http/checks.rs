//! Header checks of the Streamable HTTP transport: the session a request
//! names (and that it is the caller's), the protocol version and `Accept`.
//! `Host`/`Origin` (DNS rebinding) is [`crate::app::HostPolicy::check`],
//! shared with the admin port.

use std::sync::Arc;

use hyper::header::{HeaderMap, ACCEPT};
use hyper::{Response, StatusCode};

use super::reply::reject;
use super::{ResponseBody, PRIMING_FROM, SESSION_HEADER, SUPPORTED_VERSIONS, VERSION_HEADER};
use crate::app::App;
use crate::auth::identity::Identity;
use crate::session::Session;

/// The session named by `Mcp-Session-Id`: `Ok(None)` without the header,
/// 404 for an unknown or ended one (the client then re-initializes).
pub(super) fn session_of(
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
        .and_then(|id| app.router.sessions.get(id))
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

pub(super) fn check_version(
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

pub(super) fn accepts(headers: &HeaderMap, media: &str) -> bool {
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

/// Whether the session's protocol version starts SSE streams with a priming event.
pub(super) fn priming_version(session: &Session) -> bool {
    session
        .protocol_version()
        .is_some_and(|v| v.as_str() >= PRIMING_FROM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

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
