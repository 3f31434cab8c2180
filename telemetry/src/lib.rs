//! OpenTelemetry for mcp-warden's two binaries: where spans go and how a
//! trace context crosses a hop.
//!
//! Where it sits: each binary calls [`tracer_provider`] once at start-up.
//! Tracing is **off** unless an OTLP endpoint is configured
//! (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), and
//! `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` turn it off again;
//! when off, the binaries hold no tracer and their span helpers do nothing.
//! Everything else follows the standard variables, read by the SDK:
//! `OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL` (`http/protobuf`, the default, or
//! `grpc`), `…_HEADERS`, `…_TIMEOUT`, `OTEL_TRACES_SAMPLER[_ARG]`,
//! `OTEL_BSP_*` (the batch queue: spans beyond it are dropped, never
//! waited for), `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`.
//!
//! - [`carrier`]: W3C trace context (`traceparent`, `tracestate`) in and out
//!   of string maps (an MCP `_meta` object, HTTP headers);
//! - [`http_client`]: the OTLP/HTTP exporter's client, on the binary's tokio
//!   runtime (the SDK exports from a thread of its own).
#![forbid(unsafe_code)]

pub mod carrier;
pub mod http_client;

use std::time::Duration;

pub use opentelemetry;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
pub use opentelemetry_sdk;
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

/// Why tracing could not be set up as configured.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{var}={value:?}: the OTLP protocol must be `http/protobuf` or `grpc`")]
    Protocol { var: &'static str, value: String },
    #[error("{var}={value:?}: the OTLP endpoint must be an http:// URL (this build sends OTLP without TLS: export to a collector on the node or in the pod)")]
    Endpoint { var: &'static str, value: String },
    #[error("the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// How spans leave the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    HttpProtobuf,
    Grpc,
}

/// What the environment asks for: `None` when tracing is off.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    pub protocol: Protocol,
    /// The endpoint variable that is set, and its value.
    pub endpoint: (&'static str, String),
}

const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";

impl Settings {
    /// Read the variables (through `var`, so tests need no process environment).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Settings>, Error> {
        let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        if set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none")) {
            return Ok(None);
        }
        let endpoint = match (set(TRACES_ENDPOINT), set(ENDPOINT)) {
            (Some(v), _) => (TRACES_ENDPOINT, v),
            (None, Some(v)) => (ENDPOINT, v),
            (None, None) => return Ok(None),
        };
        if !endpoint.1.trim().starts_with("http://") {
            return Err(Error::Endpoint {
                var: endpoint.0,
                value: endpoint.1,
            });
        }
        let protocol = match set(TRACES_PROTOCOL)
            .map(|v| (TRACES_PROTOCOL, v))
            .or_else(|| set(PROTOCOL).map(|v| (PROTOCOL, v)))
        {
            None => Protocol::HttpProtobuf,
            Some((_, v)) if v.trim() == "http/protobuf" => Protocol::HttpProtobuf,
            Some((_, v)) if v.trim() == "grpc" => Protocol::Grpc,
            Some((var, value)) => return Err(Error::Protocol { var, value }),
        };
        Ok(Some(Settings { protocol, endpoint }))
    }
}

/// The tracer provider the environment asks for (`None`: tracing is off).
/// Must run inside the tokio runtime the exporter will use.
/// `service` names the binary unless `OTEL_SERVICE_NAME` does.
pub fn tracer_provider(service: &'static str) -> Result<Option<SdkTracerProvider>, Error> {
    let Some(settings) = Settings::from_vars(|k| std::env::var(k).ok())? else {
        return Ok(None);
    };
    let exporter = match settings.protocol {
        Protocol::Grpc => opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_protocol(opentelemetry_otlp::Protocol::Grpc)
            .build()?,
        Protocol::HttpProtobuf => opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_http_client(http_client::HyperClient::new(
                tokio::runtime::Handle::current(),
                export_timeout(),
            ))
            .build()?,
    };
    let mut resource = Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(service);
    }
    let resource = resource
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    tracing::info!(
        protocol = ?settings.protocol,
        endpoint_from = settings.endpoint.0,
        "OpenTelemetry tracing on"
    );
    Ok(Some(
        SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build(),
    ))
}

/// `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT` (milliseconds), default 10 s: the
/// HTTP client enforces it (the SDK leaves that to the client).
fn export_timeout() -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok()?.trim().parse::<u64>().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

/// Flush and stop the provider: the last thing a binary does (blocks, so
/// it runs on a blocking thread).
pub async fn shutdown(provider: Option<SdkTracerProvider>) {
    let Some(provider) = provider else { return };
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = provider.shutdown_with_timeout(Duration::from_secs(5)) {
            tracing::warn!(error = %e, "OpenTelemetry: spans may be lost at shutdown");
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(vars: &[(&str, &str)]) -> Result<Option<Settings>, Error> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_vars(|k| map.get(k).cloned())
    }

    #[test]
    fn off_without_an_endpoint_or_when_disabled() {
        assert_eq!(settings(&[]).unwrap(), None);
        assert_eq!(settings(&[(PROTOCOL, "grpc")]).unwrap(), None);
        let on = [(ENDPOINT, "http://c:4318")];
        assert!(settings(&on).unwrap().is_some());
        assert_eq!(
            settings(&[on[0], ("OTEL_SDK_DISABLED", "TRUE")]).unwrap(),
            None
        );
        assert_eq!(
            settings(&[on[0], ("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
    }

    #[test]
    fn the_signal_variables_win_and_http_protobuf_is_the_default() {
        let s = settings(&[
            (ENDPOINT, "http://generic:4318"),
            (TRACES_ENDPOINT, "http://traces:4317"),
            (PROTOCOL, "http/protobuf"),
            (TRACES_PROTOCOL, "grpc"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(s.protocol, Protocol::Grpc);
        assert_eq!(s.endpoint, (TRACES_ENDPOINT, "http://traces:4317".into()));
        let s = settings(&[(ENDPOINT, "http://c:4318")]).unwrap().unwrap();
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
    }

    #[test]
    fn what_this_build_cannot_do_is_an_error_not_silence() {
        assert!(matches!(
            settings(&[(ENDPOINT, "http://c:4318"), (PROTOCOL, "http/json")]),
            Err(Error::Protocol { .. })
        ));
        assert!(matches!(
            settings(&[(ENDPOINT, "https://c:4318")]),
            Err(Error::Endpoint { .. })
        ));
    }
}
