//! Keep-alive connections to one endpoint (an upstream link's, or a token
//! endpoint's).
//!
//! Where it sits: [`crate::upstream::http`] sends every client message
//! through [`Pool::send`]. Over HTTP/1.1, nothing here runs on a task of
//! its own: the task that sends a request also drives the connection
//! (hyper's HTTP/1 `Connection` future) while it waits for the answer and
//! reads the body, so a call costs no wake-ups of other tasks. A connection
//! that will carry a long stream (SSE) is detached onto its own task
//! instead; one that finished an exchange goes back to the pool.
//!
//! When a TLS server chooses HTTP/2 (ALPN), the pool holds one connection,
//! driven on a task of its own, and every request is a stream on it; a
//! closed one is replaced on the next request.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper::header::HOST;
use hyper::{Request, Response, Uri};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::tls::Io;
use super::{Client, Endpoint, NetError};

type Body = Full<Bytes>;
type Driver = Pin<Box<http1::Connection<TokioIo<Io>, Body>>>;

/// Idle connections kept per pool (beyond that, concurrent calls open
/// connections that close after their exchange).
const MAX_IDLE: usize = 16;
/// Idle connections are not reused after this: servers close theirs (Node
/// after 5 s), and a request sent as the server closes would be lost.
const IDLE_REUSE: Duration = Duration::from_secs(4);
/// HTTP/2 pings on a connection with streams, to notice a dead peer.
const H2_KEEPALIVE: Duration = Duration::from_secs(20);

/// One answered request: the response headers and the connection its body
/// still arrives on (drive it while reading the body).
pub struct Exchange {
    pub resp: Response<Incoming>,
    pub conn: Conn,
}

pub struct Pool(Arc<Inner>);

struct Inner {
    client: Arc<Client>,
    endpoint: Endpoint,
    idle: Mutex<Vec<(Conn, Instant)>>,
    /// The HTTP/2 connection, once the server chose HTTP/2.
    h2: Mutex<Option<http2::SendRequest<Body>>>,
}

impl Pool {
    pub fn new(client: Arc<Client>, endpoint: Endpoint) -> Pool {
        Pool(Arc::new(Inner {
            client,
            endpoint,
            idle: Mutex::new(Vec::new()),
            h2: Mutex::new(None),
        }))
    }

    pub fn endpoint(&self) -> &Endpoint {
        &self.0.endpoint
    }

    pub fn client(&self) -> &Arc<Client> {
        &self.0.client
    }

    /// Send `req` (origin-form URI, `Host` header) and wait for the response
    /// headers. A request that a reused connection could not even take (the
    /// server had closed it) is sent again on a new connection; one that may
    /// have reached the server is not.
    pub async fn send(&self, req: Request<Body>) -> Result<Exchange, NetError> {
        if let Some(h2) = self.h2_sender() {
            return self.send_h2(h2, req, true).await;
        }
        let (conn, reused) = match self.checkout().await {
            Some(conn) => (conn, true),
            None => (self.connect().await?, false),
        };
        let mut conn = match conn.kind {
            Kind::H2(h2) => return self.send_h2(h2, req, false).await,
            kind => Conn { kind },
        };
        let Kind::H1 { sender, driver } = &mut conn.kind else {
            unreachable!("HTTP/2 was sent above")
        };
        let sent = sender.try_send_request(req);
        match driver.drive(sent).await {
            Ok(resp) => Ok(Exchange { resp, conn }),
            Err(mut e) => match e.take_message() {
                Some(req) if reused => {
                    let conn = self.connect().await?;
                    match conn.kind {
                        Kind::H2(h2) => self.send_h2(h2, req, false).await,
                        Kind::H1 {
                            mut sender,
                            mut driver,
                        } => {
                            let sent = sender.send_request(req);
                            match driver.drive(sent).await {
                                Ok(resp) => Ok(Exchange {
                                    resp,
                                    conn: Conn {
                                        kind: Kind::H1 { sender, driver },
                                    },
                                }),
                                Err(e) => Err(NetError::Http(error_chain(&e))),
                            }
                        }
                    }
                }
                _ => Err(NetError::Http(error_chain(e.error()))),
            },
        }
    }

    fn h2_sender(&self) -> Option<http2::SendRequest<Body>> {
        let mut h2 = self.0.h2.lock().unwrap();
        match h2.as_ref() {
            Some(s) if !s.is_closed() => Some(s.clone()),
            Some(_) => {
                *h2 = None;
                None
            }
            None => None,
        }
    }

