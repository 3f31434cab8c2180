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
//!                                              (exp: never past the caller's own)
//! jti  random
//! ```
//!
//! A backend facade accepts it only when its policy lists this gateway
//! (`auth.gateways`: the issuer, the public key, its own name as audience
//! and the caller issuers it may vouch for; see `auth`'s verifier). One
//! backend's assertion is refused by another (audience), so a backend that
//! misbehaves cannot replay it sideways; it expires in minutes.
//!
//! Signing costs far more than the rest of a call (an RSA signature is a
//! millisecond or two), so an assertion is minted once per caller and
//! backend and reused until a quarter of its lifetime is left ([`Minted`]):
//! a backend always receives one with time to spare, one caller's assertion
//! never goes to another caller or another backend, and the cache is
//! bounded.
//!
//! The gateway's own requests — the tool list it reads at start and again
//! on a list change — carry an assertion of the gateway itself
//! ([`Signer::itself`]): `caller_iss` is the gateway's own `iss` and `sub`
//! is [`itself_subject`], a name no caller can hold (a caller of an issuer
//! spelled like the gateway's is never vouched for: [`Signer::mint`]
//! refuses it). A backend lets that identity list and nothing more unless
//! one of its role bindings names it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;

use crate::upstream::Credential;

/// Where the gateway's own subject starts (then its issuer).
pub const ITSELF_PREFIX: &str = "mcpwarden.dev/gateway:";

/// The subject of the gateway of issuer `issuer` speaking for itself.
pub fn itself_subject(issuer: &str) -> String {
    format!("{ITSELF_PREFIX}{issuer}")
}

/// Who a request is for: the caller the facade authenticated.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    minted: Mutex<Minted>,
}

/// Assertions already signed, by backend then caller, each with its `exp`
/// (seconds since the epoch).
#[derive(Default)]
struct Minted {
    by_backend: HashMap<String, HashMap<Principal, (Credential, u64)>>,
    len: usize,
}

/// Assertions kept at most; past it, expired ones are dropped, then all.
const MAX_MINTED: usize = 4096;

impl Minted {
    /// `who`'s assertion for `audience`, if it expires no later than
    /// `until` (the caller's own credential) and is still good for more
    /// than `spare` seconds after `now`, or as long as a new one would be.
    fn get(
        &self,
        who: &Principal,
        audience: &str,
        now: u64,
        spare: u64,
        until: u64,
    ) -> Option<Credential> {
        let (credential, exp) = self.by_backend.get(audience)?.get(who)?;
        let good = *exp <= until && (exp.saturating_sub(now) > spare || *exp == until);
        good.then(|| credential.clone())
    }

