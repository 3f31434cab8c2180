//! Structured JSON logs on stderr; `RUST_LOG` filters (default `info`). The
//! controller's reconcile span carries the object's namespace and name.

use tracing_subscriber::{fmt, EnvFilter};

/// Install the JSON subscriber (once, at start-up).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    fmt()
        .json()
        .with_current_span(true)
        .with_span_list(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
