//! Session ids that say which replica owns the session.
//!
//! Several facade replicas sit behind one Service; a client's next request
//! may land on any of them. With a shared key (a Secret the operator gives
//! every replica), an id is `<random>.<owner>.<mac>`: 128 random bits, the
//! owner's peer address (base64url), and an HMAC-SHA256 over both, so a
//! replica can route a request to the owner and nobody can forge or alter an
//! id to point a replica somewhere else. Without a key (one replica, local
//! use) an id is just the random part.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of MAC kept (128 bits).
const MAC_LEN: usize = 16;

/// Where a session lives.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner {
    /// This replica (or an id without routing).
    Local,
    /// Another replica, at this peer address.
    Peer(String),
    /// The id claims routing but its MAC does not verify.
    Forged,
}

#[derive(Clone, Default)]
pub struct SessionIds {
    /// Shared key and this replica's peer address, when routing is on.
    routing: Option<(Vec<u8>, String)>,
}

impl SessionIds {
    pub fn local() -> SessionIds {
        SessionIds { routing: None }
    }

    pub fn routed(key: Vec<u8>, me: String) -> SessionIds {
        SessionIds {
            routing: Some((key, me)),
        }
    }

    /// This replica's peer address, when routing is on.
    pub fn me(&self) -> Option<&str> {
        self.routing.as_ref().map(|(_, me)| me.as_str())
    }

    /// The seal for `requestState`s: keyed from the shared key (so every
    /// replica opens what any sealed; a key of its own, derived, so one
    /// secret never serves two purposes), else a key of this process's.
    pub fn state_seal(&self) -> crate::request_state::StateSeal {
        use sha2::Digest;
        match &self.routing {
            Some((key, _)) => {
                let mut h = sha2::Sha256::new();
                h.update(b"mcp-warden requestState v1\0");
                h.update(key);
                crate::request_state::StateSeal::new(h.finalize().to_vec())
            }
            None => crate::request_state::StateSeal::random(),
        }
    }

    /// A fresh id owned by this replica.
    pub fn mint(&self) -> String {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random).expect("the OS random source is available");
        let random = hex::encode(random);
        match &self.routing {
            None => random,
            Some((key, me)) => {
                let owner = URL_SAFE_NO_PAD.encode(me.as_bytes());
                let mac = mac(key, &random, &owner);
                format!("{random}.{owner}.{mac}")
            }
        }
    }

    /// Who owns `id`.
    pub fn owner(&self, id: &str) -> Owner {
        let Some((key, me)) = &self.routing else {
            return Owner::Local;
        };
        let mut parts = id.splitn(3, '.');
        let (Some(random), Some(owner), Some(tag)) = (parts.next(), parts.next(), parts.next())
        else {
            return Owner::Local; // a plain id: only a local lookup can match it
        };
        if !verify(key, random, owner, tag) {
            return Owner::Forged;
        }
        match URL_SAFE_NO_PAD
            .decode(owner)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
        {
            Some(addr) if &addr == me => Owner::Local,
            Some(addr) => Owner::Peer(addr),
            None => Owner::Forged,
        }
    }
}

fn mac(key: &[u8], random: &str, owner: &str) -> String {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(random.as_bytes());
    m.update(b".");
    m.update(owner.as_bytes());
    hex::encode(&m.finalize().into_bytes()[..MAC_LEN])
}

fn verify(key: &[u8], random: &str, owner: &str, tag: &str) -> bool {
    let Ok(tag) = hex::decode(tag) else {
        return false;
    };
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(random.as_bytes());
    m.update(b".");
    m.update(owner.as_bytes());
    // Constant-time comparison of the truncated tag.
    m.verify_truncated_left(&tag).is_ok() && tag.len() == MAC_LEN
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(me: &str) -> SessionIds {
        SessionIds::routed(b"0123456789abcdef0123456789abcdef".to_vec(), me.to_string())
    }

    #[test]
    fn ids_route_to_their_owner() {
        let a = ids("10.0.0.1:8080");
        let b = ids("10.0.0.2:8080");
        let id = a.mint();
        assert_eq!(a.owner(&id), Owner::Local);
        assert_eq!(b.owner(&id), Owner::Peer("10.0.0.1:8080".into()));
    }

    #[test]
    fn tampered_or_foreign_ids_are_forged() {
        let a = ids("10.0.0.1:8080");
        let id = a.mint();
        let (random, rest) = id.split_once('.').unwrap();
        let (_, mac) = rest.split_once('.').unwrap();
        let redirected = format!("{random}.{}.{mac}", URL_SAFE_NO_PAD.encode("evil:80"));
        assert_eq!(a.owner(&redirected), Owner::Forged);
        let mut flipped = id.clone();
        flipped.replace_range(0..1, if id.starts_with('0') { "1" } else { "0" });
        assert_eq!(a.owner(&flipped), Owner::Forged);
        let other_key =
            SessionIds::routed(b"another key, another cluster....".to_vec(), "x:1".into());
        assert_eq!(other_key.owner(&id), Owner::Forged);
        assert_eq!(
            a.owner(&format!(
                "{random}.{}.",
                URL_SAFE_NO_PAD.encode("10.0.0.1:8080")
            )),
            Owner::Forged
        );
    }

    #[test]
    fn unrouted_ids_are_plain_random() {
        let id = SessionIds::local().mint();
        assert_eq!(id.len(), 32);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(SessionIds::local().owner(&id), Owner::Local);
    }
}
