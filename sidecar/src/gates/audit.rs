//! The audit trail: one JSON line per tool call, resource read, prompt get,
//! completion and denial, and each held stream the facade ended itself, with who (issuer and subject), what tool or
//! prompt, which definition, how big, what was decided and how long it
//! took — never argument or result content (arguments and resource URIs
//! only as a sha256 and a size). The record's format is versioned (`v`) and
//! described by `docs/audit-record.v1.schema.json`; a test checks records
//! against it. Lines go through a bounded queue to a writer thread (stdout,
//! stderr, or a file rotated by size, [`crate::sinks::file`]), and, with
//! `--audit-http`, to an HTTP store ([`crate::sinks::http`]): a slow sink
//! drops lines (counted in `mcpwarden_audit_dropped_total{sink}`) rather
//! than ever blocking a call. The writer is a plain thread with blocking writes, not a
//! task: async file and stdout writes each take a trip through tokio's
//! blocking pool, which cost more than the rest of a call's bookkeeping.
//! Lines that arrive within a few milliseconds share one write (and the
//! writer is woken once per batch, not per call); the facade flushes the
//! queue before it exits.

mod writer;

use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::refusal::Refusal;
use super::Ended;
use super::Request;
use crate::auth::identity::Identity;
use crate::jsonrpc::RequestId;
use crate::metrics::{HeldStream, Metrics, StreamEnd};
pub use writer::{Audit, AuditConfig, AuditSink};

/// The version of the record's format (`v`): a change that removes or
/// retypes a field is a new version, with a new schema file.
pub const RECORD_VERSION: u32 = 1;

/// One audit record. Field names are the contract of the audit log.
#[derive(Serialize, Debug)]
pub struct Record<'a> {
    /// [`RECORD_VERSION`].
    pub v: u32,
    pub time: String,
    pub event: &'static str,
    /// The MCP method (only methods the facade knows; `other` else).
    pub method: Option<&'static str>,
    pub call_id: String,
    pub session: String,
    /// Who vouches for `subject` (a JWT issuer, the service-account issuer, `static`).
    pub issuer: Option<&'a str>,
    pub subject: Option<&'a str>,
    pub auth: &'static str,
    pub role: Option<&'static str>,
    pub tool: Option<&'a str>,
    pub upstream_tool: Option<&'a str>,
    /// The prompt of a `prompts/get` or a completion.
    pub prompt: Option<&'a str>,
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
    /// Who approved (or declined) the call out of band (only then present).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approver: Option<&'a str>,
    /// Why a quarantined tool looks poisoned: the scan's finding,
    /// `kind/detail` (only then present).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finding: Option<String>,
    /// The request's OpenTelemetry trace and span (only when tracing is on):
    /// joins the audit trail to the traces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_id: Option<String>,
    /// A refused outbound connection (`egress_refused` only): the host it
    /// was for, the refused address (when an address was refused) and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<&'a str>,
}

impl Default for Record<'_> {
    fn default() -> Self {
        Record {
            v: RECORD_VERSION,
            time: String::new(),
            event: "",
            method: None,
            call_id: String::new(),
            session: String::new(),
            issuer: None,
            subject: None,
            auth: "",
            role: None,
            tool: None,
            upstream_tool: None,
            prompt: None,
            definition_hash: None,
            args_sha256: None,
            args_bytes: 0,
            decision: "",
            code: None,
            reason: None,
            duration_ms: 0.0,
            output_bytes: None,
            truncated: false,
            redactions: 0,
            approver: None,
            finding: None,
            trace_id: None,
            span_id: None,
            host: None,
            address: None,
            detail: None,
        }
    }
}

impl Record<'_> {
    /// Name the request's span (when tracing is on).
    pub fn traced(mut self, span: &crate::spans::RequestSpan) -> Self {
        if let Some((trace, span)) = span.ids() {
            self.trace_id = Some(trace);
            self.span_id = Some(span);
        }
        self
    }
}

