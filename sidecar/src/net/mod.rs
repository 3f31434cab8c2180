//! Outbound HTTP connections: to the upstream MCP server and to the token
//! endpoints upstream credentials come from.
//!
//! ```text
//! Endpoint (scheme, host, port) ─▶ proxy? (HTTPS_PROXY, CONNECT)
//!        └▶ resolve (hickory, every connection) ─▶ guard each address (SSRF)
//!             ─▶ TCP connect (timeout) ─▶ TLS (rustls, SNI, ALPN h2 / http/1.1)
//!                  ─▶ pool: HTTP/1.1 connections driven by their callers, or one HTTP/2 connection
//! ```
//!
//! The connection target is the configured URL's and nothing else: no
//! message content, header the facade mirrors, or answer of the server
//! changes it (redirects are refused, see [`crate::upstream::http`]).
//! Refusing an address is an egress refusal: it is logged, counted and
//! audited through the [`Client`]'s observer.

pub mod guard;
pub mod pool;
pub mod proxy;
pub mod resolve;
pub mod tls;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hyper::Uri;
use tokio::net::TcpStream;

use guard::Guard;
use proxy::Proxy;
use resolve::Resolver;
use tls::Io;

/// How outbound connections are made.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// A PEM bundle of extra trusted CAs.
    pub ca_file: Option<PathBuf>,
    /// Trust `ca_file` alone, not the platform's roots as well: a
    /// gateway's backend whose certificate the operator found the CA of
    /// (`--backend-ca`) is trusted by that CA and no other.
    pub ca_only: bool,
    /// Blocks the SSRF guard lets through although they are not public.
    pub allow: Vec<ipnet::IpNet>,
    /// Where name servers are listed.
    pub resolv_conf: PathBuf,
    /// TCP connect plus TLS handshake, per connection.
    pub connect_timeout: Duration,
    /// Offer HTTP/2 (ALPN) to TLS servers.
    pub http2: bool,
    /// The proxy settings; `None`: from the environment (`HTTPS_PROXY`).
    pub proxy: Option<Proxy>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            ca_file: None,
            ca_only: false,
            allow: Vec::new(),
            resolv_conf: PathBuf::from("/etc/resolv.conf"),
            connect_timeout: Duration::from_secs(10),
            http2: true,
            proxy: None,
        }
    }
}

/// A connection the facade would not make, and why (logged, audited).
#[derive(Clone, Debug)]
pub struct EgressRefusal {
    /// Stable reason: `address_not_allowed`, `redirect`.
    pub reason: &'static str,
    /// The host the connection was for.
    pub host: String,
    /// The address refused, if an address was.
    pub address: Option<IpAddr>,
    /// A sentence for the error message and the log.
    pub detail: String,
}

/// Told about every egress refusal (the app audits and counts them).
pub type Observer = Arc<dyn Fn(&EgressRefusal) + Send + Sync>;

/// Why a connection or an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("{}", .0.detail)]
    Refused(EgressRefusal),
    #[error("{0}")]
    Connect(String),
    #[error("{0}")]
    Http(String),
}

/// What every outbound connection shares: trust, resolver, guard, proxy.
pub struct Client {
    tls: Option<Arc<rustls::ClientConfig>>,
    tls_error: Option<String>,
    resolver: Resolver,
    guard: Guard,
    proxy: Proxy,
    connect_timeout: Duration,
    observer: OnceLock<Observer>,
}

impl Client {
    /// A client for `config`. TLS trust is loaded now; a problem with it
    /// is reported when (and only if) a TLS connection is needed.
    pub fn new(config: &ClientConfig) -> Result<Arc<Client>, String> {
        let (tls, tls_error) =
            match tls::client_config(config.ca_file.as_deref(), config.ca_only, config.http2) {
                Ok(c) => (Some(c), None),
                // A CA file that cannot be read is a configuration error now.
                Err(e) if config.ca_file.is_some() => return Err(e),
                Err(e) => (None, Some(e)),
            };
        Ok(Arc::new(Client {
            tls,
            tls_error,
            resolver: Resolver::new(config.resolv_conf.clone()),
            guard: Guard::new(config.allow.clone()),
            proxy: match &config.proxy {
                Some(p) => p.clone(),
                None => Proxy::from_env()?,
            },
            connect_timeout: config.connect_timeout,
            observer: OnceLock::new(),
        }))
    }

    /// Who hears about refusals (set once, when the app exists).
    pub fn set_observer(&self, observer: Observer) {
        let _ = self.observer.set(observer);
    }

    /// Report a refusal and turn it into the error the caller returns.
    pub fn refuse(&self, refusal: EgressRefusal) -> NetError {
        tracing::warn!(
            reason = refusal.reason,
            host = %refusal.host,
            address = ?refusal.address,
            "{}",
            refusal.detail
        );
        if let Some(observer) = self.observer.get() {
            observer(&refusal);
        }
        NetError::Refused(refusal)
    }