    async fn send_h2(
        &self,
        mut h2: http2::SendRequest<Body>,
        mut req: Request<Body>,
        reused: bool,
    ) -> Result<Exchange, NetError> {
        absolute_form(&mut req, &self.0.endpoint);
        match h2.try_send_request(req).await {
            Ok(resp) => Ok(Exchange {
                resp,
                conn: Conn { kind: Kind::H2(h2) },
            }),
            Err(mut e) => match e.take_message() {
                Some(req) if reused => {
                    self.0.h2.lock().unwrap().take();
                    let conn = self.connect().await?;
                    match conn.kind {
                        Kind::H2(mut h2) => match h2.send_request(req).await {
                            Ok(resp) => Ok(Exchange {
                                resp,
                                conn: Conn { kind: Kind::H2(h2) },
                            }),
                            Err(e) => Err(NetError::Http(error_chain(&e))),
                        },
                        Kind::H1 { .. } => Err(NetError::Http(
                            "the server stopped offering HTTP/2; retry".into(),
                        )),
                    }
                }
                _ => Err(NetError::Http(error_chain(e.error()))),
            },
        }
    }

    /// An idle connection that is still open and ready for a request.
    async fn checkout(&self) -> Option<Conn> {
        loop {
            let (mut conn, since) = self.0.idle.lock().unwrap().pop()?;
            if since.elapsed() > IDLE_REUSE {
                continue;
            }
            let Kind::H1 { sender, driver } = &mut conn.kind else {
                continue;
            };
            let ready = sender.ready();
            if driver.drive(ready).await.is_ok() && driver.alive() {
                return Some(conn);
            }
        }
    }

    async fn connect(&self) -> Result<Conn, NetError> {
        let io = self.0.client.open(&self.0.endpoint).await?;
        if io.is_h2() {
            let (sender, connection) = http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .keep_alive_interval(H2_KEEPALIVE)
                .keep_alive_timeout(Duration::from_secs(10))
                .handshake(TokioIo::new(io))
                .await
                .map_err(|e| NetError::Http(error_chain(&e)))?;
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(error = %e, "upstream HTTP/2 connection ended");
                }
            });
            *self.0.h2.lock().unwrap() = Some(sender.clone());
            return Ok(Conn {
                kind: Kind::H2(sender),
            });
        }
        let (sender, driver) = http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| NetError::Http(error_chain(&e)))?;
        Ok(Conn {
            kind: Kind::H1 {
                sender,
                driver: Driving(Some(Box::pin(driver))),
            },
        })
    }

    /// The exchange on `conn` is complete: keep it for the next one.
    pub fn release(&self, conn: Conn) {
        let Kind::H1 { sender, driver } = &conn.kind else {
            return;
        };
        if !driver.alive() || sender.is_closed() {
            return;
        }
        let mut idle = self.0.idle.lock().unwrap();
        if idle.len() < MAX_IDLE {
            idle.push((conn, Instant::now()));
        }
    }
}

/// HTTP/2 names the target in `:scheme` and `:authority`, from the URI.
fn absolute_form(req: &mut Request<Body>, endpoint: &Endpoint) {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let scheme = if endpoint.tls { "https" } else { "http" };
    if let Ok(uri) = Uri::builder()
        .scheme(scheme)
        .authority(endpoint.authority.as_str())
        .path_and_query(path)
        .build()
    {
        *req.uri_mut() = uri;
    }
    req.headers_mut().remove(HOST);
}

/// One connection: the request side and, for HTTP/1.1, the connection
/// future that moves its bytes, polled by whoever is using it.
pub struct Conn {
    kind: Kind,
}

enum Kind {
    H1 {
        sender: http1::SendRequest<Body>,
        driver: Driving,
    },
    /// A stream of the shared HTTP/2 connection (driven on its own task).
    H2(http2::SendRequest<Body>),
}

/// The connection future; `None` once the connection has ended.
struct Driving(Option<Driver>);

impl Driving {
    fn alive(&self) -> bool {
        self.0.is_some()
    }

    /// Run `fut` while driving the connection. The connection ending does
    /// not end `fut`: hyper then finishes it with what arrived, or an error.
    async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        tokio::pin!(fut);
        loop {
            let Some(driver) = self.0.as_mut() else {
                return fut.await;
            };
            tokio::select! {
                biased;
                out = &mut fut => return out,
                end = driver.as_mut() => {
                    if let Err(e) = end {
                        tracing::debug!(error = %e, "upstream connection ended");
                    }
                    self.0 = None;
                }
            }
        }
    }
}

impl Conn {
    /// Run `fut` (reading a body that arrives on this connection) while
    /// driving the connection.
    pub async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        match &mut self.kind {
            Kind::H1 { driver, .. } => driver.drive(fut).await,
            Kind::H2(_) => fut.await,
        }
    }

    /// The body will be read for a long time (a stream): let the connection
    /// run on its own task; it closes when the body is done.
    pub fn detach(self) {
        if let Kind::H1 {
            driver: Driving(Some(driver)),
            ..
        } = self.kind
        {
            tokio::spawn(async move {
                if let Err(e) = driver.await {
                    tracing::debug!(error = %e, "upstream stream connection ended");
                }
            });
        }
    }
}

pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