impl Audit {
    /// Write the record of an outbound connection the facade refused to
    /// make (the SSRF guard: an address it may not connect to, a redirect).
    /// No caller: the connection is the facade's own; the request it was
    /// for fails on its own record.
    pub fn egress_refused(&self, refusal: &crate::net::EgressRefusal, metrics: &Metrics) {
        metrics
            .egress_refusals
            .with_label_values(&[refusal.reason])
            .inc();
        let record = Record {
            time: now_rfc3339(),
            event: "egress_refused",
            auth: "none",
            decision: "deny",
            reason: Some(refusal.reason),
            host: Some(&refusal.host),
            address: refusal.address.map(|a| a.to_string()),
            detail: Some(&refusal.detail),
            ..Default::default()
        };
        self.write(&record, metrics);
    }
}

impl Audit {
    /// A gateway withholds names: which, why, from which backends.
    pub fn gateway_conflict(
        &self,
        conflict: &crate::upstream::gateway::names::Conflict,
        metrics: &Metrics,
    ) {
        let resolved = match &conflict.resolved {
            Some((name, backend)) => format!("; resolved: {name:?} served by {backend:?}"),
            None => String::new(),
        };
        let detail = format!(
            "{} {} withheld: {:?} from backends {:?}{}{resolved}",
            conflict.catalog.as_str(),
            conflict.kind.as_str(),
            conflict.names,
            conflict.backends,
            if conflict.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", conflict.detail)
            }
        );
        let record = Record {
            time: now_rfc3339(),
            event: "gateway_conflict",
            auth: "none",
            // Resolved: the mapped backend's copy is served (the rest of
            // the names stay withheld).
            decision: if conflict.resolved.is_some() {
                "allow"
            } else {
                "deny"
            },
            reason: Some(conflict.kind.as_str()),
            tool: conflict.names.first().map(String::as_str),
            detail: Some(&detail),
            ..Default::default()
        };
        self.write(&record, metrics);
    }
}

/// Where a session's audit lines go, and what they name the session by:
/// all the audit needs of a session (a session hands it down with
/// `Session::trail`).
#[derive(Clone, Copy)]
pub struct Trail<'a> {
    pub audit: &'a Audit,
    pub metrics: &'a Metrics,
    /// The session's id (lines carry only its hash).
    pub session: &'a str,
}

/// The audit line of a request refused before its step ran (unknown
/// method, no role, unreadable params).
pub fn denied(
    trail: Trail<'_>,
    id: &RequestId,
    method: &str,
    caller: &Identity,
    refusal: &Refusal,
    started: std::time::Instant,
    span: &crate::spans::RequestSpan,
) {
    if !trail.audit.is_on() {
        return;
    }
    let hashed = hash_session(trail.session);
    let record = Record {
        time: now_rfc3339(),
        event: "request_denied",
        method: Some(crate::metrics::method_label(method)),
        call_id: format!("{hashed}:{}", id.as_json().trim_matches('"')),
        session: hashed,
        issuer: caller.issuer.as_deref(),
        subject: caller.subject.as_deref(),
        auth: caller.method.as_str(),
        decision: "deny",
        code: Some(refusal.code()),
        reason: Some(refusal.reason()),
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        ..Default::default()
    }
    .traced(span);
    trail.audit.write(&record, trail.metrics);
}

