//! The output filter: everything the server says passes it before the client
//! sees it.
//!
//! - tools/call results ([`OutputCheck`]): output size cap (truncate with a
//!   visible marker, or fail), secret redaction over every string of the
//!   result, and `structuredContent` checked against the tool's
//!   `outputSchema`. Every filter reads the decoded result, as the client
//!   will (never a scan of the raw bytes, which read `\"` for a quote and
//!   `\n` for a line break); a result nothing changed goes on as the server
//!   wrote it.
//! - every other answer ([`finish`]): reshaped by its step (list
//!   filtering), every string redacted, over the profile's `maxOutputBytes`
//!   refused with -32005 (a resource or prompt cut in half is not the
//!   resource or prompt).
//! - server notifications and requests ([`filter_params`]): `params`
//!   redacted; a message over `maxOutputBytes` is dropped.
//! - the client's answers to those requests, on their way to the server
//!   ([`filter_client_answer`]): the same cap and redaction — an
//!   elicitation or sampling result is content like any other.
//!
//! Every answer leaves under the client's id (the server only ever saw the
//! facade's).

use bytes::Bytes;
use mcp_warden_crds::OutputOverflow;
use mcp_warden_policy::{Redactor, ResolvedLimits, SchemaCache, SchemaError};
use serde_json::Value;

use super::policy::LivePolicy;
use super::refusal::{Budget, Refusal};
use super::registry::ObservedTool;
use crate::jsonrpc::{self, Message, RequestId};
use crate::metrics::Metrics;

/// What the filter did.
#[derive(Debug, Default)]
pub struct Filtered {
    pub output_bytes: u64,
    pub truncated: bool,
    /// Per detector kind, the number of redactions.
    pub redactions: Vec<(String, u32)>,
}

impl Filtered {
    pub fn redaction_total(&self) -> u32 {
        self.redactions.iter().map(|(_, n)| n).sum()
    }
}

pub struct OutputCheck<'a> {
    pub tool: &'a str,
    pub limits: &'a ResolvedLimits,
    pub redactor: &'a Redactor,
    pub schemas: &'a SchemaCache,
    pub definition: Option<&'a ObservedTool>,
}

