//! Backend health, watched: a backend that stops answering has its names
//! withdrawn, and one that answers again has them back, and every caller
//! holding a subscription or a session hears of it by a list change, not
//! only on their next list.
//!
//! Where it sits: a task of the gateway link ([`super::connect`]). Every
//! [`EVERY`] it asks each backend `server/discover` as the gateway itself
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
    let mut round: u64 = 0;
    loop {
        tokio::time::sleep(EVERY).await;
        let Some(state) = state.upgrade() else { return };
        round += 1;
        let now = probe_all(&state, round).await;
        if seen.is_empty() {
            // Before its first look, what callers were last shown: the
            // lists' own view (a backend may go before the first look).
            seen = state.gateway().answering.lock().unwrap().clone();
        }
        drop(state);
        let changed = seen
            .iter()
            .zip(&now)
            .any(|(before, now)| changed(*before, *now));
        seen = now.into_iter().map(Some).collect();
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

/// Whether each backend answers, asked at once.
async fn probe_all(state: &Arc<State>, round: u64) -> Vec<bool> {
    let gateway = state.gateway();
    let itself = gateway
        .signer
        .as_ref()
        .map(|s| Credential::on_behalf_of(s.itself()));
    let asks = (0..state.links.len()).map(|b| {
        let itself = itself.as_ref();
        async move {
            let Ok(msg) = discover(b, round) else {
                return false;
            };
            matches!(
                tokio::time::timeout(ANSWER_WAIT, ask(state, b, msg, itself)).await,
                Ok(Ok(_))
            )
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