/// The audit line of a resource read or (un)subscribe, a prompt get or a
/// completion: what it named as a hash (the URI), or by name (the prompt),
/// the decision, the size of the answer; never its content.
pub fn request(trail: Trail<'_>, req: &Request, event: &'static str, ended: &Ended) {
    if !trail.audit.is_on() {
        return;
    }
    let params = req.params();
    let named = params
        .get("uri")
        .or_else(|| params.pointer("/ref/uri"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("");
    let prompt = params
        .get("name")
        .or_else(|| params.pointer("/ref/name"))
        .and_then(serde_json::Value::as_str)
        .map(bounded);
    let hashed = hash_session(trail.session);
    let (decision, code, reason) = match ended {
        Ended::Refused(r) => ("deny", Some(r.code()), Some(r.reason())),
        _ => ("allow", None, None),
    };
    let filtered = match ended {
        Ended::Answered { filtered, .. } => Some(filtered),
        _ => None,
    };
    let record = Record {
        time: now_rfc3339(),
        event,
        method: Some(crate::metrics::method_label(req.msg.method())),
        call_id: format!("{hashed}:{}", req.id.as_json().trim_matches('"')),
        session: hashed,
        issuer: req.caller.issuer.as_deref(),
        subject: req.caller.subject.as_deref(),
        auth: req.caller.method.as_str(),
        role: req.role.map(mcp_warden_policy::role_name),
        prompt: prompt.filter(|_| !req.msg.method().starts_with("resources/")),
        args_sha256: (!named.is_empty()).then(|| sha256_hex(named.as_bytes())),
        args_bytes: named.len() as u64,
        decision,
        code,
        reason,
        duration_ms: req.started.elapsed().as_secs_f64() * 1000.0,
        output_bytes: filtered.map(|f| f.output_bytes),
        redactions: filtered.map_or(0, super::output::Filtered::redaction_total),
        ..Default::default()
    }
    .traced(&req.span);
    trail.audit.write(&record, trail.metrics);
}

/// A held stream the facade ended itself (`reason`): counted, and its audit
/// line names the caller, the stream (`subscriptions/listen` and its id, or
/// a GET stream: no method, no id) and how long it was held; never what
/// went on it.
pub fn stream_ended(
    trail: Trail<'_>,
    stream: HeldStream,
    id: Option<&RequestId>,
    caller: &Identity,
    reason: StreamEnd,
    opened: std::time::Instant,
) {
    trail.metrics.stream_ended(stream, reason);
    if !trail.audit.is_on() {
        return;
    }
    let hashed = hash_session(trail.session);
    let record = Record {
        time: now_rfc3339(),
        event: "stream_ended",
        method: match stream {
            HeldStream::Listen => Some("subscriptions/listen"),
            HeldStream::Get => None,
        },
        call_id: match id {
            Some(id) => format!("{hashed}:{}", id.as_json().trim_matches('"')),
            None => String::new(),
        },
        session: hashed,
        issuer: caller.issuer.as_deref(),
        subject: caller.subject.as_deref(),
        auth: caller.method.as_str(),
        // An expired credential is refused from then on; a stop refuses
        // nothing (the caller listens again elsewhere).
        decision: match reason {
            StreamEnd::CredentialExpired => "deny",
            StreamEnd::Shutdown => "allow",
        },
        reason: Some(reason.as_str()),
        duration_ms: opened.elapsed().as_secs_f64() * 1000.0,
        ..Default::default()
    };
    trail.audit.write(&record, trail.metrics);
}

/// A caller-chosen name, bounded so an audit line stays small.
pub fn bounded(name: &str) -> &str {
    let mut end = name.len().min(128);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
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
    use crate::sinks::file::Rotation;
    use std::time::Duration;

    fn config(sink: AuditSink) -> AuditConfig {
        AuditConfig {
            sink,
            rotation: Rotation::default(),
            http: None,
        }
    }

    #[test]
    fn every_line_is_written_by_the_time_flush_returns() {
        let scratch = tempfile::tempdir().unwrap();
        let path = scratch.path().join("audit.jsonl");
        let metrics = Metrics::new();
        let audit = Audit::start(config(AuditSink::File(path.clone())), &metrics).unwrap();
        for i in 0..1000 {
            let id = format!("s:{i}");
            audit.write(
                &Record {
                    call_id: id,
                    event: "tool_call",
                    ..Default::default()
                },
                &metrics,
            );
        }
        audit.flush(Duration::from_secs(5));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1000);
        assert!(
            lines[999].contains(r#""call_id":"s:999""#),
            "{}",
            lines[999]
        );
        assert_eq!(metrics.audit_dropped("queue").get(), 0);
    }

    #[test]
    fn off_writes_nothing_and_flush_returns_at_once() {
        let audit = Audit::start(config(AuditSink::Off), &Metrics::new()).unwrap();
        assert!(!audit.is_on());
        audit.flush(Duration::from_secs(60));
    }

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

    const SCHEMA: &str = include_str!("../../../docs/audit-record.v1.schema.json");

    fn validator() -> jsonschema::Validator {
        jsonschema::validator_for(&serde_json::from_str(SCHEMA).unwrap()).unwrap()
    }

    fn full_record() -> Record<'static> {
        Record {
            v: RECORD_VERSION,
            time: now_rfc3339(),
            event: "tool_call",
            method: Some("tools/call"),
            call_id: "0123456789abcdef:7".into(),
            session: "0123456789abcdef".into(),
            issuer: Some("static"),
            subject: Some("alice"),
            auth: "static_token",
            role: Some("user"),
            tool: Some("run"),
            upstream_tool: Some("run_command"),
            prompt: None,
            definition_hash: Some(
                "sha256:62ace6ca70a9ce32395fe1abc7c6d42dea8154c7e0c558e6ac877d7111a00286",
            ),
            args_sha256: Some(sha256_hex(b"{}")),
            args_bytes: 2,
            decision: "deny",
            code: Some(-32004),
            reason: Some("approval_declined"),
            duration_ms: 1.5,
            output_bytes: Some(10),
            truncated: false,
            redactions: 1,
            approver: Some("carol"),
            finding: Some("model_instruction/hidden_comment".into()),
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            span_id: Some("00f067aa0ba902b7".into()),
            host: Some("mcp.example.com"),
            address: Some("10.0.0.7".into()),
            detail: Some("a private address, which no --upstream-allow-cidr names"),
        }
    }

    #[test]
    fn records_match_the_published_schema_and_it_names_every_field() {
        let v = validator();
        let full = serde_json::to_value(full_record()).unwrap();
        assert!(
            v.is_valid(&full),
            "{:?}",
            v.iter_errors(&full).collect::<Vec<_>>()
        );
        // The schema describes exactly the fields a record can have.
        let schema: serde_json::Value = serde_json::from_str(SCHEMA).unwrap();
        let mut described: Vec<&String> =
            schema["properties"].as_object().unwrap().keys().collect();
        let mut written: Vec<&String> = full.as_object().unwrap().keys().collect();
        described.sort();
        written.sort();
        assert_eq!(described, written);
        // The sparse records: a refused authentication, a denied request.
        let auth = Record {
            time: now_rfc3339(),
            event: "auth_failure",
            decision: "deny",
            code: Some(-32001),
            reason: Some("token_missing"),
            auth: "none",
            ..Default::default()
        };
        let auth = serde_json::to_value(auth).unwrap();
        assert!(
            v.is_valid(&auth),
            "{:?}",
            v.iter_errors(&auth).collect::<Vec<_>>()
        );
        assert_eq!(auth["v"], RECORD_VERSION);
    }

    #[test]
    fn the_schema_refuses_what_a_record_must_never_be() {
        let v = validator();
        let good = serde_json::to_value(full_record()).unwrap();
        let mut content = good.clone();
        content["arguments"] = serde_json::json!({"path": "/etc/shadow"});
        assert!(
            !v.is_valid(&content),
            "an unknown field (content) is refused"
        );
        let mut version = good.clone();
        version["v"] = 2.into();
        assert!(!v.is_valid(&version));
        let mut hash = good;
        hash["args_sha256"] = "not-a-hash".into();
        assert!(!v.is_valid(&hash));
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