impl OutputCheck<'_> {
    /// Filter an upstream answer into the client's answer (under `client_id`).
    pub fn apply(&self, msg: Message, client_id: &RequestId) -> Result<(Bytes, Filtered), Refusal> {
        let (changed, filtered) = self.filter(&msg)?;
        // Untouched by the filter: put the client's id in place; else the
        // filter wrote new bytes (under the server's id) to read again.
        let bytes = match changed {
            None => jsonrpc::with_id(&msg, client_id),
            Some(bytes) => jsonrpc::rebuild_bytes(&bytes, Some(client_id), None),
        };
        Ok((bytes.map_err(|_| self.unreadable())?, filtered))
    }

    fn unreadable(&self) -> Refusal {
        Refusal::InvalidOutput {
            tool: self.tool.to_string(),
            detail: "the answer cannot be read".into(),
        }
    }

    /// Filter an upstream answer; error answers are only redacted. `None`:
    /// the answer passes as the server wrote it.
    fn filter(&self, msg: &Message) -> Result<(Option<Bytes>, Filtered), Refusal> {
        let size = msg.bytes.len() as u64;
        if msg.is_error {
            // An error answer is the server's text too: it may leak secrets.
            return Ok(self.redact_error(msg));
        }
        let needs_schema = self
            .definition
            .is_some_and(|d| d.definition.get("outputSchema").is_some());
        // Redaction reads the decoded strings the client will read, never
        // the raw bytes: in JSON a quote is `\"` and a line break `\n`, so a
        // scan of the bytes misses `key="value"` and secrets after a line
        // break. Only with nothing to redact, check or cut do the bytes pass
        // unread.
        let untouched_ok = !self.redactor.is_enabled() && !needs_schema;
        if size <= self.limits.max_output_bytes && untouched_ok {
            let filtered = Filtered {
                output_bytes: size,
                ..Default::default()
            };
            return Ok((None, filtered));
        }
        let mut value: Value = serde_json::from_slice(&msg.bytes).unwrap_or(Value::Null);
        let Some(result) = value.get_mut("result") else {
            return Ok((None, Filtered::default()));
        };
        // A question for the client (`input_required`), or a task handle
        // (its result comes with `tasks/get`), has no output yet.
        let asks = matches!(
            result.get("resultType").and_then(Value::as_str),
            Some("input_required" | "task")
        );
        if let (Some(def), true, false) = (self.definition, needs_schema, asks) {
            let is_error = result
                .get("isError")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let check = self.schemas.validate_output(
                &def.hash,
                &def.definition,
                result.get("structuredContent"),
                is_error,
            );
            if let Err(e) = check {
                let detail = match e {
                    SchemaError::Invalid(v) => format!("{} violation(s)", v.len()),
                    other => other.to_string(),
                };
                return Err(Refusal::InvalidOutput {
                    tool: self.tool.to_string(),
                    detail,
                });
            }
        }
        let mut filtered = Filtered::default();
        if self.redactor.is_enabled() {
            let mut counts = self.redactor.counts();
            self.redactor.redact_json(result, &mut counts);
            filtered.redactions = counts
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(k, n)| (k.to_string(), n))
                .collect();
        }
        if filtered.redactions.is_empty() && size <= self.limits.max_output_bytes {
            // Nothing changed: the client gets the server's own bytes.
            filtered.output_bytes = size;
            return Ok((None, filtered));
        }
        let mut bytes = serde_json::to_vec(&value).expect("values serialize");
        if bytes.len() as u64 > self.limits.max_output_bytes {
            if self.limits.output_overflow == OutputOverflow::Fail {
                return Err(Refusal::Budget {
                    tool: self.tool.to_string(),
                    budget: Budget::OutputBytes,
                    limit: self.limits.max_output_bytes,
                    observed: Some(bytes.len() as u64),
                });
            }
            let original = bytes.len() as u64;
            let keep_structured = needs_schema;
            let result = value.get_mut("result").expect("checked above");
            truncate(
                result,
                self.limits.max_output_bytes,
                original,
                keep_structured,
            );
            bytes = serde_json::to_vec(&value).expect("values serialize");
            // Structured output that must match an outputSchema cannot be cut
            // validly: when it alone does not fit, the call fails instead.
            if bytes.len() as u64 > self.limits.max_output_bytes {
                return Err(Refusal::Budget {
                    tool: self.tool.to_string(),
                    budget: Budget::OutputBytes,
                    limit: self.limits.max_output_bytes,
                    observed: Some(original),
                });
            }
            filtered.truncated = true;
        }
        filtered.output_bytes = bytes.len() as u64;
        Ok((Some(Bytes::from(bytes)), filtered))
    }
}

impl OutputCheck<'_> {
    fn redact_error(&self, msg: &Message) -> (Option<Bytes>, Filtered) {
        let size = msg.bytes.len() as u64;
        let untouched = || {
            (
                None,
                Filtered {
                    output_bytes: size,
                    ..Default::default()
                },
            )
        };
        if !self.redactor.is_enabled() {
            return untouched();
        }
        let mut value: Value = match serde_json::from_slice(&msg.bytes) {
            Ok(v) => v,
            Err(_) => return untouched(),
        };
        let Some(error) = value.get_mut("error") else {
            return untouched();
        };
        let mut counts = self.redactor.counts();
        self.redactor.redact_json(error, &mut counts);
        if counts.total() == 0 {
            return untouched();
        }
        let redactions = counts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| (k.to_string(), n))
            .collect();
        let bytes = Bytes::from(serde_json::to_vec(&value).expect("values serialize"));
        let output_bytes = bytes.len() as u64;
        (
            Some(bytes),
            Filtered {
                output_bytes,
                truncated: false,
                redactions,
            },
        )
    }
}

