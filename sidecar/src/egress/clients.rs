//! The egress proxy's clients file (pure, plus the poller that reloads it):
//! who may ask, with which credential, for which `host:port` pairs, address
//! blocks and plain-HTTP hosts.
//!
//! ```text
//! clients.json ─(poll)─▶ parse ─▶ Clients (ArcSwap) ─▶ authenticate(Proxy-Authorization)
//!                                                       └▶ Client: may_connect / may_get / cidr_allows
//! ```
//!
//! A file that cannot be read or parsed keeps the last good set in force
//! (logged, and a gauge says so); the proxy never falls back to "nobody"
//! or "everybody" on a typo. Host names are compared in one form: ASCII
//! (IDNA), lowercase, without a trailing dot; `*.example.org` matches every
//! name below `example.org`, never `example.org` itself.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use base64::Engine;
use ipnet::IpNet;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::metrics::EgressMetrics;

/// The version of the clients file this proxy reads.
pub const FILE_VERSION: u32 = 1;

/// Why a clients file was not taken.
#[derive(Debug, thiserror::Error)]
pub enum ClientsError {
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: String },
    #[error("{0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileDoc {
    version: u32,
    clients: Vec<FileClient>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct FileClient {
    name: String,
    token_sha256: String,
    #[serde(default)]
    hosts: Vec<FileHost>,
    #[serde(default)]
    cidrs: Vec<FileCidr>,
    #[serde(default)]
    plain_http_hosts: Vec<FileHost>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHost {
    host: String,
    port: u16,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCidr {
    cidr: String,
    port: u16,
}

/// One host rule: an exact name, or every name below a domain (`*.d`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostRule {
    Exact(String, u16),
    Below(String, u16),
}

impl HostRule {
    fn matches(&self, host: &str, port: u16) -> bool {
        match self {
            HostRule::Exact(h, p) => *p == port && h == host,
            HostRule::Below(d, p) => {
                *p == port
                    && host.len() > d.len() + 1
                    && host.ends_with(d.as_str())
                    && host.as_bytes()[host.len() - d.len() - 1] == b'.'
            }
        }
    }
}

/// One client of the proxy (an MCPServer) and what it may reach.
#[derive(Debug)]
pub struct Client {
    pub name: String,
    token_sha256: [u8; 32],
    hosts: Vec<HostRule>,
    cidrs: Vec<(IpNet, u16)>,
    plain_http: Vec<HostRule>,
}

impl Client {
    /// Whether `CONNECT host:port` names an approved pair (host normalized).
    pub fn may_connect(&self, host: &str, port: u16) -> bool {
        self.hosts.iter().any(|r| r.matches(host, port))
    }

    /// Whether a plain `http://host:port` request is approved.
    pub fn may_get(&self, host: &str, port: u16) -> bool {
        self.plain_http.iter().any(|r| r.matches(host, port))
    }

    /// Whether one of the client's address blocks holds `ip` on `port`.
    pub fn cidr_allows(&self, ip: IpAddr, port: u16) -> bool {
        let ip = ip.to_canonical();
        self.cidrs
            .iter()
            .any(|(net, p)| *p == port && net.contains(&ip))
    }
}

/// Every client, by name.
#[derive(Debug, Default)]
pub struct Clients {
    by_name: HashMap<String, Arc<Client>>,
}

impl Clients {
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The client called `name` (no credential checked: for tests and logs).
    pub fn get(&self, name: &str) -> Option<Arc<Client>> {
        self.by_name.get(name).cloned()
    }

    /// The client a `Proxy-Authorization` header value proves, if any.
    ///
    /// The name may arrive percent-encoded (`team-a%2Ffetch`: some clients
    /// send the proxy URL's user name as written) or decoded; both are
    /// accepted. The token's hash is compared in constant time, and a hash
    /// is computed even for an unknown name, so the time taken does not
    /// say which names exist.
    pub fn authenticate(&self, header: Option<&str>) -> Option<Arc<Client>> {
        let (name, token) = basic_credentials(header?)?;
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let client = self.by_name.get(&name).or_else(|| {
            name.contains('%')
                .then(|| percent_decode(&name))
                .flatten()
                .and_then(|n| self.by_name.get(&n))
        });
        let expected = client.map(|c| c.token_sha256).unwrap_or([0xff; 32]);
        let same = constant_time_eq(&digest, &expected);
        client.filter(|_| same).cloned()
    }
}

/// `(name, token)` of a `Basic` credential (`name:token`, the name has no
/// colon; the token may be percent-encoded like the name).
fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, value) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (name, token) = text.split_once(':')?;
    let token = if token.contains('%') {
        percent_decode(token)?
    } else {
        token.to_string()
    };
    Some((name.to_string(), token))
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A host name in the form rules and requests are compared in: IDNA ASCII,
/// lowercase, no trailing dot. An IP literal stays as it is (without IPv6
/// brackets). `None` for a name that is not a valid host name.
pub fn normalize_host(host: &str) -> Option<String> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.is_empty() {
        return None;
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let ascii = idna::domain_to_ascii(host).ok()?;
    let valid = !ascii.is_empty()
        && ascii.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    valid.then_some(ascii)
}

