//! OpenTelemetry spans of the requests the facade polices.
//!
//! Where it sits: the session's intake opens one SERVER span per client
//! request ([`Telemetry::request`]), continuing the caller's trace from the
//! request's `_meta` (`traceparent`/`tracestate`, as the 2026-07-28 revision
//! reserves them) or, failing that, from the HTTP `traceparent` header; the
//! pipeline step adds the gates as events and the decision as attributes;
//! [`crate::session::Session::forward`] opens a CLIENT child span per
//! exchange with the server and puts its context in the upstream request's
//! `_meta` (and, over HTTP, in the `traceparent`/`tracestate` headers).
//!
//! What a span may carry: the method, the tool (exposed and upstream
//! names, definition hash), who called (issuer, subject, role), the call id
//! and hashed session the audit line carries too, and the decision (gate,
//! code, reason). Never arguments, results, URIs or anything else a caller
//! or a server wrote: the e2e test searches every attribute for the
//! call's content.
//!
//! Off (no OTLP endpoint configured) there is no tracer: [`Telemetry::request`]
//! returns [`RequestSpan::NONE`] without reading anything, and every
//! method on it is a branch on `None`.

use std::sync::atomic::{AtomicBool, Ordering};

use mcp_warden_telemetry::opentelemetry::trace::{
    SpanBuilder, SpanKind, Status, TraceContextExt, Tracer as _,
};
use mcp_warden_telemetry::opentelemetry::{Context, KeyValue};
use mcp_warden_telemetry::opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// What a span records of a refusal. The gates' refusal type implements it:
/// spans sit below the gates (an upstream link writes trace headers), so
/// they see a refusal only through this.
pub trait Refused {
    /// The gate that refused.
    fn gate(&self) -> &'static str;
    /// Its JSON-RPC error code.
    fn code(&self) -> i64;
    /// Its bounded reason.
    fn reason(&self) -> &'static str;
}

/// Set once at start-up when tracing is on: lets code far from the shared
/// context (an HTTP link writing headers) skip all trace work when it is off.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether spans are being made (the process-wide switch).
#[inline]
pub fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

tokio::task_local! {
    /// The trace context of the HTTP request whose messages are being
    /// taken (its `traceparent` header), for requests without one in `_meta`.
    pub static HEADER_PARENT: Context;
}

/// The facade's tracer, or none.
#[derive(Default)]
pub struct Telemetry {
    tracer: Option<SdkTracer>,
}

impl Telemetry {
    pub fn new(provider: Option<&SdkTracerProvider>) -> Telemetry {
        use mcp_warden_telemetry::opentelemetry::trace::TracerProvider as _;
        let tracer = provider.map(|p| p.tracer("mcp-warden-sidecar"));
        ON.store(tracer.is_some(), Ordering::Relaxed);
        Telemetry { tracer }
    }

    #[inline]
    pub fn is_on(&self) -> bool {
        self.tracer.is_some()
    }

    /// The SERVER span of one client request for `method`, child of
    /// `parent` (the caller's context) when there is one. `attributes` are
    /// built only when the span records (sampled).
    pub fn request(
        &self,
        parent: Option<Context>,
        method: &'static str,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> RequestSpan {
        let Some(tracer) = &self.tracer else {
            return RequestSpan::NONE;
        };
        let parent = parent.unwrap_or_default();
        let span = tracer.build_with_context(
            SpanBuilder::from_name(method).with_kind(SpanKind::Server),
            &parent,
        );
        let cx = parent.with_span(span);
        let span = RequestSpan(Some(cx));
        if span.is_recording() {
            let mut kvs = attributes();
            kvs.push(KeyValue::new("mcp.method.name", method));
            span.set(kvs);
        }
        span
    }

    /// A CLIENT span for one exchange with the server, child of `parent`
    /// (the request's span): its context is what the server is sent.
    pub fn upstream(
        &self,
        parent: &Context,
        method: &'static str,
        upstream_id: u64,
    ) -> RequestSpan {
        let Some(tracer) = &self.tracer else {
            return RequestSpan::NONE;
        };
        let span = tracer.build_with_context(
            SpanBuilder::from_name(method)
                .with_kind(SpanKind::Client)
                .with_attributes([
                    KeyValue::new("mcp.method.name", method),
                    KeyValue::new("mcpwarden.upstream.request_id", upstream_id as i64),
                ]),
            parent,
        );
        RequestSpan(Some(parent.with_span(span)))
    }
}

/// A span that ends when dropped (or at [`RequestSpan::end`]); a no-op
/// when tracing is off.
#[derive(Default)]
pub struct RequestSpan(Option<Context>);

impl RequestSpan {
    pub const NONE: RequestSpan = RequestSpan(None);

    /// The context children are made in (`None` when off).
    pub fn context(&self) -> Option<&Context> {
        self.0.as_ref()
    }

    /// The span's trace and span ids (hex), for the audit line to name
    /// (`None` when tracing is off).
    pub fn ids(&self) -> Option<(String, String)> {
        let cx = self.0.as_ref()?;
        let span = cx.span();
        let sc = span.span_context();
        sc.is_valid()
            .then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
    }

    /// Whether attributes and events are kept (on and sampled).
    pub fn is_recording(&self) -> bool {
        self.0.as_ref().is_some_and(|cx| cx.span().is_recording())
    }

