//! Tests of the owner choice and of the ask/answer between replicas. The
//! replicas here are real [`SharedBudgets`]; the link between them hands
//! the ask's bytes to the other replica's [`SharedBudgets::answer`] in
//! process (the HTTP relay is exercised end to end in
//! `tests/e2e/test_replicas.py`).

use std::sync::Weak;

use super::*;
use mcp_warden_crds::BudgetWindow;

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
const T0: u64 = 1_700_000_040; // 0 s into a minute window

fn peers(list: &[&str]) -> Vec<String> {
    list.iter().map(|p| p.to_string()).collect()
}

fn four() -> IdentityBudget {
    IdentityBudget {
        calls: 4,
        per: BudgetWindow::Minute,
    }
}

/// Replicas that reach each other in process, by address.
#[derive(Default)]
struct Net {
    replicas: Mutex<HashMap<String, Weak<SharedBudgets>>>,
    /// Addresses that do not answer (a stopped replica).
    down: Mutex<Vec<String>>,
    /// Asks delivered, by owner.
    delivered: Mutex<HashMap<String, usize>>,
}

struct Link(Arc<Net>);

impl PeerLink for Link {
    fn ask(&self, peer: &str, body: Bytes) -> Pending {
        let net = self.0.clone();
        let peer = peer.to_string();
        Box::pin(async move {
            if net.down.lock().unwrap().contains(&peer) {
                return Err("connection refused".into());
            }
            *net.delivered
                .lock()
                .unwrap()
                .entry(peer.clone())
                .or_default() += 1;
            let owner = net
                .replicas
                .lock()
                .unwrap()
                .get(&peer)
                .and_then(Weak::upgrade);
            let owner = owner.ok_or("no such peer")?;
            owner.answer(&body, T0).map_err(|e| e.to_string())
        })
    }
}

/// Replicas at `addrs`, each configured with the list in its own order.
fn cluster(addrs: &[&str]) -> (Arc<Net>, Vec<Arc<SharedBudgets>>) {
    let net = Arc::new(Net::default());
    let mut out = Vec::new();
    for (i, me) in addrs.iter().enumerate() {
        let b = Arc::new(SharedBudgets::default());
        let mut list = peers(addrs);
        list.rotate_left(i);
        b.set_peers(me.to_string(), &list, KEY, Arc::new(Link(net.clone())));
        net.replicas
            .lock()
            .unwrap()
            .insert(me.to_string(), Arc::downgrade(&b));
        out.push(b);
    }
    (net, out)
}

