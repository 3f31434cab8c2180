//! A caller's subscription held at the backends: never on behalf of a
//! caller whose own credential has expired.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::upstream::gateway::assertion::Signer;
use crate::upstream::gateway::test_backend;
use crate::upstream::gateway::GatewayTarget;
use crate::upstream::{HttpTarget, LinkLimits};

fn alice() -> Principal {
    Principal {
        issuer: "https://login.example.com".into(),
        subject: "alice".into(),
        groups: Vec::new(),
    }
}

/// A gateway with one backend (nothing listens there: nothing here posts).
fn gateway() -> Arc<GatewayTarget> {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
    let signer = Signer::from_pem(
        "gw",
        key.serialize_pem().as_bytes(),
        Duration::from_secs(60),
    )
    .unwrap();
    let config = crate::net::ClientConfig {
        allow: vec!["127.0.0.0/8".parse().unwrap()],
        ..Default::default()
    };
    let target = HttpTarget {
        uri: "http://127.0.0.1:9/mcp".parse().unwrap(),
        client: crate::net::Client::new(&config).unwrap(),
    };
    let backends = vec![("everything".to_string(), "everything".to_string(), target)];
    Arc::new(GatewayTarget::new(backends, Some(signer)).unwrap())
}

fn listen_request(n: u64) -> Message {
    let params = serde_json::json!({"notifications": {"toolsListChanged": true}});
    Message::parse(crate::jsonrpc::request(
        &RequestId::number(n),
        "subscriptions/listen",
        &params,
    ))
    .unwrap()
}

fn until(offset: i64) -> Credential {
    let exp = now().saturating_add_signed(offset);
    Credential::on_behalf_of(alice()).until(Some(exp))
}

#[tokio::test]
async fn no_assertion_is_minted_for_a_caller_whose_credential_expired() {
    let (state, _guards, _events) =
        crate::upstream::gateway::connect(&gateway(), &LinkLimits::default()).unwrap();
    let id = RequestId::number(7);

    // Expired already: refused at once, nothing held.
    let refused = hold(&state, listen_request(7), Some(&until(-1)));
    assert!(matches!(refused, Err(UpstreamError::Refused(_))));
    assert!(!state.listening.holds(&id));

    // Held, then the caller's credential expires: its part is not held
    // again (no fresh assertion), while a caller still good gets one.
    state.listening.start(id.clone());
    let part = |credential: Option<Credential>| Part {
        state: Arc::downgrade(&state),
        b: 0,
        id: id.clone(),
        msg: listen_request(7),
        who: Some(alice()),
        credential,
    };
    let good = part(Some(until(60))).next();
    assert!(good.is_some_and(|(_, minted, _)| minted.is_some()));
    assert!(part(Some(until(-1))).next().is_none());
    // A credential without an expiry (a static token's caller) is held on.
    assert!(part(Some(Credential::on_behalf_of(alice())))
        .next()
        .is_some());
}

/// A backend that answers `subscriptions/listen` with a stream it keeps
/// open, counting the listens it is sent; anything else is refused.
async fn backend_holding_streams() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncWriteExt;
    let listens = Arc::new(AtomicUsize::new(0));
    let counted = listens.clone();
    let port = test_backend::serve(move |body, mut conn| {
        let counted = counted.clone();
        async move {
            if body["method"] == "subscriptions/listen" {
                counted.fetch_add(1, Ordering::SeqCst);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n";
                let _ = conn.write_all(head.as_bytes()).await;
                // Held open, as a live subscription is.
                tokio::time::sleep(Duration::from_secs(60)).await;
            } else {
                let _ = conn.write_all(test_backend::REFUSED.as_bytes()).await;
            }
        }
    })
    .await;
    (port, listens)
}

#[tokio::test]
async fn a_part_whose_stream_is_live_is_not_opened_again_beside_it() {
    let (port, listens) = backend_holding_streams().await;
    let gateway = test_backend::gateway_at(port, "everything", "everything");
    let (state, _guards, _events) =
        crate::upstream::gateway::connect(&gateway, &LinkLimits::default()).unwrap();
    hold(&state, listen_request(3), None).unwrap();
    // Past the first two pauses (1 s, then 2 s) a part would be held again
    // after if it did not wait for its stream to end.
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    assert_eq!(
        listens.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one live stream per part"
    );
}

#[test]
fn each_backend_is_asked_for_its_own_resources_as_it_knows_them() {
    let names = Names::new(vec![
        ("fx".into(), "fx__".into()),
        ("ev".into(), "ev__".into()),
    ]);
    let params = json!({"notifications": {"toolsListChanged": true,
        "resourceSubscriptions": ["fx+test://a", "ev+demo://b", "fx+test://c", "nobody+x://y"]},
        "_meta": {"k": 1}});
    assert_eq!(
        own_resources(&names, 0, &params),
        Some(json!({"notifications": {"toolsListChanged": true,
            "resourceSubscriptions": ["test://a", "test://c"]}, "_meta": {"k": 1}}))
    );
    assert_eq!(
        own_resources(&names, 1, &params).unwrap()["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["demo://b"]})
    );
    let none_here = json!({"notifications": {"resourceSubscriptions": ["ev+demo://b"]}});
    assert_eq!(
        own_resources(&names, 0, &none_here),
        Some(json!({"notifications": {}}))
    );
    let no_resources = json!({"notifications": {"toolsListChanged": true}});
    assert_eq!(own_resources(&names, 0, &no_resources), None);
}

#[test]
fn the_gateway_acknowledges_what_was_asked_that_it_serves() {
    let names = Names::new(vec![("fx".into(), "fx__".into())]);
    let params = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false,
        "resourceSubscriptions": ["fx+test://a", "nobody+x://y"]}});
    let ack: Value =
        serde_json::from_slice(&acknowledgement(&names, &RequestId::number(7), &params)).unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"],
        json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["fx+test://a"]},
            "_meta": {crate::era::meta::SUBSCRIPTION_ID: 7}})
    );
}

#[test]
fn a_backends_resource_update_comes_up_under_the_gateways_uri() {
    let names = Names::new(vec![
        ("fx".into(), "fx__".into()),
        ("ev".into(), "ev__".into()),
    ]);
    let update = |params: Value| {
        Message::parse(crate::jsonrpc::notification(
            "notifications/resources/updated",
            &params,
        ))
        .unwrap()
    };
    let msg = update(json!({"uri": "demo://b", "_meta": {"s": 7}}));
    let renamed: Value = serde_json::from_slice(&gateway_uri(&names, 1, &msg).unwrap()).unwrap();
    assert_eq!(
        renamed["params"],
        json!({"uri": "ev+demo://b", "_meta": {"s": 7}})
    );
    assert_eq!(gateway_uri(&names, 0, &update(json!({}))), None);
}
