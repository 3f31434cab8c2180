//! Forwarding a request to the replica that owns its session.
//!
//! A Service spreads a client's requests over the replicas; a request for a
//! session owned by another replica is relayed to it over the pod network,
//! streams (GET, SSE answers) included, byte for byte. A relayed request is
//! marked so it is never relayed twice. If the owner is gone the client gets
//! 404, as the transport spec says, and re-initializes. A modern client's
//! retry whose signed `requestState` names a call parked on another replica
//! is relayed the same way ([`relay`]). When the listener serves TLS, so do
//! relays, trusting only the facade's own certificate (`crate::tls`).
//!
//! The same relay carries a replica's asks to the replica that counts an
//! identity's calls ([`Relay`], the [`PeerLink`] the identity budget gate is
//! handed) and brings the owner's answer back ([`answer_ask`]); what an ask
//! says and who may make one is the gate's business
//! (`gates::shared_budget`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::http::{json_error, ResponseBody};
use crate::app::App;
use crate::gates::shared_budget::{PeerLink, Pending, ASK_PATH, MAX_BODY};

/// Marks a relayed request.
pub const FORWARDED_HEADER: &str = "x-mcp-warden-forwarded";

/// The TLS client configuration for relays, when the listener serves TLS
/// (set once at start).
static PEER_TLS: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();

/// Relay over TLS with `config` (the listener serves TLS).
pub fn set_peer_tls(config: Arc<rustls::ClientConfig>) {
    let _ = PEER_TLS.set(config);
}

fn client() -> &'static Client<HttpConnector, Full<Bytes>> {
    static CLIENT: OnceLock<Client<HttpConnector, Full<Bytes>>> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(3)));
        Client::builder(TokioExecutor::new()).build(connector)
    })
}

fn gone(app: &App) -> Response<ResponseBody> {
    app.metrics
        .http_rejections
        .with_label_values(&["owner_gone"])
        .inc();
    json_error(
        StatusCode::NOT_FOUND,
        -32000,
        "Not Found: the replica that held this session is gone; initialize a new session",
    )
}

/// Relay `req` to the replica at `peer` and stream its answer back.
pub async fn to_peer(app: &App, peer: &str, req: Request<Incoming>) -> Response<ResponseBody> {
    if req.headers().contains_key(FORWARDED_HEADER) {
        return gone(app); // relayed once already: the owner does not have it
    }
    let (parts, body) = req.into_parts();
    let read = Limited::new(body, app.limits.max_body_bytes).collect();
    let body = match tokio::time::timeout(app.limits.body_read_timeout, read).await {
        Ok(Ok(body)) => body.to_bytes(),
        Err(_) => return body_timeout(app),
        Ok(Err(_)) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                "the message is larger than the body limit",
            )
        }
    };
    relay(app, peer, parts, body).await
}

/// A body that did not arrive within the read timeout: a client sending
/// it a byte at a time holds nothing here for longer than that.
fn body_timeout(app: &App) -> Response<ResponseBody> {
    json_error(
        StatusCode::REQUEST_TIMEOUT,
        -32600,
        &format!(
            "the request body did not arrive within {} s",
            app.limits.body_read_timeout.as_secs()
        ),
    )
}

/// Relay a request already read (its `parts` and `body`) to the replica at
/// `peer`: a modern client's retry of a call that replica holds.
pub async fn relay(
    app: &App,
    peer: &str,
    mut parts: hyper::http::request::Parts,
    body: Bytes,
) -> Response<ResponseBody> {
    if parts.headers.contains_key(FORWARDED_HEADER) {
        return gone(app);
    }
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/mcp");
    let Ok(uri) = format!("http://{peer}{path}").parse() else {
        return gone(app);
    };
    parts.uri = uri;
    let open_ended = parts.method == hyper::Method::GET;
    parts.headers.insert(
        FORWARDED_HEADER,
        hyper::header::HeaderValue::from_static("1"),
    );
    parts.version = hyper::Version::HTTP_11;
    let req = Request::from_parts(parts, Full::new(body));
    let sent = match PEER_TLS.get() {
        None => client().request(req).await.map_err(|e| e.to_string()),
        Some(tls) => over_tls(tls.clone(), peer, req).await,
    };
    match sent {
        Ok(resp) => {
            app.metrics.forwarded.inc();
            let (parts, body) = resp.into_parts();
            // A GET stream owes no answer: it ends when this replica stops,
            // and the client resumes it through another replica. A relayed
            // call's stream runs to its answer (the stop waits for it).
            let stop = open_ended.then(|| Box::pin(app.stopping.clone().cancelled_owned()));
            Response::from_parts(parts, Relayed { body, stop }.boxed_unsync())
        }
        Err(e) => {
            tracing::info!(%peer, error = %e, "session owner unreachable");
            gone(app)
        }
    }
}

/// One request over a fresh TLS connection to `peer` (relays are rare: a
/// client whose requests the Service spreads over replicas).
async fn over_tls(
    tls: Arc<rustls::ClientConfig>,
    peer: &str,
    req: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, String> {
    let connect = async {
        let tcp = tokio::net::TcpStream::connect(peer)
            .await
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        // Peers are pod IPs; the verifier pins the certificate, not a name.
        let host = peer.rsplit_once(':').map_or(peer, |(h, _)| h);
        let name =
            rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| e.to_string())?;
        let stream = tokio_rustls::TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())
    };
    let (mut sender, conn) = tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .map_err(|_| "connect timed out".to_string())??;
    tokio::spawn(conn);
    sender.send_request(req).await.map_err(|e| e.to_string())
}

/// The relay as the identity budget gate sees it: one POST of an ask to
/// a peer's [`ASK_PATH`], its answer's body back. The gate bounds the wait.
pub struct Relay;

