//! JWT bearer tokens verified offline against a JWKS file: OIDC issuers, and
//! Kubernetes projected service-account tokens (the same check plus the
//! `kubernetes.io` claims and an audience bound to this MCPServer); and a
//! trusted gateway's assertions, verified against its public key (the same
//! check, the audience this backend's name, and the caller it names only
//! of an issuer the policy lets that gateway vouch for).
//!
//! Accepted algorithms: RS256, ES256, EdDSA (`none` does not exist in the
//! library, HMAC is refused: a shared secret is not an identity). `iss`,
//! `aud`, `exp` and `nbf` are required and checked with bounded clock skew.
//! An issuer with `resourceAudience` takes only tokens whose `aud` is one of
//! the facade's URLs (RFC 8707); `requiredScopes` are checked last, on an
//! otherwise valid token, so their absence can be told to the client.
//! A token accepted once is known again by its hash until its `exp`
//! ([`super::verified`]): the same checks are not repeated for it on every
//! request.

use std::path::Path;

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{decode, decode_header, Algorithm, DecodingKey, Validation};
use mcp_warden_crds::{JwtIssuer, ServiceAccountTokens, TrustedGateway};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::identity::{AuthMethod, Identity};
use crate::auth::verified::{self, Verified};
use crate::upstream::gateway::assertion::itself_subject;
use mcp_warden_policy::login::ResourceUrl;

