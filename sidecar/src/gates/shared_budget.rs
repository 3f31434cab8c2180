//! The identity budget across replicas: each identity's calls per window are
//! counted by one owner replica, and the others ask it for each call.
//!
//! Where it sits: a gate, run by the tools/call step right after the
//! session's own budgets ([`super::budget`]). It decides; it does not carry
//! bytes. The ask travels over the relay between replicas (the one that
//! carries a session's requests to its owner), which the application hands
//! down as a [`PeerLink`]; the owner's side of it calls [`SharedBudgets::answer`].
//!
//! ```text
//!  call on replica B ─ owner_of(identity, peers) = A ─► ask A (signed, deadline)
//!                                                       A: verify, take from its window
//!  granted → the call goes on     refused → -32005 calls_per_identity_exceeded
//!  A unreachable, late or its answer unreadable → -32005 identity_budget_unavailable
//! ```
//!
//! The owner is chosen by rendezvous hashing over the configured peers
//! (every replica's `--peer` list, this replica's address included): the
//! peer with the highest `sha256(peer, identity)`. Every replica given the
//! same set picks the same owner, whatever the order it was given in, and
//! removing a peer moves only the identities it owned.
//!
//! Asks and answers are HMAC-SHA256-signed under a key derived from the
//! replicas' shared peer key (the key that already signs session ids and
//! request states), name their sender and addressee, carry a time and a
//! nonce: the owner refuses an ask that is not signed by a peer, not for it,
//! stale, or replayed, and the asker believes only an answer signed for its
//! own nonce. There is no open endpoint: without the key nothing is granted.
//!
//! **Owner unreachable: fail closed.** A call whose owner cannot be asked in
//! time is refused with a retryable error, not counted against a local share
//! (budget / replicas). A local share is strict only when the owner is
//! really gone; when it is merely cut off (a partition, a slow node) it
//! keeps granting its full budget while the others grant their shares, so
//! the identity could get nearly twice what the policy gives. The facade is
//! a boundary: never more than the policy gives beats availability here.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use hmac::{Hmac, Mac};
use mcp_warden_crds::IdentityBudget;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::budget::IdentityBudgets;

/// The path on the client listener where a replica answers another's ask.
/// Served only when peers are configured; every ask must carry the peers'
/// signature.
pub const ASK_PATH: &str = "/peer/identity-budget";

/// How long an asker waits for the owner's answer.
pub const ASK_DEADLINE: Duration = Duration::from_secs(2);

/// Asks in flight for one identity on one replica; beyond it a call is
/// refused at once (a caller cannot pile up waiting tasks on a slow owner).
pub const MAX_ASKS_IN_FLIGHT: usize = 8;

/// How far the sender's clock may be from the owner's, in seconds; older
/// asks are refused (and nonces are remembered this long).
const SKEW_SECS: u64 = 30;

/// Nonces remembered before old ones are swept.
const SWEEP_AT: usize = 4096;

/// Largest ask or answer body, in bytes.
pub const MAX_BODY: usize = 16 * 1024;

type HmacSha256 = Hmac<Sha256>;

/// A boxed future (the link is a trait object handed down from the top).
pub type Pending = Pin<Box<dyn Future<Output = Result<Bytes, String>> + Send>>;

/// How an ask reaches another replica: the relay between replicas, given
/// by the application.
pub trait PeerLink: Send + Sync {
    /// POST `body` to [`ASK_PATH`] on `peer` and return the answer's body
    /// (an error for anything but a 200).
    fn ask(&self, peer: &str, body: Bytes) -> Pending;
}

/// The owner of `identity` among `peers`: the peer with the highest
/// `sha256(peer, 0, identity)` (rendezvous hashing). `None` without peers.
pub fn owner_of<'a>(peers: &'a [String], identity: &str) -> Option<&'a str> {
    peers
        .iter()
        .max_by_key(|peer| {
            let mut h = Sha256::new();
            h.update(peer.as_bytes());
            h.update([0]);
            h.update(identity.as_bytes());
            <[u8; 32]>::from(h.finalize())
        })
        .map(String::as_str)
}

