//! Signed `requestState`: what the facade hands a modern client in an
//! `input_required` result, and checks when the client retries.
//!
//! Where it sits: the tool-call step seals a state when it asks a modern
//! client for input (an approval, a question of a legacy server's, or a
//! modern server's own `input_required`, whose state is carried inside),
//! and opens the state of every retry before anything else is decided.
//!
//! A state is `mw1.<claims>.<mac>`: the claims as base64url JSON, and an
//! HMAC-SHA256 over them with a key every replica shares (the peer key; a
//! random key per process for a single replica), so any replica can check a
//! retry and none can be fooled into taking an altered one. The claims bind
//! the state to the caller (a hash of its issuer-qualified identity), to the
//! exact request (a hash of the method, the name or URI, and the
//! arguments), and to an expiry. The client must not read it (the spec says
//! it is opaque), and nothing in it is secret: the server's own state is
//! carried as the server gave it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

type HmacSha256 = Hmac<Sha256>;

const PREFIX: &str = "mw1.";
/// How long a client has to answer before a state expires, by default.
pub const LIFETIME: Duration = Duration::from_secs(600);

/// What a state stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    /// The facade asked a person to approve the call.
    Approval,
    /// A modern server asked for input; its own state is in `upstream`.
    Upstream,
    /// A legacy server asked for input in the middle of a call, which waits
    /// on the replica in `owner` under `park`.
    Parked,
    /// Not a `requestState` but a task id of the tasks extension, as the
    /// client sees it: the server's task (`task`) on the replica in `owner`,
    /// created by the caller for the tool `tool`; `nonce` names it in that
    /// replica's table of live tasks. Never accepted as a `requestState`.
    Task,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub kind: StateKind,
    /// Hash of the caller's identity.
    pub caller: String,
    /// Hash of the request: method, name or URI, arguments.
    pub request: String,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// The person approved this exact request.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// The modern server's own `requestState`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// The parked call's key, on its replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub park: Option<String>,
    /// The replica holding a parked call (its peer address; empty: this one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// What makes one approval's state unlike any other: it is spent
    /// ([`Spent`]) by the retry that uses it, so an approval runs its call
    /// once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The keys of a modern server's `roots/list` input requests: the
    /// retry's answers to them are the facade's (the policy's roots), never
    /// the client's, which could widen the server's scope.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots_keys: Vec<String>,
    /// A task id's server task id ([`StateKind::Task`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// A task id's tool, as the client named it ([`StateKind::Task`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl Claims {
    /// Whether the state carries a person's approval, which runs its call
    /// once ([`Spent`]): the facade's own question, or a modern server's
    /// after an approval. (A parked call is continued once by being taken
    /// from its replica's table.)
    pub fn carries_approval(&self) -> bool {
        self.kind == StateKind::Approval || (self.kind == StateKind::Upstream && self.approved)
    }
}

/// Why a retry's state is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("the requestState was altered or was not issued by this server")]
    Tampered,
    #[error("the requestState has expired; send the request again without it")]
    Expired,
    #[error("the requestState was issued to another caller")]
    OtherCaller,
    #[error("the requestState was issued for other arguments")]
    OtherRequest,
    #[error(
        "the call this requestState continues is held by another replica that cannot be reached"
    )]
    OtherReplica,
    #[error("the call this requestState continues has ended or was continued already; send the request again without requestState")]
    Consumed,
    #[error("the approval this requestState carries was used already; send the request again without requestState to be asked again")]
    Used,
    #[error("the replica that issued this requestState has restarted since and cannot tell whether its approval was used; send the request again without requestState to be asked again")]
    IssuerRestarted,
}

impl StateError {
    pub fn reason(self) -> &'static str {
        match self {
            StateError::Tampered => "request_state_tampered",
            StateError::Expired => "request_state_expired",
            StateError::OtherCaller => "request_state_other_caller",
            StateError::OtherRequest => "request_state_other_arguments",
            StateError::OtherReplica => "request_state_other_replica",
            StateError::Consumed => "request_state_consumed",
            StateError::Used => "request_state_used",
            StateError::IssuerRestarted => "request_state_issuer_restarted",
        }
    }
}

