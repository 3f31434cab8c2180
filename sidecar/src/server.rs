//! Accept loops for the MCP and admin listeners: HTTP/1.1 with
//! bounded headers and a header read timeout (slow clients cannot hold
//! connections open for free), over TLS when the listener has a certificate
//! (`crate::tls`; the handshake shares the header timeout).
//!
//! Stopping is graceful: the listener closes at once (a balancer or Service
//! moves on), and every open connection finishes the request it is serving,
//! streamed answer and relayed answer included, before `serve` returns. The
//! caller bounds how long that may take.

use std::future::Future;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::downstream::http::{Peer, ResponseBody};

pub async fn serve<F, Fut>(
    app: Arc<App>,
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    stop: CancellationToken,
    handler: F,
) where
    F: Fn(Arc<App>, Request<Incoming>) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = Response<ResponseBody>> + Send + 'static,
{
    // HTTP/1.1 only: MCP clients speak it, and sniffing for an HTTP/2
    // preface is a read hyper's header timeout does not cover.
    let mut builder = auto::Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(app.limits.header_read_timeout)
        .max_buf_size(app.limits.max_header_bytes.max(8192));
    let builder = Arc::new(builder);
    let connections = GracefulShutdown::new();
    loop {
        let (tcp, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stop.cancelled() => break,
        };
        let _ = tcp.set_nodelay(true);
        let peer = tcp.peer_addr().ok();
        let app = app.clone();
        let builder = builder.clone();
        let tls = tls.clone();
        let handshake_timeout = app.limits.header_read_timeout;
        let watcher = connections.watcher();
        let stop = stop.clone();
        tokio::spawn(async move {
            // The protocol sniffing before hyper's own header timeout has no
            // timeout of its own: a connection that sends nothing is dropped
            // here, and at once when the facade stops (it owes such a
            // connection nothing, and the stop waits for every watched one).
            let mut first = [0u8; 1];
            let sniffed = tokio::select! {
                sniffed = tokio::time::timeout(app.limits.header_read_timeout, tcp.peek(&mut first)) => sniffed,
                () = stop.cancelled() => return,
            };
            match sniffed {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
            let service = service_fn(move |mut req: Request<Incoming>| {
                let app = app.clone();
                if let Some(addr) = peer {
                    req.extensions_mut().insert(Peer(addr));
                }
                async move { Ok::<_, std::convert::Infallible>(handler(app, req).await) }
            });
            let served = match tls {
                None => {
                    watcher
                        .watch(builder.serve_connection(TokioIo::new(tcp), service))
                        .await
                }
                Some(acceptor) => {
                    let handshake = acceptor.accept(tcp);
                    match tokio::time::timeout(handshake_timeout, handshake).await {
                        Ok(Ok(stream)) => {
                            watcher
                                .watch(builder.serve_connection(TokioIo::new(stream), service))
                                .await
                        }
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    }
                }
            };
            if let Err(e) = served {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    connections.shutdown().await;
}