    fn put(&mut self, who: &Principal, audience: &str, credential: Credential, exp: u64, now: u64) {
        if self.len >= MAX_MINTED {
            for callers in self.by_backend.values_mut() {
                callers.retain(|_, (_, e)| *e > now);
            }
            self.len = self.by_backend.values().map(HashMap::len).sum();
            if self.len >= MAX_MINTED {
                self.by_backend.clear();
                self.len = 0;
            }
        }
        let callers = self.by_backend.entry(audience.to_string()).or_default();
        if callers.insert(who.clone(), (credential, exp)).is_none() {
            self.len += 1;
        }
    }
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
            minted: Mutex::default(),
        })
    }

    /// The gateway itself, as its own requests name it: its issuer, its
    /// own subject, no groups.
    pub fn itself(&self) -> Principal {
        Principal {
            issuer: self.issuer.clone(),
            subject: itself_subject(&self.issuer),
            groups: Vec::new(),
        }
    }

    /// An assertion of `who` for backend `audience`, as a bearer credential:
    /// the one signed before while a quarter of its lifetime is left, else
    /// a new one. It never outlives the caller's own credential (`until`,
    /// seconds since the epoch; `None`: one that does not expire), so a
    /// backend holds nothing for the caller past it. A caller whose issuer
    /// is spelled like the gateway's is refused: only [`Signer::itself`]
    /// speaks under the gateway's issuer.
    pub fn mint(
        &self,
        who: &Principal,
        audience: &str,
        until: Option<u64>,
    ) -> Result<Credential, String> {
        if who.issuer == self.issuer && *who != self.itself() {
            return Err(format!(
                "a caller of issuer {:?} (the gateway's own) cannot be vouched for",
                who.issuer
            ));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let until = until.unwrap_or(u64::MAX);
        if until <= now {
            return Err("the caller's credential has expired".into());
        }
        let lifetime = self.lifetime.as_secs().max(1);
        let spare = lifetime / 4;
        let cached = self
            .minted
            .lock()
            .unwrap()
            .get(who, audience, now, spare, until);
        if let Some(c) = cached {
            return Ok(c);
        }
        let (credential, exp) = self.sign(who, audience, now, lifetime.min(until - now))?;
        self.minted
            .lock()
            .unwrap()
            .put(who, audience, credential.clone(), exp, now);
        Ok(credential)
    }

    /// A new assertion, valid from `now` for `lifetime` seconds, and its `exp`.
    fn sign(
        &self,
        who: &Principal,
        audience: &str,
        now: u64,
        lifetime: u64,
    ) -> Result<(Credential, u64), String> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce).map_err(|e| format!("no randomness: {e}"))?;
        let exp = now + lifetime;
        let claims = Claims {
            iss: &self.issuer,
            aud: audience,
            sub: &who.subject,
            caller_iss: &who.issuer,
            groups: &who.groups,
            iat: now,
            nbf: now,
            exp,
            jti: hex::encode(nonce),
        };
        let token = jsonwebtoken::encode(&Header::new(self.alg), &claims, &self.key)
            .map_err(|e| format!("cannot sign the assertion: {e}"))?;
        Ok((Credential::bearer(&token)?, exp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(subject: &str, groups: &[&str]) -> Principal {
        Principal {
            issuer: "static".into(),
            subject: subject.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }

    fn text(c: &Credential) -> String {
        c.header().unwrap().1.to_str().unwrap().to_string()
    }

    fn signer() -> Signer {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
        Signer::from_pem(
            "gw",
            pair.serialize_pem().as_bytes(),
            Duration::from_secs(120),
        )
        .unwrap()
    }

    #[test]
    fn an_assertion_is_reused_for_its_caller_and_backend_only() {
        let s = signer();
        let alice = who("alice", &["devs"]);
        let first = text(&s.mint(&alice, "git", None).unwrap());
        assert_eq!(text(&s.mint(&alice, "git", None).unwrap()), first);
        // Another backend, another caller, the same caller with other
        // groups: each its own assertion.
        assert_ne!(text(&s.mint(&alice, "everything", None).unwrap()), first);
        assert_ne!(
            text(&s.mint(&who("bob", &["devs"]), "git", None).unwrap()),
            first
        );
        assert_ne!(
            text(&s.mint(&who("alice", &["ops"]), "git", None).unwrap()),
            first
        );
        assert_eq!(text(&s.mint(&alice, "git", None).unwrap()), first);
    }

    #[test]
    fn the_gateway_itself_is_no_caller_of_its_issuer() {
        let s = signer();
        let me = s.itself();
        assert_eq!(
            (me.issuer.as_str(), me.subject.as_str()),
            ("gw", "mcpwarden.dev/gateway:gw")
        );
        assert!(me.groups.is_empty());
        assert!(s.mint(&me, "git", None).is_ok());
        // A caller some issuer named like the gateway: never vouched for,
        // not even under the gateway's own subject with groups.
        assert!(s
            .mint(&who("alice", &[]).with_issuer("gw"), "git", None)
            .is_err());
        let mut lookalike = me.clone();
        lookalike.groups.push("admins".into());
        assert!(s.mint(&lookalike, "git", None).is_err());
    }

    impl Principal {
        fn with_issuer(mut self, issuer: &str) -> Principal {
            self.issuer = issuer.into();
            self
        }
    }

    #[test]
    fn an_assertion_near_its_expiry_is_not_handed_out() {
        let mut m = Minted::default();
        let alice = who("alice", &[]);
        let c = Credential::bearer("t").unwrap();
        m.put(&alice, "git", c, 1_000, 900);
        // 30 s of spare wanted: good until 970, not after.
        assert!(m.get(&alice, "git", 969, 30, u64::MAX).is_some());
        assert!(m.get(&alice, "git", 970, 30, u64::MAX).is_none());
        assert!(m.get(&alice, "git", 1_000, 0, u64::MAX).is_none());
        assert!(m.get(&alice, "git", 2_000, 0, u64::MAX).is_none());
        assert!(m.get(&alice, "other", 900, 30, u64::MAX).is_none());
    }

    /// The `exp` an assertion carries.
    fn exp_of(c: &Credential) -> u64 {
        use base64::Engine as _;
        let token = text(c).strip_prefix("Bearer ").unwrap().to_string();
        let payload = token.split('.').nth(1).unwrap();
        let claims: serde_json::Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .unwrap(),
        )
        .unwrap();
        claims["exp"].as_u64().unwrap()
    }

    #[test]
    fn an_assertion_never_outlives_its_callers_credential() {
        let s = signer();
        let alice = who("alice", &[]);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        // A caller whose token has 10 s left: the assertion ends with it,
        // not 120 s on, and is handed out again until then.
        let short = s.mint(&alice, "git", Some(now + 10)).unwrap();
        assert_eq!(exp_of(&short), now + 10);
        let again = s.mint(&alice, "git", Some(now + 10)).unwrap();
        assert_eq!(text(&again), text(&short));
        // The same caller with a longer-lived token gets a longer one; a
        // shorter-lived token never gets the longer one back.
        let long = s.mint(&alice, "git", None).unwrap();
        assert!(exp_of(&long) >= now + 120);
        let shorter = s.mint(&alice, "git", Some(now + 5)).unwrap();
        assert_eq!(exp_of(&shorter), now + 5);
        // An expired caller gets nothing.
        assert!(s.mint(&alice, "git", Some(now)).is_err());
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut m = Minted::default();
        let c = Credential::bearer("t").unwrap();
        for i in 0..MAX_MINTED + 10 {
            m.put(&who(&format!("u{i}"), &[]), "git", c.clone(), 1_000, 900);
            assert!(m.len <= MAX_MINTED);
        }
        let held: usize = m.by_backend.values().map(HashMap::len).sum();
        assert_eq!(held, m.len);
        assert!(m
            .get(
                &who(&format!("u{}", MAX_MINTED + 9), &[]),
                "git",
                900,
                30,
                u64::MAX
            )
            .is_some());
        // Expired entries go first when it fills.
        let mut m = Minted::default();
        for i in 0..MAX_MINTED {
            m.put(&who(&format!("u{i}"), &[]), "git", c.clone(), 100, 50);
        }
        m.put(&who("fresh", &[]), "git", c.clone(), 1_000, 900);
        assert_eq!(m.len, 1);
    }
}
