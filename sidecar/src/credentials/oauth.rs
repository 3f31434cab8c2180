//! OAuth 2.0 token endpoints: client credentials (RFC 6749 §4.4) and token
//! exchange (RFC 8693), over the facade's own outbound client (TLS, the
//! resolver, the SSRF guard: a token endpoint is egress like any other).
//!
//! Tokens are cached until [`REFRESH_MARGIN`] before they expire (a token
//! without `expires_in` for [`DEFAULT_LIFETIME`]); concurrent requests for
//! the same token wait for one fetch. Token exchange caches per caller
//! token (by its sha256), at most [`MAX_EXCHANGED`] entries.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE, HOST};
use hyper::{Method, Request, Uri};
use sha2::{Digest, Sha256};

use super::Secret;
use crate::net::pool::Pool;
use crate::net::{Client, Endpoint};

const REFRESH_MARGIN: Duration = Duration::from_secs(30);
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
const MAX_EXCHANGED: usize = 4096;
const MAX_ANSWER_BYTES: usize = 64 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

const GRANT_CLIENT_CREDENTIALS: &str = "client_credentials";
const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A token endpoint: its URL and, once used, its connections.
struct TokenEndpoint {
    uri: Uri,
    endpoint: Endpoint,
    pool: OnceLock<Pool>,
}

impl TokenEndpoint {
    fn new(url: &str) -> Result<TokenEndpoint, String> {
        let uri: Uri = url
            .parse()
            .map_err(|_| format!("tokenUrl `{url}` is not a URL"))?;
        let endpoint = Endpoint::of(&uri).map_err(|e| format!("tokenUrl `{url}`: {e}"))?;
        if !endpoint.tls && !endpoint.is_local_plain() {
            return Err(format!(
                "tokenUrl `{url}` must be https:// (http:// only on loopback)"
            ));
        }
        Ok(TokenEndpoint {
            uri,
            endpoint,
            pool: OnceLock::new(),
        })
    }

    /// POST `form` (with HTTP Basic client authentication when `client` is
    /// given); the token and its lifetime.
    async fn fetch(
        &self,
        form: &[(&str, &str)],
        client_auth: Option<(&str, &Secret)>,
        client: &Arc<Client>,
    ) -> Result<(Secret, Duration), String> {
        let pool = self
            .pool
            .get_or_init(|| Pool::new(client.clone(), self.endpoint.clone()));
        let body = encode_form(form);
        let path = self.uri.path_and_query().map_or("/", |p| p.as_str());
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(HOST, self.endpoint.authority.as_str())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json");
        if let Some((id, secret)) = client_auth {
            use base64::Engine;
            let basic = base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                encode(id),
                encode(secret.expose())
            ));
            let mut value = HeaderValue::from_str(&format!("Basic {basic}"))
                .map_err(|_| "the client id or secret cannot go in a header".to_string())?;
            value.set_sensitive(true);
            req = req.header(AUTHORIZATION, value);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let url = &self.uri;
        let exchange = async {
            let mut ex = pool.send(req).await.map_err(|e| e.to_string())?;
            let status = ex.resp.status();
            let body = ex
                .conn
                .drive(Limited::new(ex.resp.into_body(), MAX_ANSWER_BYTES).collect())
                .await
                .map_err(|e| format!("reading the answer failed: {e}"))?
                .to_bytes();
            pool.release(ex.conn);
            Ok::<_, String>((status, body))
        };
        let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("the token endpoint {url} did not answer in time"))?
            .map_err(|e| format!("the token endpoint {url}: {e}"))?;
        let answer: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if !status.is_success() {
            // The OAuth error code only: a description could echo what was sent.
            let code = answer
                .get("error")
                .and_then(|e| e.as_str())
                .filter(|e| e.len() <= 64 && e.bytes().all(|b| b.is_ascii_graphic()))
                .unwrap_or("no error code");
            return Err(format!(
                "the token endpoint {url} refused: HTTP {} ({code})",
                status.as_u16()
            ));
        }
        let token = answer
            .get("access_token")
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| format!("the token endpoint {url} answered without an access_token"))?;
        let lifetime = answer
            .get("expires_in")
            .and_then(|e| {
                e.as_u64()
                    .or_else(|| e.as_str().and_then(|s| s.parse().ok()))
            })
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        Ok((Secret::new(token), lifetime))
    }
}

#[derive(Clone)]
struct Cached {
    token: Secret,
    fresh_until: Instant,
}

impl Cached {
    fn new(token: Secret, lifetime: Duration) -> Cached {
        let margin = REFRESH_MARGIN.min(lifetime / 10);
        Cached {
            token,
            fresh_until: Instant::now() + lifetime.saturating_sub(margin),
        }
    }

    fn fresh(&self) -> bool {
        Instant::now() < self.fresh_until
    }
}

/// The facade's own token (client credentials).
pub struct ClientCredentialsGrant {
    endpoint: TokenEndpoint,
    client_id: String,
    secret: Secret,
    scopes: String,
    audience: Option<String>,
    resource: Option<String>,
    cached: tokio::sync::Mutex<Option<Cached>>,
}

impl ClientCredentialsGrant {
    pub fn new(
        cfg: &mcp_warden_crds::ClientCredentials,
        base: &Path,
    ) -> Result<ClientCredentialsGrant, String> {
        Ok(ClientCredentialsGrant {
            endpoint: TokenEndpoint::new(&cfg.token_url)?,
            client_id: cfg.client_id.clone(),
            secret: Secret::read(&base.join(&cfg.client_secret_file))?,
            scopes: cfg.scopes.join(" "),
            audience: cfg.audience.clone(),
            resource: cfg.resource.clone(),
            cached: tokio::sync::Mutex::new(None),
        })
    }

