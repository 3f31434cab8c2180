//! Reading a JWT issuer's signing keys from the issuer itself: OIDC
//! discovery, then the `jwks_uri` it names, over real HTTPS. The issuer is a
//! TLS server on loopback with a generated certificate for `localhost`,
//! trusted through `SSL_CERT_FILE` (as a cluster's CA bundle would be).

use std::{convert::Infallible, sync::Arc};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use mcp_warden_operator::{reconcile::oidc, webhook::certs};
use serde_json::json;
use tokio::net::TcpListener;

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

/// An issuer on a fresh port: its discovery document (claiming `claimed`
/// as issuer, else its own URL) names its JWKS at `/keys`.
async fn serve_issuer(
    tls: Arc<rustls::ServerConfig>,
    keys: &serde_json::Value,
    claimed: Option<&str>,
) -> u16 {
    // The port is only known once bound, and the document names it: serve a
    // placeholder route table filled in through a shared cell.
    let cell: Arc<std::sync::Mutex<Vec<(String, u16, String)>>> = Default::default();
    let port = serve_dynamic(tls, cell.clone()).await;
    let own = format!("https://localhost:{port}");
    let discovery = json!({
        "issuer": claimed.unwrap_or(&own),
        "jwks_uri": format!("{own}/keys"),
    });
    *cell.lock().unwrap() = vec![
        (
            "/.well-known/openid-configuration".into(),
            200,
            discovery.to_string(),
        ),
        ("/keys".into(), 200, keys.to_string()),
    ];
    port
}

async fn serve_dynamic(
    tls: Arc<rustls::ServerConfig>,
    routes: Arc<std::sync::Mutex<Vec<(String, u16, String)>>>,
) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            let (acceptor, routes) = (tokio_rustls::TlsAcceptor::from(tls.clone()), routes.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let table = routes.lock().unwrap().clone();
                        async move {
                            let (status, body) = table
                                .iter()
                                .find(|(p, _, _)| p == req.uri().path())
                                .map(|(_, s, b)| (*s, b.clone()))
                                .unwrap_or((404, String::new()));
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from(body)))
                                    .unwrap(),
                            )
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    port
}
