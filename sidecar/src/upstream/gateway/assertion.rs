//! The gateway's assertions: how a caller's identity reaches each backend
//! without the caller's token.
//!
//! Where it sits: the gateway link ([`super`]) asks [`Signer::mint`] for
//! each request to a backend, with the [`Principal`] the facade above
//! authenticated. The result is a short-lived JWT signed with the
//! gateway's private key:
//!
//! ```text
//! iss  the gateway (--gateway-issuer)        aud  the backend's name
//! sub  the caller's subject                  caller_iss  the caller's issuer
//! groups  the caller's groups                iat/nbf/exp  now, now, now + lifetime
//! jti  random
//! ```
//!
//! A backend facade accepts it only when its policy lists this gateway
//! (`auth.gateways`: the issuer, the public key, its own name as audience
//! and the caller issuers it may vouch for; see `auth`'s verifier). One
//! backend's assertion is refused by another (audience), so a backend that
//! misbehaves cannot replay it sideways; it expires in minutes.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

use crate::upstream::Credential;

/// Who a request is for: the caller the facade authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub issuer: String,
    pub subject: String,
    pub groups: Vec<String>,
}

/// Signs assertions for the gateway's backends.
pub struct Signer {
    issuer: String,
    key: EncodingKey,
    alg: Algorithm,
    lifetime: Duration,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Signer({}, {:?}, [key redacted])", self.issuer, self.alg)
    }
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    aud: &'a str,
    sub: &'a str,
    caller_iss: &'a str,
    groups: &'a [String],
    iat: u64,
    nbf: u64,
    exp: u64,
    jti: String,
}

impl Signer {
    /// A signer with the PEM private key at `path` (PKCS#8 Ed25519 or
    /// P-256, or RSA), assertions valid for `lifetime`.
    pub fn load(issuer: &str, path: &Path, lifetime: Duration) -> Result<Signer, String> {
        let pem = std::fs::read(path)
            .map_err(|e| format!("cannot read the gateway key {}: {e}", path.display()))?;
        Signer::from_pem(issuer, &pem, lifetime)
            .map_err(|e| format!("the gateway key {}: {e}", path.display()))
    }

    pub fn from_pem(issuer: &str, pem: &[u8], lifetime: Duration) -> Result<Signer, String> {
        if issuer.trim().is_empty() {
            return Err("the gateway issuer must not be empty".into());
        }
        let (key, alg) = if let Ok(k) = EncodingKey::from_ed_pem(pem) {
            (k, Algorithm::EdDSA)
        } else if let Ok(k) = EncodingKey::from_ec_pem(pem) {
            (k, Algorithm::ES256)
        } else if let Ok(k) = EncodingKey::from_rsa_pem(pem) {
            (k, Algorithm::RS256)
        } else {
            return Err("not a PEM Ed25519, P-256 or RSA private key".into());
        };
        Ok(Signer {
            issuer: issuer.to_string(),
            key,
            alg,
            lifetime,
        })
    }

    /// An assertion of `who` for backend `audience`, as a bearer credential.
    pub fn mint(&self, who: &Principal, audience: &str) -> Result<Credential, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| format!("no randomness: {e}"))?;
        let claims = Claims {
            iss: &self.issuer,
            aud: audience,
            sub: &who.subject,
            caller_iss: &who.issuer,
            groups: &who.groups,
            iat: now,
            nbf: now,
            exp: now + self.lifetime.as_secs().max(1),
            jti: hex::encode(nonce),
        };
        let token = jsonwebtoken::encode(&Header::new(self.alg), &claims, &self.key)
            .map_err(|e| format!("cannot sign the assertion: {e}"))?;
        Credential::bearer(&token)
    }
}
