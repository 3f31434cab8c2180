//! Tokens a JWT verifier ([`super::jwt`]) has already accepted, so the same
//! token presented again (a gateway's assertion is reused for every call of
//! its caller for minutes) is not checked against its signature every time.
//!
//! Where it sits: consulted first by `JwtVerifier::verify`, filled by it
//! after a token passed every check (signature, issuer, audience, time,
//! resource, scopes). It is as strict as verifying: an entry is keyed by the
//! SHA-256 of the whole token (a byte changed is another token), answers
//! only while `now < exp` (the expiry without the clock-skew leeway; past
//! it the token is verified again, leeway and all), and lives in one
//! verifier, so a policy reload (new keys, audiences, issuers) starts empty.
//! Bounded: [`MAX_TOKENS`] in all and [`MAX_PER_CALLER`] per caller, so one
//! caller minting many tokens cannot push the others' out; a token that
//! finds no room is simply verified each time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use super::identity::Identity;

/// Tokens held at most.
pub const MAX_TOKENS: usize = 4096;
/// Tokens of one caller (issuer and subject) held at most.
pub const MAX_PER_CALLER: usize = 8;

type Digested = [u8; 32];

#[derive(Default)]
pub struct Verified(Mutex<Inner>);

#[derive(Default)]
struct Inner {
    tokens: HashMap<Digested, (Identity, u64)>,
    per_caller: HashMap<(Option<String>, Option<String>), usize>,
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn digest(token: &str) -> Digested {
    Sha256::digest(token.as_bytes()).into()
}

fn caller(identity: &Identity) -> (Option<String>, Option<String>) {
    (identity.issuer.clone(), identity.subject.clone())
}

impl Verified {
    /// Who token `key` names, if it was accepted and `now` is before its `exp`.
    pub fn get(&self, key: &Digested, now: u64) -> Option<Identity> {
        let inner = self.0.lock().unwrap();
        let (identity, exp) = inner.tokens.get(key)?;
        (now < *exp).then(|| identity.clone())
    }

    /// Remember an accepted token until its `exp`, room permitting.
    pub fn put(&self, key: Digested, identity: &Identity, exp: u64, now: u64) {
        if now >= exp {
            return;
        }
        let mut inner = self.0.lock().unwrap();
        let who = caller(identity);
        let full = inner.tokens.len() >= MAX_TOKENS
            || inner.per_caller.get(&who).copied().unwrap_or(0) >= MAX_PER_CALLER;
        if full {
            inner.drop_expired(now);
        }
        if inner.tokens.len() >= MAX_TOKENS
            || inner.per_caller.get(&who).copied().unwrap_or(0) >= MAX_PER_CALLER
        {
            return;
        }
        if inner.tokens.insert(key, (identity.clone(), exp)).is_none() {
            *inner.per_caller.entry(who).or_default() += 1;
        }
    }
}

impl Inner {
    fn drop_expired(&mut self, now: u64) {
        let Inner { tokens, per_caller } = self;
        tokens.retain(|_, (identity, exp)| {
            let keep = now < *exp;
            if !keep {
                let who = caller(identity);
                if let Some(n) = per_caller.get_mut(&who) {
                    *n -= 1;
                    if *n == 0 {
                        per_caller.remove(&who);
                    }
                }
            }
            keep
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::identity::AuthMethod;

    fn id(subject: &str) -> Identity {
        Identity {
            issuer: Some("static".into()),
            subject: Some(subject.into()),
            groups: vec![],
            service_account: None,
            method: AuthMethod::Gateway,
            token: None,
            expires_at: None,
        }
    }

    #[test]
    fn a_token_is_known_until_its_expiry_and_only_itself() {
        let v = Verified::default();
        let t = digest("a.b.c");
        v.put(t, &id("alice"), 1_000, 900);
        assert_eq!(v.get(&t, 999), Some(id("alice")));
        assert_eq!(v.get(&t, 1_000), None);
        assert_eq!(v.get(&digest("a.b.d"), 950), None);
        // Already expired: never held.
        let old = digest("old");
        v.put(old, &id("alice"), 900, 900);
        assert_eq!(v.get(&old, 800), None);
    }

    #[test]
    fn one_caller_cannot_fill_it() {
        let v = Verified::default();
        for i in 0..MAX_PER_CALLER + 5 {
            v.put(digest(&format!("m{i}")), &id("mallory"), 1_000, 900);
        }
        let held = (0..MAX_PER_CALLER + 5)
            .filter(|i| v.get(&digest(&format!("m{i}")), 950).is_some())
            .count();
        assert_eq!(held, MAX_PER_CALLER);
        v.put(digest("a"), &id("alice"), 1_000, 900);
        assert_eq!(v.get(&digest("a"), 950), Some(id("alice")));
        // Once the caller's tokens expired there is room for new ones.
        v.put(digest("later"), &id("mallory"), 2_000, 1_500);
        assert_eq!(v.get(&digest("later"), 1_600), Some(id("mallory")));
    }

    #[test]
    fn the_whole_is_bounded() {
        let v = Verified::default();
        for i in 0..MAX_TOKENS + 10 {
            v.put(digest(&format!("t{i}")), &id(&format!("u{i}")), 1_000, 900);
        }
        assert_eq!(v.0.lock().unwrap().tokens.len(), MAX_TOKENS);
        assert_eq!(v.get(&digest(&format!("t{}", MAX_TOKENS + 1)), 950), None);
        // Expired ones make room.
        v.put(digest("new"), &id("new"), 3_000, 2_000);
        assert_eq!(v.get(&digest("new"), 2_500), Some(id("new")));
        assert_eq!(v.0.lock().unwrap().tokens.len(), 1);
    }
}
