//! The audit trail: one JSON line per tool call and per denial, with who,
//! what tool, which definition, how big, what was decided and how long it
//! took — never argument or result content (arguments only as a sha256 and a
//! size). Lines go through a bounded queue to a writer task: a slow sink
//! drops lines (counted in `mcpwarden_audit_dropped_total`) rather than ever
//! blocking a call.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use crate::metrics::Metrics;

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

/// One audit record. Field names are the contract of the audit log.
#[derive(Serialize, Debug, Default)]
pub struct Record<'a> {
    pub time: String,
    pub event: &'static str,
    pub call_id: String,
    pub session: String,
    pub subject: Option<&'a str>,
    pub auth: &'static str,
    pub role: Option<&'static str>,
    pub tool: Option<&'a str>,
    pub upstream_tool: Option<&'a str>,
    pub definition_hash: Option<&'a str>,
    pub args_sha256: Option<String>,
    pub args_bytes: u64,
    pub decision: &'static str,
    pub code: Option<i64>,
    pub reason: Option<&'static str>,
    pub duration_ms: f64,
    pub output_bytes: Option<u64>,
    pub truncated: bool,
    pub redactions: u32,
}

pub struct Audit {
    tx: Option<mpsc::Sender<Vec<u8>>>,
}

impl Audit {
    /// Start the writer task for `sink`.
    pub fn start(sink: AuditSink) -> std::io::Result<Audit> {
        let writer: Box<dyn AsyncWrite + Send + Unpin> = match &sink {
            AuditSink::Off => return Ok(Audit { tx: None }),
            AuditSink::Stdout => Box::new(tokio::io::stdout()),
            AuditSink::Stderr => Box::new(tokio::io::stderr()),
            AuditSink::File(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)?;
                Box::new(tokio::fs::File::from_std(file))
            }
        };
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(4096);
        tokio::spawn(async move {
            let mut out = BufWriter::new(writer);
            while let Some(line) = rx.recv().await {
                if out.write_all(&line).await.is_err() {
                    continue;
                }
                if rx.is_empty() && out.flush().await.is_err() {
                    continue;
                }
            }
            let _ = out.flush().await;
        });
        Ok(Audit { tx: Some(tx) })
    }

    /// Queue a record; never waits.
    /// Whether audit lines go anywhere (when not, callers skip building them).
    pub fn is_on(&self) -> bool {
        self.tx.is_some()
    }

    pub fn write(&self, record: &Record<'_>, metrics: &Metrics) {
        let Some(tx) = &self.tx else { return };
        let mut line = serde_json::to_vec(record).expect("audit records serialize");
        line.push(b'\n');
        if tx.try_send(line).is_err() {
            metrics.audit_dropped.inc();
        }
    }
}

/// RFC 3339 UTC time with milliseconds, without a date library.
pub fn now_rfc3339() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// A short, stable, non-reversible id for a session.
pub fn hash_session(id: &str) -> String {
    hex::encode(&Sha256::digest(id.as_bytes())[..8])
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }

    #[test]
    fn sink_parsing() {
        assert!(matches!(
            "file:/tmp/a".parse::<AuditSink>(),
            Ok(AuditSink::File(_))
        ));
        assert!("file:".parse::<AuditSink>().is_err());
        assert!("syslog".parse::<AuditSink>().is_err());
    }

    #[test]
    fn records_have_no_content_fields() {
        let r = Record {
            args_sha256: Some(sha256_hex(b"{}")),
            ..Default::default()
        };
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert!(!keys
            .iter()
            .any(|k| k.as_str() == "arguments" || k.as_str() == "result"));
    }
}
