//! Structured JSON logs on stderr; `RUST_LOG` filters (default `info`). The
//! controller's reconcile span carries the object's namespace and name.
//!
//! With an OTLP endpoint configured (the standard `OTEL_*` variables, see
//! `mcp-warden-telemetry`), the operator's own spans are exported too: one
//! per reconcile (namespace, name, generation, result), its steps as events.
//! Only the operator's spans (not kube's or hyper's), at debug and above,
//! whatever `RUST_LOG` says about logs.

use mcp_warden_telemetry::opentelemetry::trace::TracerProvider as _;
use mcp_warden_telemetry::opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, EnvFilter, Layer};

/// Install the JSON subscriber (once, at start-up, inside the runtime) and,
/// when tracing is configured, the OpenTelemetry layer; returns the
/// provider to flush at exit.
pub fn init() -> Result<Option<SdkTracerProvider>, String> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let logs = fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_writer(std::io::stderr)
        .with_filter(filter);
    // Set up before the subscriber exists: an error is reported after it is.
    let provider = mcp_warden_telemetry::tracer_provider("mcp-warden-operator");
    let otel = provider
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .map(otel_layer);
    tracing_subscriber::registry().with(logs).with(otel).init();
    let provider = provider.map_err(|e| format!("OpenTelemetry: {e}"))?;
    if provider.is_some() {
        tracing::info!("OpenTelemetry tracing on: reconciles are exported as spans");
    }
    Ok(provider)
}

/// The layer that turns the operator's spans into OpenTelemetry spans
/// (public so that tests export through exactly this one).
pub fn otel_layer<S>(provider: &SdkTracerProvider) -> impl Layer<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("mcp-warden-operator"))
        .with_filter(Targets::new().with_target("mcp_warden_operator", LevelFilter::DEBUG))
}