/// Seals and opens states with the key every replica shares.
#[derive(Clone)]
pub struct StateSeal {
    key: Vec<u8>,
    /// How long a state issued now stays good.
    pub lifetime: Duration,
}

impl StateSeal {
    pub fn new(key: Vec<u8>) -> StateSeal {
        StateSeal {
            key,
            lifetime: LIFETIME,
        }
    }

    /// A key of this process's own (a single replica).
    pub fn random() -> StateSeal {
        let mut key = vec![0u8; 32];
        getrandom::fill(&mut key).expect("the OS random source is available");
        StateSeal::new(key)
    }

    /// The same key, states good for `lifetime`.
    pub fn with_lifetime(mut self, lifetime: Duration) -> StateSeal {
        self.lifetime = lifetime;
        self
    }

    /// The expiry of a state issued now.
    pub fn expiry(&self) -> u64 {
        now() + self.lifetime.as_secs()
    }

    pub fn seal(&self, claims: &Claims) -> String {
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims serialize"));
        let mac = URL_SAFE_NO_PAD.encode(self.mac(&body));
        format!("{PREFIX}{body}.{mac}")
    }

    /// Whether `state` looks like one of the facade's (else it is not ours
    /// to open: a client made it up, and it is refused as tampered).
    pub fn is_ours(state: &str) -> bool {
        state.starts_with(PREFIX)
    }

    /// The claims of an unaltered state, not checked against a caller or a
    /// request (to route a retry to the replica its state names; that
    /// replica checks the rest).
    pub fn peek(&self, state: &str) -> Option<Claims> {
        let rest = state.strip_prefix(PREFIX)?;
        let (body, mac) = rest.split_once('.')?;
        let mac = URL_SAFE_NO_PAD.decode(mac).ok()?;
        let mut m = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(body.as_bytes());
        m.verify_slice(&mac).ok()?;
        URL_SAFE_NO_PAD
            .decode(body)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }

    /// The claims of an unaltered, unexpired state issued to `caller` for
    /// `request`.
    pub fn open(&self, state: &str, caller: &str, request: &str) -> Result<Claims, StateError> {
        let rest = state.strip_prefix(PREFIX).ok_or(StateError::Tampered)?;
        let (body, mac) = rest.split_once('.').ok_or(StateError::Tampered)?;
        let mac = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| StateError::Tampered)?;
        let mut m = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(body.as_bytes());
        m.verify_slice(&mac).map_err(|_| StateError::Tampered)?;
        let claims: Claims = URL_SAFE_NO_PAD
            .decode(body)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or(StateError::Tampered)?;
        if claims.exp < now() {
            return Err(StateError::Expired);
        }
        if claims.caller != caller {
            return Err(StateError::OtherCaller);
        }
        if claims.request != request {
            return Err(StateError::OtherRequest);
        }
        Ok(claims)
    }

    fn mac(&self, body: &str) -> Vec<u8> {
        let mut m = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        m.update(body.as_bytes());
        m.finalize().into_bytes().to_vec()
    }
}

/// The approvals' states already used, until they expire: a retry that
/// carries an approval spends its state, and a replay of it is refused.
///
/// The record lives in one process, so an approval's state names the
/// replica that issued it (`owner`; a retry that lands elsewhere is relayed
/// there) and its nonce names the process ([`Spent::nonce`]): a replica
/// restarted at the same address has forgotten what was spent, and refuses
/// what its earlier run issued instead of running it again.
pub struct Spent {
    /// This process's run: random, never repeated.
    incarnation: String,
    used: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl Default for Spent {
    fn default() -> Spent {
        Spent {
            incarnation: nonce(),
            used: Default::default(),
        }
    }
}

impl Spent {
    /// A fresh nonce for an approval's state, spendable only here.
    pub fn nonce(&self) -> String {
        format!("{}.{}", self.incarnation, nonce())
    }