#[test]
fn the_owner_is_stable_and_the_same_whatever_the_order_of_the_peers() {
    let a = peers(&["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]);
    let mut b = a.clone();
    b.reverse();
    let mut c = a.clone();
    c.rotate_left(1);
    for n in 0..200 {
        let id = format!("static\0user-{n}");
        let owner = owner_of(&a, &id).unwrap();
        assert_eq!(owner_of(&a, &id), Some(owner), "stable");
        assert_eq!(owner_of(&b, &id), Some(owner), "same in any order");
        assert_eq!(owner_of(&c, &id), Some(owner), "same in any order");
    }
    assert_eq!(owner_of(&[], "x"), None);
}

#[test]
fn identities_spread_over_the_peers_and_a_removed_peer_moves_only_its_own() {
    let three = peers(&["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]);
    let two = peers(&["10.0.0.1:8080", "10.0.0.3:8080"]);
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for n in 0..3000 {
        let id = format!("https://idp.example\0user-{n}");
        let before = owner_of(&three, &id).unwrap();
        *counts.entry(before).or_default() += 1;
        let after = owner_of(&two, &id).unwrap();
        if before != "10.0.0.2:8080" {
            assert_eq!(before, after, "{id} moved though its owner stayed");
        }
    }
    assert_eq!(counts.len(), 3);
    for (peer, n) in counts {
        assert!((800..=1200).contains(&n), "{peer} owns {n} of 3000");
    }
}

#[tokio::test]
async fn every_replica_takes_from_the_owners_window() {
    let (net, replicas) = cluster(&["10.0.0.1:8080", "10.0.0.2:8080"]);
    for identity in ["static\0alice", "static\0bob"] {
        let owner = replicas[0]
            .owner(identity)
            .unwrap_or("10.0.0.1:8080".into());
        assert_eq!(
            replicas[1]
                .owner(identity)
                .unwrap_or("10.0.0.2:8080".into()),
            owner
        );
        let mut granted = 0;
        let mut outcomes = Vec::new();
        // Calls alternate between the replicas, as a balancer spreads them.
        for n in 0..10 {
            let (taken, asked) = replicas[n % 2].take(identity, &[("", four())], T0).await;
            outcomes.push(asked);
            match taken {
                Ok(()) => granted += 1,
                Err(e) => assert!(
                    matches!(e, NotGranted::Spent { limit: 4, observed } if observed >= 5),
                    "{e:?}"
                ),
            }
        }
        assert_eq!(granted, 4, "{identity}: one budget across both replicas");
        // Exactly the calls on the other replica asked the owner.
        let asks = outcomes.iter().filter(|o| o.is_some()).count();
        assert_eq!(asks, 5, "{identity}: {outcomes:?}");
        assert!(outcomes.contains(&Some(AskOutcome::Refused)));
        assert_eq!(net.delivered.lock().unwrap()[&owner], asks);
        net.delivered.lock().unwrap().clear();
    }
}

#[tokio::test]
async fn an_unreachable_owner_fails_closed_and_others_are_not_affected() {
    let (net, replicas) = cluster(&["10.0.0.1:8080", "10.0.0.2:8080"]);
    // An identity replica 0 owns, asked for on replica 1, with replica 0 down.
    let identity = (0..)
        .map(|n| format!("static\0user-{n}"))
        .find(|id| replicas[1].owner(id).as_deref() == Some("10.0.0.1:8080"))
        .unwrap();
    net.down.lock().unwrap().push("10.0.0.1:8080".into());
    let (taken, asked) = replicas[1].take(&identity, &[("", four())], T0).await;
    assert_eq!(taken, Err(NotGranted::Unavailable(AskOutcome::Unreachable)));
    assert_eq!(asked, Some(AskOutcome::Unreachable));
    // Nothing was counted anywhere, and no local share was handed out.
    assert!(replicas[1]
        .local
        .take(
            &identity,
            &[(
                "",
                IdentityBudget {
                    calls: 1,
                    per: BudgetWindow::Minute
                }
            )],
            T0
        )
        .is_ok());
    // An identity the live replica owns is served as before.
    let mine = (0..)
        .map(|n| format!("static\0other-{n}"))
        .find(|id| replicas[1].owner(id).is_none())
        .unwrap();
    assert_eq!(
        replicas[1].take(&mine, &[("", four())], T0).await,
        (Ok(()), None)
    );
}

/// A link whose answers never come.
struct Silent;

impl PeerLink for Silent {
    fn ask(&self, _: &str, _: Bytes) -> Pending {
        Box::pin(std::future::pending())
    }
}

fn asker_with(link: Arc<dyn PeerLink>) -> (SharedBudgets, String) {
    let b = SharedBudgets::default();
    b.set_peers(
        "10.0.0.2:8080".into(),
        &peers(&["10.0.0.1:8080"]),
        KEY,
        link,
    );
    let identity = (0..)
        .map(|n| format!("static\0user-{n}"))
        .find(|id| b.owner(id).is_some())
        .unwrap();
    (b, identity)
}

#[tokio::test]
async fn an_ask_has_a_deadline_and_an_identity_a_cap_on_asks_in_flight() {
    let (b, identity) = asker_with(Arc::new(Silent));
    let b = Arc::new(b);
    let started = std::time::Instant::now();
    let waiting: Vec<_> = (0..MAX_ASKS_IN_FLIGHT)
        .map(|_| {
            let (b, identity) = (b.clone(), identity.clone());
            tokio::spawn(async move { b.take(&identity, &[("", four())], T0).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The ninth is refused at once, without waiting for the owner.
    let (taken, asked) = b.take(&identity, &[("", four())], T0).await;
    assert_eq!(taken, Err(NotGranted::Unavailable(AskOutcome::Busy)));
    assert_eq!(asked, Some(AskOutcome::Busy));
    assert!(started.elapsed() < ASK_DEADLINE);
    // Another identity has slots of its own.
    let other = (0..)
        .map(|n| format!("static\0other-{n}"))
        .find(|id| b.owner(id).is_some())
        .unwrap();
    let late = b.clone();
    let other_ask = tokio::spawn(async move { late.take(&other, &[("", four())], T0).await });
    for w in waiting {
        let (taken, _) = w.await.unwrap();
        assert_eq!(taken, Err(NotGranted::Unavailable(AskOutcome::Unreachable)));
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= ASK_DEADLINE && elapsed < ASK_DEADLINE * 2,
        "{elapsed:?}"
    );
    assert_eq!(other_ask.await.unwrap().1, Some(AskOutcome::Unreachable));
    // The slots are free again.
    assert!(b.asking.lock().unwrap().is_empty());
}

/// A link that answers every ask with what `forge` makes of it.
struct Forger(fn(&[u8]) -> Bytes);

impl PeerLink for Forger {
    fn ask(&self, _: &str, body: Bytes) -> Pending {
        let answer = (self.0)(&body);
        Box::pin(async move { Ok(answer) })
    }
}

#[tokio::test]
async fn a_grant_counts_only_when_signed_for_this_ask() {
    fn granted(nonce: String) -> Answer {
        Answer {
            nonce,
            granted: true,
            limit: 0,
            observed: 0,
        }
    }
    fn ask_of(body: &[u8]) -> Ask {
        open(&derived(KEY), b"ask", body).unwrap()
    }
    let forgeries: [fn(&[u8]) -> Bytes; 4] = [
        // Signed with another key.
        |body| {
            sign(
                &derived(b"not the peers' key, 32 bytes long"),
                b"answer",
                &granted(ask_of(body).nonce),
            )
        },
        // Signed for another ask.
        |_| sign(&derived(KEY), b"answer", &granted("0".repeat(32))),
        // The ask itself sent back (an ask's signature is not an answer's).
        |body| Bytes::copy_from_slice(body),
        // Not even JSON.
        |_| Bytes::from_static(b"granted"),
    ];
    for forge in forgeries {
        let (b, identity) = asker_with(Arc::new(Forger(forge)));
        let (taken, asked) = b.take(&identity, &[("", four())], T0).await;
        assert_eq!(taken, Err(NotGranted::Unavailable(AskOutcome::Unreachable)));
        assert_eq!(asked, Some(AskOutcome::Unreachable));
    }
    // The genuine answer is believed.
    let (b, identity) = asker_with(Arc::new(Forger(|body| {
        sign(&derived(KEY), b"answer", &granted(ask_of(body).nonce))
    })));
    assert_eq!(
        b.take(&identity, &[("", four())], T0).await,
        (Ok(()), Some(AskOutcome::Granted))
    );
}

fn derived(key: &[u8]) -> Vec<u8> {
    let b = SharedBudgets::default();
    b.set_peers("x".into(), &[], key, Arc::new(Silent));
    b.ring.load_full().unwrap().key.clone()
}

#[test]
fn the_owner_answers_only_signed_fresh_asks_of_a_peer_for_itself() {
    let owner = SharedBudgets::default();
    let list = peers(&["10.0.0.1:8080", "10.0.0.2:8080"]);
    owner.set_peers("10.0.0.1:8080".into(), &list, KEY, Arc::new(Silent));
    let key = derived(KEY);
    let ask = |from: &str, to: &str, at: u64| Ask {
        from: from.into(),
        to: to.into(),
        identity: "static\0alice".into(),
        budgets: vec![(String::new(), four())],
        at,
        nonce: nonce(),
    };
    let good = sign(&key, b"ask", &ask("10.0.0.2:8080", "10.0.0.1:8080", T0));
    let answer: Answer = open(&key, b"answer", &owner.answer(&good, T0).unwrap()).unwrap();
    assert!(answer.granted);
    // The same ask again is a replay.
    assert_eq!(owner.answer(&good, T0), Err(AskError::Replayed));
    let cases = [
        (
            sign(
                &derived(b"another key, at least 32 bytes.."),
                b"ask",
                &ask("10.0.0.2:8080", "10.0.0.1:8080", T0),
            ),
            AskError::BadSignature,
        ),
        (
            sign(&key, b"answer", &ask("10.0.0.2:8080", "10.0.0.1:8080", T0)),
            AskError::BadSignature,
        ),
        (
            sign(&key, b"ask", &ask("10.0.0.9:8080", "10.0.0.1:8080", T0)),
            AskError::NotForMe,
        ),
        (
            sign(&key, b"ask", &ask("10.0.0.2:8080", "10.0.0.2:8080", T0)),
            AskError::NotForMe,
        ),
        (
            sign(&key, b"ask", &ask("10.0.0.1:8080", "10.0.0.1:8080", T0)),
            AskError::NotForMe,
        ),
        (
            sign(
                &key,
                b"ask",
                &ask("10.0.0.2:8080", "10.0.0.1:8080", T0 - 120),
            ),
            AskError::Replayed,
        ),
        (Bytes::from_static(b"{}"), AskError::Unreadable),
    ];
    for (body, want) in cases {
        assert_eq!(owner.answer(&body, T0), Err(want));
    }
    // None of the refused asks took anything: three of four calls are left.
    for _ in 0..3 {
        assert!(owner
            .local
            .take("static\0alice", &[("", four())], T0)
            .is_ok());
    }
    assert_eq!(
        owner.local.take("static\0alice", &[("", four())], T0),
        Err((4, 5))
    );
    // A replica without peers answers nothing.
    assert_eq!(
        SharedBudgets::default().answer(&good, T0),
        Err(AskError::NoPeers)
    );
}

#[test]
fn ask_outcomes_are_the_metrics_bounded_labels() {
    let labels: Vec<&str> = AskOutcome::ALL.iter().map(|o| o.label()).collect();
    assert_eq!(labels, crate::metrics::ASK_OUTCOMES);
}

#[tokio::test]
async fn a_changed_replica_set_moves_only_what_it_must_at_once() {
    let (_net, replicas) = cluster(&["10.0.0.1:8080", "10.0.0.2:8080"]);
    let b = &replicas[1];
    let identity = (0..)
        .map(|n| format!("static\0user-{n}"))
        .find(|id| b.owner(id).as_deref() == Some("10.0.0.1:8080"))
        .unwrap();
    assert_eq!(
        b.take(&identity, &[("", four())], T0).await,
        (Ok(()), Some(AskOutcome::Granted))
    );
    // Replica 1 is gone from the set: replica 2 counts the identity itself.
    b.set_peers(
        "10.0.0.2:8080".into(),
        &peers(&["10.0.0.2:8080"]),
        KEY,
        Arc::new(Silent),
    );
    assert_eq!(b.peers(), peers(&["10.0.0.2:8080"]));
    assert_eq!(b.owner(&identity), None);
    assert_eq!(b.take(&identity, &[("", four())], T0).await, (Ok(()), None));
}

#[test]
fn nonces_are_remembered_until_their_asks_are_stale_and_then_swept() {
    let b = SharedBudgets::default();
    for n in 0..SWEEP_AT {
        assert!(b.first_sight(&format!("n{n}"), T0));
    }
    assert!(!b.first_sight("n0", T0 + 2 * SKEW_SECS), "still remembered");
    // Past twice the skew, the next sweep forgets them (an ask that old is
    // refused as stale before its nonce is looked at).
    assert!(b.first_sight("fresh", T0 + 2 * SKEW_SECS + 1));
    let seen = b.seen.lock().unwrap();
    assert_eq!(seen.keys().collect::<Vec<_>>(), vec!["fresh"]);
}
