//! Kinds that may appear after the operator started — Cilium's
//! `CiliumNetworkPolicy`, Calico's `NetworkPolicy`, Gateway API's
//! `HTTPRoute` — and the servers that wait for them.
//!
//! ```text
//! at start, then every KINDS_POLL: API discovery of each group version ─▶ the set served
//!   changed since the last look? ─▶ forget the engine answer (observe::EngineCache)
//!                                 ─▶ reconcile every MCPServer (Controller::reconcile_all_on)
//! ```
//! A server whose approved host names nothing enforced (`NamedEgressNotEnforced`)
//! or whose route had no kind (`GatewayAPINotInstalled`) otherwise waits for
//! its next resync; reconciling all of them is cheap (apply skips objects
//! that match) and needs no watch on CRDs. A failed look keeps the last answer.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use futures::Stream;
use kube::Client;
use tracing::{info, warn};

use super::Context;

/// How often discovery is asked.
pub const KINDS_POLL: Duration = Duration::from_secs(10);

/// `(group version, plural)` of each kind a server may wait for.
pub const KINDS: &[(&str, &str)] = &[
    ("cilium.io/v2", "ciliumnetworkpolicies"),
    ("projectcalico.org/v3", "networkpolicies"),
    ("gateway.networking.k8s.io/v1", "httproutes"),
];

/// The kinds of [`KINDS`] the API server serves now, as `group version/plural`.
pub async fn served(client: &Client) -> Result<BTreeSet<String>, String> {
    let mut found = BTreeSet::new();
    for (api_version, plural) in KINDS {
        match client.list_api_group_resources(api_version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == *plural) => {
                found.insert(format!("{api_version}/{plural}"));
            }
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(format!("{api_version}: {e}")),
        }
    }
    Ok(found)
}

/// Whether a new answer should wake the servers: it differs from the last
/// one (the first answer does not: every server is reconciled at start).
pub fn changed(last: Option<&BTreeSet<String>>, now: &BTreeSet<String>) -> bool {
    last.is_some_and(|last| last != now)
}

/// A stream that yields once each time the set of served kinds changes.
pub fn triggers(client: Client, ctx: Arc<Context>) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold(
        (client, ctx, None::<BTreeSet<String>>),
        |(client, ctx, mut last)| async move {
            loop {
                // The first look is at once, as the controller starts: a kind
                // that appears after it is a change, however soon.
                if last.is_some() {
                    tokio::time::sleep(KINDS_POLL).await;
                }
                let now = match served(&client).await {
                    Ok(now) => now,
                    Err(e) => {
                        warn!(error = %e, "cannot ask the API server which policy and route kinds it serves");
                        tokio::time::sleep(KINDS_POLL).await;
                        continue;
                    }
                };
                let wake = changed(last.as_ref(), &now);
                last = Some(now);
                if wake {
                    info!(served = ?last, "the served kinds changed; reconciling every MCPServer");
                    ctx.engine.forget();
                    return Some(((), (client, ctx, last)));
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn only_a_change_after_the_first_look_wakes_the_servers() {
        let none = set(&[]);
        let cilium = set(&["cilium.io/v2/ciliumnetworkpolicies"]);
        assert!(
            !changed(None, &cilium),
            "the first answer: start-up reconciles all"
        );
        assert!(!changed(Some(&none), &none));
        assert!(changed(Some(&none), &cilium), "Cilium installed");
        assert!(changed(Some(&cilium), &none), "Cilium removed");
    }
}
