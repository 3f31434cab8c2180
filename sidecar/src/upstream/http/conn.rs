//! The HTTP link's keep-alive connections to the upstream server.
//!
//! Where it sits: [`super::post`] sends every client message through
//! [`Pool::send`]. Unlike a general-purpose client, nothing here runs on a
//! task of its own: the task that sends a request also drives the
//! connection (hyper's HTTP/1 `Connection` future) while it waits for the
//! answer and reads the body, so a call costs no wake-ups of other tasks.
//! A connection that will carry a long stream (SSE) is detached onto its own
//! task instead; one that finished an exchange goes back to the pool.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper::{Request, Response, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type Body = Full<Bytes>;
type Driver = Pin<Box<http1::Connection<TokioIo<TcpStream>, Body>>>;

/// Idle connections kept per link (beyond that, concurrent calls open
/// connections that close after their exchange).
const MAX_IDLE: usize = 16;
/// Idle connections are not reused after this: servers close theirs (Node
/// after 5 s), and a request sent as the server closes would be lost.
const IDLE_REUSE: Duration = Duration::from_secs(4);
/// A connection attempt that takes longer than this fails the request.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One answered request: the response headers and the connection its body
/// still arrives on (drive it while reading the body).
pub struct Exchange {
    pub resp: Response<Incoming>,
    pub conn: Conn,
}

pub struct Pool(Arc<Inner>);

struct Inner {
    host: String,
    port: u16,
    idle: Mutex<Vec<(Conn, Instant)>>,
}

impl Pool {
    /// A pool for `uri` (plain `http://` only: the upstream is on loopback
    /// in the pod, and the facade's own port is where TLS would end).
    pub fn new(uri: &Uri) -> Result<Pool, String> {
        match uri.scheme_str() {
            Some("http") | None => {}
            Some(other) => {
                return Err(format!(
                    "the upstream URL scheme `{other}` is not supported; use http://"
                ))
            }
        }
        let host = uri
            .host()
            .ok_or("the upstream URL has no host")?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        Ok(Pool(Arc::new(Inner {
            host,
            port: uri.port_u16().unwrap_or(80),
            idle: Mutex::new(Vec::new()),
        })))
    }

    /// Send `req` and wait for the response headers. A request that a reused
    /// connection could not even take (the server had closed it) is sent
    /// again on a new connection; one that may have reached the server is not.
    pub async fn send(&self, req: Request<Body>) -> Result<Exchange, String> {
        let (mut conn, reused) = match self.checkout().await {
            Some(conn) => (conn, true),
            None => (self.connect().await?, false),
        };
        let sent = conn.sender.try_send_request(req);
        match conn.driver.drive(sent).await {
            Ok(resp) => Ok(Exchange { resp, conn }),
            Err(mut e) => match e.take_message() {
                Some(req) if reused => {
                    let mut conn = self.connect().await?;
                    let sent = conn.sender.send_request(req);
                    match conn.driver.drive(sent).await {
                        Ok(resp) => Ok(Exchange { resp, conn }),
                        Err(e) => Err(error_chain(&e)),
                    }
                }
                _ => Err(error_chain(e.error())),
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
            let ready = conn.sender.ready();
            if conn.driver.drive(ready).await.is_ok() && conn.driver.alive() {
                return Some(conn);
            }
        }
    }

    async fn connect(&self) -> Result<Conn, String> {
        let addr = (self.0.host.as_str(), self.0.port);
        let tcp = match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(tcp)) => tcp,
            Ok(Err(e)) => return Err(format!("connect to {}:{}: {e}", self.0.host, self.0.port)),
            Err(_) => {
                return Err(format!(
                    "connect to {}:{}: timed out",
                    self.0.host, self.0.port
                ))
            }
        };
        let _ = tcp.set_nodelay(true);
        let (sender, driver) = http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| error_chain(&e))?;
        Ok(Conn {
            sender,
            driver: Driving(Some(Box::pin(driver))),
        })
    }

    /// The exchange on `conn` is complete: keep it for the next one.
    pub fn release(&self, conn: Conn) {
        if !conn.driver.alive() || conn.sender.is_closed() {
            return;
        }
        let mut idle = self.0.idle.lock().unwrap();
        if idle.len() < MAX_IDLE {
            idle.push((conn, Instant::now()));
        }
    }
}

/// One connection: the request side and the connection future that moves
/// its bytes, polled by whoever is using it.
pub struct Conn {
    sender: http1::SendRequest<Body>,
    driver: Driving,
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
        self.driver.drive(fut).await
    }

    /// The body will be read for a long time (a stream): let the connection
    /// run on its own task; it closes when the body is done.
    pub fn detach(self) {
        if let Some(driver) = self.driver.0 {
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