    /// Spend the state whose claims are `claims`; [`StateError::Used`] if it
    /// was spent before, [`StateError::IssuerRestarted`] if an earlier run
    /// of this replica issued it. A state without a nonce cannot be told
    /// apart from another, so it cannot be spent: refused as altered.
    pub fn spend(&self, claims: &Claims) -> Result<(), StateError> {
        let nonce = claims.nonce.as_ref().ok_or(StateError::Tampered)?;
        // A nonce without a run was issued by a build before runs were named.
        let run = nonce.split_once('.').map(|(run, _)| run);
        if run != Some(self.incarnation.as_str()) {
            return Err(StateError::IssuerRestarted);
        }
        let mut used = self.used.lock().unwrap();
        let now = now();
        // Expired states are refused by their expiry: no need to remember them.
        used.retain(|_, exp| *exp >= now);
        match used.entry(nonce.clone()) {
            std::collections::hash_map::Entry::Occupied(_) => Err(StateError::Used),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(claims.exp);
                Ok(())
            }
        }
    }
}

/// A fresh nonce for a state's claims: 96 random bits, base64url.
pub fn nonce() -> String {
    let mut random = [0u8; 12];
    getrandom::fill(&mut random).expect("the OS random source is available");
    URL_SAFE_NO_PAD.encode(random)
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Hash of a caller (how it authenticated, its issuer and subject), as
/// states carry it. The caller's identity type lives above this layer: it
/// hands down only these parts.
pub fn caller_hash(method: &str, issuer: Option<&str>, subject: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(method);
    h.update([0]);
    h.update(issuer.unwrap_or(""));
    h.update([0]);
    h.update(subject.unwrap_or(""));
    hex::encode(&h.finalize()[..16])
}

/// Hash of a request as a retry must repeat it: the method, what it names
/// (`params.name` or `params.uri`) and its arguments, in a canonical form
/// (object keys sorted), so a retry that changes any of them does not match.
pub fn request_hash(method: &str, params: &Value) -> String {
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .cloned()
        .unwrap_or(Value::Null);
    let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
    // serde_json's maps are ordered by key: this is canonical.
    let canonical = serde_json::to_vec(&serde_json::json!([method, name, arguments]))
        .expect("values serialize");
    hex::encode(&Sha256::digest(&canonical)[..16])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(request: &str) -> Claims {
        Claims {
            kind: StateKind::Approval,
            caller: "alice".into(),
            request: request.into(),
            exp: now() + LIFETIME.as_secs(),
            approved: false,
            upstream: None,
            park: None,
            owner: None,
            nonce: Some(nonce()),
            roots_keys: Vec::new(),
            task: None,
            tool: None,
        }
    }

    #[test]
    fn an_approvals_state_is_spent_once_and_only_its_own() {
        let spent = Spent::default();
        let claims = |request: &str| Claims {
            nonce: Some(spent.nonce()),
            ..claims(request)
        };
        let (a, b) = (claims("r"), claims("r"));
        assert_ne!(a.nonce, b.nonce, "two approvals of one request differ");
        assert_eq!(spent.spend(&a), Ok(()));
        assert_eq!(spent.spend(&a), Err(StateError::Used));
        assert_eq!(spent.spend(&b), Ok(()));
        let no_nonce = Claims {
            nonce: None,
            ..claims("r")
        };
        assert_eq!(spent.spend(&no_nonce), Err(StateError::Tampered));
        // An expired state is forgotten (its expiry refuses it already).
        let old = Claims {
            exp: now() - 1,
            ..claims("r")
        };
        spent.spend(&old).unwrap();
        spent.spend(&claims("r")).unwrap();
        assert!(!spent
            .used
            .lock()
            .unwrap()
            .contains_key(old.nonce.as_ref().unwrap()));
    }

    #[test]
    fn only_an_approval_or_an_approved_servers_state_is_spent() {
        assert!(claims("r").carries_approval());
        let upstream = |approved| Claims {
            kind: StateKind::Upstream,
            approved,
            ..claims("r")
        };
        assert!(upstream(true).carries_approval());
        assert!(!upstream(false).carries_approval());
        // An approved call that a legacy server paused with a question is
        // continued once by taking it from its table; its state has no
        // nonce to spend, and spending it would refuse the retry.
        let parked = Claims {
            kind: StateKind::Parked,
            approved: true,
            nonce: None,
            ..claims("r")
        };
        assert!(!parked.carries_approval());
    }

    #[test]
    fn a_state_issued_by_an_earlier_run_is_refused_not_spent() {
        let (earlier, now_running) = (Spent::default(), Spent::default());
        let issued = Claims {
            nonce: Some(earlier.nonce()),
            ..claims("r")
        };
        assert_eq!(now_running.spend(&issued), Err(StateError::IssuerRestarted));
        assert_eq!(now_running.spend(&issued), Err(StateError::IssuerRestarted));
        // A nonce without a run (sealed by a build before runs were named).
        let bare = Claims {
            nonce: Some(nonce()),
            ..claims("r")
        };
        assert_eq!(now_running.spend(&bare), Err(StateError::IssuerRestarted));
        assert_eq!(earlier.spend(&issued), Ok(()));
    }

    #[test]
    fn a_state_opens_only_for_its_caller_request_and_time() {
        let seal = StateSeal::new(b"shared key of every replica.....".to_vec());
        let args = json!({"name": "deploy", "arguments": {"env": "prod", "n": 1}});
        let request = request_hash("tools/call", &args);
        let state = seal.seal(&claims(&request));
        assert_eq!(
            seal.open(&state, "alice", &request).unwrap().kind,
            StateKind::Approval
        );
        // Another replica with the same key opens it too.
        let other = StateSeal::new(b"shared key of every replica.....".to_vec());
        assert!(other.open(&state, "alice", &request).is_ok());
        assert_eq!(
            seal.open(&state, "mallory", &request),
            Err(StateError::OtherCaller)
        );
        let changed = request_hash(
            "tools/call",
            &json!({"name": "deploy", "arguments": {"env": "dev", "n": 1}}),
        );
        assert_eq!(
            seal.open(&state, "alice", &changed),
            Err(StateError::OtherRequest)
        );
        let mut expired = claims(&request);
        expired.exp = now() - 1;
        assert_eq!(
            seal.open(&seal.seal(&expired), "alice", &request),
            Err(StateError::Expired)
        );
    }

    #[test]
    fn altered_or_foreign_states_are_tampered() {
        let seal = StateSeal::new(b"k1".to_vec());
        let state = seal.seal(&claims("r"));
        // Claims rewritten (approved: true) under the old MAC.
        let (_, rest) = state.split_once('.').unwrap();
        let (_, mac) = rest.split_once('.').unwrap();
        let mut forged = claims("r");
        forged.approved = true;
        let body = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        for bad in [
            format!("mw1.{body}.{mac}"),
            StateSeal::new(b"k2".to_vec()).seal(&forged),
            "mw1.e30".to_string(),
            "server-state".to_string(),
            format!("{state}x"),
        ] {
            assert_eq!(
                seal.open(&bad, "alice", "r"),
                Err(StateError::Tampered),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_request_hash_ignores_key_order_but_not_values() {
        let a = request_hash(
            "tools/call",
            &json!({"name": "t", "arguments": {"a": 1, "b": [1, 2]}}),
        );
        let b = request_hash(
            "tools/call",
            &json!({"arguments": {"b": [1, 2], "a": 1}, "name": "t"}),
        );
        assert_eq!(a, b);
        assert_ne!(
            a,
            request_hash(
                "tools/call",
                &json!({"name": "t", "arguments": {"a": 1, "b": [2, 1]}})
            )
        );
        assert_ne!(
            a,
            request_hash(
                "prompts/get",
                &json!({"name": "t", "arguments": {"a": 1, "b": [1, 2]}})
            )
        );
    }
}
