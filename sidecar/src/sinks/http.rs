//! The audit HTTP sink: records POSTed to a store in batches, retried with
//! backoff, held meanwhile in a bounded buffer; dropped (counted, logged)
//! only when that buffer is full. Never in a call's way.
//!
//! Where it sits: [`crate::gates::audit::Audit::write`] pushes each
//! record's line here (a lock and a wake-up, nothing more); a task sends
//! them. A batch is up to `batch` lines as one `application/x-ndjson` body,
//! sent once `batch` lines wait or `linger` has passed since the first.
//! Lines leave the buffer only once the store answered 2xx, so an outage
//! delays them, in order, until the buffer's `capacity` is reached; from
//! then on new lines are dropped: `mcpwarden_audit_dropped_total{sink="http"}`
//! counts each, and a warning (at most one per 10 s) says how many.
//! Plain `http://` only: send to a forwarder in the pod or on the node.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use prometheus::{IntCounter, IntGauge};

/// How the HTTP sink sends.
#[derive(Clone, Debug)]
pub struct Settings {
    pub url: hyper::Uri,
    /// Lines held while the store is unreachable; more are dropped.
    pub capacity: usize,
    /// Lines per POST, at most.
    pub batch: usize,
    /// How long the first waiting line waits for others to share its POST.
    pub linger: Duration,
    /// `Authorization: Bearer` for the store, if it wants one.
    pub token: Option<String>,
    /// One POST's limit (connect, send, answer).
    pub timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl Settings {
    pub fn new(url: hyper::Uri) -> Result<Settings, String> {
        if url.scheme_str() != Some("http") || url.host().is_none() {
            return Err(format!(
                "--audit-http must be an http:// URL with a host (got `{url}`): send to a forwarder in the pod or on the node"
            ));
        }
        Ok(Settings {
            url,
            capacity: 10_000,
            batch: 500,
            linger: Duration::from_millis(200),
            token: None,
            timeout: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(200),
            backoff_max: Duration::from_secs(10),
        })
    }
}

/// The sink's meters (registered by [`crate::metrics::Metrics`]).
#[derive(Clone)]
pub struct Meters {
    pub dropped: IntCounter,
    pub buffered: IntGauge,
    pub delivered: IntCounter,
    pub failures: IntCounter,
}

struct Buffer {
    lines: VecDeque<Vec<u8>>,
    /// Dropped since the last warning.
    unlogged: u64,
    last_warning: Option<Instant>,
}

pub struct HttpSink {
    settings: Settings,
    meters: Meters,
    buffer: Mutex<Buffer>,
    wake: tokio::sync::Notify,
}

const WARN_EVERY: Duration = Duration::from_secs(10);

impl HttpSink {
    /// Start the sending task (on the current runtime).
    pub fn start(settings: Settings, meters: Meters) -> Arc<HttpSink> {
        let sink = Arc::new(HttpSink {
            buffer: Mutex::new(Buffer {
                lines: VecDeque::with_capacity(settings.batch.min(settings.capacity)),
                unlogged: 0,
                last_warning: None,
            }),
            settings,
            meters,
            wake: tokio::sync::Notify::new(),
        });
        tokio::spawn(sink.clone().send_loop());
        sink
    }

    /// Hold `line` for sending; never waits. Dropped when the buffer is full.
    pub fn push(&self, line: Vec<u8>) {
        let mut b = self.buffer.lock().unwrap();
        if b.lines.len() >= self.settings.capacity {
            b.unlogged += 1;
            self.meters.dropped.inc();
            let due = b.last_warning.is_none_or(|t| t.elapsed() >= WARN_EVERY);
            if due {
                tracing::warn!(
                    dropped = b.unlogged,
                    capacity = self.settings.capacity,
                    url = %self.settings.url,
                    "audit records dropped: the HTTP sink's buffer is full (the store is down or too slow)"
                );
                b.unlogged = 0;
                b.last_warning = Some(Instant::now());
            }
            return;
        }
        b.lines.push_back(line);
        self.meters.buffered.set(b.lines.len() as i64);
        let first = b.lines.len() == 1;
        drop(b);
        if first {
            self.wake.notify_one();
        }
    }

    /// Lines not yet delivered.
    pub fn pending(&self) -> usize {
        self.buffer.lock().unwrap().lines.len()
    }

    /// Wait (at most `timeout`) until every held line is delivered.
    pub async fn flush(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        self.wake.notify_one();
        while self.pending() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn send_loop(self: Arc<Self>) {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(self.settings.timeout));
        let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
        let mut backoff = self.settings.backoff_initial;
        let mut failing_since: Option<Instant> = None;
        loop {
            if self.pending() == 0 {
                self.wake.notified().await;
                continue;
            }
            // Let a batch gather, unless one is already full.
            if self.pending() < self.settings.batch {
                tokio::time::sleep(self.settings.linger).await;
            }
            let (body, n) = {
                let b = self.buffer.lock().unwrap();
                let n = b.lines.len().min(self.settings.batch);
                let mut body = Vec::with_capacity(b.lines.iter().take(n).map(Vec::len).sum());
                for line in b.lines.iter().take(n) {
                    body.extend_from_slice(line);
                }
                (body, n)
            };
            match self.post(&client, body).await {
                Ok(()) => {
                    let mut b = self.buffer.lock().unwrap();
                    b.lines.drain(..n);
                    self.meters.buffered.set(b.lines.len() as i64);
                    drop(b);
                    self.meters.delivered.inc_by(n as u64);
                    if let Some(since) = failing_since.take() {
                        tracing::info!(
                            down_secs = since.elapsed().as_secs(),
                            "audit HTTP sink: the store answers again"
                        );
                    }
                    backoff = self.settings.backoff_initial;
                }
                Err(why) => {
                    self.meters.failures.inc();
                    if failing_since.is_none() {
                        failing_since = Some(Instant::now());
                        tracing::warn!(
                            url = %self.settings.url,
                            error = %why,
                            buffered = self.pending(),
                            "audit HTTP sink: delivery failed; holding records and retrying"
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.settings.backoff_max);
                }
            }
        }
    }

    async fn post(
        &self,
        client: &Client<HttpConnector, Full<Bytes>>,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let mut req = hyper::Request::post(self.settings.url.clone())
            .header(CONTENT_TYPE, "application/x-ndjson");
        if let Some(token) = &self.settings.token {
            if let Ok(v) = HeaderValue::from_str(&format!("Bearer {token}")) {
                req = req.header(AUTHORIZATION, v);
            }
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let exchange = async {
            let resp = client.request(req).await.map_err(|e| e.to_string())?;
            let status = resp.status();
            let _ = resp.into_body().collect().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the store answered {status}"))
            }
        };
        tokio::time::timeout(self.settings.timeout, exchange)
            .await
            .map_err(|_| format!("no answer within {:?}", self.settings.timeout))?
    }
}
