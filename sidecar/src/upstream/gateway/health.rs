//! Backend health, watched: a backend that stops answering has its names
//! withdrawn, and one that answers again has them back, and every caller
//! holding a subscription or a session hears of it by a list change, not
//! only on their next list.
//!
//! Where it sits: a task of the gateway link ([`super::connect`]). Every
//! [`EVERY`] (less often for a backend that keeps not answering) it asks
//! each backend `server/discover` as the gateway itself
//! (the one request a backend answers whoever asks: it says nothing about
//! any tool), and when a backend goes from answering to not, or back, it
//! sends the facade above `notifications/{tools,prompts,resources}/list_changed`
//! as a server would. The facade then re-reads the tool list (pins and
//! drift are checked before anyone hears) and tells each legacy session and
//! each modern subscription, filtered per caller as any list change is.
//!
//! The watcher keeps its own view of each backend, apart from the
//! `answering` flags the lists set: a list asked as one caller can fail for
//! that caller alone (a backend refusing them), which says nothing about
//! the backend, and mixing the two would announce a change at every such
//! list. Only its first look starts from the lists' view (the gateway's
//! start-up list), so a backend that goes before that look is announced.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{ask, State};
use crate::jsonrpc::{self, Message, RequestId};
use crate::upstream::{Credential, LinkEvent};

/// How often each backend is asked.
const EVERY: Duration = Duration::from_secs(3);
/// The most rounds a backend that does not answer sits out (30 s).
const LONGEST_WAIT: u32 = 9;
/// How long a backend may take to answer before it counts as down.
const ANSWER_WAIT: Duration = Duration::from_secs(5);
/// The changes a backend's arrival or departure makes to the union.
const CHANGES: [&str; 3] = [
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
];

/// Watch every backend until the link goes (its state is dropped or the
/// facade stops reading its events).
pub(super) async fn watch(state: Weak<State>, up: mpsc::Sender<LinkEvent>) {
    let mut seen: Vec<Option<bool>> = Vec::new();
    // Rounds each backend sits out before it is asked again.
    let mut waits: Vec<(u32, u32)> = Vec::new();
    let mut round: u64 = 0;
    loop {
        tokio::time::sleep(EVERY).await;
        let Some(state) = state.upgrade() else { return };
        round += 1;
        if waits.is_empty() {
            waits = vec![(0, 0); state.links.len()];
        }
        let due: Vec<bool> = waits.iter().map(|&(_, left)| left == 0).collect();
        let now = probe_all(&state, round, &due).await;
        if seen.is_empty() {
            // Before its first look, what callers were last shown: the
            // lists' own view (a backend may go before the first look).
            seen = state.gateway().answering.lock().unwrap().clone();
        }
        drop(state);
        let mut changed = false;
        for (b, answered) in now.into_iter().enumerate() {
            let (wait, left) = &mut waits[b];
            let Some(answered) = answered else {
                *left -= 1;
                continue;
            };
            changed |= self::changed(seen[b], answered);
            seen[b] = Some(answered);
            *wait = next_wait(*wait, answered);
            *left = *wait;
        }
        if changed {
            for method in CHANGES {
                let event = LinkEvent::Message {
                    bytes: jsonrpc::notification(method, &json!({})),
                    related: None,
                };
                if up.send(event).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// A change callers must hear of: a backend seen answering and now not, or
/// the other way. The first look says nothing (callers listed what was).
fn changed(before: Option<bool>, now: bool) -> bool {
    before.is_some_and(|b| b != now)
}

/// Rounds a backend sits out after this look: none while it answers; one
/// that does not is asked less and less often (1, 3, 7 rounds … at most
/// [`LONGEST_WAIT`]), so a backend gone for good, or one that refuses the
/// gateway (each refusal counted at the backend), is not asked every round.
fn next_wait(wait: u32, answered: bool) -> u32 {
    if answered {
        0
    } else {
        (wait * 2 + 1).min(LONGEST_WAIT)
    }
}

/// Whether each backend that is due answers, asked at once (`None`: not
/// asked this round).
async fn probe_all(state: &Arc<State>, round: u64, due: &[bool]) -> Vec<Option<bool>> {
    let gateway = state.gateway();
    let itself = gateway
        .signer
        .as_ref()
        .map(|s| Credential::on_behalf_of(s.itself()));
    let asks = (0..state.links.len()).map(|b| {
        let itself = itself.as_ref();
        let due = due.get(b).copied().unwrap_or(true);
        async move {
            if !due {
                return None;
            }
            let Ok(msg) = discover(b, round) else {
                return Some(false);
            };
            Some(matches!(
                tokio::time::timeout(ANSWER_WAIT, ask(state, b, msg, itself)).await,
                Ok(Ok(_))
            ))
        }
    });
    futures::future::join_all(asks).await
}

/// The probe's request: an id no caller's request has (the facade's are
/// numbers), the modern `_meta` a stateless backend asks of every request.
fn discover(b: usize, round: u64) -> Result<Message, String> {
    let id = RequestId::from_raw(&format!("\"mcp-warden-gateway-health-{b}-{round}\""))
        .ok_or("probe id")?;
    let info = json!({ "name": "mcp-warden-gateway", "version": env!("CARGO_PKG_VERSION") });
    let params = json!({ "_meta": Value::Object(crate::era::modern_meta(&json!({}), &info)) });
    Message::parse(jsonrpc::request(&id, "server/discover", &params))
        .map_err(|_| "probe message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_change_of_a_seen_backend_is_announced() {
        assert!(!changed(None, true));
        assert!(!changed(None, false));
        assert!(!changed(Some(true), true));
        assert!(!changed(Some(false), false));
        assert!(changed(Some(true), false));
        assert!(changed(Some(false), true));
    }

    #[test]
    fn a_backend_that_does_not_answer_is_asked_less_often_until_it_does() {
        let mut wait = 0;
        let mut waits = Vec::new();
        for _ in 0..5 {
            wait = next_wait(wait, false);
            waits.push(wait);
        }
        assert_eq!(waits, [1, 3, 7, 9, 9]);
        assert_eq!(next_wait(wait, true), 0);
        assert_eq!(next_wait(0, true), 0);
    }

    #[test]
    fn the_probe_is_a_modern_discover_under_an_id_no_caller_has() {
        let msg = discover(2, 7).unwrap();
        assert_eq!(msg.method(), "server/discover");
        let id = msg.id.clone().unwrap();
        assert_eq!(id.as_number(), None);
        assert!(id.as_json().contains("health-2-7"));
        let value = msg.to_value();
        assert!(value.pointer("/params/_meta").is_some(), "{value}");
    }
}