    /// A connected byte stream to `endpoint`: through the proxy if one
    /// applies, else to an address of its host that the guard allows; TLS
    /// for `https`.
    pub async fn open(&self, endpoint: &Endpoint) -> Result<Io, NetError> {
        let work = async {
            let tcp = match (endpoint.tls, self.proxy.for_host(&endpoint.host)) {
                (true, Some((phost, pport, auth))) => {
                    if let Ok(ip) = endpoint.host.parse::<IpAddr>() {
                        self.judge(endpoint, &[ip])?;
                    }
                    let addrs = self
                        .resolver
                        .lookup(phost)
                        .await
                        .map_err(NetError::Connect)?;
                    let mut tcp = connect_any(&addrs, pport, phost).await?;
                    proxy::connect_tunnel(&mut tcp, &endpoint.host, endpoint.port, auth)
                        .await
                        .map_err(NetError::Connect)?;
                    tcp
                }
                _ => {
                    let addrs = self
                        .resolver
                        .lookup(&endpoint.host)
                        .await
                        .map_err(NetError::Connect)?;
                    let allowed = self.judge(endpoint, &addrs)?;
                    connect_any(&allowed, endpoint.port, &endpoint.host).await?
                }
            };
            let _ = tcp.set_nodelay(true);
            if !endpoint.tls {
                return Ok(Io::Plain(tcp));
            }
            let config = self
                .tls
                .clone()
                .ok_or_else(|| NetError::Connect(self.tls_error.clone().unwrap_or_default()))?;
            let name =
                rustls::pki_types::ServerName::try_from(endpoint.host.clone()).map_err(|_| {
                    NetError::Connect(format!(
                        "`{}` is not a valid TLS server name",
                        endpoint.host
                    ))
                })?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    NetError::Connect(format!(
                        "TLS with {}:{} failed: {e}",
                        endpoint.host, endpoint.port
                    ))
                })?;
            Ok(Io::Tls(Box::new(tls)))
        };
        match tokio::time::timeout(self.connect_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(NetError::Connect(format!(
                "connect to {}:{}: timed out after {} s",
                endpoint.host,
                endpoint.port,
                self.connect_timeout.as_secs()
            ))),
        }
    }

    /// The addresses of `addrs` the guard allows; none is a refusal.
    fn judge(&self, endpoint: &Endpoint, addrs: &[IpAddr]) -> Result<Vec<IpAddr>, NetError> {
        let mut allowed = Vec::with_capacity(addrs.len());
        let mut refused = None;
        for ip in addrs {
            match self.guard.check(*ip) {
                Ok(()) => allowed.push(*ip),
                Err(class) => refused = refused.or(Some((*ip, class))),
            }
        }
        match (allowed.is_empty(), refused) {
            (true, Some((ip, class))) => {
                let via = if endpoint.host.parse::<IpAddr>().is_ok() {
                    String::new()
                } else {
                    format!(" ({} resolves to it)", endpoint.host)
                };
                Err(self.refuse(EgressRefusal {
                    reason: "address_not_allowed",
                    host: endpoint.host.clone(),
                    address: Some(ip),
                    detail: format!(
                        "the facade does not connect to {ip}{via}: a {class} address, which no --upstream-allow-cidr names"
                    ),
                }))
            }
            _ => Ok(allowed),
        }
    }
}

async fn connect_any(addrs: &[IpAddr], port: u16, host: &str) -> Result<TcpStream, NetError> {
    let mut last = None;
    for ip in addrs {
        match TcpStream::connect(SocketAddr::new(*ip, port)).await {
            Ok(tcp) => return Ok(tcp),
            Err(e) => last = Some(format!("connect to {host}:{port} ({ip}): {e}")),
        }
    }
    Err(NetError::Connect(last.unwrap_or_else(|| {
        format!("connect to {host}:{port}: no address")
    })))
}

/// Where connections go: from a URL's scheme, host and port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `https`.
    pub tls: bool,
    /// Lowercase, without IPv6 brackets.
    pub host: String,
    pub port: u16,
    /// `host[:port]` as the `Host` header and `:authority` carry it.
    pub authority: String,
}

impl Endpoint {
    /// The endpoint of an `http://` or `https://` URL.
    pub fn of(uri: &Uri) -> Result<Endpoint, String> {
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            Some(other) => {
                return Err(format!(
                "the URL scheme `{other}` is not supported; use https:// (or http:// on loopback)"
            ))
            }
            None => return Err(format!("`{uri}` is not an absolute http(s) URL")),
        };
        let authority = uri.authority().ok_or("the URL has no host")?;
        if authority.as_str().contains('@') {
            return Err("the URL must not carry a user name or password".into());
        }
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if host.is_empty() {
            return Err("the URL has no host".into());
        }
        Ok(Endpoint {
            tls,
            port: uri.port_u16().unwrap_or(if tls { 443 } else { 80 }),
            authority: authority.as_str().to_ascii_lowercase(),
            host,
        })
    }

    /// Whether `other` is the same origin (scheme, host, port).
    pub fn same_origin(&self, other: &Endpoint) -> bool {
        self.tls == other.tls && self.host == other.host && self.port == other.port
    }

    /// A plain-http URL on a loopback address or `localhost`: the MCP server
    /// in the same pod.
    pub fn is_local_plain(&self) -> bool {
        !self.tls
            && (self.host == "localhost"
                || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_from_urls() {
        let e = Endpoint::of(&"https://MCP.Example.com/mcp".parse().unwrap()).unwrap();
        assert_eq!(
            (e.tls, e.host.as_str(), e.port),
            (true, "mcp.example.com", 443)
        );
        let e = Endpoint::of(&"http://[::1]:3001/mcp".parse().unwrap()).unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.authority.as_str()),
            ("::1", 3001, "[::1]:3001")
        );
        assert!(e.is_local_plain());
        assert!(!Endpoint::of(&"http://10.0.0.1/".parse().unwrap())
            .unwrap()
            .is_local_plain());
        assert!(!Endpoint::of(&"https://127.0.0.1/".parse().unwrap())
            .unwrap()
            .is_local_plain());
        assert!(Endpoint::of(&"ftp://x/".parse().unwrap()).is_err());
        assert!(Endpoint::of(&"https://u:p@x/".parse().unwrap()).is_err());
        assert!(Endpoint::of(&"/mcp".parse().unwrap()).is_err());
    }
}
