//! Upstream links: one live connection to the MCP server for one session.
//!
//! Flow: the session router sends client messages with [`Link::send`] and
//! consumes [`LinkEvent`]s (server messages, then exactly one `Closed`). The
//! three kinds differ in framing:
//! - [`stdio`]: a child process per session, newline-delimited JSON;
//! - [`socket`]: a unix socket served by `mcp-warden-sidecar bridge`, which
//!   spawns the server per connection, same framing;
//! - [`http`]: a Streamable HTTP server, one upstream session per link (a
//!   modern server has no sessions: the link is stateless); it knows which
//!   request each SSE message relates to, and a plain JSON answer comes
//!   back from `send` itself (no trip through the events);
//! - [`gateway`]: several backend facades over modern HTTP, seen as one
//!   modern server (lists merged and renamed, requests routed by name).

pub mod child_env;
pub mod framed;
pub mod gateway;
pub mod http;
pub mod socket;
pub mod spares;
pub mod stdio;

use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;

use crate::jsonrpc::{Message, RequestId};

/// Where the MCP server is.
#[derive(Clone)]
pub enum UpstreamTarget {
    /// Spawn this command per session and speak over its stdio.
    Command {
        program: String,
        args: Vec<String>,
        /// The child's whole environment ([`child_env`]).
        env: Arc<Vec<(std::ffi::OsString, std::ffi::OsString)>>,
    },
    /// Connect to a bridge's unix socket per session.
    Socket(PathBuf),
    /// A Streamable HTTP endpoint (`http://` on loopback, or `https://`).
    Http(HttpTarget),
    /// Several backend facades behind one endpoint (gateway mode).
    Gateway(Arc<gateway::GatewayTarget>),
}

/// A Streamable HTTP upstream: its URL and how connections to it are made.
#[derive(Clone)]
pub struct HttpTarget {
    pub uri: hyper::Uri,
    pub client: Arc<crate::net::Client>,
}

impl std::fmt::Debug for UpstreamTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamTarget::Command { program, .. } => write!(f, "Command({program})"),
            UpstreamTarget::Socket(path) => write!(f, "Socket({})", path.display()),
            UpstreamTarget::Http(t) => write!(f, "Http({})", t.uri),
            UpstreamTarget::Gateway(g) => {
                let names: Vec<&str> = g.backends.iter().map(|b| b.name.as_str()).collect();
                write!(f, "Gateway({})", names.join(","))
            }
        }
    }
}

/// A credential the facade presents to the upstream for a request — chosen
/// by the caller's identity after policy, never the caller's own token. One
/// header, marked sensitive (HTTP/2 never indexes it); it never prints. For
/// a gateway it is instead the caller's identity ([`Credential::on_behalf_of`]),
/// from which the gateway link mints each backend's own assertion.
#[derive(Clone)]
pub struct Credential {
    header: Option<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
    principal: Option<Arc<gateway::assertion::Principal>>,
    /// When the credential the caller proved itself with expires (seconds
    /// since the epoch; `None`: it does not): past it nothing more is done
    /// on the caller's behalf, such as a gateway holding its subscription.
    caller_expires_at: Option<u64>,
}

impl Credential {
    /// `name: value` (`Authorization: Bearer …` for bearer tokens).
    pub fn new(name: hyper::header::HeaderName, value: &str) -> Result<Credential, String> {
        let mut value = hyper::header::HeaderValue::from_str(value).map_err(|_| {
            "the upstream credential holds characters a header cannot carry".to_string()
        })?;
        value.set_sensitive(true);
        Ok(Credential {
            header: Some((name, value)),
            principal: None,
            caller_expires_at: None,
        })
    }

    /// `Authorization: Bearer <token>`.
    pub fn bearer(token: &str) -> Result<Credential, String> {
        Credential::new(
            hyper::header::AUTHORIZATION,
            &format!("Bearer {}", token.trim()),
        )
    }

    /// The caller a gateway's backends are to hear of (no header by itself).
    pub fn on_behalf_of(who: gateway::assertion::Principal) -> Credential {
        Credential {
            header: None,
            principal: Some(Arc::new(who)),
            caller_expires_at: None,
        }
    }

