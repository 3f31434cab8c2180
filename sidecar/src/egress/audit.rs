//! The egress proxy's audit trail: one JSON line per refusal and one per
//! finished tunnel or forwarded request — who asked (the client's name),
//! for which host and port, how it ended, bytes each way and how long it
//! took; never content. Versioned (`v`) like the facade's records and
//! described by `docs/egress-audit-record.v1.schema.json`.
//!
//! Lines go to stdout through a bounded queue and a writer thread; a full
//! queue drops the line (counted) rather than stall a connection.

use std::io::Write;
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::Arc;

use serde::Serialize;

use super::metrics::{EgressMetrics, Outcome};
use crate::gates::audit::now_rfc3339;

/// The version of the record's format.
pub const RECORD_VERSION: u32 = 1;

/// One egress audit record. Field names are the contract of the log.
#[derive(Serialize, Debug, Clone, Default)]
pub struct EgressRecord {
    pub v: u32,
    pub time: String,
    /// `egress_tunnel`, `egress_http` or `egress_refused`.
    pub event: &'static str,
    /// The authenticated client (`namespace/MCPServer`); absent when the
    /// request carried no valid credential.
    pub client: Option<String>,
    /// `CONNECT`, or the plain-HTTP method (from a fixed set; `other`).
    pub method: &'static str,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub outcome: &'static str,
    /// The status the proxy answered with.
    pub status: u16,
    /// The address connected to, or refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: f64,
    /// A sentence on a refusal or failure (never request content).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl EgressRecord {
    pub fn new(event: &'static str, outcome: Outcome, status: u16) -> EgressRecord {
        EgressRecord {
            v: RECORD_VERSION,
            time: now_rfc3339(),
            event,
            outcome: outcome.as_str(),
            status,
            method: "CONNECT",
            ..Default::default()
        }
    }
}

/// The methods a record names; others are `other`.
pub fn method_label(method: &hyper::Method) -> &'static str {
    const KNOWN: [&str; 9] = [
        "CONNECT", "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE",
    ];
    KNOWN
        .iter()
        .find(|m| **m == method.as_str())
        .copied()
        .unwrap_or("other")
}

/// Where records go.
#[derive(Clone)]
pub struct EgressAudit {
    tx: SyncSender<Vec<u8>>,
    metrics: Arc<EgressMetrics>,
}

impl EgressAudit {
    /// A writer thread on stdout.
    pub fn stdout(metrics: Arc<EgressMetrics>) -> EgressAudit {
        let (tx, rx) = sync_channel::<Vec<u8>>(8192);
        std::thread::Builder::new()
            .name("egress-audit".into())
            .spawn(move || {
                let mut out = std::io::stdout().lock();
                while let Ok(line) = rx.recv() {
                    let mut batch = line;
                    while let Ok(more) = rx.try_recv() {
                        batch.extend_from_slice(&more);
                    }
                    let _ = out.write_all(&batch).and_then(|_| out.flush());
                }
            })
            .expect("audit thread");
        EgressAudit { tx, metrics }
    }

    /// Count the outcome and write the record.
    pub fn write(&self, record: &EgressRecord) {
        let outcome = Outcome::ALL
            .iter()
            .find(|o| o.as_str() == record.outcome)
            .copied()
            .unwrap_or(Outcome::BadRequest);
        self.metrics
            .requests
            .with_label_values(&[outcome.as_str()])
            .inc();
        let mut line = serde_json::to_vec(record).expect("records serialize");
        line.push(b'\n');
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = self.tx.try_send(line) {
            self.metrics.audit_dropped.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_match_their_schema() {
        let schema: serde_json::Value = serde_json::from_str(include_str!(
            "../../../docs/egress-audit-record.v1.schema.json"
        ))
        .unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let mut tunnel = EgressRecord::new("egress_tunnel", Outcome::Tunnel, 200);
        tunnel.client = Some("team-a/fetch".into());
        tunnel.host = Some("pypi.org".into());
        tunnel.port = Some(443);
        tunnel.address = Some("151.101.0.223".into());
        tunnel.bytes_up = 512;
        tunnel.bytes_down = 1 << 20;
        tunnel.duration_ms = 12.5;
        let refused = EgressRecord::new("egress_refused", Outcome::Unauthenticated, 407);
        for record in [tunnel, refused] {
            let value = serde_json::to_value(&record).unwrap();
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{value}: {errors:?}");
        }
        // The schema is not vacuous: a record without an outcome fails it.
        let mut value =
            serde_json::to_value(EgressRecord::new("egress_refused", Outcome::Limited, 429))
                .unwrap();
        value.as_object_mut().unwrap().remove("outcome");
        assert!(!validator.is_valid(&value));
    }
}
