//! The signing keys of the ToolProfiles' JWT issuers that name no JWKS
//! ConfigMap, read from the issuers themselves: `GET
//! <issuer>/.well-known/openid-configuration`, then its `jwks_uri`, both over
//! HTTPS with the system's roots (`SSL_CERT_FILE`/`SSL_CERT_DIR` honoured).
//! The facade cannot do this itself: its pod has no egress unless an admin
//! approved some, and that egress would be the server's too. One path and
//! one cache for both kinds of profile user: the MCPServer reconcile and
//! the MCPGateway's ([`IssuerKeys::unnamed`]).
//!
//! ```text
//! reconcile ─▶ IssuerKeys::get(issuer) ─▶ cached < REFRESH? ─yes─▶ keys
//!                                          └─no─▶ discovery ─▶ jwks_uri ─▶ keys (kept on failure)
//! ```
//! A failed fetch keeps the last keys (an issuer's outage must not lock its
//! users out of a running server) and is retried at the next reconcile.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::{Request, Uri};
use mcp_warden_crds::toolprofile::ProfileAuth;
use serde_json::Value;

/// How long fetched keys are used before the issuer is asked again.
pub const REFRESH: Duration = Duration::from_secs(600);
/// The most a discovery document or JWKS may weigh.
const MAX_BYTES: usize = 1 << 20;
/// Connect + TLS + answer, per request.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why an issuer's keys could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// Not an `https://` URL with a host.
    #[error("{0}: not an https URL")]
    NotHttps(String),
    /// The connection or the HTTP exchange failed.
    #[error("{url}: {message}")]
    Http {
        /// What was asked for.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The document is not what OIDC discovery or a JWKS looks like.
    #[error("{url}: {message}")]
    Invalid {
        /// What was asked for.
        url: String,
        /// What is wrong with it.
        message: String,
    },
}

/// The keys of every issuer asked for, shared by reconciles.
#[derive(Clone, Default)]
pub struct IssuerKeys {
    cache: Arc<Mutex<HashMap<String, (Instant, String)>>>,
}

impl IssuerKeys {
    /// The issuer's JWKS (JSON text): cached, refreshed after [`REFRESH`],
    /// the last good one kept when a refresh fails; `None` when it was
    /// never read.
    pub async fn get(&self, issuer: &str) -> Option<String> {
        self.read(issuer).await.ok()
    }

    /// As [`IssuerKeys::get`], with why the keys were never read.
    pub async fn read(&self, issuer: &str) -> Result<String, FetchError> {
        let cached = self
            .cache
            .lock()
            .expect("issuer keys lock")
            .get(issuer)
            .cloned();
        if let Some((at, keys)) = &cached {
            if at.elapsed() < REFRESH {
                return Ok(keys.clone());
            }
        }
        match fetch(issuer).await {
            Ok(keys) => {
                self.cache
                    .lock()
                    .expect("issuer keys lock")
                    .insert(issuer.to_string(), (Instant::now(), keys.clone()));
                Ok(keys)
            }
            Err(e) => {
                tracing::warn!(%issuer, error = %e, "cannot read the issuer's keys; its tokens are refused until they are read");
                cached.map(|(_, keys)| keys).ok_or(e)
            }
        }
    }

    /// The keys of every JWT issuer of `auth` that names no JWKS ConfigMap
    /// (an MCPServer's profile or a gateway's: one path for both), by
    /// issuer, and a line per issuer whose keys were never read (the
    /// `IssuerKeysUnavailable` condition's message).
    pub async fn unnamed(&self, auth: &ProfileAuth) -> Unnamed {
        let mut out = Unnamed::default();
        for issuer in auth.jwt.iter().filter(|j| j.jwks.is_none()) {
            match self.read(&issuer.issuer).await {
                Ok(keys) => {
                    out.keys.insert(issuer.issuer.clone(), keys);
                }
                Err(e) => out.unread.push(e.to_string()),
            }
        }
        out
    }
}

/// What [`IssuerKeys::unnamed`] read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Unnamed {
    /// Issuer → its JWKS (JSON text).
    pub keys: BTreeMap<String, String>,
    /// Why an issuer's keys were never read, one line each.
    pub unread: Vec<String>,
}

/// The `Degraded` condition's reason (an MCPServer's and a gateway's) while
/// an issuer's keys were never read, and its message.
pub const UNAVAILABLE_REASON: &str = "IssuerKeysUnavailable";

/// The message of [`UNAVAILABLE_REASON`].
pub fn unavailable_message(unread: &[String]) -> String {
    format!(
        "cannot read the keys of JWT issuers, whose tokens are refused until they are read (the operator asks again at each reconcile; or name a JWKS ConfigMap): {}",
        unread.join("; ")
    )
}

/// Discovery document, then the JWKS it names. Returns the JWKS as text.
pub async fn fetch(issuer: &str) -> Result<String, FetchError> {
    let discovery_url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    let discovery = get_json(&discovery_url).await?;
    let invalid = |url: &str, message: &str| FetchError::Invalid {
        url: url.to_string(),
        message: message.to_string(),
    };
    if discovery.get("issuer").and_then(Value::as_str) != Some(issuer) {
        // OIDC discovery: the document's issuer must be exactly the one asked for.
        return Err(invalid(
            &discovery_url,
            "its `issuer` is not the issuer asked for",
        ));
    }
    let jwks_uri = discovery
        .get("jwks_uri")
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(&discovery_url, "no `jwks_uri`"))?
        .to_string();
    let jwks = get_json(&jwks_uri).await?;
    if !jwks.get("keys").is_some_and(Value::is_array) {
        return Err(invalid(&jwks_uri, "not a JWKS (no `keys` list)"));
    }
    Ok(serde_json::to_string(&jwks).expect("JSON serializes"))
}

/// GET an https URL and parse the answer as JSON.
async fn get_json(url: &str) -> Result<Value, FetchError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| FetchError::NotHttps(url.to_string()))?;
    let host = match (uri.scheme_str(), uri.host()) {
        (Some("https"), Some(host)) => host.to_string(),
        _ => return Err(FetchError::NotHttps(url.to_string())),
    };
    let port = uri.port_u16().unwrap_or(443);
    let http = |message: String| FetchError::Http {
        url: url.to_string(),
        message,
    };
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?;
        let name =
            rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(client_config()?)
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map_or(host.clone(), |a| a.to_string());
        let req = Request::get(path)
            .header(hyper::header::HOST, authority)
            .header(hyper::header::ACCEPT, "application/json")
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("HTTP {}", resp.status()));
        }
        let body = Limited::new(resp.into_body(), MAX_BYTES)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<Bytes, String>(body)
    };
    let body = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| http("timed out".into()))?
        .map_err(http)?;
    serde_json::from_slice(&body).map_err(|e| FetchError::Invalid {
        url: url.to_string(),
        message: format!("not JSON: {e}"),
    })
}

/// TLS with the system's roots (re-read per fetch: rare, and a rotated
/// bundle is then used without a restart).
fn client_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for cert in found.certs {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err("no trusted root certificates found".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