    /// The same credential, for a caller whose own credential expires at
    /// `expires_at` (seconds since the epoch).
    pub fn until(mut self, expires_at: Option<u64>) -> Credential {
        self.caller_expires_at = expires_at;
        self
    }

    /// When the caller's own credential expires (seconds since the epoch),
    /// if it does.
    pub fn caller_expires_at(&self) -> Option<u64> {
        self.caller_expires_at
    }

    /// Whether the caller's own credential has expired at `now` (seconds
    /// since the epoch).
    pub fn caller_expired(&self, now: u64) -> bool {
        self.caller_expires_at.is_some_and(|exp| now >= exp)
    }

    /// A gateway's caller it cannot name (anonymous): its requests carry
    /// no assertion, and never the gateway's own (which an absent
    /// credential would fall back to).
    pub fn nobody() -> Credential {
        Credential {
            header: None,
            principal: None,
            caller_expires_at: None,
        }
    }

    pub fn principal(&self) -> Option<&gateway::assertion::Principal> {
        self.principal.as_deref()
    }

    pub fn header(&self) -> Option<(&hyper::header::HeaderName, &hyper::header::HeaderValue)> {
        self.header.as_ref().map(|(n, v)| (n, v))
    }

    /// Remove the credential's secret from `text` (an upstream error body
    /// could echo it).
    pub fn scrub(&self, text: &str) -> String {
        let Some(Ok(value)) = self.header.as_ref().map(|(_, v)| v.to_str()) else {
            return text.to_string();
        };
        let secret = value.strip_prefix("Bearer ").unwrap_or(value).trim();
        if secret.len() < 4 {
            return text.to_string();
        }
        text.replace(secret, "[REDACTED:upstream_credential]")
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.header, &self.principal) {
            (Some((name, _)), _) => write!(f, "Credential({name}: [redacted])"),
            (None, Some(who)) => {
                write!(f, "Credential(on behalf of {}/{})", who.issuer, who.subject)
            }
            (None, None) => f.write_str("Credential(none)"),
        }
    }
}

impl UpstreamTarget {
    /// A short label for logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            UpstreamTarget::Command { .. } => "stdio",
            UpstreamTarget::Socket(_) => "socket",
            UpstreamTarget::Http(_) => "http",
            UpstreamTarget::Gateway(_) => "gateway",
        }
    }
}

/// What a link reports.
#[derive(Debug)]
pub enum LinkEvent {
    /// A message from the server. `related` is the client request it belongs
    /// to, when the transport says so (HTTP: it came on that request's stream).
    Message {
        bytes: Bytes,
        related: Option<RequestId>,
    },
    /// A request could not be delivered (HTTP status, connection error); the
    /// router answers it with this reason.
    Failed { id: RequestId, reason: String },
    /// The link is gone (process exited, socket closed, session expired).
    Closed { reason: String },
}

/// Limits that bound what an upstream can make the facade hold.
#[derive(Clone, Debug)]
pub struct LinkLimits {
    /// Longest single message from the server.
    pub max_message_bytes: usize,
    /// Messages buffered towards the server before senders wait.
    pub queue_depth: usize,
}

impl Default for LinkLimits {
    fn default() -> Self {
        LinkLimits {
            max_message_bytes: 16 * 1024 * 1024,
            queue_depth: 256,
        }
    }
}

/// The `Mcp-Param-*` headers a request to a modern HTTP server carries
/// (the tool's `x-mcp-header` annotations, read from the facade's registry).
pub type ParamHeaders = Arc<dyn Fn(&Message) -> Vec<(String, String)> + Send + Sync>;

/// How the facade speaks to the server on a link.
#[derive(Clone, Default)]
pub struct LinkMode {
    /// The server is modern (2026-07-28). Over HTTP: no session, no GET
    /// stream, the protocol version and the standard headers on every POST,
    /// and a request is cancelled by closing its stream.
    pub modern: bool,
    pub param_headers: Option<ParamHeaders>,
    /// The credential of the link's own requests (a legacy session's GET
    /// stream, resumption and DELETE): its caller's. Each request may carry
    /// its own ([`Link::send_as`]); a legacy link then keeps the latest.
    pub credential: Option<Credential>,
}

