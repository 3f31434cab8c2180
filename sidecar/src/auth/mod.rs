//! Who is calling: the authenticators a policy chooses, tried in order —
//! static bearer tokens, JWT issuers, Kubernetes service-account tokens,
//! trusted gateways' assertions — first match wins; anonymous only when the
//! policy says so.
//!
//! Sits right after the transport parsed a request: HTTP passes the
//! `Authorization: Bearer` token, stdio passes `params.auth.token` (the stdio transport has no headers),
//! which [`strip_params_auth`] removes before the message goes upstream.
//! Failures say why only in the audit line (`reason`); the client just gets
//! -32001, so a caller cannot tell an expired token from a forged one. The
//! one exception is a valid token without its issuer's required scopes: the
//! client is told which scopes to log in for (HTTP 403 `insufficient_scope`).
//! Tokens are never logged, audited, counted or forwarded. [`resource`] is
//! what a client that has no token yet is told: where to log in.

pub mod identity;
mod jwt;
pub mod resource;
mod static_tokens;
mod verified;

use std::path::Path;

use mcp_warden_crds::AuthConfig;
use mcp_warden_crds::ServerRef;

use crate::auth::identity::Identity;
use crate::jsonrpc::Message;
use jwt::JwtVerifier;
use resource::ProtectedResource;
use static_tokens::StaticTokens;

/// Why a caller could not be authenticated (stable audit reasons).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No token, and anonymous access is off.
    Missing,
    /// A token no authenticator accepts; the reason says what was wrong.
    Invalid(&'static str),
    /// A valid token of an issuer that requires scopes it lacks: these
    /// (space-separated). HTTP answers 403 `insufficient_scope`.
    InsufficientScope(String),
}

impl AuthFailure {
    pub fn reason(&self) -> &'static str {
        match self {
            AuthFailure::Missing => "token_missing",
            AuthFailure::Invalid(reason) => reason,
            AuthFailure::InsufficientScope(_) => "insufficient_scope",
        }
    }
}

/// The authenticators of one policy version.
pub struct Authenticator {
    anonymous: bool,
    static_tokens: StaticTokens,
    jwt: Vec<JwtVerifier>,
    /// The protected resource this facade is (its URLs, login issuers).
    pub resource: ProtectedResource,
}

impl Authenticator {
    /// Build from the policy's `auth` section, reading the token and JWKS
    /// files it names (relative paths are relative to the policy file).
    pub fn from_config(
        cfg: &AuthConfig,
        server: Option<&ServerRef>,
        base: &Path,
    ) -> Result<Authenticator, String> {
        // Only through a gateway: its assertions are the one way in (the
        // other authenticators' issuers still name callers in bindings).
        let own = !cfg.gateways_only;
        let static_tokens = StaticTokens::load(cfg.static_tokens.as_ref().filter(|_| own), base)?;
        let resource = ProtectedResource::from_config(cfg);
        let mut jwt = Vec::new();
        for issuer in cfg.jwt.iter().filter(|_| own) {
            jwt.push(JwtVerifier::issuer(issuer, &resource.urls, base)?);
        }
        if let Some(sa) = cfg.service_account_tokens.as_ref().filter(|_| own) {
            let audience = match (&sa.audience, server) {
                (Some(aud), _) => aud.clone(),
                (None, Some(s)) => format!("mcpwarden.dev/{}/{}", s.namespace, s.name),
                (None, None) => {
                    return Err("auth.serviceAccountTokens needs an audience, or `server` to derive mcpwarden.dev/<namespace>/<name>".into())
                }
            };
            jwt.push(JwtVerifier::service_accounts(sa, audience, base)?);
        }
        let sa_issuer = cfg
            .service_account_tokens
            .as_ref()
            .map(|sa| sa.issuer.as_str());
        for gateway in &cfg.gateways {
            jwt.push(JwtVerifier::gateway(gateway, sa_issuer, base)?);
        }
        Ok(Authenticator {
            anonymous: own && cfg.anonymous.is_some(),
            static_tokens,
            jwt,
            resource,
        })
    }

