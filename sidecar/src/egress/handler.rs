//! One request to the egress proxy, from its credential to its end.
//!
//! ```text
//! request ─▶ authenticate (Proxy-Authorization, Basic) ──no──▶ 407 (audited)
//!   ├ CONNECT host:port ─▶ approved pair? ─▶ slot (per client) ─▶ dial (resolve, guard, connect)
//!   │                        ─▶ 200, upgrade ─▶ relay (idle, byte cap) ─▶ audit egress_tunnel
//!   ├ METHOD http://host[:port]/… ─▶ approved plain-HTTP pair? ─▶ slot ─▶ dial ─▶ forward
//!   │                        ─▶ response streamed back ─▶ audit egress_http when its body ends
//!   └ anything else (https:// absolute form, origin form, a bad target) ─▶ 400 (audited)
//! ```
//!
//! Every refusal answers before any upstream connection is made, with a
//! short reason in `X-Mcp-Warden-Egress-Reason` and the body; the 407
//! carries only `Proxy-Authenticate` (it says nothing about what exists).

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use super::audit::{method_label, EgressRecord};
use super::clients::{normalize_host, Client};
use super::dial::DialError;
use super::metrics::Outcome;
use super::relay::relay;
use super::{Slot, State};

pub type ProxyBody = BoxBody<Bytes, hyper::Error>;

/// The header a refusal's reason travels in.
pub const REASON_HEADER: &str = "x-mcp-warden-egress-reason";

/// Headers that belong to one hop and are not passed on.
const HOP_BY_HOP: [&str; 8] = [
    "proxy-authorization",
    "proxy-connection",
    "proxy-authenticate",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
];

fn empty() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// A refusal: status, reason header, a one-line body.
fn refusal(status: StatusCode, outcome: Outcome, detail: &str) -> Response<ProxyBody> {
    let mut resp = Response::new(
        Full::new(Bytes::from(format!("{}: {detail}\n", outcome.as_str())))
            .map_err(|never| match never {})
            .boxed(),
    );
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(REASON_HEADER, HeaderValue::from_static(outcome.as_str()));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}

/// What a request is for, as far as it says.
struct Target {
    host: Option<String>,
    port: Option<u16>,
}

fn connect_target(req: &Request<Incoming>) -> Target {
    let authority = req.uri().authority();
    Target {
        host: authority.and_then(|a| normalize_host(a.host())),
        port: authority.and_then(|a| a.port_u16()),
    }
}