/// The sending half of a live link. Dropping it closes the link (kills the
/// child, closes the socket, deletes the HTTP session).
pub struct Link {
    to_server: ToServer,
    pub(crate) _guard: Option<Box<dyn Send + Sync>>,
}

enum ToServer {
    /// A writer task's queue (stdio, socket).
    Framed(mpsc::Sender<Message>),
    /// POSTs sent by the caller itself.
    Http(std::sync::Arc<http::State>),
    /// Requests routed among backends by the caller itself.
    Gateway(std::sync::Arc<gateway::State>),
}

#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("cannot start the MCP server `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("cannot connect to the MCP server socket {path}: {source}")]
    Connect {
        path: String,
        source: std::io::Error,
    },
    #[error("the MCP server link is closed")]
    Closed,
    /// The server did not take a request (HTTP status, connection error).
    #[error("{0}")]
    Refused(String),
    /// The upstream URL cannot be used.
    #[error("the upstream URL cannot be used: {0}")]
    BadUrl(String),
}

impl Link {
    /// A link whose messages a writer task frames (stdio, socket).
    pub(crate) fn framed(tx: mpsc::Sender<Message>, guard: Option<Box<dyn Send + Sync>>) -> Link {
        Link {
            to_server: ToServer::Framed(tx),
            _guard: guard,
        }
    }

    /// Whether `send` only queues (stdio, socket): then the order of sends
    /// is the order the server reads.
    pub fn is_queued(&self) -> bool {
        matches!(self.to_server, ToServer::Framed(_))
    }

    /// Deliver a message to the server: queued (waits when the queue is
    /// full), or for HTTP sent, returning the answer to a request when the
    /// server gave it in the POST's response. Everything else the server
    /// says arrives as [`LinkEvent`]s.
    pub async fn send(&self, msg: Message) -> Result<Option<Message>, UpstreamError> {
        self.send_as(msg, None).await
    }

    /// [`Link::send`] presenting `credential` upstream (HTTP; other links
    /// have no place for one). `None`: the link's own credential.
    pub async fn send_as(
        &self,
        msg: Message,
        credential: Option<&Credential>,
    ) -> Result<Option<Message>, UpstreamError> {
        match &self.to_server {
            ToServer::Framed(tx) => tx
                .send(msg)
                .await
                .map(|()| None)
                .map_err(|_| UpstreamError::Closed),
            ToServer::Http(state) => http::post(state, msg, credential).await,
            ToServer::Gateway(state) => gateway::send(state, msg, credential).await,
        }
    }

    /// Cancel request `id` the way the transport does it, if it has a way
    /// (modern HTTP: close the request's stream). `false`: send
    /// `notifications/cancelled` instead.
    pub fn abort(&self, id: &RequestId) -> bool {
        match &self.to_server {
            ToServer::Http(state) => http::abort(state, id),
            ToServer::Gateway(state) => gateway::abort(state, id),
            ToServer::Framed(_) => false,
        }
    }
}

/// Open a new link to `target`.
pub async fn connect(
    target: &UpstreamTarget,
    limits: &LinkLimits,
    mode: &LinkMode,
) -> Result<(Link, mpsc::Receiver<LinkEvent>), UpstreamError> {
    match target {
        UpstreamTarget::Command { program, args, env } => stdio::spawn(program, args, env, limits),
        UpstreamTarget::Socket(path) => socket::connect(path, limits).await,
        UpstreamTarget::Http(target) => {
            let (state, guard, events) = http::connect(target, limits, mode.clone())?;
            let link = Link {
                to_server: ToServer::Http(state),
                _guard: Some(Box::new(guard)),
            };
            Ok((link, events))
        }
        UpstreamTarget::Gateway(gateway) => {
            let (state, guard, events) = gateway::connect(gateway, limits)?;
            let link = Link {
                to_server: ToServer::Gateway(state),
                _guard: Some(guard),
            };
            Ok((link, events))
        }
    }
}
