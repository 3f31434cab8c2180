//! The facade's outbound client against real TLS servers on loopback: a CA
//! of the test's own (rcgen), HTTP/2 chosen by ALPN and shared by
//! concurrent requests, HTTP/1.1 when asked, a CONNECT proxy, and what is
//! refused: an address the guard does not allow, a certificate nobody
//! trusts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::HOST;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_warden_sidecar::net::guard::parse_cidr;
use mcp_warden_sidecar::net::proxy::Proxy;
use mcp_warden_sidecar::net::{pool::Pool, Client, ClientConfig, Endpoint, NetError};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Pki {
    ca_file: PathBuf,
    /// Removes the CA file when the test's Pki goes.
    _ca_guard: tempfile::TempPath,
    server: Arc<rustls::ServerConfig>,
}

fn pki(name: &str, alpn: &[&[u8]]) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let mut ca_guard = tempfile::Builder::new()
        .prefix("mcp-warden-net-ca-")
        .suffix(".pem")
        .tempfile()
        .unwrap();
    std::io::Write::write_all(&mut ca_guard, ca_cert.pem().as_bytes()).unwrap();
    let ca_guard = ca_guard.into_temp_path();
    let ca_file = ca_guard.to_path_buf();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    server.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Pki {
        ca_file,
        _ca_guard: ca_guard,
        server: Arc::new(server),
    }
}

/// A TLS server answering every request with its HTTP version; counts
/// the TCP connections it accepted.
async fn tls_server(config: Arc<rustls::ServerConfig>) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                        let text = format!("{:?} {}", req.version(), req.uri().path());
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(text))))
                    });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, accepted)
}

fn client(ca: Option<&PathBuf>, http2: bool, proxy: Proxy, allow: &[&str]) -> Arc<Client> {
    Client::new(&ClientConfig {
        ca_file: ca.cloned(),
        allow: allow.iter().map(|a| parse_cidr(a).unwrap()).collect(),
        http2,
        proxy: Some(proxy),
        ..ClientConfig::default()
    })
    .unwrap()
}

async fn get(pool: &Pool, path: &str) -> Result<String, NetError> {
    let req = Request::get(path)
        .header(HOST, pool.endpoint().authority.as_str())
        .body(Full::new(Bytes::new()))
        .unwrap();
    let mut ex = pool.send(req).await?;
    let body = ex
        .conn
        .drive(ex.resp.into_body().collect())
        .await
        .unwrap()
        .to_bytes();
    pool.release(ex.conn);
    Ok(String::from_utf8_lossy(&body).into_owned())
}

fn endpoint(url: &str) -> Endpoint {
    Endpoint::of(&url.parse().unwrap()).unwrap()
}

#[tokio::test]
async fn http2_is_chosen_by_alpn_and_one_connection_carries_concurrent_requests() {
    let pki = pki("localhost", &[b"h2", b"http/1.1"]);
    let (addr, accepted) = tls_server(pki.server.clone()).await;
    let c = client(
        Some(&pki.ca_file),
        true,
        Proxy::default(),
        &["127.0.0.0/8", "::1"],
    );
    let pool = Arc::new(Pool::new(
        c,
        endpoint(&format!("https://localhost:{}/mcp", addr.port())),
    ));
    assert_eq!(get(&pool, "/first").await.unwrap(), "HTTP/2.0 /first");
    let mut calls = Vec::new();
    for i in 0..8 {
        let pool = pool.clone();
        calls.push(tokio::spawn(
            async move { get(&pool, &format!("/c{i}")).await },
        ));
    }
    for (i, call) in calls.into_iter().enumerate() {
        assert_eq!(call.await.unwrap().unwrap(), format!("HTTP/2.0 /c{i}"));
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one HTTP/2 connection for all"
    );
}

#[tokio::test]
async fn http1_when_http2_is_not_offered_and_connections_are_reused() {
    let pki = pki("localhost", &[b"h2", b"http/1.1"]);
    let (addr, accepted) = tls_server(pki.server.clone()).await;
    let c = client(Some(&pki.ca_file), false, Proxy::default(), &["127.0.0.1"]);
    let pool = Pool::new(
        c,
        endpoint(&format!("https://localhost:{}/mcp", addr.port())),
    );
    for i in 0..3 {
        assert_eq!(
            get(&pool, &format!("/s{i}")).await.unwrap(),
            format!("{:?} /s{i}", Version::HTTP_11)
        );
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "kept alive and reused");
}