pub async fn handle(state: Arc<State>, req: Request<Incoming>) -> Response<ProxyBody> {
    let started = Instant::now();
    let method = method_label(req.method());
    let target = if req.method() == Method::CONNECT {
        connect_target(&req)
    } else {
        let uri = req.uri();
        Target {
            host: uri.host().and_then(normalize_host),
            port: uri
                .port_u16()
                .or_else(|| (uri.scheme_str() == Some("http")).then_some(80)),
        }
    };
    let record = |event, outcome, status: StatusCode, client: Option<&Client>| {
        let mut r = EgressRecord::new(event, outcome, status.as_u16());
        r.method = method;
        r.client = client.map(|c| c.name.clone());
        r.host = target.host.as_ref().map(|h| cut(h, 253));
        r.port = target.port;
        r.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        r
    };
    let auth = req
        .headers()
        .get(header::PROXY_AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(client) = state.clients.load().authenticate(auth) else {
        let r = record(
            "egress_refused",
            Outcome::Unauthenticated,
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            None,
        );
        state.audit.write(&r);
        let mut resp = Response::new(empty());
        *resp.status_mut() = StatusCode::PROXY_AUTHENTICATION_REQUIRED;
        resp.headers_mut().insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"mcp-warden-egress\""),
        );
        return resp;
    };
    let refuse = |status: StatusCode, outcome: Outcome, detail: String, address: Option<IpAddr>| {
        let mut r = record("egress_refused", outcome, status, Some(&client));
        r.address = address.map(|a| a.to_string());
        r.detail = Some(cut(&detail, 1000));
        state.audit.write(&r);
        refusal(status, outcome, &detail)
    };
    let is_connect = req.method() == Method::CONNECT;
    if !is_connect {
        match req.uri().scheme_str() {
            Some("http") => {}
            Some("https") => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    Outcome::BadRequest,
                    "an https:// URL goes through the proxy as CONNECT host:443".into(),
                    None,
                )
            }
            _ => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    Outcome::BadRequest,
                    "not a proxy request: CONNECT host:port, or an absolute http:// URL".into(),
                    None,
                )
            }
        }
    }
    let (Some(host), Some(port)) = (target.host.clone(), target.port) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            Outcome::BadRequest,
            "the request names no valid host and port".into(),
            None,
        );
    };
    let approved = match (is_connect, host.parse::<IpAddr>()) {
        // An address is approved only by the client's blocks.
        (_, Ok(ip)) => client.cidr_allows(ip, port),
        (true, Err(_)) => client.may_connect(&host, port),
        (false, Err(_)) => client.may_get(&host, port),
    };
    if !approved {
        let what = if is_connect {
            "CONNECT to"
        } else {
            "plain HTTP to"
        };
        return refuse(
            StatusCode::FORBIDDEN,
            Outcome::HostNotApproved,
            format!("{what} {host}:{port} is not approved for {}", client.name),
            None,
        );
    }
    let Some(slot) = Slot::take(&state, &client.name) else {
        return refuse(
            StatusCode::TOO_MANY_REQUESTS,
            Outcome::Limited,
            format!(
                "{} has {} connections open, its bound",
                client.name, state.limits.max_conns_per_client
            ),
            None,
        );
    };
    let addrs = match state.dialer.judge(&client, &host, port).await {
        Ok(a) => a,
        Err(e) => return dial_refusal(e, refuse),
    };
    let (tcp, address) = match state.dialer.connect(&host, port, &addrs).await {
        Ok(pair) => pair,
        Err(e) => return dial_refusal(e, refuse),
    };
    let _ = tcp.set_nodelay(true);
    let mut done = record(
        "egress_tunnel",
        Outcome::Tunnel,
        StatusCode::OK,
        Some(&client),
    );
    done.address = Some(address.to_string());
    if is_connect {
        tunnel(state, req, tcp, done, started, slot)
    } else {
        done.event = "egress_http";
        forward(state, req, tcp, done, started, slot, &host, port).await
    }
}

fn dial_refusal(
    e: DialError,
    refuse: impl Fn(StatusCode, Outcome, String, Option<IpAddr>) -> Response<ProxyBody>,
) -> Response<ProxyBody> {
    match e {
        DialError::NotAllowed { address, .. } => refuse(
            StatusCode::FORBIDDEN,
            Outcome::AddressNotAllowed,
            e.to_string(),
            Some(address),
        ),
        DialError::Timeout(..) => refuse(
            StatusCode::GATEWAY_TIMEOUT,
            Outcome::UpstreamFailed,
            e.to_string(),
            None,
        ),
        DialError::Resolve(_) | DialError::Connect(_) => refuse(
            StatusCode::BAD_GATEWAY,
            Outcome::UpstreamFailed,
            e.to_string(),
            None,
        ),
    }
}

/// Answer 200 and, once hyper hands over the connection, relay it.
fn tunnel(
    state: Arc<State>,
    req: Request<Incoming>,
    tcp: tokio::net::TcpStream,
    mut done: EgressRecord,
    started: Instant,
    slot: Slot,
) -> Response<ProxyBody> {
    tokio::spawn(async move {
        let _slot = slot;
        state.metrics.tunnels_active.inc();
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let limits = &state.limits;
                let r = relay(
                    TokioIo::new(upgraded),
                    tcp,
                    limits.idle_timeout,
                    limits.max_bytes_per_conn,
                    &state.metrics.bytes.with_label_values(&["up"]),
                    &state.metrics.bytes.with_label_values(&["down"]),
                )
                .await;
                done.bytes_up = r.up;
                done.bytes_down = r.down;
                done.detail = r.end.detail(limits.idle_timeout, limits.max_bytes_per_conn);
            }
            Err(e) => {
                done.detail = Some(format!("the client's connection was not handed over: {e}"))
            }
        }
        state.metrics.tunnels_active.dec();
        done.time = crate::gates::audit::now_rfc3339();
        done.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        state.audit.write(&done);
    });
    Response::new(empty())
}

