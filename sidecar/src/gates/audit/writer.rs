//! Where audit lines go: a bounded queue to a writer thread (stdout,
//! stderr, or a file rotated by size), and, with `--audit-http`, an HTTP
//! store. A slow sink drops lines (counted) rather than ever blocking a
//! call; lines that arrive within a few milliseconds share one write; the
//! queue is flushed before the facade exits.
//!
//! Where it sits: under [`super`], which builds the records; this only
//! carries their bytes to the sinks ([`crate::sinks`]).

use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

use super::Record;
use crate::metrics::Metrics;
use crate::sinks::file::{RotatingFile, Rotation};
use crate::sinks::http::HttpSink;

/// Where audit lines go.
#[derive(Clone, Debug)]
pub enum AuditSink {
    Stdout,
    Stderr,
    File(PathBuf),
    Off,
}

impl std::str::FromStr for AuditSink {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "stdout" => AuditSink::Stdout,
            "stderr" => AuditSink::Stderr,
            "off" => AuditSink::Off,
            other => match other.strip_prefix("file:") {
                Some(path) if !path.is_empty() => AuditSink::File(PathBuf::from(path)),
                _ => {
                    return Err(format!(
                        "audit sink must be stdout, stderr, off or file:PATH, not {other:?}"
                    ))
                }
            },
        })
    }
}

pub struct Audit {
    tx: Option<SyncSender<ToWriter>>,
    /// The HTTP store, when there is one.
    http: Option<Arc<HttpSink>>,
}

/// Every audit destination, as the command line set it.
#[derive(Clone, Debug)]
pub struct AuditConfig {
    pub sink: AuditSink,
    /// How a `file:` sink is rotated.
    pub rotation: Rotation,
    pub http: Option<crate::sinks::http::Settings>,
}

enum ToWriter {
    Line(Vec<u8>),
    /// Write out everything queued so far, then say so.
    Flush(mpsc::Sender<()>),
}

/// Lines queued before new ones are dropped.
const QUEUE_DEPTH: usize = 4096;
/// How long the writer lets lines gather after the first of a batch.
const BATCH_WINDOW: Duration = Duration::from_millis(5);

/// Where the writer thread writes.
enum Out {
    Stream(Box<dyn Write + Send>),
    File(RotatingFile),
}

impl Out {
    fn write_batch(&mut self, batch: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Stream(w) => {
                w.write_all(batch)?;
                w.flush()
            }
            Out::File(f) => f.write_lines(batch),
        }
    }
}

impl Audit {
    /// Start the writer thread for `config.sink` and, with an HTTP store,
    /// its sending task (on the current runtime).
    pub fn start(config: AuditConfig, metrics: &Metrics) -> std::io::Result<Audit> {
        let http = config
            .http
            .map(|settings| HttpSink::start(settings, metrics.audit_http_meters()));
        let out = match &config.sink {
            AuditSink::Off => return Ok(Audit { tx: None, http }),
            AuditSink::Stdout => Out::Stream(Box::new(std::io::stdout())),
            AuditSink::Stderr => Out::Stream(Box::new(std::io::stderr())),
            AuditSink::File(path) => Out::File(RotatingFile::open(path, config.rotation)?),
        };
        let dropped = metrics.audit_dropped("file");
        let (tx, rx) = mpsc::sync_channel(QUEUE_DEPTH);
        std::thread::Builder::new()
            .name("audit-writer".into())
            .spawn(move || write_lines(rx, out, dropped))?;
        Ok(Audit { tx: Some(tx), http })
    }

    /// Whether audit lines go anywhere (when not, callers skip building them).
    pub fn is_on(&self) -> bool {
        self.tx.is_some() || self.http.is_some()
    }

    /// Queue a record; never waits.
    pub fn write(&self, record: &Record<'_>, metrics: &Metrics) {
        if !self.is_on() {
            return;
        }
        let mut line = serde_json::to_vec(record).expect("audit records serialize");
        line.push(b'\n');
        if let Some(http) = &self.http {
            http.push(if self.tx.is_some() {
                line.clone()
            } else {
                std::mem::take(&mut line)
            });
        }
        let Some(tx) = &self.tx else { return };
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            tx.try_send(ToWriter::Line(line))
        {
            metrics.audit_dropped("queue").inc();
        }
    }

    /// Wait (at most `timeout`) until every line queued so far is written:
    /// the last thing the facade does before it exits.
    pub fn flush(&self, timeout: Duration) {
        let Some(tx) = &self.tx else { return };
        let (done_tx, done_rx) = mpsc::channel();
        if tx.send(ToWriter::Flush(done_tx)).is_ok() {
            let _ = done_rx.recv_timeout(timeout);
        }
    }

    /// Wait (at most `timeout`) for the HTTP store to take what is held.
    pub async fn flush_http(&self, timeout: Duration) {
        if let Some(http) = &self.http {
            http.flush(timeout).await;
            let left = http.pending();
            if left > 0 {
                tracing::warn!(
                    records = left,
                    "audit records not delivered to the HTTP store before exit"
                );
            }
        }
    }
}

fn write_lines(rx: mpsc::Receiver<ToWriter>, mut out: Out, dropped: prometheus::IntCounter) {
    let mut batch = Vec::with_capacity(64 * 1024);
    let mut flushed = Vec::new();
    let mut failing = false;
    // Blocks only while idle: a busy facade queues lines without waking anyone.
    while let Ok(first) = rx.recv() {
        let is_line = matches!(first, ToWriter::Line(_));
        take(first, &mut batch, &mut flushed);
        if is_line {
            std::thread::sleep(BATCH_WINDOW);
        }
        while let Ok(msg) = rx.try_recv() {
            take(msg, &mut batch, &mut flushed);
        }
        if !batch.is_empty() {
            match out.write_batch(&batch) {
                Ok(()) => failing = false,
                Err(e) => {
                    let lines = memchr::memchr_iter(b'\n', &batch).count();
                    dropped.inc_by(lines as u64);
                    if !failing {
                        tracing::warn!(error = %e, lines, "audit records dropped: the audit sink cannot be written");
                    }
                    failing = true;
                }
            }
            batch.clear();
        }
        for done in flushed.drain(..) {
            let _ = done.send(());
        }
    }
}

fn take(msg: ToWriter, batch: &mut Vec<u8>, flushed: &mut Vec<mpsc::Sender<()>>) {
    match msg {
        ToWriter::Line(line) => batch.extend_from_slice(&line),
        ToWriter::Flush(done) => flushed.push(done),
    }
}