/// How an ask to the owner ended (the `outcome` label of
/// `mcpwarden_identity_budget_asks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskOutcome {
    Granted,
    Refused,
    /// No answer in time, no connection, or an answer that does not verify.
    Unreachable,
    /// Too many asks for this identity in flight already.
    Busy,
}

impl AskOutcome {
    pub const ALL: [AskOutcome; 4] = [
        AskOutcome::Granted,
        AskOutcome::Refused,
        AskOutcome::Unreachable,
        AskOutcome::Busy,
    ];

    pub fn label(self) -> &'static str {
        match self {
            AskOutcome::Granted => "granted",
            AskOutcome::Refused => "refused",
            AskOutcome::Unreachable => "unreachable",
            AskOutcome::Busy => "busy",
        }
    }
}

/// Why [`SharedBudgets::take`] did not grant a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotGranted {
    /// A budget is spent: its limit, and the calls counted with this one.
    Spent { limit: u64, observed: u64 },
    /// The owner could not say (unreachable, or too many asks waiting).
    Unavailable(AskOutcome),
}

/// Why an owner refused to answer an ask at all (HTTP 403, not a refusal
/// of the call: the asker treats it as unreachable).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AskError {
    #[error("this replica has no peers")]
    NoPeers,
    #[error("the ask is not signed by a peer")]
    BadSignature,
    #[error("the ask is unreadable")]
    Unreadable,
    #[error("the ask is for another replica or from a replica that is not a peer")]
    NotForMe,
    #[error("the ask is stale or replayed")]
    Replayed,
}

/// One ask: which identity, which budgets, from whom, to whom, when.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Ask {
    from: String,
    to: String,
    identity: String,
    /// `(scope, budget)`: `""` for the profile's, a tool's name for its own.
    budgets: Vec<(String, IdentityBudget)>,
    at: u64,
    nonce: String,
}

/// The owner's answer to the ask with `nonce`.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
struct Answer {
    nonce: String,
    granted: bool,
    limit: u64,
    observed: u64,
}

/// A message and its signature (over the message's exact bytes).
#[derive(Serialize, Deserialize)]
struct Signed {
    msg: String,
    mac: String,
}

/// The replica set, this replica's place in it, the signing key and the
/// link to the others.
struct Ring {
    me: String,
    /// Sorted, without duplicates, `me` included.
    peers: Vec<String>,
    key: Vec<u8>,
    link: Arc<dyn PeerLink>,
}

/// Calls per identity per window, kept by each identity's owner replica.
/// Without peers it is [`IdentityBudgets`] on this replica alone.
#[derive(Default)]
pub struct SharedBudgets {
    /// The windows of the identities this replica owns (all of them
    /// without peers).
    pub local: IdentityBudgets,
    /// The replica set as last configured (`--peer`, or the peers' DNS
    /// name as last resolved).
    ring: ArcSwapOption<Ring>,
    /// Asks in flight, per identity.
    asking: Arc<Mutex<HashMap<String, usize>>>,
    /// Nonces of asks answered within the last [`SKEW_SECS`] (and when).
    seen: Mutex<HashMap<String, u64>>,
}

/// Holds one of an identity's ask slots; dropping it frees the slot.
struct AskSlot {
    asking: Arc<Mutex<HashMap<String, usize>>>,
    identity: String,
}

impl Drop for AskSlot {
    fn drop(&mut self) {
        let mut asking = self.asking.lock().unwrap();
        if let Some(n) = asking.get_mut(&self.identity) {
            *n -= 1;
            if *n == 0 {
                asking.remove(&self.identity);
            }
        }
    }
}

