//! The admission webhook the operator serves over TLS (`run --mode
//! all|webhook`, port 8443; contract in `operator/RBAC.md`).
//!
//! ```text
//! API server ──HTTPS──▶ serve (TLS: tokio-rustls) ─▶ route
//!     POST /mutate-mcpserver   ─▶ admission::review(Mutate)   records mcpwarden.dev/approved-by
//!     POST /validate-mcpserver ─▶ admission::review(Validate) ─▶ Authorizer (SubjectAccessReviews:
//!                                 approve on mcpservers/approval; update on mcpservers)
//!     POST /validate-profile   ─▶ profiles::review_profile   refuses a ToolProfile/SandboxProfile
//!                                 the facade's policy loader would refuse, and the deletion of
//!                                 one an MCPServer uses (ProfileUsers: lists MCPServers)
//!     POST /validate-gateway   ─▶ gateway::review_gateway   refuses an MCPGateway the operator
//!                                 could never build (duplicate backends, colliding prefixes)
//!     GET  /healthz            ─▶ ok
//! ```
//! [`certs`] loads the serving certificate from a mounted Secret directory,
//! or generates one (shared by the replicas through a Secret) and writes its
//! CA into the webhook configurations' `caBundle`.

pub mod admission;
pub mod certs;
pub mod duties;
pub mod gateway;
pub mod profiles;

use std::{convert::Infallible, net::SocketAddr, sync::Arc};

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{body::Incoming, service::service_fn, Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::{api::PostParams, Api, Client};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info, warn};

pub use admission::{Access, AccessDecision, Authorizer, Mode, UserInfo};
pub use profiles::{KubeProfileUsers, ProfileUsers};

/// Path of the validating webhook (contract).
pub const VALIDATE_PATH: &str = "/validate-mcpserver";
/// Path of the mutating webhook (contract).
pub const MUTATE_PATH: &str = "/mutate-mcpserver";
/// The largest AdmissionReview accepted (the API server sends at most ~3 MiB objects).
const MAX_BODY: usize = 4 * 1024 * 1024;

/// Serving failed to start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// The real [`Authorizer`]: a SubjectAccessReview through the API server.
pub struct KubeAuthorizer {
    /// The API client.
    pub client: Client,
    /// `approval.allowSelfApproval`: someone who changed covered content
    /// may approve it.
    pub allow_self_approval: bool,
}

impl Authorizer for KubeAuthorizer {
    fn allowed<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
        name: &'a str,
        access: Access,
    ) -> BoxFuture<'a, Result<AccessDecision, String>> {
        let (verb, subresource) = access.verb_and_subresource();
        let (group, resource, named) = access.resource();
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.username.clone()),
                    uid: user.uid.clone(),
                    groups: Some(user.groups.clone()),
                    extra: Some(user.extra.clone()),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(group.into()),
                        resource: Some(resource.into()),
                        subresource: subresource.map(Into::into),
                        verb: Some(verb.into()),
                        namespace: Some(namespace.into()),
                        name: named.then(|| name.into()),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
            let answer = api
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| e.to_string())?;
            let status = answer.status.unwrap_or_default();
            let reason = [status.reason, status.evaluation_error]
                .into_iter()
                .flatten()
                .filter(|s| !s.is_empty())
                .collect::<Vec<_>>()
                .join("; ");
            Ok(AccessDecision {
                allowed: status.allowed && !status.denied.unwrap_or(false),
                reason,
            })
        })
    }

    fn allow_self_approval(&self) -> bool {
        self.allow_self_approval
    }
}

fn reply(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a static response builds")
}

