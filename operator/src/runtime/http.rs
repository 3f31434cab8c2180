//! The admin HTTP server: `/metrics` (Prometheus text), `/healthz` (the
//! process is alive) and `/readyz` (connected to the API server; standby
//! replicas are ready too, so a rollout is not blocked by leader election).

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{body::Incoming, service::service_fn, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tracing::{info, warn};

use super::metrics::Metrics;

/// Shared state of the admin endpoints.
#[derive(Clone, Default)]
pub struct Admin {
    /// Metrics to expose.
    pub metrics: Metrics,
    /// Set once the operator is connected and running.
    pub ready: Arc<AtomicBool>,
}

/// Answer one request.
pub fn respond(admin: &Admin, path: &str) -> Response<Full<Bytes>> {
    let (status, body) = match path {
        "/metrics" => (StatusCode::OK, admin.metrics.render()),
        "/healthz" => (StatusCode::OK, "ok\n".to_string()),
        "/readyz" if admin.ready.load(Ordering::Relaxed) => (StatusCode::OK, "ok\n".to_string()),
        "/readyz" => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".to_string()),
        _ => (StatusCode::NOT_FOUND, "not found\n".to_string()),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

/// Serve until the task is dropped.
pub async fn serve(addr: SocketAddr, admin: Admin) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    info!(%addr, "admin endpoints listening");
    loop {
        let (stream, _) = listener.accept().await?;
        let admin = admin.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let response = respond(&admin, req.uri().path());
                async move { Ok::<_, Infallible>(response) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                warn!(error = %e, "admin connection failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_follows_the_flag_and_metrics_render() {
        let admin = Admin::default();
        assert_eq!(respond(&admin, "/healthz").status(), StatusCode::OK);
        assert_eq!(
            respond(&admin, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        admin.ready.store(true, Ordering::Relaxed);
        assert_eq!(respond(&admin, "/readyz").status(), StatusCode::OK);
        assert_eq!(respond(&admin, "/metrics").status(), StatusCode::OK);
        assert_eq!(respond(&admin, "/nope").status(), StatusCode::NOT_FOUND);
    }
}
