//! With tracing on, each reconcile is one exported span: named for the
//! object and its outcome, the pipeline steps it reached as events. A test
//! binary of its own: the subscriber is per thread, and tracing's callsite
//! cache races with tests on other threads that run without one.

mod support;

use std::sync::{Arc, Mutex};

use mcp_warden_telemetry::{
    opentelemetry::trace::{SpanId, Status},
    opentelemetry_sdk::{
        error::OTelSdkResult,
        trace::{SdkTracerProvider, SpanData, SpanExporter},
    },
};
use support::*;
use tracing_subscriber::layer::SubscriberExt;

/// Collects the spans the operator exports (in place of an OTLP exporter).
#[derive(Clone, Debug, Default)]
struct Exported(Arc<Mutex<Vec<SpanData>>>);

impl SpanExporter for Exported {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        self.0.lock().unwrap().extend(batch);
        std::future::ready(Ok(()))
    }
}

fn attribute(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.to_string())
}

/// With tracing on, a reconcile is one span named for the object and its
/// outcome, the pipeline steps it reached as events, through the same layer
/// `run` installs; a server that waits for its profile stops after `plan`.
#[tokio::test]
async fn each_reconcile_is_a_span_with_its_steps_as_events() {
    let exported = Exported::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exported.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(mcp_warden_operator::runtime::logging::otel_layer(&provider));
    let _default = tracing::subscriber::set_default(subscriber);

    Fixture::new()
        .with_server()
        .with_tool_profile(tools_v1())
        .reconcile()
        .await;
    Fixture::new().with_server().reconcile().await;

    let spans = exported.0.lock().unwrap().clone();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    assert_eq!(
        names,
        ["reconcile", "reconcile"],
        "only the operator's spans"
    );
    let steps = |span: &SpanData| -> Vec<String> {
        span.events
            .iter()
            .filter(|e| e.name == "reconcile step")
            .filter_map(|e| {
                e.attributes
                    .iter()
                    .find(|kv| kv.key.as_str() == "step")
                    .map(|kv| kv.value.to_string())
            })
            .collect()
    };
    let (applied, waiting) = (&spans[0], &spans[1]);
    for span in [applied, waiting] {
        assert_eq!(attribute(span, "namespace").as_deref(), Some(NS));
        assert_eq!(attribute(span, "name").as_deref(), Some("git"));
        assert_eq!(attribute(span, "generation").as_deref(), Some("1"));
        assert_eq!(
            span.parent_span_id,
            SpanId::INVALID,
            "a root span per reconcile"
        );
        assert_eq!(span.status, Status::Unset);
    }
    assert_ne!(
        applied.span_context.trace_id(),
        waiting.span_context.trace_id()
    );
    assert_eq!(attribute(applied, "result").as_deref(), Some("applied"));
    assert_eq!(
        steps(applied),
        ["resolve", "plan", "apply", "observe", "status"]
    );
    assert_eq!(attribute(waiting, "result").as_deref(), Some("waiting"));
    assert_eq!(steps(waiting), ["resolve", "plan"]);
}