/// Route one HTTP request (TLS already terminated).
pub async fn handle(
    request: Request<Incoming>,
    authorizer: Arc<dyn Authorizer>,
    users: Arc<dyn ProfileUsers>,
) -> Response<Full<Bytes>> {
    let mode = match (request.method(), request.uri().path()) {
        (&Method::GET, "/healthz") => return reply(StatusCode::OK, "text/plain", b"ok\n".to_vec()),
        (&Method::POST, VALIDATE_PATH) => Mode::Validate,
        (&Method::POST, MUTATE_PATH) => Mode::Mutate,
        (&Method::POST, gateway::VALIDATE_GATEWAY_PATH) => {
            return match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => match gateway::review_gateway(&body.to_bytes()) {
                    Ok(review) => {
                        let bytes = serde_json::to_vec(&review).expect("JSON serializes");
                        reply(StatusCode::OK, "application/json", bytes)
                    }
                    Err(malformed) => {
                        let msg = format!("{malformed}\n");
                        reply(StatusCode::BAD_REQUEST, "text/plain", msg.into_bytes())
                    }
                },
                Err(e) => {
                    let msg = format!("malformed AdmissionReview: cannot read the body: {e}\n");
                    reply(StatusCode::BAD_REQUEST, "text/plain", msg.into_bytes())
                }
            };
        }
        (&Method::POST, profiles::VALIDATE_PROFILE_PATH) => {
            return match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => {
                    match profiles::review_profile(&body.to_bytes(), users.as_ref()).await {
                        Ok(review) => {
                            if review["response"]["allowed"] == false {
                                info!(
                                    message = review["response"]["status"]["message"]
                                        .as_str()
                                        .unwrap_or_default(),
                                    "profile refused"
                                );
                            }
                            let bytes = serde_json::to_vec(&review).expect("JSON serializes");
                            reply(StatusCode::OK, "application/json", bytes)
                        }
                        Err(malformed) => {
                            let msg = format!("{malformed}\n");
                            reply(StatusCode::BAD_REQUEST, "text/plain", msg.into_bytes())
                        }
                    }
                }
                Err(e) => {
                    let msg = format!("malformed AdmissionReview: cannot read the body: {e}\n");
                    reply(StatusCode::BAD_REQUEST, "text/plain", msg.into_bytes())
                }
            };
        }
        (_, path) => {
            let msg = format!("no webhook at {path}; use POST {VALIDATE_PATH} or {MUTATE_PATH}\n");
            return reply(StatusCode::NOT_FOUND, "text/plain", msg.into_bytes());
        }
    };
    let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            let msg = format!("malformed AdmissionReview: cannot read the body: {e}\n");
            return reply(StatusCode::BAD_REQUEST, "text/plain", msg.into_bytes());
        }
    };
    match admission::review(&body, mode, authorizer.as_ref()).await {
        Ok(review) => {
            let response = &review["response"];
            if response["allowed"] == false {
                info!(
                    ?mode,
                    message = response["status"]["message"].as_str().unwrap_or_default(),
                    "admission denied"
                );
            }
            let bytes = serde_json::to_vec(&review).expect("JSON serializes");
            reply(StatusCode::OK, "application/json", bytes)
        }
        Err(malformed) => {
            warn!(error = %malformed, "bad admission request");
            let bytes = serde_json::to_vec(&serde_json::json!({"error": malformed.to_string()}))
                .expect("JSON serializes");
            reply(StatusCode::BAD_REQUEST, "application/json", bytes)
        }
    }
}

/// Bind `addr` and serve HTTPS until the future is dropped.
pub async fn serve(
    addr: SocketAddr,
    tls: Arc<rustls::ServerConfig>,
    authorizer: Arc<dyn Authorizer>,
    users: Arc<dyn ProfileUsers>,
) -> Result<(), ServeError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })?;
    serve_on(listener, tls, authorizer, users).await;
    Ok(())
}

/// Serve HTTPS on a bound listener (tests bind port 0).
pub async fn serve_on(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    authorizer: Arc<dyn Authorizer>,
    users: Arc<dyn ProfileUsers>,
) {
    let acceptor = TlsAcceptor::from(tls);
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "admission webhook listening (HTTPS)");
    }
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                warn!(error = %e, "accept failed");
                continue;
            }
        };
        let (acceptor, authorizer, users) = (acceptor.clone(), authorizer.clone(), users.clone());
        tokio::spawn(async move {
            let stream = match acceptor.accept(tcp).await {
                Ok(s) => s,
                Err(e) => return debug!(%peer, error = %e, "TLS handshake failed"),
            };
            let service = service_fn(move |req| {
                let (authorizer, users) = (authorizer.clone(), users.clone());
                async move { Ok::<_, Infallible>(handle(req, authorizer, users).await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}