    pub async fn token(&self, client: &Arc<Client>) -> Result<Secret, String> {
        let mut cached = self.cached.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.fresh()) {
            return Ok(c.token.clone());
        }
        let mut form = vec![("grant_type", GRANT_CLIENT_CREDENTIALS)];
        push_optional(&mut form, &self.scopes, &self.audience, &self.resource);
        let (token, lifetime) = self
            .endpoint
            .fetch(&form, Some((&self.client_id, &self.secret)), client)
            .await?;
        *cached = Some(Cached::new(token.clone(), lifetime));
        Ok(token)
    }
}

/// One caller token's exchanged token, fetched under its lock.
type Slot = Arc<tokio::sync::Mutex<Option<Cached>>>;

/// A caller's token exchanged for the upstream's (RFC 8693).
pub struct TokenExchangeGrant {
    endpoint: TokenEndpoint,
    client: Option<(String, Secret)>,
    scopes: String,
    audience: Option<String>,
    resource: Option<String>,
    subject_token_type: String,
    requested_token_type: Option<String>,
    /// By sha256 of the caller's token; the lock per entry makes concurrent
    /// requests of one caller wait for one exchange.
    cache: Mutex<HashMap<[u8; 32], Slot>>,
}

impl TokenExchangeGrant {
    pub fn new(
        cfg: &mcp_warden_crds::TokenExchange,
        base: &Path,
    ) -> Result<TokenExchangeGrant, String> {
        let client = match (&cfg.client_id, &cfg.client_secret_file) {
            (Some(id), Some(file)) => Some((id.clone(), Secret::read(&base.join(file))?)),
            (None, None) => None,
            _ => return Err("tokenExchange: give clientId and clientSecretFile together".into()),
        };
        Ok(TokenExchangeGrant {
            endpoint: TokenEndpoint::new(&cfg.token_url)?,
            client,
            scopes: cfg.scopes.join(" "),
            audience: cfg.audience.clone(),
            resource: cfg.resource.clone(),
            subject_token_type: cfg
                .subject_token_type
                .clone()
                .unwrap_or_else(|| ACCESS_TOKEN_TYPE.into()),
            requested_token_type: cfg.requested_token_type.clone(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    pub async fn token(&self, subject: &str, client: &Arc<Client>) -> Result<Secret, String> {
        let key: [u8; 32] = Sha256::digest(subject.as_bytes()).into();
        let slot = {
            let mut cache = self.cache.lock().unwrap();
            if cache.len() >= MAX_EXCHANGED && !cache.contains_key(&key) {
                cache.retain(|_, slot| {
                    slot.try_lock()
                        .map(|c| c.as_ref().is_some_and(Cached::fresh))
                        .unwrap_or(true)
                });
                if cache.len() >= MAX_EXCHANGED {
                    cache.clear();
                }
            }
            cache.entry(key).or_default().clone()
        };
        let mut cached = slot.lock().await;
        if let Some(c) = cached.as_ref().filter(|c| c.fresh()) {
            return Ok(c.token.clone());
        }
        let mut form = vec![
            ("grant_type", GRANT_TOKEN_EXCHANGE),
            ("subject_token", subject),
            ("subject_token_type", self.subject_token_type.as_str()),
        ];
        if let Some(t) = &self.requested_token_type {
            form.push(("requested_token_type", t));
        }
        push_optional(&mut form, &self.scopes, &self.audience, &self.resource);
        let client_auth = self.client.as_ref().map(|(id, s)| (id.as_str(), s));
        let (token, lifetime) = self.endpoint.fetch(&form, client_auth, client).await?;
        *cached = Some(Cached::new(token.clone(), lifetime));
        Ok(token)
    }
}

fn push_optional<'a>(
    form: &mut Vec<(&'static str, &'a str)>,
    scopes: &'a str,
    audience: &'a Option<String>,
    resource: &'a Option<String>,
) {
    if !scopes.is_empty() {
        form.push(("scope", scopes));
    }
    if let Some(a) = audience {
        form.push(("audience", a));
    }
    if let Some(r) = resource {
        form.push(("resource", r));
    }
}

/// `application/x-www-form-urlencoded`.
fn encode_form(form: &[(&str, &str)]) -> String {
    form.iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encode everything but the unreserved characters (also what
/// RFC 6749 §2.3.1 asks of a client id and secret in HTTP Basic).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded() {
        assert_eq!(
            encode_form(&[("grant_type", GRANT_TOKEN_EXCHANGE), ("scope", "a b")]),
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&scope=a%20b"
        );
    }

    #[test]
    fn token_endpoints_must_be_https_unless_on_loopback() {
        assert!(TokenEndpoint::new("https://idp.example/token").is_ok());
        assert!(TokenEndpoint::new("http://127.0.0.1:8080/token").is_ok());
        assert!(TokenEndpoint::new("http://idp.example/token").is_err());
        assert!(TokenEndpoint::new("not a url").is_err());
    }

    #[test]
    fn cached_tokens_refresh_before_they_expire() {
        let c = Cached::new(Secret::new("t"), Duration::from_secs(3600));
        assert!(c.fresh());
        let short = Cached::new(Secret::new("t"), Duration::from_secs(0));
        assert!(!short.fresh());
    }
}
