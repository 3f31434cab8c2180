//! Operator metrics (contract names, prefix `mcpwarden_`):
//! `mcpwarden_reconcile_total{result}`,
//! `mcpwarden_reconcile_duration_seconds` and `mcpwarden_capabilities_pending`
//! (MCPServers waiting for an admin's approval, counted from the
//! controller's cache when scraped, so deleted servers drop out by
//! themselves). `result` is one of `applied`, `waiting`, `resolve_error`,
//! `apply_error`, `status_error` — bounded.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// Counts the servers pending approval (set once the controller runs).
type PendingCount = Arc<dyn Fn() -> usize + Send + Sync>;

/// The operator's metrics and their registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    reconciles: IntCounterVec,
    duration: Histogram,
    pending: IntGauge,
    count_pending: Arc<Mutex<Option<PendingCount>>>,
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
        let pending = IntGauge::new(
            "mcpwarden_capabilities_pending",
            "MCPServers whose requested capabilities wait for an admin's approval",
        )
        .expect("valid metric");
        registry
            .register(Box::new(duration.clone()))
            .expect("registers once");
        registry
            .register(Box::new(pending.clone()))
            .expect("registers once");
        Metrics {
            registry,
            reconciles,
            duration,
            pending,
            count_pending: Default::default(),
        }
    }
}

impl Metrics {
    /// Count one reconcile and its duration.
    pub fn observe(&self, result: &str, took: Duration) {
        self.reconciles.with_label_values(&[result]).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// Where `mcpwarden_capabilities_pending` comes from (the controller's cache).
    pub fn count_pending_with(&self, count: impl Fn() -> usize + Send + Sync + 'static) {
        *self.count_pending.lock().expect("metrics lock") = Some(Arc::new(count));
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let count = self.count_pending.lock().expect("metrics lock").clone();
        if let Some(count) = count {
            self.pending.set(count() as i64);
        }
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
    fn capabilities_pending_is_counted_when_scraped() {
        let m = Metrics::default();
        assert!(m.render().contains("mcpwarden_capabilities_pending 0"));
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(3));
        let seen = n.clone();
        m.count_pending_with(move || seen.load(std::sync::atomic::Ordering::Relaxed));
        assert!(m.render().contains("mcpwarden_capabilities_pending 3"));
        n.store(1, std::sync::atomic::Ordering::Relaxed);
        assert!(
            m.clone()
                .render()
                .contains("mcpwarden_capabilities_pending 1"),
            "a clone (the admin server's) sees the same source"
        );
    }

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