#[tokio::test]
async fn an_untrusted_certificate_or_a_wrong_name_fails_the_handshake() {
    let pki_a = pki("localhost", &[b"http/1.1"]);
    let pki_b = pki("localhost", &[b"http/1.1"]);
    let (addr, _) = tls_server(pki_a.server.clone()).await;
    // Trusting another CA.
    let c = client(Some(&pki_b.ca_file), true, Proxy::default(), &["127.0.0.1"]);
    let pool = Pool::new(c, endpoint(&format!("https://localhost:{}/", addr.port())));
    let e = get(&pool, "/").await.unwrap_err().to_string();
    assert!(
        e.contains("TLS with localhost") && e.contains("certificate"),
        "{e}"
    );
    // The right CA, but the certificate does not name 127.0.0.1.
    let c = client(Some(&pki_a.ca_file), true, Proxy::default(), &["127.0.0.1"]);
    let pool = Pool::new(c, endpoint(&format!("https://127.0.0.1:{}/", addr.port())));
    let e = get(&pool, "/").await.unwrap_err().to_string();
    assert!(e.contains("TLS with 127.0.0.1"), "{e}");
}

#[tokio::test]
async fn the_guard_refuses_before_any_connection_is_made() {
    let pki = pki("localhost", &[b"http/1.1"]);
    let (addr, accepted) = tls_server(pki.server.clone()).await;
    let c = client(Some(&pki.ca_file), true, Proxy::default(), &[]);
    let refusals = Arc::new(Mutex::new(Vec::new()));
    let seen = refusals.clone();
    c.set_observer(Arc::new(move |r| {
        seen.lock().unwrap().push((r.reason, r.address))
    }));
    let pool = Pool::new(c, endpoint(&format!("https://localhost:{}/", addr.port())));
    let e = get(&pool, "/").await.unwrap_err();
    assert!(matches!(e, NetError::Refused(_)), "{e}");
    assert!(e.to_string().contains("loopback address"), "{e}");
    assert_eq!(accepted.load(Ordering::SeqCst), 0);
    assert_eq!(refusals.lock().unwrap()[0].0, "address_not_allowed");
}

/// A CONNECT proxy that records the targets it was asked for.
async fn connect_proxy() -> (SocketAddr, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let targets = Arc::new(Mutex::new(Vec::new()));
    let seen = targets.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if tcp.read(&mut byte).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
                seen.lock().unwrap().push(target.clone());
                let port = target.rsplit(':').next().unwrap_or("0").to_string();
                let Ok(mut upstream) = TcpStream::connect(format!("127.0.0.1:{port}")).await else {
                    return;
                };
                tcp.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut upstream).await;
            });
        }
    });
    (addr, targets)
}

#[tokio::test]
async fn https_goes_through_the_proxy_by_name_except_for_no_proxy_hosts() {
    let pki = pki("mcp.remote.test", &[b"h2", b"http/1.1"]);
    let (addr, _) = tls_server(pki.server.clone()).await;
    let (proxy_addr, targets) = connect_proxy().await;
    let proxy = Proxy::parse(Some(&format!("http://{proxy_addr}")), "internal.test").unwrap();
    // The name is the proxy's to resolve (this machine cannot); the
    // certificate is checked against it end to end.
    let c = client(Some(&pki.ca_file), true, proxy, &[]);
    let pool = Pool::new(
        c.clone(),
        endpoint(&format!("https://mcp.remote.test:{}/", addr.port())),
    );
    assert_eq!(get(&pool, "/via").await.unwrap(), "HTTP/2.0 /via");
    assert_eq!(
        *targets.lock().unwrap(),
        [format!("mcp.remote.test:{}", addr.port())]
    );
    // A NO_PROXY host is connected to directly (and the guard judges it).
    let pool = Pool::new(c, endpoint("https://x.internal.test:1/"));
    let e = get(&pool, "/").await.unwrap_err().to_string();
    assert!(
        e.contains("resolve") || e.contains("x.internal.test"),
        "{e}"
    );
    assert_eq!(targets.lock().unwrap().len(), 1);
}
