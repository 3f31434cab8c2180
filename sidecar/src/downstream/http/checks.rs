//! Header checks of the Streamable HTTP transport: the session a request
//! names (and that it is the caller's), the protocol version, `Accept`,
//! and `Host`/`Origin` (DNS rebinding).

use std::sync::Arc;

use hyper::header::{HeaderMap, ACCEPT, HOST, ORIGIN};
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

/// DNS rebinding protection: the `Host` must be one we serve, and a browser
/// `Origin` must be allowed.
pub(super) fn check_host_and_origin(app: &App, headers: &HeaderMap) -> Result<(), String> {
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
