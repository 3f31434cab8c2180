//! Out-of-band approvals: calls that an argument rule with `approval:
//! outOfBand` holds until a person decides on the admin port, a channel the
//! agent does not control (unlike an elicitation, which the agent's own
//! client answers).
//!
//! Flow: session/steps/approval.rs --[`Approvals::open`]--> a pending entry
//! (listed by `GET /approvals`) and a [`Ticket`] the call waits on -->
//! `POST /approvals/<id>` --[`Approvals::decide`]--> the ticket resolves
//! with the decision and the approver (the identity that authenticated the
//! decision, never a name it typed) --> the call goes on (or is refused),
//! and its audit line names the approver. The identity whose call waits
//! can never decide it: a caller holding the approver role still needs
//! another person. A ticket nobody decides
//! within the wait is refused (-32008, `approval_timeout`); one whose call
//! went away (client cancelled, session ended) leaves the list when it is
//! dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::oneshot;

/// What a person sees about a pending call (never shown to the agent).
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    pub id: String,
    /// The tool as the caller named it.
    pub tool: String,
    /// The (first) argument rule that asked for approval, and why.
    pub rule: String,
    pub reason: &'static str,
    /// The argument's value, cut to a readable length.
    pub argument: String,
    /// Every argument rule that asked, each with its value: the person
    /// approves all of them at once.
    pub rules: Vec<PendingRule>,
    /// Who is calling.
    pub issuer: Option<String>,
    pub subject: Option<String>,
    /// The session, hashed as in audit lines.
    pub session: String,
    /// Whose share of the queue the call takes: the caller's quota key
    /// (issuer and subject; an address for anonymous callers). Not shown.
    #[serde(skip)]
    pub owner: String,
    /// Unix seconds.
    pub requested_at: u64,
    pub expires_at: u64,
}

/// One argument rule that asked for a pending call's approval.
#[derive(Serialize, Clone, Debug, Default)]
pub struct PendingRule {
    pub rule: String,
    pub reason: &'static str,
    /// The argument's value, cut to a readable length and redacted.
    pub argument: String,
}

/// A person's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub approved: bool,
    /// Who decided: the authenticated identity (subject and issuer).
    pub approver: String,
}

/// Why a ticket could not be opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    #[error("no admin listener serves /approvals (stdio mode)")]
    Unreachable,
    #[error("too many calls are waiting for approval")]
    Full,
    #[error("this caller already has {0} calls waiting for approval, its share of the queue")]
    ShareExhausted(usize),
}

/// Why a decision was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    #[error("no pending approval with that id (decided, expired or never asked)")]
    NotFound,
    #[error("this call is your own: another approver must decide it")]
    OwnCall,
}

struct Entry {
    call: PendingCall,
    tx: oneshot::Sender<Verdict>,
    opened: std::time::Instant,
}

/// The pending list, shared by the calls and the admin port.
pub struct Approvals {
    pending: Arc<Mutex<BTreeMap<String, Entry>>>,
    /// At most this many calls wait at once (0: out-of-band approval is
    /// unavailable, e.g. without an admin listener).
    max: usize,
    /// At most this many of them are one caller's, so one identity cannot
    /// fill the queue and lock everyone else out of approvals.
    per_owner: usize,
    /// How long a call waits for a decision.
    pub wait: Duration,
}

/// A call's place in the list; dropping it withdraws the request.
pub struct Ticket {
    id: String,
    rx: oneshot::Receiver<Verdict>,
    pending: Arc<Mutex<BTreeMap<String, Entry>>>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.pending.lock().unwrap().remove(&self.id);
    }
}

