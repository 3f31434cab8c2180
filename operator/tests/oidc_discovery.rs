//! Reading a JWT issuer's signing keys from the issuer itself: OIDC
//! discovery, then the `jwks_uri` it names, over real HTTPS. The issuer is a
//! TLS server on loopback with a generated certificate for `localhost`,
//! trusted through `SSL_CERT_FILE` (as a cluster's CA bundle would be).

mod issuer;

use issuer::serve_issuer;
use mcp_warden_operator::{reconcile::oidc, webhook::certs};
use serde_json::json;

#[tokio::test]
async fn keys_come_from_the_discovery_document_over_trusted_https() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let pair = certs::generate(vec!["localhost".into()]).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let bundle = dir.join("ca.pem");
    std::fs::write(&bundle, &pair.cert_pem).unwrap();
    // The only roots this test process trusts (one test in this binary: no race).
    std::env::set_var("SSL_CERT_FILE", &bundle);
    let tls = certs::server_config(&pair).unwrap();

    let keys = json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo", "kid": "k1"}]});
    let port = serve_issuer(tls.clone(), &keys, None).await;
    let issuer = format!("https://localhost:{port}");
    let got = oidc::fetch(&issuer).await.expect("the keys");
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got, keys);
    let cache = oidc::IssuerKeys::default();
    assert!(cache.get(&issuer).await.is_some());

    // A discovery document for another issuer is not this issuer's.
    let port = serve_issuer(tls.clone(), &keys, Some("https://elsewhere.example.com")).await;
    let err = oidc::fetch(&format!("https://localhost:{port}"))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("not the issuer asked for"),
        "{err}"
    );

    // Plain HTTP is refused; an untrusted certificate fails the handshake.
    assert!(matches!(
        oidc::fetch("http://localhost:1").await,
        Err(oidc::FetchError::NotHttps(_))
    ));
    let stranger =
        certs::server_config(&certs::generate(vec!["localhost".into()]).unwrap()).unwrap();
    let port = serve_issuer(stranger, &keys, None).await;
    let err = oidc::fetch(&format!("https://localhost:{port}"))
        .await
        .unwrap_err();
    assert!(matches!(err, oidc::FetchError::Http { .. }), "{err}");
    assert!(oidc::IssuerKeys::default()
        .get(&format!("https://localhost:{port}"))
        .await
        .is_none());
}
