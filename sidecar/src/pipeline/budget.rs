//! Budgets: per-session call counts, a calls-per-minute token bucket,
//! concurrency per session and across the facade, session wall time, and the
//! size of a call's arguments. Checked before a call goes upstream; the
//! concurrency slots are held by a [`CallPermit`] until the call ends.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mcp_warden_policy::ResolvedLimits;

use super::refusal::{Budget, Refusal};

/// Tool calls running across all sessions.
#[derive(Default)]
pub struct GlobalCalls(AtomicU64);

impl GlobalCalls {
    /// Calls running now (the `mcpwarden_tool_calls_in_flight` gauge).
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// One session's budget state.
pub struct SessionBudget {
    started: Instant,
    calls: AtomicU64,
    in_flight: Arc<AtomicU64>,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    refilled: Instant,
}

/// Holds a call's concurrency slots; dropping it frees them.
pub struct CallPermit {
    session: Arc<AtomicU64>,
    global: Arc<GlobalCalls>,
}

impl Drop for CallPermit {
    fn drop(&mut self) {
        self.session.fetch_sub(1, Ordering::AcqRel);
        self.global.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Default for SessionBudget {
    fn default() -> Self {
        SessionBudget {
            started: Instant::now(),
            calls: AtomicU64::new(0),
            in_flight: Arc::new(AtomicU64::new(0)),
            bucket: Mutex::new(Bucket {
                tokens: f64::NAN,
                refilled: Instant::now(),
            }),
        }
    }
}

impl SessionBudget {
    /// Admit one call, or say which budget it would exceed. Order: argument
    /// size, session wall time, calls per session, rate, concurrency (so a
    /// refused call consumes nothing it should not).
    pub fn admit(
        &self,
        tool: &str,
        limits: &ResolvedLimits,
        arg_bytes: u64,
        global: &Arc<GlobalCalls>,
    ) -> Result<CallPermit, Refusal> {
        let refuse = |budget, limit: u64, observed: u64| Refusal::Budget {
            tool: tool.to_string(),
            budget,
            limit,
            observed,
        };
        if arg_bytes > limits.max_arg_bytes {
            return Err(refuse(Budget::ArgBytes, limits.max_arg_bytes, arg_bytes));
        }
        let age = self.started.elapsed();
        if age > limits.session_wall {
            return Err(refuse(
                Budget::SessionWallTime,
                limits.session_wall.as_secs(),
                age.as_secs(),
            ));
        }
        let made = self.calls.load(Ordering::Acquire);
        if made >= limits.max_calls_per_session {
            return Err(refuse(
                Budget::CallsPerSession,
                limits.max_calls_per_session,
                made + 1,
            ));
        }
        self.take_token(limits.calls_per_minute).map_err(|_| {
            refuse(
                Budget::CallsPerMinute,
                limits.calls_per_minute,
                limits.calls_per_minute + 1,
            )
        })?;
        let running = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if running >= limits.max_concurrent_calls {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(refuse(
                Budget::ConcurrentCalls,
                limits.max_concurrent_calls,
                running + 1,
            ));
        }
        let total = global.0.fetch_add(1, Ordering::AcqRel);
        if total >= limits.max_concurrent_calls_total {
            global.0.fetch_sub(1, Ordering::AcqRel);
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(refuse(
                Budget::ConcurrentCallsTotal,
                limits.max_concurrent_calls_total,
                total + 1,
            ));
        }
        self.calls.fetch_add(1, Ordering::AcqRel);
        Ok(CallPermit {
            session: self.in_flight.clone(),
            global: global.clone(),
        })
    }

    /// Token bucket of `per_minute` capacity, refilled continuously.
    fn take_token(&self, per_minute: u64) -> Result<(), ()> {
        let capacity = per_minute as f64;
        let mut b = self.bucket.lock().unwrap();
        let now = Instant::now();
        if b.tokens.is_nan() {
            b.tokens = capacity;
        } else {
            let refill = now.duration_since(b.refilled).as_secs_f64() * capacity / 60.0;
            b.tokens = (b.tokens + refill).min(capacity);
        }
        b.refilled = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::Limits;

    fn limits(yaml: &str) -> ResolvedLimits {
        let l: Limits = serde_yaml_ng::from_str(yaml).unwrap();
        ResolvedLimits::resolve(None, &l)
    }

    #[test]
    fn refuses_oversized_arguments_without_spending_a_call() {
        let b = SessionBudget::default();
        let g = Arc::new(GlobalCalls::default());
        let l = limits("maxArgBytes: 10");
        let err = b.admit("t", &l, 11, &g).err().unwrap();
        assert!(matches!(
            err,
            Refusal::Budget {
                budget: Budget::ArgBytes,
                limit: 10,
                observed: 11,
                ..
            }
        ));
        assert_eq!(b.calls.load(Ordering::Acquire), 0);
    }

    #[test]
    fn counts_calls_per_session() {
        let b = SessionBudget::default();
        let g = Arc::new(GlobalCalls::default());
        let l = limits("maxCallsPerSession: 2");
        drop(b.admit("t", &l, 1, &g).unwrap());
        drop(b.admit("t", &l, 1, &g).unwrap());
        assert!(matches!(
            b.admit("t", &l, 1, &g),
            Err(Refusal::Budget {
                budget: Budget::CallsPerSession,
                ..
            })
        ));
    }

    #[test]
    fn concurrency_slots_are_released_by_the_permit() {
        let b = SessionBudget::default();
        let g = Arc::new(GlobalCalls::default());
        let l = limits("maxConcurrentCalls: 1");
        let first = b.admit("t", &l, 1, &g).unwrap();
        assert!(matches!(
            b.admit("t", &l, 1, &g),
            Err(Refusal::Budget {
                budget: Budget::ConcurrentCalls,
                ..
            })
        ));
        drop(first);
        assert!(b.admit("t", &l, 1, &g).is_ok());
        assert_eq!(g.0.load(Ordering::Acquire), 0, "all slots free again");
    }

    #[test]
    fn global_concurrency_spans_sessions() {
        let g = Arc::new(GlobalCalls::default());
        let l = limits("maxConcurrentCallsTotal: 1");
        let (a, b) = (SessionBudget::default(), SessionBudget::default());
        let _held = a.admit("t", &l, 1, &g).unwrap();
        assert!(matches!(
            b.admit("t", &l, 1, &g),
            Err(Refusal::Budget {
                budget: Budget::ConcurrentCallsTotal,
                ..
            })
        ));
    }

    #[test]
    fn rate_limit_is_a_token_bucket() {
        let b = SessionBudget::default();
        let g = Arc::new(GlobalCalls::default());
        let l = limits("callsPerMinute: 3");
        for _ in 0..3 {
            drop(b.admit("t", &l, 1, &g).unwrap());
        }
        assert!(matches!(
            b.admit("t", &l, 1, &g),
            Err(Refusal::Budget {
                budget: Budget::CallsPerMinute,
                ..
            })
        ));
    }
}