    /// Whether any authenticator needs a token at all.
    pub fn requires_token(&self) -> bool {
        !self.anonymous
    }

    /// Authenticate a bearer token (or its absence).
    pub fn authenticate(&self, token: Option<&str>) -> Result<Identity, AuthFailure> {
        let Some(token) = token.map(str::trim).filter(|t| !t.is_empty()) else {
            return if self.anonymous {
                Ok(Identity::anonymous())
            } else {
                Err(AuthFailure::Missing)
            };
        };
        if let Some(identity) = self.static_tokens.find(token) {
            return Ok(identity);
        }
        let mut failure = AuthFailure::Invalid("unknown_token");
        for verifier in &self.jwt {
            match verifier.verify(token) {
                Ok(mut identity) => {
                    identity.token = Some(crate::auth::identity::CallerToken::new(token));
                    return Ok(identity);
                }
                // An issuer that is not this verifier's says nothing; a more
                // specific reason from the verifier it was meant for wins.
                Err(jwt::Rejection::NotMine) => {}
                Err(jwt::Rejection::Invalid(reason)) => failure = AuthFailure::Invalid(reason),
                // Its issuer's token, valid but without the scopes to use
                // this server: no other verifier would take it either.
                Err(jwt::Rejection::InsufficientScope(scopes)) => {
                    return Err(AuthFailure::InsufficientScope(scopes))
                }
            }
        }
        Err(failure)
    }
}

/// The token of an `Authorization: Bearer …` header value.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let value = header?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// Take `params.auth.token` out of a request (stdio's way to authenticate): the
/// token for the authenticator and the message without `params.auth`.
pub fn strip_params_auth(msg: Message) -> (Message, Option<String>) {
    // A cheap pre-check, which an escaped key (`"\u0061uth"`) cannot slip past.
    if !msg.mentions(b"auth") && !msg.mentions(b"\\u") {
        return (msg, None);
    }
    let mut auth = None;
    let Ok(stripped) = crate::jsonrpc::edit_params(&msg, |p| auth = p.remove("auth")) else {
        return (msg, None);
    };
    let Some(auth) = auth else { return (msg, None) };
    let token = serde_json::from_str::<serde_json::Value>(auth.get())
        .ok()
        .and_then(|a| {
            a.get("token")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        });
    (stripped, token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::identity::AuthMethod;

    #[test]
    fn bearer_header_parsing() {
        assert_eq!(bearer(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(Some("Basic abc")), None);
        assert_eq!(bearer(None), None);
    }

    #[test]
    fn params_auth_is_removed_before_forwarding() {
        let msg = Message::parse(bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"auth":{"token":"s3cret"},"cursor":"c"}}"#,
        ))
        .unwrap();
        let (stripped, token) = strip_params_auth(msg);
        assert_eq!(token.as_deref(), Some("s3cret"));
        assert!(!String::from_utf8_lossy(&stripped.bytes).contains("s3cret"));
        assert!(String::from_utf8_lossy(&stripped.bytes).contains("\"cursor\""));
        let escaped = Message::parse(bytes::Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"\u0061uth":{"token":"s3cret"}}}"#,
        ))
        .unwrap();
        let (stripped, token) = strip_params_auth(escaped);
        assert_eq!(token.as_deref(), Some("s3cret"));
        assert!(!String::from_utf8_lossy(&stripped.bytes).contains("s3cret"));
    }

    #[test]
    fn anonymous_only_when_configured() {
        let closed =
            Authenticator::from_config(&AuthConfig::default(), None, Path::new(".")).unwrap();
        assert_eq!(closed.authenticate(None), Err(AuthFailure::Missing));
        let open: AuthConfig = serde_yaml_ng::from_str("anonymous: {role: viewer}").unwrap();
        let open = Authenticator::from_config(&open, None, Path::new(".")).unwrap();
        assert_eq!(
            open.authenticate(None).unwrap().method,
            AuthMethod::Anonymous
        );
    }
}

#[cfg(test)]
mod gateway_tests;

#[cfg(test)]
mod login_tests;
