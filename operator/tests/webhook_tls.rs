//! The admission webhook over real HTTPS: a certificate generated the way
//! self-generated mode does, the server bound on loopback, and a TLS client
//! that trusts only that certificate (as the API server trusts `caBundle`)
//! posting real AdmissionReviews.

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use mcp_warden_operator::reconcile::controller::ProfileKind;
use mcp_warden_operator::webhook::{
    self, certs, Access, AccessDecision, Authorizer, ProfileUsers, UserInfo, MUTATE_PATH,
    VALIDATE_PATH,
};
use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
use serde_json::{json, Value};

struct OnlyAlice;

impl Authorizer for OnlyAlice {
    fn allowed<'a>(
        &'a self,
        user: &'a UserInfo,
        _namespace: &'a str,
        _name: &'a str,
        access: Access,
    ) -> BoxFuture<'a, Result<AccessDecision, String>> {
        // alice approves and updates servers; she cannot edit profiles or
        // Secrets, so she may approve changes no record attributes.
        let allowed = user.username == "alice" && !matches!(access, Access::Edit(_));
        Box::pin(async move {
            Ok(AccessDecision {
                allowed,
                reason: String::new(),
            })
        })
    }
}

/// No MCPServer uses any profile (this test posts no profile deletion).
struct NoUsers;

impl ProfileUsers for NoUsers {
    fn servers_using<'a>(
        &'a self,
        _: &'a str,
        _: ProfileKind,
        _: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

async fn post(
    addr: std::net::SocketAddr,
    ca_pem: &str,
    path: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The name the certificate was issued for, as with <svc>.<ns>.svc.
    let name = ServerName::try_from("mcp-warden-webhook.mcp-warden-system.svc").unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .expect("TLS handshake with the caBundle");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = Request::post(path)
        .header("host", "mcp-warden-webhook.mcp-warden-system.svc")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn admission_review(user: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "b1e5c1a4-0000-4000-8000-000000000001",
            "kind": {"group": "mcpwarden.dev", "version": "v1alpha1", "kind": "MCPServer"},
            "resource": {"group": "mcpwarden.dev", "version": "v1alpha1", "resource": "mcpservers"},
            "requestKind": {"group": "mcpwarden.dev", "version": "v1alpha1", "kind": "MCPServer"},
            "requestResource": {"group": "mcpwarden.dev", "version": "v1alpha1", "resource": "mcpservers"},
            "name": "fetch", "namespace": "team-a", "operation": "UPDATE",
            "userInfo": {"username": user, "uid": "u-1", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                       "metadata": {"name": "fetch", "namespace": "team-a",
                                    "annotations": {"mcpwarden.dev/approve": "sha256:abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabca"}},
                       "spec": {"image": "i", "toolProfileRef": {"name": "p"}}},
            "oldObject": {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                          "metadata": {"name": "fetch", "namespace": "team-a"},
                          "spec": {"image": "i", "toolProfileRef": {"name": "p"}}},
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}
        }
    }))
    .unwrap()
}

#[tokio::test]
async fn the_tls_endpoint_answers_real_admission_reviews() {
    let pair = certs::generate(certs::service_dns_names(
        "mcp-warden-webhook",
        "mcp-warden-system",
        "cluster.local",
    ))
    .unwrap();
    let tls = certs::server_config(&pair).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(webhook::serve_on(
        listener,
        tls,
        Arc::new(OnlyAlice),
        Arc::new(NoUsers),
    ));

    let (status, review) = post(
        addr,
        &pair.cert_pem,
        VALIDATE_PATH,
        admission_review("alice"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(review["kind"], "AdmissionReview");
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        review["response"]["uid"],
        "b1e5c1a4-0000-4000-8000-000000000001"
    );
    assert_eq!(review["response"]["allowed"], true);

    let (_, review) = post(
        addr,
        &pair.cert_pem,
        VALIDATE_PATH,
        admission_review("mallory"),
    )
    .await;
    assert_eq!(review["response"]["allowed"], false);
    assert_eq!(review["response"]["status"]["code"], 403);

    let (_, review) = post(addr, &pair.cert_pem, MUTATE_PATH, admission_review("alice")).await;
    assert_eq!(review["response"]["patchType"], "JSONPatch");

    let (status, error) = post(
        addr,
        &pair.cert_pem,
        VALIDATE_PATH,
        b"{\"kind\": 1".to_vec(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .starts_with("malformed AdmissionReview"),
        "{error}"
    );

    // A client that does not trust this certificate cannot talk to it.
    let other = certs::generate(vec!["elsewhere.svc".into()]).unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(other.cert_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let refused = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(
            ServerName::try_from("mcp-warden-webhook.mcp-warden-system.svc").unwrap(),
            tcp,
        )
        .await;
    assert!(
        refused.is_err(),
        "an untrusted certificate must fail the handshake"
    );
    server.abort();
}