/// The client's answer to a request other than tools/call: the server's
/// `result` reshaped by `shape` (the step's list filter), every string of
/// it (or of the `error`) redacted, refused when over the profile's
/// `maxOutputBytes`, under `client_id`.
pub fn finish(
    answer: &Message,
    client_id: &RequestId,
    what: &str,
    policy: &LivePolicy,
    metrics: &Metrics,
    shape: impl FnOnce(&mut Value),
) -> Result<(Bytes, Filtered), Refusal> {
    let mut value: Value =
        serde_json::from_slice(&answer.bytes).map_err(|_| Refusal::InvalidOutput {
            tool: what.to_string(),
            detail: "the answer cannot be read".into(),
        })?;
    if let Some(result) = value.get_mut("result") {
        shape(result);
    }
    let mut filtered = Filtered::default();
    let redactor = policy.compiled.redactor();
    if redactor.is_enabled() {
        let mut counts = redactor.counts();
        for key in ["result", "error"] {
            if let Some(part) = value.get_mut(key) {
                redactor.redact_json(part, &mut counts);
            }
        }
        filtered.redactions = counted(&counts, metrics);
    }
    value["id"] = serde_json::from_str(client_id.as_json()).expect("ids are JSON");
    let bytes = serde_json::to_vec(&value).expect("values serialize");
    let max = policy.compiled.profile_limits().max_output_bytes;
    if bytes.len() as u64 > max {
        return Err(Refusal::Budget {
            tool: what.to_string(),
            budget: Budget::OutputBytes,
            limit: max,
            observed: Some(bytes.len() as u64),
        });
    }
    filtered.output_bytes = bytes.len() as u64;
    Ok((Bytes::from(bytes), filtered))
}

/// The params of a server notification or request as the client may see
/// them: every string redacted. `None`: not to be passed on (over the
/// profile's `maxOutputBytes`, or not readable). `Value::Null` when the
/// message has no params.
pub fn filter_params(msg: &Message, policy: &LivePolicy, metrics: &Metrics) -> Option<Value> {
    if msg.bytes.len() as u64 > policy.compiled.profile_limits().max_output_bytes {
        return None;
    }
    let mut value: Value = serde_json::from_slice(&msg.bytes).ok()?;
    let mut params = value
        .get_mut("params")
        .map(Value::take)
        .unwrap_or(Value::Null);
    let redactor = policy.compiled.redactor();
    if redactor.is_enabled() {
        let mut counts = redactor.counts();
        redactor.redact_json(&mut params, &mut counts);
        counted(&counts, metrics);
    }
    Some(params)
}

/// A client's answer to a server request (elicitation, sampling), as the
/// server gets it under `server_id`: every string redacted; `None` when it
/// is over `maxOutputBytes` or unreadable (the server then gets an error).
pub fn filter_client_answer(
    msg: &Message,
    server_id: &RequestId,
    policy: &LivePolicy,
    metrics: &Metrics,
) -> Option<Bytes> {
    if msg.bytes.len() as u64 > policy.compiled.profile_limits().max_output_bytes {
        return None;
    }
    let redactor = policy.compiled.redactor();
    if !redactor.is_enabled() {
        return jsonrpc::with_id(msg, server_id).ok();
    }
    let mut value: Value = serde_json::from_slice(&msg.bytes).ok()?;
    let mut counts = redactor.counts();
    for key in ["result", "error"] {
        if let Some(part) = value.get_mut(key) {
            redactor.redact_json(part, &mut counts);
        }
    }
    if counted(&counts, metrics).is_empty() {
        return jsonrpc::with_id(msg, server_id).ok();
    }
    value["id"] = serde_json::from_str(server_id.as_json()).ok()?;
    serde_json::to_vec(&value).ok().map(Bytes::from)
}

/// One of a client's answers that the facade carries to the server inside
/// a request (a modern retry's `inputResponses`, a parked call's answer, a
/// task's update): every string redacted in place, as
/// [`filter_client_answer`] does for an answer sent as a message. `Err`
/// when it is over `maxOutputBytes`.
pub fn filter_answer_value(
    answer: &mut Value,
    policy: &LivePolicy,
    metrics: &Metrics,
) -> Result<(), AnswerTooLarge> {
    let size = serde_json::to_vec(answer).map_or(u64::MAX, |b| b.len() as u64);
    let limit = policy.compiled.profile_limits().max_output_bytes;
    if size > limit {
        return Err(AnswerTooLarge { limit });
    }
    let redactor = policy.compiled.redactor();
    if redactor.is_enabled() {
        let mut counts = redactor.counts();
        redactor.redact_json(answer, &mut counts);
        counted(&counts, metrics);
    }
    Ok(())
}