fn host_rule(h: &FileHost, what: &str, client: &str) -> Result<HostRule, ClientsError> {
    let bad = || {
        ClientsError::Invalid(format!(
            "client {client}: {what} `{}` is not a host name",
            h.host
        ))
    };
    if h.port == 0 {
        return Err(ClientsError::Invalid(format!(
            "client {client}: {what} `{}` has port 0",
            h.host
        )));
    }
    match h.host.strip_prefix("*.") {
        Some(domain) => Ok(HostRule::Below(
            normalize_host(domain).ok_or_else(bad)?,
            h.port,
        )),
        None if h.host.contains('*') => Err(bad()),
        None => {
            let host = normalize_host(&h.host).ok_or_else(bad)?;
            if host.parse::<IpAddr>().is_ok() {
                return Err(ClientsError::Invalid(format!(
                    "client {client}: {what} `{}` is an address: approve addresses as `cidrs`",
                    h.host
                )));
            }
            Ok(HostRule::Exact(host, h.port))
        }
    }
}

/// Parse a clients file.
pub fn parse(text: &str) -> Result<Clients, ClientsError> {
    let doc: FileDoc = serde_json::from_str(text)
        .map_err(|e| ClientsError::Invalid(format!("not a clients file: {e}")))?;
    if doc.version != FILE_VERSION {
        return Err(ClientsError::Invalid(format!(
            "version {} is not {FILE_VERSION}",
            doc.version
        )));
    }
    let mut by_name = HashMap::new();
    for c in doc.clients {
        if c.name.is_empty() || c.name.contains(':') {
            return Err(ClientsError::Invalid(format!(
                "client name `{}` is empty or has a colon",
                c.name
            )));
        }
        let hash = hex::decode(c.token_sha256.trim())
            .ok()
            .and_then(|h| <[u8; 32]>::try_from(h).ok())
            .ok_or_else(|| {
                ClientsError::Invalid(format!(
                    "client {}: tokenSha256 is not 64 hex digits",
                    c.name
                ))
            })?;
        let hosts = c
            .hosts
            .iter()
            .map(|h| host_rule(h, "host", &c.name))
            .collect::<Result<_, _>>()?;
        let plain_http = c
            .plain_http_hosts
            .iter()
            .map(|h| host_rule(h, "plainHttpHost", &c.name))
            .collect::<Result<_, _>>()?;
        let cidrs = c
            .cidrs
            .iter()
            .map(|r| {
                crate::net::guard::parse_cidr(&r.cidr)
                    .map(|net| (net, r.port))
                    .map_err(|e| ClientsError::Invalid(format!("client {}: {e}", c.name)))
            })
            .collect::<Result<_, _>>()?;
        let client = Client {
            name: c.name.clone(),
            token_sha256: hash,
            hosts,
            cidrs,
            plain_http,
        };
        if by_name.insert(c.name.clone(), Arc::new(client)).is_some() {
            return Err(ClientsError::Invalid(format!(
                "client `{}` is listed twice",
                c.name
            )));
        }
    }
    Ok(Clients { by_name })
}

/// Read and parse the clients file at `path`.
pub fn load(path: &Path) -> Result<Clients, ClientsError> {
    let text = std::fs::read_to_string(path).map_err(|e| ClientsError::Read {
        path: path.display().to_string(),
        error: e.to_string(),
    })?;
    parse(&text)
}

/// Re-read `path` every `every` while the process runs; a change that
/// parses replaces the set, one that does not keeps the last good set.
pub fn watch(
    path: PathBuf,
    every: Duration,
    live: Arc<ArcSwap<Clients>>,
    metrics: Arc<EgressMetrics>,
) {
    tokio::spawn(async move {
        let mut last: Option<String> = std::fs::read_to_string(&path).ok();
        loop {
            tokio::time::sleep(every).await;
            let text = match tokio::fs::read_to_string(&path).await {
                Ok(t) => t,
                Err(e) => {
                    if last.is_some() {
                        tracing::warn!(path = %path.display(), error = %e,
                            "cannot read the clients file; the last good set stays in force");
                        metrics.clients_reload_failing.set(1);
                    }
                    last = None;
                    continue;
                }
            };
            if last.as_deref() == Some(text.as_str()) {
                continue;
            }
            match parse(&text) {
                Ok(clients) => {
                    tracing::info!(clients = clients.len(), "clients file reloaded");
                    metrics.clients.set(clients.len() as i64);
                    metrics.clients_reload_failing.set(0);
                    live.store(Arc::new(clients));
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e,
                        "invalid clients file; the last good set stays in force");
                    metrics.clients_reload_failing.set(1);
                }
            }
            last = Some(text);
        }
    });
}

#[cfg(test)]
#[path = "clients_tests.rs"]
mod tests;