impl Ticket {
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The decision, or `None` when none came within `wait`.
    pub async fn decision(mut self, wait: Duration) -> Option<Verdict> {
        match tokio::time::timeout(wait, &mut self.rx).await {
            Ok(Ok(v)) => Some(v),
            _ => None,
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Approvals {
    /// A queue of `max` calls; each caller's share is a quarter of it (at
    /// least one) unless [`Approvals::with_share`] says otherwise.
    pub fn new(max: usize, wait: Duration) -> Approvals {
        Approvals {
            pending: Arc::default(),
            max,
            per_owner: (max / 4).max(1),
            wait,
        }
    }

    /// Each caller's share of the queue (0: the default, a quarter).
    pub fn with_share(mut self, per_owner: usize) -> Approvals {
        if per_owner > 0 {
            self.per_owner = per_owner.min(self.max.max(1));
        }
        self
    }

    /// Put a call on the list. `call.id`, `requested_at` and `expires_at`
    /// are filled in here.
    pub fn open(&self, mut call: PendingCall) -> Result<Ticket, OpenError> {
        if self.max == 0 {
            return Err(OpenError::Unreachable);
        }
        let mut pending = self.pending.lock().unwrap();
        if pending.len() >= self.max {
            return Err(OpenError::Full);
        }
        let theirs = pending
            .values()
            .filter(|e| e.call.owner == call.owner)
            .count();
        if theirs >= self.per_owner {
            return Err(OpenError::ShareExhausted(self.per_owner));
        }
        let mut random = [0u8; 12];
        getrandom::fill(&mut random).expect("the OS random source is available");
        call.id = hex::encode(random);
        call.requested_at = unix_now();
        call.expires_at = call.requested_at + self.wait.as_secs();
        let (tx, rx) = oneshot::channel();
        let id = call.id.clone();
        pending.insert(
            id.clone(),
            Entry {
                call,
                tx,
                opened: std::time::Instant::now(),
            },
        );
        Ok(Ticket {
            id,
            rx,
            pending: self.pending.clone(),
        })
    }

    /// How many calls wait, and how long the oldest has waited (the
    /// `mcpwarden_approvals_pending` and `…_oldest_pending_seconds` gauges).
    pub fn waiting(&self) -> (usize, Option<Duration>) {
        let pending = self.pending.lock().unwrap();
        let oldest = pending.values().map(|e| e.opened).min();
        (pending.len(), oldest.map(|t| t.elapsed()))
    }

    /// The pending calls, oldest first.
    pub fn list(&self) -> Vec<PendingCall> {
        let mut calls: Vec<PendingCall> = self
            .pending
            .lock()
            .unwrap()
            .values()
            .map(|e| e.call.clone())
            .collect();
        calls.sort_by(|a, b| a.requested_at.cmp(&b.requested_at).then(a.id.cmp(&b.id)));
        calls
    }

    /// Decide a pending call for the decider whose quota key is `decider`
    /// (the same key the call's owner has when it is the same identity);
    /// it leaves the list. A call stays pending when its own caller tries.
    pub fn decide(
        &self,
        id: &str,
        decider: &str,
        verdict: Verdict,
    ) -> Result<PendingCall, DecideError> {
        let entry = {
            let mut pending = self.pending.lock().unwrap();
            match pending.get(id) {
                None => return Err(DecideError::NotFound),
                Some(e) if e.call.owner == decider => return Err(DecideError::OwnCall),
                Some(_) => pending.remove(id).expect("present under the lock"),
            }
        };
        // The call may have given up a moment ago: then nobody is told.
        let _ = entry.tx.send(verdict);
        Ok(entry.call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call() -> PendingCall {
        PendingCall {
            id: String::new(),
            tool: "shell".into(),
            rule: "cmd".into(),
            reason: "command_needs_approval",
            argument: "\"git push\"".into(),
            rules: Vec::new(),
            issuer: Some("static".into()),
            subject: Some("alice".into()),
            session: "s1".into(),
            owner: "static/alice".into(),
            requested_at: 0,
            expires_at: 0,
        }
    }

    fn call_of(owner: &str) -> PendingCall {
        PendingCall {
            owner: owner.into(),
            ..call()
        }
    }

    #[test]
    fn one_caller_takes_at_most_its_share_and_others_still_get_in() {
        let a = Approvals::new(8, Duration::from_secs(5));
        let mine: Vec<Ticket> = (0..2).map(|_| a.open(call_of("alice")).unwrap()).collect();
        assert_eq!(
            a.open(call_of("alice")).err(),
            Some(OpenError::ShareExhausted(2))
        );
        let bobs = a.open(call_of("bob")).unwrap();
        drop(mine);
        a.open(call_of("alice")).unwrap();
        drop(bobs);
        // A share set by flag; never above the queue itself.
        let b = Approvals::new(3, Duration::from_secs(5)).with_share(10);
        let _held: Vec<Ticket> = (0..3).map(|_| b.open(call_of("carol")).unwrap()).collect();
        assert_eq!(b.open(call_of("carol")).err(), Some(OpenError::Full));
    }

    #[tokio::test]
    async fn a_decision_reaches_the_waiting_call_and_leaves_the_list() {
        let a = Approvals::new(4, Duration::from_secs(5));
        let t = a.open(call()).unwrap();
        let id = t.id().to_string();
        assert_eq!(a.list().len(), 1);
        assert_eq!(a.list()[0].expires_at - a.list()[0].requested_at, 5);
        let v = Verdict {
            approved: true,
            approver: "bob".into(),
        };
        // Alice's own call: she cannot decide it, and it stays pending.
        assert_eq!(
            a.decide(&id, "static/alice", v.clone()).err(),
            Some(DecideError::OwnCall)
        );
        assert_eq!(a.list().len(), 1);
        assert_eq!(
            a.decide(&id, "static/bob", v.clone()).unwrap().tool,
            "shell"
        );
        assert_eq!(t.decision(Duration::from_secs(1)).await, Some(v));
        assert!(a.list().is_empty());
        assert_eq!(
            a.decide(
                &id,
                "static/bob",
                Verdict {
                    approved: false,
                    approver: "x".into()
                }
            )
            .err(),
            Some(DecideError::NotFound)
        );
    }

    #[tokio::test]
    async fn undecided_calls_time_out_and_dropped_tickets_withdraw() {
        let a = Approvals::new(1, Duration::from_millis(20));
        let t = a.open(call()).unwrap();
        assert_eq!(a.open(call()).err(), Some(OpenError::Full));
        assert_eq!(t.decision(Duration::from_millis(20)).await, None);
        assert!(a.list().is_empty(), "the timed-out ticket left the list");
        let t = a.open(call()).unwrap();
        drop(t);
        assert!(a.list().is_empty());
        let none = Approvals::new(0, Duration::from_secs(1));
        assert_eq!(none.open(call()).err(), Some(OpenError::Unreachable));
    }
}