/// Send a plain-HTTP request on `tcp` in origin form, without the hop's
/// headers, and stream the answer back.
#[allow(clippy::too_many_arguments)]
async fn forward(
    state: Arc<State>,
    req: Request<Incoming>,
    tcp: tokio::net::TcpStream,
    mut done: EgressRecord,
    started: Instant,
    slot: Slot,
    host: &str,
    port: u16,
) -> Response<ProxyBody> {
    let fail = |mut done: EgressRecord, detail: String| {
        done.event = "egress_refused";
        done.outcome = Outcome::UpstreamFailed.as_str();
        done.status = StatusCode::BAD_GATEWAY.as_u16();
        done.detail = Some(cut(&detail, 1000));
        done.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
        state.audit.write(&done);
        refusal(StatusCode::BAD_GATEWAY, Outcome::UpstreamFailed, &detail)
    };
    let (mut parts, body) = req.into_parts();
    for h in HOP_BY_HOP {
        parts.headers.remove(h);
    }
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    parts.uri = match path.parse() {
        Ok(u) => u,
        Err(e) => return fail(done, format!("bad path: {e}")),
    };
    // The approved authority, whatever `Host` the client sent: a server
    // with several virtual hosts on the address must not be asked for
    // another one.
    let value = if port == 80 {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    match HeaderValue::from_str(&value) {
        Ok(v) => {
            parts.headers.insert(header::HOST, v);
        }
        Err(e) => return fail(done, format!("bad host: {e}")),
    }
    let (mut sender, conn) = match hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await {
        Ok(pair) => pair,
        Err(e) => return fail(done, format!("HTTP to {host}:{port}: {e}")),
    };
    tokio::spawn(conn);
    let sent = tokio::time::timeout(
        state.limits.idle_timeout,
        sender.send_request(Request::from_parts(parts, body)),
    )
    .await;
    let resp = match sent {
        Ok(Ok(resp)) => resp,
        Ok(Err(e)) => return fail(done, format!("HTTP to {host}:{port}: {e}")),
        Err(_) => return fail(done, format!("HTTP to {host}:{port}: no answer in time")),
    };
    done.outcome = Outcome::Forwarded.as_str();
    done.status = resp.status().as_u16();
    let (mut parts, body) = resp.into_parts();
    for h in HOP_BY_HOP {
        parts.headers.remove(h);
    }
    state.metrics.tunnels_active.inc();
    let counted = Counted {
        inner: body,
        state: state.clone(),
        record: Some(done),
        started,
        down: 0,
        _slot: slot,
    };
    Response::from_parts(parts, counted.boxed())
}

/// A forwarded answer's body: counts what passes, enforces the byte cap,
/// and writes the audit record when it ends or is dropped.
struct Counted {
    inner: Incoming,
    state: Arc<State>,
    record: Option<EgressRecord>,
    started: Instant,
    down: u64,
    _slot: Slot,
}

impl Body for Counted {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if self.down > self.state.limits.max_bytes_per_conn {
            if let Some(r) = self.record.as_mut() {
                r.detail = Some("the connection's bytes are spent: cut".into());
            }
            return Poll::Ready(None);
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                let n = data.len() as u64;
                self.down += n;
                self.state
                    .metrics
                    .bytes
                    .with_label_values(&["down"])
                    .inc_by(n);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.state.metrics.tunnels_active.dec();
        if let Some(mut r) = self.record.take() {
            r.bytes_down = self.down;
            r.time = crate::gates::audit::now_rfc3339();
            r.duration_ms = self.started.elapsed().as_secs_f64() * 1000.0;
            self.state.audit.write(&r);
        }
    }
}

/// At most `max` bytes of `s`, on a character boundary.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}