const ALGORITHMS: &[Algorithm] = &[Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
const DEFAULT_SKEW: u64 = 60;
const MAX_SKEW: u64 = 300;

pub enum Rejection {
    /// Not this verifier's issuer.
    NotMine,
    /// This verifier's issuer, but invalid (stable reason).
    Invalid(&'static str),
    /// A valid token of this issuer without the scopes it requires
    /// (`requiredScopes`), space-separated.
    InsufficientScope(String),
}

enum Kind {
    Oidc {
        groups_claim: String,
        username_claim: String,
    },
    ServiceAccount,
    Gateway {
        caller_issuers: Vec<String>,
        /// This policy's service-account issuer: a vouched caller of that
        /// issuer is a service account (`serviceAccounts` bindings match it),
        /// as it would be with its own token.
        service_account_issuer: Option<String>,
    },
}

pub struct JwtVerifier {
    issuer: String,
    keys: Vec<(Option<String>, Algorithm, DecodingKey)>,
    validation: Validation,
    kind: Kind,
    /// `resourceAudience`: the facade's URLs, one of which `aud` must name
    /// (compared as URLs, so the library's exact-string check is off).
    resources: Option<Vec<ResourceUrl>>,
    /// Scopes every token must carry (`requiredScopes`).
    required_scopes: Vec<String>,
    /// Tokens this verifier accepted, until their `exp`.
    verified: Verified,
}

#[derive(Deserialize)]
struct Unverified {
    iss: Option<String>,
}

impl JwtVerifier {
    /// An OIDC issuer; `resources` are the facade's URLs (`auth.resourceUrls`),
    /// the audiences of an issuer with `resourceAudience`.
    pub fn issuer(
        cfg: &JwtIssuer,
        resources: &[ResourceUrl],
        base: &Path,
    ) -> Result<JwtVerifier, String> {
        let kind = Kind::Oidc {
            groups_claim: cfg.groups_claim.clone().unwrap_or_else(|| "groups".into()),
            username_claim: cfg.username_claim.clone().unwrap_or_else(|| "sub".into()),
        };
        let audiences: Vec<String> = if cfg.resource_audience {
            if resources.is_empty() {
                return Err(format!(
                    "JWT issuer {}: resourceAudience needs auth.resourceUrls (or --resource-url)",
                    cfg.issuer
                ));
            }
            resources.iter().map(|r| r.url.clone()).collect()
        } else {
            cfg.audiences.clone()
        };
        let mut verifier = Self::new(
            &cfg.issuer,
            &audiences,
            &cfg.jwks_file,
            cfg.clock_skew_seconds,
            kind,
            base,
        )?;
        if cfg.resource_audience {
            verifier.validation.validate_aud = false;
            verifier.resources = Some(resources.to_vec());
        }
        verifier.required_scopes = cfg.required_scopes.clone();
        Ok(verifier)
    }

    pub fn service_accounts(
        cfg: &ServiceAccountTokens,
        audience: String,
        base: &Path,
    ) -> Result<JwtVerifier, String> {
        Self::new(
            &cfg.issuer,
            &[audience],
            &cfg.jwks_file,
            None,
            Kind::ServiceAccount,
            base,
        )
    }

    fn new(
        issuer: &str,
        audiences: &[String],
        jwks_file: &str,
        skew: Option<u64>,
        kind: Kind,
        base: &Path,
    ) -> Result<JwtVerifier, String> {
        if audiences.is_empty() {
            return Err(format!(
                "JWT issuer {issuer}: at least one audience is required"
            ));
        }
        let path = base.join(jwks_file);
        let keys = match std::fs::read_to_string(&path) {
            // A JWKS that does not parse or holds no usable key (an empty
            // `{"keys": []}` placeholder, a half-edited ConfigMap) refuses
            // this issuer's tokens only: failing the whole policy would lock
            // out every other caller over one issuer's file.
            Ok(text) => Self::keys(&text, &path).unwrap_or_else(|e| {
                tracing::warn!(jwks = %path.display(), %issuer, error = %e, "unusable JWKS; tokens of this issuer are refused until it is fixed");
                Vec::new()
            }),
            // The operator publishes the cluster's JWKS after the pod may
            // start; until then this issuer's tokens are refused, and the
            // policy watcher picks the file up when it appears.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(jwks = %path.display(), %issuer, "JWKS file not found yet; tokens of this issuer are refused until it appears");
                Vec::new()
            }
            Err(e) => return Err(format!("cannot read JWKS {}: {e}", path.display())),
        };
        Ok(JwtVerifier {
            issuer: issuer.to_string(),
            keys,
            validation: validation(issuer, audiences, skew),
            kind,
            resources: None,
            required_scopes: Vec::new(),
            verified: Verified::default(),
        })
    }

    /// A trusted gateway: its assertions, checked against its public key.
    pub fn gateway(
        cfg: &TrustedGateway,
        service_account_issuer: Option<&str>,
        base: &Path,
    ) -> Result<JwtVerifier, String> {
        let at = format!("auth.gateways[{}]", cfg.issuer);
        if cfg.issuer.trim().is_empty() || cfg.audience.trim().is_empty() {
            return Err(format!("{at}: issuer and audience must not be empty"));
        }
        if cfg.caller_issuers.is_empty() {
            return Err(format!(
                "{at}.callerIssuers: name the issuers of the callers this gateway may vouch for"
            ));
        }
        if cfg.caller_issuers.contains(&cfg.issuer) {
            // Under its own issuer a gateway speaks only for itself.
            return Err(format!(
                "{at}.callerIssuers: the gateway's own issuer names the gateway itself, not callers"
            ));
        }
        let path = base.join(&cfg.public_key_file);
        let pem = std::fs::read(&path)
            .map_err(|e| format!("{at}: cannot read the public key {}: {e}", path.display()))?;
        let key = if let Ok(k) = DecodingKey::from_ed_pem(&pem) {
            (None, Algorithm::EdDSA, k)
        } else if let Ok(k) = DecodingKey::from_ec_pem(&pem) {
            (None, Algorithm::ES256, k)
        } else if let Ok(k) = DecodingKey::from_rsa_pem(&pem) {
            (None, Algorithm::RS256, k)
        } else {
            return Err(format!(
                "{at}: {} is not a PEM Ed25519, P-256 or RSA public key",
                path.display()
            ));
        };
        let mut validation = validation(
            &cfg.issuer,
            std::slice::from_ref(&cfg.audience),
            cfg.clock_skew_seconds,
        );
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub", "nbf"]);
        Ok(JwtVerifier {
            issuer: cfg.issuer.clone(),
            keys: vec![key],
            validation,
            kind: Kind::Gateway {
                caller_issuers: cfg.caller_issuers.clone(),
                service_account_issuer: service_account_issuer.map(str::to_string),
            },
            resources: None,
            required_scopes: Vec::new(),
            verified: Verified::default(),
        })
    }

    fn keys(
        text: &str,
        path: &Path,
    ) -> Result<Vec<(Option<String>, Algorithm, DecodingKey)>, String> {
        let set: JwkSet = serde_json::from_str(text)
            .map_err(|e| format!("invalid JWKS {}: {e}", path.display()))?;
        let mut keys = Vec::new();
        for jwk in &set.keys {
            let Ok(key) = DecodingKey::from_jwk(jwk) else {
                continue;
            };
            let alg = match jwk
                .common
                .key_algorithm
                .and_then(|a| a.to_string().parse::<Algorithm>().ok())
            {
                Some(alg) => alg,
                None => match &jwk.algorithm {
                    jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => Algorithm::RS256,
                    jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => Algorithm::ES256,
                    jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_) => Algorithm::EdDSA,
                    _ => continue,
                },
            };
            if ALGORITHMS.contains(&alg) {
                keys.push((jwk.common.key_id.clone(), alg, key));
            }
        }
        if keys.is_empty() {
            return Err(format!(
                "JWKS {} has no usable RS256, ES256 or EdDSA key",
                path.display()
            ));
        }
        Ok(keys)
    }

    pub fn verify(&self, token: &str) -> Result<Identity, Rejection> {
        // Route by the (unverified) issuer first, so another issuer's tokens
        // are not reported as this issuer's failures.
        let claims: Option<Unverified> =
            jsonwebtoken::dangerous::insecure_decode_claims(token).ok();
        match claims.and_then(|c| c.iss) {
            Some(iss) if iss == self.issuer => {}
            Some(_) => return Err(Rejection::NotMine),
            None => return Err(Rejection::Invalid("malformed_token")),
        }
        let (digest, now) = (verified::digest(token), verified::now());
        if let Some(identity) = self.verified.get(&digest, now) {
            return Ok(identity);
        }
        let header = decode_header(token).map_err(|e| Rejection::Invalid(reason(e.kind())))?;
        if !ALGORITHMS.contains(&header.alg) {
            return Err(Rejection::Invalid("unsupported_algorithm"));
        }
        let candidates = self.keys.iter().filter(|(kid, alg, _)| {
            *alg == header.alg && (header.kid.is_none() || kid.is_none() || *kid == header.kid)
        });
        if self.keys.is_empty() {
            return Err(Rejection::Invalid("jwks_unavailable"));
        }
        let mut last = Rejection::Invalid("no_matching_key");
        for (_, _, key) in candidates {
            let mut validation = self.validation.clone();
            validation.algorithms = vec![header.alg];
            match decode::<Value>(token, key, &validation) {
                Ok(data) => {
                    self.bound_to_resource(&data.claims)?;
                    let mut identity = self.identity(&data.claims)?;
                    self.scoped(&data.claims)?;
                    // `exp` is a required claim: every token accepted here
                    // has one, and what the caller holds ends with it.
                    let exp = data.claims.get("exp").and_then(Value::as_u64);
                    identity.expires_at = exp;
                    if let Some(exp) = exp {
                        self.verified.put(digest, &identity, exp, now);
                    }
                    return Ok(identity);
                }
                Err(e) if *e.kind() == ErrorKind::InvalidSignature => {
                    last = Rejection::Invalid("bad_signature")
                }
                Err(e) => return Err(Rejection::Invalid(reason(e.kind()))),
            }
        }
        Err(last)
    }

    /// With `resourceAudience`: `aud` (a string or a list) names one of
    /// the facade's URLs, so a token the issuer minted for another
    /// resource is refused, as RFC 8707 and the MCP spec require.
    fn bound_to_resource(&self, claims: &Value) -> Result<(), Rejection> {
        let Some(resources) = &self.resources else {
            return Ok(());
        };
        let auds: Vec<&str> = match claims.get("aud") {
            Some(Value::String(a)) => vec![a.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => return Err(Rejection::Invalid("missing_claim")),
        };
        if auds.iter().any(|a| resources.iter().any(|r| r.is(a))) {
            Ok(())
        } else {
            Err(Rejection::Invalid("wrong_audience"))
        }
    }

    /// The token carries every required scope: `scope` (RFC 9068,
    /// space-separated) or `scp` (a list, or a string, as some issuers
    /// write it).
    fn scoped(&self, claims: &Value) -> Result<(), Rejection> {
        if self.required_scopes.is_empty() {
            return Ok(());
        }
        let mut granted: Vec<&str> = Vec::new();
        for name in ["scope", "scp"] {
            match claims.get(name) {
                Some(Value::String(s)) => granted.extend(s.split_whitespace()),
                Some(Value::Array(a)) => granted.extend(a.iter().filter_map(Value::as_str)),
                _ => {}
            }
        }
        if self
            .required_scopes
            .iter()
            .all(|s| granted.contains(&s.as_str()))
        {
            Ok(())
        } else {
            Err(Rejection::InsufficientScope(self.required_scopes.join(" ")))
        }
    }

    fn identity(&self, claims: &Value) -> Result<Identity, Rejection> {
        let sub = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        match &self.kind {
            Kind::Oidc {
                groups_claim,
                username_claim,
            } => {
                let subject = claim(claims, username_claim)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .ok_or(Rejection::Invalid("missing_claim"))?
                    .to_string();
                let groups = match claim(claims, groups_claim) {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                    Some(Value::String(s)) => vec![s.clone()],
                    _ => Vec::new(),
                };
                Ok(Identity {
                    issuer: Some(self.issuer.clone()),
                    subject: Some(subject),
                    groups,
                    service_account: None,
                    method: AuthMethod::Jwt,
                    token: None,
                    expires_at: None,
                })
            }
            Kind::ServiceAccount => {
                let k8s = claims
                    .get("kubernetes.io")
                    .ok_or(Rejection::Invalid("not_a_service_account_token"))?;
                let ns = k8s.get("namespace").and_then(Value::as_str);
                let name = k8s.pointer("/serviceaccount/name").and_then(Value::as_str);
                let (Some(ns), Some(name)) = (ns, name) else {
                    return Err(Rejection::Invalid("not_a_service_account_token"));
                };
                if sub != format!("system:serviceaccount:{ns}:{name}") {
                    return Err(Rejection::Invalid("service_account_subject_mismatch"));
                }
                Ok(Identity {
                    issuer: Some(self.issuer.clone()),
                    subject: Some(sub),
                    groups: vec![
                        "system:serviceaccounts".into(),
                        format!("system:serviceaccounts:{ns}"),
                    ],
                    service_account: Some(format!("{ns}/{name}")),
                    method: AuthMethod::ServiceAccount,
                    token: None,
                    expires_at: None,
                })
            }
            Kind::Gateway {
                caller_issuers,
                service_account_issuer,
            } => {
                // The caller the gateway authenticated, of an issuer it may
                // vouch for: judged by this policy's bindings for that issuer.
                let issuer = claims
                    .get("caller_iss")
                    .and_then(Value::as_str)
                    .ok_or(Rejection::Invalid("missing_claim"))?;
                if issuer == self.issuer {
                    // The gateway itself (its own tool list), by its one
                    // subject and no groups: no caller is ever named so.
                    if sub != itself_subject(&self.issuer) {
                        return Err(Rejection::Invalid("caller_issuer_not_vouched"));
                    }
                    return Ok(Identity {
                        issuer: Some(self.issuer.clone()),
                        subject: Some(sub),
                        groups: Vec::new(),
                        service_account: None,
                        method: AuthMethod::GatewayItself,
                        token: None,
                        expires_at: None,
                    });
                }
                if !caller_issuers.iter().any(|i| i == issuer) {
                    return Err(Rejection::Invalid("caller_issuer_not_vouched"));
                }
                if sub.is_empty() {
                    return Err(Rejection::Invalid("missing_claim"));
                }
                let groups = match claims.get("groups") {
                    Some(Value::Array(a)) => a
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect(),
                    _ => Vec::new(),
                };
                // Only under this policy's own service-account issuer does a
                // `system:serviceaccount:` subject name a service account: any
                // other issuer may spell its subjects so.
                let service_account = (service_account_issuer.as_deref() == Some(issuer))
                    .then(|| service_account_of(&sub))
                    .flatten();
                Ok(Identity {
                    issuer: Some(issuer.to_string()),
                    subject: Some(sub),
                    groups,
                    service_account,
                    method: AuthMethod::Gateway,
                    token: None,
                    expires_at: None,
                })
            }
        }
    }
}

/// `namespace/name` of a `system:serviceaccount:<namespace>:<name>` subject.
fn service_account_of(subject: &str) -> Option<String> {
    let rest = subject.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    let valid = |s: &str| !s.is_empty() && !s.contains(':');
    (valid(ns) && valid(name)).then(|| format!("{ns}/{name}"))
}

/// What every token must be: signed by one of the accepted algorithms, of
/// `issuer`, for one of `audiences`, current (with bounded skew).
fn validation(issuer: &str, audiences: &[String], skew: Option<u64>) -> Validation {
    let mut validation = Validation::new(Algorithm::RS256);
    validation.algorithms = ALGORITHMS.to_vec();
    validation.leeway = skew.unwrap_or(DEFAULT_SKEW).min(MAX_SKEW);
    validation.validate_nbf = true;
    validation.set_issuer(&[issuer]);
    validation.set_audience(audiences);
    // `sub` is checked where it is read: the username claim (OIDC, which
    // may name another claim) or the service account's subject.
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation
}

/// A claim by name, or by JSON pointer when `name` starts with `/`.
fn claim<'a>(claims: &'a Value, name: &str) -> Option<&'a Value> {
    if name.starts_with('/') {
        claims.pointer(name)
    } else {
        claims.get(name)
    }
}

fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "token_expired",
        ErrorKind::ImmatureSignature => "token_not_yet_valid",
        ErrorKind::InvalidIssuer => "wrong_issuer",
        ErrorKind::InvalidAudience => "wrong_audience",
        ErrorKind::InvalidSignature => "bad_signature",
        ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::UnsupportedAlgorithm => "unsupported_algorithm",
        ErrorKind::MissingRequiredClaim(_) => "missing_claim",
        _ => "malformed_token",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn unsigned(claims: &Value) -> String {
        let b64 = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
        };
        format!(
            "{}.{}.c2ln",
            b64(&serde_json::json!({"alg": "RS256", "typ": "JWT"})),
            b64(claims)
        )
    }

    #[test]
    fn an_unusable_jwks_refuses_only_its_issuers_tokens() {
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path();
        std::fs::write(dir.join("empty.json"), r#"{"keys": []}"#).unwrap();
        std::fs::write(dir.join("broken.json"), "{not json").unwrap();
        for file in ["empty.json", "broken.json", "absent.json"] {
            let cfg = JwtIssuer {
                issuer: "https://login.example.com".into(),
                audiences: vec!["mcp".into()],
                jwks_file: file.into(),
                ..JwtIssuer::default()
            };
            let verifier = JwtVerifier::issuer(&cfg, &[], dir).expect("the policy still loads");
            let token =
                unsigned(&serde_json::json!({"iss": "https://login.example.com", "sub": "a"}));
            assert!(
                matches!(
                    verifier.verify(&token),
                    Err(Rejection::Invalid("jwks_unavailable"))
                ),
                "{file}"
            );
            let other = unsigned(&serde_json::json!({"iss": "https://elsewhere", "sub": "a"}));
            assert!(matches!(verifier.verify(&other), Err(Rejection::NotMine)));
        }
    }
}