/// A client's answer over the profile's `maxOutputBytes`.
#[derive(Debug, thiserror::Error)]
#[error("the client's answer is over the size limit of {limit} bytes")]
pub struct AnswerTooLarge {
    pub limit: u64,
}

/// Non-zero redaction counts, also added to `mcpwarden_redactions_total`.
fn counted(
    counts: &mcp_warden_policy::RedactionCounts<'_>,
    metrics: &Metrics,
) -> Vec<(String, u32)> {
    counts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(kind, n)| {
            metrics
                .redactions
                .with_label_values(&[kind])
                .inc_by(u64::from(n));
            (kind.to_string(), n)
        })
        .collect()
}

/// Room left for the marker and JSON framing when cutting text.
const MARKER_RESERVE: u64 = 256;

/// Shrink a result to about `max` bytes: keep text blocks in order, cut the
/// one that crosses the limit, drop non-text blocks that do not fit, and say
/// so in a final text block. `structuredContent` is kept when the tool
/// declares an `outputSchema` (its room is reserved first), else dropped if
/// it does not fit.
fn truncate(result: &mut Value, max: u64, original: u64, keep_structured: bool) {
    let budget = max.saturating_sub(MARKER_RESERVE);
    let mut used = 0u64;
    if keep_structured {
        used += result
            .get("structuredContent")
            .map_or(0, |v| serde_json::to_vec(v).map_or(0, |b| b.len() as u64));
    }
    if let Some(Value::Array(content)) = result.get_mut("content") {
        let mut kept = Vec::new();
        for mut item in std::mem::take(content) {
            let size = serde_json::to_vec(&item)
                .map(|b| b.len() as u64)
                .unwrap_or(u64::MAX);
            if used + size <= budget {
                used += size;
                kept.push(item);
                continue;
            }
            if let Some(Value::String(text)) = item.get_mut("text") {
                let room = budget.saturating_sub(used + 32) as usize;
                if room > 0 {
                    let mut cut = room.min(text.len());
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    text.truncate(cut);
                    used += cut as u64 + 32;
                    kept.push(item);
                }
            }
            break;
        }
        kept.push(serde_json::json!({
            "type": "text",
            "text": format!("[mcp-warden: output truncated to about {max} of {original} bytes by policy]"),
        }));
        *content = kept;
    }
    if keep_structured {
        return;
    }
    if let Some(structured) = result.get("structuredContent") {
        let size = serde_json::to_vec(structured)
            .map(|b| b.len() as u64)
            .unwrap_or(u64::MAX);
        if used + size > budget {
            if let Some(obj) = result.as_object_mut() {
                obj.remove("structuredContent");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::{Limits, Redaction};

    fn msg(v: Value) -> Message {
        Message::parse(Bytes::from(serde_json::to_vec(&v).unwrap())).unwrap()
    }

    fn check<'a>(
        limits: &'a ResolvedLimits,
        redactor: &'a Redactor,
        schemas: &'a SchemaCache,
    ) -> OutputCheck<'a> {
        OutputCheck {
            tool: "t",
            limits,
            redactor,
            schemas,
            definition: None,
        }
    }

    #[test]
    fn clean_small_results_pass_byte_for_byte() {
        let limits = ResolvedLimits::resolve(None, &Limits::default());
        let redactor = Redactor::new(&Redaction::default()).unwrap();
        let schemas = SchemaCache::new();
        let m = msg(
            serde_json::json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}],"_meta":{"x":1}}}),
        );
        let original = m.bytes.clone();
        let (bytes, f) = check(&limits, &redactor, &schemas)
            .apply(m, &RequestId::number(1))
            .unwrap();
        assert_eq!(bytes, original);
        assert!(!f.truncated && f.redaction_total() == 0);
    }

    #[test]
    fn secrets_are_redacted_and_counted() {
        let limits = ResolvedLimits::resolve(None, &Limits::default());
        let redactor = Redactor::new(&Redaction::default()).unwrap();
        let schemas = SchemaCache::new();
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let m = msg(
            serde_json::json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":format!("token {token}")}]}}),
        );
        let (bytes, f) = check(&limits, &redactor, &schemas)
            .apply(m, &RequestId::number(1))
            .unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        assert!(!text.contains(token), "{text}");
        assert!(text.contains("[REDACTED:github_token]"));
        assert_eq!(f.redactions, vec![("github_token".to_string(), 1)]);
    }

    #[test]
    fn escaped_secrets_cannot_slip_past_the_raw_scan() {
        let limits = ResolvedLimits::resolve(None, &Limits::default());
        let redactor = Redactor::new(&Redaction::default()).unwrap();
        let schemas = SchemaCache::new();
        let raw = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"\u0067hp_abcdefghijklmnopqrstuvwxyz0123456789"}]}}"#;
        let m = Message::parse(Bytes::from(raw)).unwrap();
        let (bytes, _) = check(&limits, &redactor, &schemas)
            .apply(m, &RequestId::number(1))
            .unwrap();
        assert!(String::from_utf8(bytes.to_vec())
            .unwrap()
            .contains("[REDACTED:github_token]"));
    }

    #[test]
    fn oversized_output_is_truncated_with_a_marker_or_fails() {
        let redactor = Redactor::disabled();
        let schemas = SchemaCache::new();
        let big = "x".repeat(10_000);
        let m = || {
            msg(
                serde_json::json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":big}]}}),
            )
        };
        let limits = ResolvedLimits::resolve(
            None,
            &serde_yaml_ng::from_str::<Limits>("maxOutputBytes: 1000").unwrap(),
        );
        let (bytes, f) = check(&limits, &redactor, &schemas)
            .apply(m(), &RequestId::number(1))
            .unwrap();
        assert!(f.truncated);
        assert!(bytes.len() <= 1000, "{}", bytes.len());
        assert!(String::from_utf8_lossy(&bytes).contains("output truncated"));
        let failing = ResolvedLimits::resolve(
            None,
            &serde_yaml_ng::from_str::<Limits>("maxOutputBytes: 1000\noutputOverflow: fail")
                .unwrap(),
        );
        let err = check(&failing, &redactor, &schemas)
            .apply(m(), &RequestId::number(1))
            .unwrap_err();
        assert_eq!(err.reason(), "output_bytes_exceeded");
    }

    #[test]
    fn truncation_keeps_structured_content_a_schema_requires() {
        let redactor = Redactor::disabled();
        let schemas = SchemaCache::new();
        let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let tool = ObservedTool::new(serde_json::json!({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema})).unwrap();
        let limits = ResolvedLimits::resolve(
            None,
            &serde_yaml_ng::from_str::<Limits>("maxOutputBytes: 1000").unwrap(),
        );
        let check = OutputCheck {
            tool: "t",
            limits: &limits,
            redactor: &redactor,
            schemas: &schemas,
            definition: Some(&tool),
        };
        let text = "y".repeat(5000);
        let m = msg(
            serde_json::json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":text}],"structuredContent":{"n":7}}}),
        );
        let (bytes, f) = check.apply(m, &RequestId::number(1)).unwrap();
        assert!(f.truncated);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            v["result"]["structuredContent"]["n"], 7,
            "the structured result survives truncation"
        );
        assert!(bytes.len() <= 1000);
        let huge = serde_json::json!({"n": 1, "pad": "z".repeat(5000)});
        let m = msg(
            serde_json::json!({"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":huge}}),
        );
        let err = check.apply(m, &RequestId::number(1)).unwrap_err();
        assert_eq!(
            err.reason(),
            "output_bytes_exceeded",
            "structured output that cannot fit fails the call"
        );
    }

    #[test]
    fn secrets_in_upstream_errors_are_redacted() {
        let limits = ResolvedLimits::resolve(None, &Limits::default());
        let redactor = Redactor::new(&Redaction::default()).unwrap();
        let schemas = SchemaCache::new();
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let m = msg(
            serde_json::json!({"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":format!("bad {token}"),"data":{"t":token}}}),
        );
        let (bytes, f) = check(&limits, &redactor, &schemas)
            .apply(m, &RequestId::number(1))
            .unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains(token));
        assert_eq!(f.redaction_total(), 2);
    }
}