impl PeerLink for Relay {
    fn ask(&self, peer: &str, body: Bytes) -> Pending {
        let peer = peer.to_string();
        Box::pin(async move {
            let req = Request::post(format!("http://{peer}{ASK_PATH}"))
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(body))
                .map_err(|e| e.to_string())?;
            let resp = match PEER_TLS.get() {
                None => client().request(req).await.map_err(|e| e.to_string())?,
                Some(tls) => over_tls(tls.clone(), &peer, req).await?,
            };
            let status = resp.status();
            let body = Limited::new(resp.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            if status != StatusCode::OK {
                return Err(format!("the peer answered {status}"));
            }
            Ok(body)
        })
    }
}

/// Where a replica learns every replica's peer address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerSource {
    /// A name (`host:port`: the replicas' headless Service, which lists every
    /// replica's address, ready or not), resolved through DNS.
    Dns(String),
    /// A file of addresses (one per line, or comma-separated; `#` starts a
    /// comment): the operator's `<name>-peers` ConfigMap, mounted, since its
    /// NetworkPolicy closes DNS to the pod.
    File(std::path::PathBuf),
}

/// Keep the identity budget's replica set to what `source` lists, looking
/// again every `every`. A failed or empty read keeps the last set: a replica
/// never goes back to counting alone because a lookup failed or a file was
/// being replaced. Until the first read lists anyone, each replica counts
/// alone (one replica: neither the Service nor the file exists).
pub async fn watch_peers(
    ctx: Arc<crate::session::context::Context>,
    source: PeerSource,
    me: String,
    key: Vec<u8>,
    every: Duration,
) {
    let mut last = Vec::new();
    loop {
        let read = match &source {
            PeerSource::Dns(name) => resolve_peers(name).await,
            PeerSource::File(path) => tokio::fs::read_to_string(path)
                .await
                .map(|text| parse_peers(&text)),
        };
        match read {
            Ok(peers) if !peers.is_empty() && peers != last => {
                tracing::info!(?peers, "the identity budget's replica set changed");
                ctx.identity_budgets
                    .set_peers(me.clone(), &peers, &key, Arc::new(Relay));
                ctx.metrics
                    .identity_budget_peers
                    .set(ctx.identity_budgets.peers().len() as i64);
                last = peers;
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(?source, error = %e, "cannot read the replicas"),
        }
        tokio::time::sleep(every).await;
    }
}

/// The addresses a peers file lists, sorted and without duplicates.
pub fn parse_peers(text: &str) -> Vec<String> {
    let mut peers: Vec<String> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.split([',', ' ', '\t']))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    peers.sort();
    peers.dedup();
    peers
}

/// Every address `name` (`host:port`) resolves to, as peer addresses,
/// sorted and without duplicates.
async fn resolve_peers(name: &str) -> std::io::Result<Vec<String>> {
    let mut peers: Vec<String> = tokio::net::lookup_host(name)
        .await?
        .map(|a| a.to_string())
        .collect();
    peers.sort();
    peers.dedup();
    Ok(peers)
}

/// A peer's ask for one call of an identity this replica counts: the
/// gate verifies it (signed by a peer, for this replica, fresh, not
/// replayed) and takes the call; anything else is 403, and nothing is
/// taken.
pub async fn answer_ask(app: &App, req: Request<Incoming>) -> Response<ResponseBody> {
    let read = Limited::new(req.into_body(), MAX_BODY).collect();
    let body = match tokio::time::timeout(app.limits.body_read_timeout, read).await {
        Ok(Ok(body)) => body.to_bytes(),
        Err(_) => return body_timeout(app),
        Ok(Err(_)) => {
            return json_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                "the ask is larger than the limit",
            )
        }
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    match app.identity_budgets.answer(&body, now) {
        Ok(answer) => Response::builder()
            .header(hyper::header::CONTENT_TYPE, "application/json")
            .body(Full::new(answer).boxed_unsync())
            .expect("a valid response"),
        Err(e) => {
            tracing::warn!(error = %e, "refused an identity budget ask");
            app.metrics
                .http_rejections
                .with_label_values(&["peer_ask"])
                .inc();
            json_error(StatusCode::FORBIDDEN, -32600, "Forbidden: not a peer's ask")
        }
    }
}

/// A relayed answer's body, ended cleanly at a frame's edge when the
/// owner's connection breaks (the client sees the stream end and can resume
/// or re-initialize) or, for a GET stream, when this replica stops.
struct Relayed {
    body: Incoming,
    stop: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl Body for Relayed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(stop) = self.stop.as_mut() {
            if stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
        }
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
            Poll::Ready(Some(Err(_))) | Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn a_peers_name_resolves_to_peer_addresses() {
        let peers = super::resolve_peers("127.0.0.1:8080").await.unwrap();
        assert_eq!(peers, vec!["127.0.0.1:8080".to_string()]);
        let local = super::resolve_peers("localhost:9").await.unwrap();
        assert!(local.contains(&"127.0.0.1:9".to_string()), "{local:?}");
        assert!(super::resolve_peers("no-port-given").await.is_err());
    }

    #[test]
    fn a_peers_file_lists_addresses_by_line_or_comma() {
        let text = "# written by the operator\n10.0.0.9:8080\n10.0.0.2:8080, 10.0.0.5:8080\n\n10.0.0.2:8080\n";
        assert_eq!(
            super::parse_peers(text),
            ["10.0.0.2:8080", "10.0.0.5:8080", "10.0.0.9:8080"].map(String::from)
        );
        assert!(super::parse_peers("").is_empty());
        assert!(super::parse_peers("# nobody yet\n").is_empty());
    }
}