impl SharedBudgets {
    /// Share the budgets with `peers` (this replica is `me`; `key` is the
    /// replicas' shared peer key): at start, and again whenever the set
    /// changes (a replica added or gone). The windows stay: an identity
    /// that moves to this replica starts from what it counted here.
    pub fn set_peers(&self, me: String, peers: &[String], key: &[u8], link: Arc<dyn PeerLink>) {
        let mut all: Vec<String> = peers.iter().cloned().chain([me.clone()]).collect();
        all.sort();
        all.dedup();
        let mut h = Sha256::new();
        // A key of its own, derived: one secret never serves two purposes.
        h.update(b"mcp-warden identity budget v1\0");
        h.update(key);
        self.ring.store(Some(Arc::new(Ring {
            me,
            peers: all,
            key: h.finalize().to_vec(),
            link,
        })));
    }

    /// Whether peers are configured (the ask path is served).
    pub fn shared(&self) -> bool {
        self.ring.load().is_some()
    }

    /// The replica set as configured now (sorted, this replica included).
    pub fn peers(&self) -> Vec<String> {
        self.ring
            .load()
            .as_ref()
            .map(|r| r.peers.clone())
            .unwrap_or_default()
    }

    /// The replica that counts `identity`'s calls (`None`: this one).
    pub fn owner(&self, identity: &str) -> Option<String> {
        let ring = self.ring.load_full()?;
        owner_of(&ring.peers, identity)
            .filter(|o| *o != ring.me)
            .map(str::to_string)
    }

    /// Take one call for `identity` from each budget, on its owner: here,
    /// or by asking the owner. The ask's outcome, when there was one, is
    /// returned for the metrics along with the decision.
    pub async fn take(
        &self,
        identity: &str,
        budgets: &[(&str, IdentityBudget)],
        now: u64,
    ) -> (Result<(), NotGranted>, Option<AskOutcome>) {
        let ring = self.ring.load_full();
        let owner = ring.as_ref().and_then(|r| {
            owner_of(&r.peers, identity)
                .filter(|o| *o != r.me)
                .map(str::to_string)
        });
        let (Some(ring), Some(owner)) = (ring, owner) else {
            let taken = self
                .local
                .take(identity, budgets, now)
                .map_err(|(limit, observed)| NotGranted::Spent { limit, observed });
            return (taken, None);
        };
        let Some(_slot) = self.slot(identity) else {
            return (
                Err(NotGranted::Unavailable(AskOutcome::Busy)),
                Some(AskOutcome::Busy),
            );
        };
        let ask = Ask {
            from: ring.me.clone(),
            to: owner.clone(),
            identity: identity.to_string(),
            budgets: budgets.iter().map(|(s, b)| (s.to_string(), *b)).collect(),
            at: now,
            nonce: nonce(),
        };
        let body = sign(&ring.key, b"ask", &ask);
        let sent = tokio::time::timeout(ASK_DEADLINE, ring.link.ask(&owner, body)).await;
        let answer = match sent {
            Ok(Ok(bytes)) => open::<Answer>(&ring.key, b"answer", &bytes)
                .ok()
                .filter(|a| a.nonce == ask.nonce),
            Ok(Err(e)) => {
                tracing::info!(%owner, error = %e, "identity budget owner unreachable");
                None
            }
            Err(_) => {
                tracing::info!(%owner, "identity budget owner did not answer in time");
                None
            }
        };
        match answer {
            Some(a) if a.granted => (Ok(()), Some(AskOutcome::Granted)),
            Some(a) => (
                Err(NotGranted::Spent {
                    limit: a.limit,
                    observed: a.observed,
                }),
                Some(AskOutcome::Refused),
            ),
            None => (
                Err(NotGranted::Unavailable(AskOutcome::Unreachable)),
                Some(AskOutcome::Unreachable),
            ),
        }
    }

