//! A caller's subscription held at the backends: never on behalf of a
//! caller whose own credential has expired.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::upstream::gateway::assertion::Signer;
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