    pub fn set(&self, attributes: Vec<KeyValue>) {
        if let Some(cx) = &self.0 {
            cx.span().set_attributes(attributes);
        }
    }

    /// Name the span after its target (`tools/call echo`), once the target
    /// is one the policy vouches for (span names must stay few).
    pub fn rename(&self, method: &'static str, target: &str) {
        if self.is_recording() {
            if let Some(cx) = &self.0 {
                cx.span().update_name(format!("{method} {target}"));
            }
        }
    }

    /// A gate the request passed (`pass`), or that asked a person (`ask`).
    pub fn gate(&self, gate: &'static str, result: &'static str) {
        if let Some(cx) = &self.0 {
            cx.span()
                .add_event(gate, vec![KeyValue::new("mcpwarden.gate.result", result)]);
        }
    }

    /// The request was refused: the gate that did it, its code and reason.
    pub fn refused(&self, refusal: &impl Refused) {
        let Some(cx) = &self.0 else { return };
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        let (gate, code, reason) = (refusal.gate(), refusal.code(), refusal.reason());
        span.add_event(
            gate,
            vec![
                KeyValue::new("mcpwarden.gate.result", "deny"),
                KeyValue::new("mcpwarden.code", code),
                KeyValue::new("mcpwarden.reason", reason),
            ],
        );
        span.set_attributes([
            KeyValue::new("mcpwarden.decision", "deny"),
            KeyValue::new("mcpwarden.gate", gate),
            KeyValue::new("mcpwarden.code", code),
            KeyValue::new("mcpwarden.reason", reason),
            KeyValue::new("error.type", reason),
            KeyValue::new("rpc.response.status_code", code.to_string()),
        ]);
        span.set_status(Status::error(reason));
    }

    /// How the request ended when nothing refused it (`ok`, `error`,
    /// `failed`, `cancelled`, `input_required`).
    pub fn ended(&self, outcome: &'static str) {
        if self.is_recording() {
            self.set(vec![KeyValue::new("mcpwarden.decision", "allow")]);
            self.outcome(outcome);
        }
    }

    /// How an exchange ended (`ok`, `error`: the server answered with an
    /// error, `failed`, `timeout`, `cancelled`, …).
    pub fn outcome(&self, outcome: &'static str) {
        let Some(cx) = &self.0 else { return };
        let span = cx.span();
        if !span.is_recording() {
            return;
        }
        span.set_attribute(KeyValue::new("mcpwarden.outcome", outcome));
        match outcome {
            "failed" | "timeout" => {
                let kind = if outcome == "failed" {
                    "upstream_failed"
                } else {
                    "timeout"
                };
                span.set_attribute(KeyValue::new("error.type", kind));
                span.set_status(Status::error(kind));
            }
            "error" => span.set_attribute(KeyValue::new("error.type", "tool_error")),
            _ => {}
        }
    }

    /// End it now (it also ends when dropped).
    pub fn end(&self) {
        if let Some(cx) = &self.0 {
            cx.span().end();
        }
    }
}

impl Drop for RequestSpan {
    fn drop(&mut self) {
        self.end();
    }
}

/// The caller's trace context in a request: `params._meta` first (the
/// MCP carrier), then the HTTP header of the request that brought it.
/// Only called when tracing is on.
pub fn parent_of(request: Option<&serde_json::Value>) -> Option<Context> {
    let meta = request.and_then(|r| r.pointer("/params/_meta"));
    let from_meta = meta.and_then(|m| {
        mcp_warden_telemetry::carrier::extract(|k| m.get(k).and_then(serde_json::Value::as_str))
    });
    from_meta.or_else(|| HEADER_PARENT.try_with(Context::clone).ok())
}

/// The trace context of an HTTP request's headers (`None` when off or absent).
pub fn header_parent(headers: &hyper::HeaderMap) -> Option<Context> {
    if !enabled() || !headers.contains_key(mcp_warden_telemetry::carrier::TRACEPARENT) {
        return None;
    }
    mcp_warden_telemetry::carrier::extract(|k| headers.get(k).and_then(|v| v.to_str().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_is_inert() {
        let t = Telemetry::default();
        assert!(!t.is_on());
        let span = t.request(None, "tools/call", || panic!("no attributes when off"));
        assert!(span.context().is_none() && !span.is_recording());
        span.gate("policy", "pass");
        span.ended("ok");
    }

    #[test]
    fn meta_wins_over_the_header() {
        let meta = serde_json::json!({"params": {"_meta": {
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}}});
        let header = mcp_warden_telemetry::carrier::extract(|k| {
            (k == "traceparent")
                .then_some("00-11111111111111111111111111111111-2222222222222222-01")
        })
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let (from_meta, from_header) = rt.block_on(HEADER_PARENT.scope(header, async {
            (
                parent_of(Some(&meta)),
                parent_of(Some(&serde_json::json!({"params": {}}))),
            )
        }));
        let trace = |cx: Option<Context>| cx.unwrap().span().span_context().trace_id().to_string();
        assert_eq!(trace(from_meta), "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(trace(from_header), "11111111111111111111111111111111");
        assert!(parent_of(None).is_none());
    }
}