    /// The owner's side: verify a peer's ask, take from this replica's
    /// windows at `now`, and return the signed answer.
    pub fn answer(&self, body: &[u8], now: u64) -> Result<Bytes, AskError> {
        let ring = self.ring.load_full().ok_or(AskError::NoPeers)?;
        let ask: Ask = open(&ring.key, b"ask", body)?;
        if ask.to != ring.me || ask.from == ring.me || ring.peers.binary_search(&ask.from).is_err()
        {
            return Err(AskError::NotForMe);
        }
        if ask.at.abs_diff(now) > SKEW_SECS || !self.first_sight(&ask.nonce, now) {
            return Err(AskError::Replayed);
        }
        // An asker that counts this replica as the owner while this replica
        // does not (the peer lists differ during a change) is still
        // answered: refusing would fail every call of the identity there.
        let budgets: Vec<(&str, IdentityBudget)> =
            ask.budgets.iter().map(|(s, b)| (s.as_str(), *b)).collect();
        let answer = match self.local.take(&ask.identity, &budgets, now) {
            Ok(()) => Answer {
                nonce: ask.nonce,
                granted: true,
                limit: 0,
                observed: 0,
            },
            Err((limit, observed)) => Answer {
                nonce: ask.nonce,
                granted: false,
                limit,
                observed,
            },
        };
        Ok(sign(&ring.key, b"answer", &answer))
    }

    /// One ask slot for `identity`, if it has fewer than
    /// [`MAX_ASKS_IN_FLIGHT`] asks waiting.
    fn slot(&self, identity: &str) -> Option<AskSlot> {
        let mut asking = self.asking.lock().unwrap();
        let n = asking.entry(identity.to_string()).or_insert(0);
        if *n >= MAX_ASKS_IN_FLIGHT {
            return None;
        }
        *n += 1;
        Some(AskSlot {
            asking: self.asking.clone(),
            identity: identity.to_string(),
        })
    }

    /// Whether `nonce` is new (remembering it).
    fn first_sight(&self, nonce: &str, now: u64) -> bool {
        let mut seen = self.seen.lock().unwrap();
        // Swept at each multiple of SWEEP_AT, so a busy minute whose nonces
        // are all fresh does not sweep on every ask.
        if seen.len() >= SWEEP_AT && seen.len() % SWEEP_AT == 0 {
            seen.retain(|_, at| at.abs_diff(now) <= 2 * SKEW_SECS);
        }
        match seen.entry(nonce.to_string()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(now);
                true
            }
        }
    }
}

fn nonce() -> String {
    let mut random = [0u8; 16];
    getrandom::fill(&mut random).expect("the OS random source is available");
    hex::encode(random)
}

/// `msg` as JSON, signed under `key` for `purpose` (an ask's signature
/// never verifies as an answer's, and the other way round).
fn sign<T: Serialize>(key: &[u8], purpose: &[u8], msg: &T) -> Bytes {
    let msg = serde_json::to_string(msg).expect("plain data serializes");
    let mac = hex::encode(mac(key, purpose, &msg).finalize().into_bytes());
    Bytes::from(serde_json::to_vec(&Signed { msg, mac }).expect("plain data serializes"))
}

/// The message in `body`, if its signature verifies under `key` for `purpose`.
fn open<T: for<'de> Deserialize<'de>>(
    key: &[u8],
    purpose: &[u8],
    body: &[u8],
) -> Result<T, AskError> {
    let signed: Signed = serde_json::from_slice(body).map_err(|_| AskError::Unreadable)?;
    let tag = hex::decode(&signed.mac).map_err(|_| AskError::BadSignature)?;
    // Constant-time comparison.
    mac(key, purpose, &signed.msg)
        .verify_slice(&tag)
        .map_err(|_| AskError::BadSignature)?;
    serde_json::from_str(&signed.msg).map_err(|_| AskError::Unreadable)
}

fn mac(key: &[u8], purpose: &[u8], msg: &str) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(key).expect("HMAC takes any key length");
    m.update(purpose);
    m.update(b"\0");
    m.update(msg.as_bytes());
    m
}

#[cfg(test)]
#[path = "shared_budget_tests.rs"]
mod tests;
