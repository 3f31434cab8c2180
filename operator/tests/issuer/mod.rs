//! A JWT issuer for the tests that read one: OIDC discovery and a JWKS
//! over real HTTPS on loopback, with the certificate the test generated
//! (trusted through `SSL_CERT_FILE`, as a cluster's CA bundle would be).
#![allow(dead_code)]

use std::{convert::Infallible, sync::Arc};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::net::TcpListener;

/// Trust only `pair`'s certificate in this process (`SSL_CERT_FILE`) and
/// return a TLS server config with it. Call it from the one test of a
/// binary: the variable is process-wide.
pub fn trust_only(
    pair: &mcp_warden_operator::webhook::certs::CertPair,
    dir: &std::path::Path,
) -> Arc<rustls::ServerConfig> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let bundle = dir.join("ca.pem");
    std::fs::write(&bundle, &pair.cert_pem).unwrap();
    std::env::set_var("SSL_CERT_FILE", &bundle);
    mcp_warden_operator::webhook::certs::server_config(pair).unwrap()
}

/// An issuer on a fresh port: its discovery document (claiming `claimed`
/// as issuer, else its own URL) names its JWKS at `/keys`.
pub async fn serve_issuer(
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
