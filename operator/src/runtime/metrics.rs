//! Operator metrics (contract names, prefix `mcpwarden_`):
//! `mcpwarden_reconcile_total{result}` and
//! `mcpwarden_reconcile_duration_seconds`. `result` is one of `applied`,
//! `waiting`, `resolve_error`, `apply_error`, `status_error` — bounded.

use std::time::Duration;

use prometheus::{Encoder, Histogram, HistogramOpts, IntCounterVec, Opts, Registry, TextEncoder};

/// The operator's metrics and their registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    reconciles: IntCounterVec,
    duration: Histogram,
}

impl Default for Metrics {
    fn default() -> Self {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new(
                "mcpwarden_reconcile_total",
                "Reconciles of MCPServers, by result",
            ),
            &["result"],
        )
        .expect("valid metric");
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "mcpwarden_reconcile_duration_seconds",
                "Duration of one MCPServer reconcile",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )
        .expect("valid metric");
        registry
            .register(Box::new(reconciles.clone()))
            .expect("registers once");
        registry
            .register(Box::new(duration.clone()))
            .expect("registers once");
        Metrics {
            registry,
            reconciles,
            duration,
        }
    }
}

impl Metrics {
    /// Count one reconcile and its duration.
    pub fn observe(&self, result: &str, took: Duration) {
        self.reconciles.with_label_values(&[result]).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding");
        String::from_utf8(buf).expect("utf-8")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_contract_names() {
        let m = Metrics::default();
        m.observe("applied", Duration::from_millis(20));
        let text = m.render();
        assert!(
            text.contains("mcpwarden_reconcile_total{result=\"applied\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("mcpwarden_reconcile_duration_seconds_count 1"),
            "{text}"
        );
    }
}
