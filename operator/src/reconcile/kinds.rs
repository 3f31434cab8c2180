//! Kinds that may appear after the operator started — Cilium's
//! `CiliumNetworkPolicy`, Calico's `NetworkPolicy`, Gateway API's
//! `HTTPRoute` — and the objects that wait for them.
//!
//! ```text
//! at start, then every KINDS_POLL: API discovery of each group version ─▶ the set served
//!   changed since the last look? ─▶ on_change (the MCPServer controller: forget the
//!                                    engine answer, observe::EngineCache) ─▶ publish it
//! each controller: triggers(its kinds) ─▶ the served subset of them changed?
//!   ─▶ reconcile every object (Controller::reconcile_all_on)
//!      MCPServers: every kind; MCPGateways: HTTPRoute
//! ```
//! A server whose approved host names nothing enforced (`NamedEgressNotEnforced`),
//! or a server or gateway whose route had no kind (`GatewayAPINotInstalled`),
//! otherwise waits for its next resync (ten minutes for a gateway that is
//! Ready); reconciling all of them is cheap (apply skips objects that match)
//! and needs no watch on CRDs. One look serves both controllers. A failed
//! look keeps the last answer.

use std::{collections::BTreeSet, future::Future, time::Duration};

use futures::Stream;
use kube::Client;
use tokio::sync::watch;
use tracing::{info, warn};

/// How often discovery is asked.
pub const KINDS_POLL: Duration = Duration::from_secs(10);

/// A kind as `(group version, plural)`.
pub type Kind = (&'static str, &'static str);

/// The Gateway API's HTTPRoute (`expose.httpRoute`).
pub const HTTP_ROUTE: Kind = ("gateway.networking.k8s.io/v1", "httproutes");

/// Each kind a server or gateway may wait for.
pub const KINDS: &[Kind] = &[
    ("cilium.io/v2", "ciliumnetworkpolicies"),
    ("projectcalico.org/v3", "networkpolicies"),
    HTTP_ROUTE,
];

/// How a kind is named in a served set: `group version/plural`.
fn key((api_version, plural): Kind) -> String {
    format!("{api_version}/{plural}")
}

/// The kinds of [`KINDS`] the API server serves now (see [`key`]).
pub async fn served(client: &Client) -> Result<BTreeSet<String>, String> {
    let mut found = BTreeSet::new();
    for &(api_version, plural) in KINDS {
        match client.list_api_group_resources(api_version).await {
            Ok(list) if list.resources.iter().any(|r| r.name == plural) => {
                found.insert(key((api_version, plural)));
            }
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(format!("{api_version}: {e}")),
        }
    }
    Ok(found)
}

/// Whether a new answer should wake the waiting objects: it differs from
/// the last one (the first answer does not: every object is reconciled at
/// start).
pub fn changed(last: Option<&BTreeSet<String>>, now: &BTreeSet<String>) -> bool {
    last.is_some_and(|last| last != now)
}

/// The answers of the discovery loop ([`watch`]): `None` until the first.
#[derive(Clone)]
pub struct Served(watch::Receiver<Option<BTreeSet<String>>>);

/// The discovery loop, and its answers for [`triggers`]. The loop calls
/// `on_change` before it publishes a changed answer (so a reconcile it wakes
/// sees what `on_change` did), and ends once every [`Served`] is dropped
/// (the controllers ended).
pub fn watch(
    client: Client,
    on_change: impl Fn() + Send + 'static,
) -> (impl Future<Output = ()> + Send, Served) {
    let (tx, rx) = watch::channel(None::<BTreeSet<String>>);
    let looks = async move {
        loop {
            // The first look is at once, as the controllers start: a kind
            // that appears after it is a change, however soon.
            let look = async {
                if tx.borrow().is_some() {
                    tokio::time::sleep(KINDS_POLL).await;
                }
                served(&client).await
            };
            let now = tokio::select! {
                () = tx.closed() => return,
                now = look => now,
            };
            match now {
                Ok(now) => {
                    if changed(tx.borrow().as_ref(), &now) {
                        info!(served = ?now, "the served kinds changed; reconciling what waits for them");
                        on_change();
                    }
                    tx.send_if_modified(|last| {
                        let new = last.as_ref() != Some(&now);
                        *last = Some(now);
                        new
                    });
                }
                Err(e) => {
                    warn!(error = %e, "cannot ask the API server which policy and route kinds it serves");
                    tokio::select! {
                        () = tx.closed() => return,
                        () = tokio::time::sleep(KINDS_POLL) => {}
                    }
                }
            }
        }
    };
    (looks, Served(rx))
}

/// A stream that yields once each time the served subset of `kinds` changes
/// (not at the first answer). Ends with the discovery loop.
pub fn triggers(served: Served, kinds: &'static [Kind]) -> impl Stream<Item = ()> + Send {
    let wanted: BTreeSet<String> = kinds.iter().map(|&k| key(k)).collect();
    futures::stream::unfold(
        (served.0, wanted, None::<BTreeSet<String>>),
        |(mut rx, wanted, mut last)| async move {
            loop {
                rx.changed().await.ok()?;
                let Some(now) = rx
                    .borrow_and_update()
                    .as_ref()
                    .map(|all| all.intersection(&wanted).cloned().collect::<BTreeSet<_>>())
                else {
                    continue;
                };
                let wake = changed(last.as_ref(), &now);
                last = Some(now);
                if wake {
                    return Some(((), (rx, wanted, last)));
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

    #[tokio::test]
    async fn each_controller_wakes_for_its_own_kinds_only() {
        use futures::{FutureExt, StreamExt};
        let (tx, rx) = watch::channel(None);
        let mut servers = Box::pin(triggers(Served(rx.clone()), KINDS));
        let mut gateways = Box::pin(triggers(Served(rx), &[HTTP_ROUTE]));
        // Whether a trigger is ready once the published answer is seen.
        async fn woke(s: &mut (impl Stream<Item = ()> + Unpin)) -> bool {
            tokio::task::yield_now().await;
            s.next().now_or_never().is_some()
        }
        let cilium = "cilium.io/v2/ciliumnetworkpolicies";
        let route = "gateway.networking.k8s.io/v1/httproutes";
        tx.send_replace(Some(set(&[])));
        assert!(
            !woke(&mut servers).await && !woke(&mut gateways).await,
            "the first answer"
        );
        tx.send_replace(Some(set(&[cilium])));
        assert!(woke(&mut servers).await, "Cilium installed: servers");
        assert!(
            !woke(&mut gateways).await,
            "Cilium installed: no gateway waits for it"
        );
        tx.send_replace(Some(set(&[cilium, route])));
        assert!(
            woke(&mut servers).await,
            "the Gateway API installed: servers"
        );
        assert!(
            woke(&mut gateways).await,
            "the Gateway API installed: gateways"
        );
        tx.send_replace(Some(set(&[route])));
        assert!(
            woke(&mut servers).await && !woke(&mut gateways).await,
            "Cilium removed"
        );
        drop(tx);
        assert_eq!(servers.next().await, None, "ends with the discovery loop");
    }

    #[test]
    fn the_route_kind_is_the_one_the_routes_are_applied_as() {
        let api = crate::build::exposure::http_route_api();
        assert_eq!(HTTP_ROUTE, (api.api_version.as_str(), api.plural.as_str()));
    }
}
