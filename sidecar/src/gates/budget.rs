//! Budgets: per-session call counts, a calls-per-minute token bucket,
//! concurrency per session and across the facade, session wall time, the
//! size of a call's arguments, and calls per identity per window across
//! that identity's sessions ([`IdentityBudgets`]). Checked before a call
//! goes upstream; the concurrency slots are held by a [`CallPermit`] until
//! the call ends.
//!
//! Which budget is which: `maxCallsPerSession`, `callsPerMinute` and
//! `maxConcurrentCalls` are per session (a modern caller's: per caller and
//! replica) and so bound one session, never use — a caller with five
//! sessions gets five of them; `maxCallsPerIdentity` is the one a new
//! session does not reset, keyed by the issuer-qualified identity (one
//! source address for anonymous callers); `maxConcurrentCallsTotal` is the
//! facade's. [`IdentityBudgets`] counts on this replica; with peers
//! configured, `super::shared_budget` makes one budget across the replicas
//! (each identity's owner replica keeps these windows, the others ask it).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use mcp_warden_crds::IdentityBudget;
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

/// Calls per identity per fixed window, across the identity's sessions:
/// `(identity, scope)` → the window's index, its count and its length. The scope is
/// `""` for the profile-wide budget, a tool's name for a tool's own.
#[derive(Default)]
pub struct IdentityBudgets {
    windows: Mutex<HashMap<(String, String), Window>>,
}

/// A window's index (unix time / its length), calls counted, and length (s).
type Window = (u64, u64, u64);

/// Entries kept before stale windows are swept.
const SWEEP_AT: usize = 4096;

impl IdentityBudgets {
    /// Take one call for `identity` from each `(scope, budget)` at unix time
    /// `now` — all or none. `Err((limit, observed))` names the first budget
    /// that is spent.
    pub fn take(
        &self,
        identity: &str,
        budgets: &[(&str, IdentityBudget)],
        now: u64,
    ) -> Result<(), (u64, u64)> {
        let mut windows = self.windows.lock().unwrap();
        if windows.len() >= SWEEP_AT {
            // Windows that are over count nothing any more.
            windows.retain(|_, (index, _, per)| (*index + 1) * *per > now);
        }
        for (scope, budget) in budgets {
            let index = now / budget.per.seconds();
            let used = match windows.get(&(identity.to_string(), scope.to_string())) {
                Some((i, n, p)) if *i == index && *p == budget.per.seconds() => *n,
                _ => 0,
            };
            if used >= budget.calls {
                return Err((budget.calls, used + 1));
            }
        }
        for (scope, budget) in budgets {
            let index = now / budget.per.seconds();
            let per = budget.per.seconds();
            let entry = windows
                .entry((identity.to_string(), scope.to_string()))
                .or_insert((index, 0, per));
            if entry.0 != index || entry.2 != per {
                *entry = (index, 0, per);
            }
            entry.1 += 1;
        }
        Ok(())
    }

    /// Give back a call [`IdentityBudgets::take`] took, when a later budget
    /// refused it (a refused call consumes nothing).
    pub fn give_back(&self, identity: &str, budgets: &[(&str, IdentityBudget)], now: u64) {
        let mut windows = self.windows.lock().unwrap();
        for (scope, budget) in budgets {
            if let Some((index, n, _)) = windows.get_mut(&(identity.to_string(), scope.to_string()))
            {
                if *index == now / budget.per.seconds() {
                    *n = n.saturating_sub(1);
                }
            }
        }
    }
}

/// The identity budgets a call counts against: the profile's (scope `""`),
/// and the tool's own when it sets a different one (scope: the tool).
pub fn identity_budgets<'a>(
    tool: &'a str,
    limits: &ResolvedLimits,
    profile: &ResolvedLimits,
) -> Vec<(&'a str, IdentityBudget)> {
    let mut out = Vec::new();
    if let Some(b) = profile.max_calls_per_identity {
        out.push(("", b));
    }
    if let Some(b) = limits.max_calls_per_identity {
        if limits.max_calls_per_identity != profile.max_calls_per_identity {
            out.push((tool, b));
        }
    }
    out
}

/// One session's budget state (a modern caller's: one per caller, see
/// `Context::budget_for`).
pub struct SessionBudget {
    started: Instant,
    /// When a call was last admitted (an idle caller's budget is forgotten).
    last_call: Mutex<Instant>,
    calls: AtomicU64,
    in_flight: Arc<AtomicU64>,
    /// Calls-per-minute buckets: `""` for the session as a whole (the
    /// profile's rate), plus one per tool whose rule sets its own rate.
    buckets: Mutex<HashMap<String, Bucket>>,
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
            last_call: Mutex::new(Instant::now()),
            calls: AtomicU64::new(0),
            in_flight: Arc::new(AtomicU64::new(0)),
            buckets: Mutex::new(HashMap::new()),
        }
    }
}

impl SessionBudget {
    /// Admit one call, or say which budget it would exceed. Order: argument
    /// size, session wall time, calls per session, concurrency (session, then
    /// facade), rate — and a refused call consumes nothing.
    /// `session_rate` is the profile's calls per minute for the whole
    /// session; a tool whose own rate differs also gets its own bucket.
    pub fn admit(
        &self,
        tool: &str,
        limits: &ResolvedLimits,
        session_rate: u64,
        arg_bytes: u64,
        global: &Arc<GlobalCalls>,
    ) -> Result<CallPermit, Refusal> {
        let refuse = |budget, limit: u64, observed: Option<u64>| Refusal::Budget {
            tool: tool.to_string(),
            budget,
            limit,
            observed,
        };
        if arg_bytes > limits.max_arg_bytes {
            return Err(refuse(
                Budget::ArgBytes,
                limits.max_arg_bytes,
                Some(arg_bytes),
            ));
        }
        let age = self.started.elapsed();
        if age > limits.session_wall {
            return Err(refuse(
                Budget::SessionWallTime,
                limits.session_wall.as_secs(),
                Some(age.as_secs()),
            ));
        }
        let made = self.calls.load(Ordering::Acquire);
        if made >= limits.max_calls_per_session {
            return Err(refuse(
                Budget::CallsPerSession,
                limits.max_calls_per_session,
                Some(made + 1),
            ));
        }
        let running = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if running >= limits.max_concurrent_calls {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return Err(refuse(
                Budget::ConcurrentCalls,
                limits.max_concurrent_calls,
                Some(running + 1),
            ));
        }
        let total = global.0.fetch_add(1, Ordering::AcqRel);
        // The permit releases both slots if anything below refuses.
        let permit = CallPermit {
            session: self.in_flight.clone(),
            global: global.clone(),
        };
        if total >= limits.max_concurrent_calls_total {
            return Err(refuse(
                Budget::ConcurrentCallsTotal,
                limits.max_concurrent_calls_total,
                Some(total + 1),
            ));
        }
        let tool_rate =
            (limits.calls_per_minute != session_rate).then_some((tool, limits.calls_per_minute));
        if let Err(limit) = self.take_tokens(session_rate, tool_rate) {
            return Err(refuse(Budget::CallsPerMinute, limit, None));
        }
        self.calls.fetch_add(1, Ordering::AcqRel);
        *self.last_call.lock().unwrap() = Instant::now();
        Ok(permit)
    }

    /// Undo the call count of an admitted call that a later budget refused
    /// (its permit, dropped, frees the concurrency slots; a rate token
    /// stays spent).
    pub fn give_back(&self) {
        let _ = self
            .calls
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }

    /// Whether a call is running or was admitted within `window`.
    pub fn active_within(&self, window: std::time::Duration) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
            || self.last_call.lock().unwrap().elapsed() < window
    }

    /// Take one token from the session bucket and, if given, the tool's
    /// bucket — both or neither. Buckets hold a minute's worth of calls and
    /// refill continuously. Returns the exhausted limit.
    fn take_tokens(&self, session_rate: u64, tool: Option<(&str, u64)>) -> Result<(), u64> {
        let mut buckets = self.buckets.lock().unwrap();
        let now = Instant::now();
        let mut refill = |key: &str, per_minute: u64| -> bool {
            let capacity = per_minute as f64;
            let b = buckets.entry(key.to_string()).or_insert(Bucket {
                tokens: capacity,
                refilled: now,
            });
            let add = now.duration_since(b.refilled).as_secs_f64() * capacity / 60.0;
            b.tokens = (b.tokens + add).min(capacity);
            b.refilled = now;
            b.tokens >= 1.0
        };
        if !refill("", session_rate) {
            return Err(session_rate);
        }
        if let Some((name, rate)) = tool {
            if !refill(name, rate) {
                return Err(rate);
            }
        }
        buckets.get_mut("").expect("just refilled").tokens -= 1.0;
        if let Some((name, _)) = tool {
            buckets.get_mut(name).expect("just refilled").tokens -= 1.0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_warden_crds::{BudgetWindow, Limits};

    #[test]
    fn an_identity_budget_spans_sessions_and_resets_with_the_window() {
        let b = IdentityBudgets::default();
        let two = IdentityBudget {
            calls: 2,
            per: BudgetWindow::Minute,
        };
        let t0 = 1_700_000_040; // 0 s into a minute window
        assert!(b.take("alice", &[("", two)], t0).is_ok());
        assert!(b.take("alice", &[("", two)], t0 + 10).is_ok());
        // The third call in the window is refused, whichever session makes it.
        assert_eq!(b.take("alice", &[("", two)], t0 + 59), Err((2, 3)));
        // Someone else is not affected.
        assert!(b.take("bob", &[("", two)], t0 + 59).is_ok());
        // The next window starts afresh.
        assert!(b.take("alice", &[("", two)], t0 + 60).is_ok());
        // A per-hour budget keeps counting over minutes.
        let hourly = IdentityBudget {
            calls: 1,
            per: BudgetWindow::Hour,
        };
        let h0 = 1_699_999_200; // an hour boundary
        assert!(b.take("carol", &[("t", hourly)], h0).is_ok());
        assert_eq!(b.take("carol", &[("t", hourly)], h0 + 3599), Err((1, 2)));
        assert!(b.take("carol", &[("t", hourly)], h0 + 3600).is_ok());
    }

    #[test]
    fn both_identity_budgets_are_taken_or_neither_and_refunds_give_back() {
        let b = IdentityBudgets::default();
        let wide = IdentityBudget {
            calls: 5,
            per: BudgetWindow::Minute,
        };
        let tight = IdentityBudget {
            calls: 1,
            per: BudgetWindow::Minute,
        };
        let t = 1_700_000_040;
        assert!(b.take("a", &[("", wide), ("t", tight)], t).is_ok());
        assert_eq!(b.take("a", &[("", wide), ("t", tight)], t), Err((1, 2)));
        // The refused call took nothing from the wide budget: four are left.
        for _ in 0..4 {
            assert!(b.take("a", &[("", wide)], t).is_ok());
        }
        assert_eq!(b.take("a", &[("", wide)], t), Err((5, 6)));
        b.give_back("a", &[("", wide)], t);
        assert!(b.take("a", &[("", wide)], t).is_ok());
    }

    fn limits(yaml: &str) -> ResolvedLimits {
        let l: Limits = serde_yaml_ng::from_str(yaml).unwrap();
        ResolvedLimits::resolve(None, &l)
    }

    #[test]
    fn refuses_oversized_arguments_without_spending_a_call() {
        let b = SessionBudget::default();
        let g = Arc::new(GlobalCalls::default());
        let l = limits("maxArgBytes: 10");
        let err = b.admit("t", &l, l.calls_per_minute, 11, &g).err().unwrap();
        assert!(matches!(
            err,
            Refusal::Budget {
                budget: Budget::ArgBytes,
                limit: 10,
                observed: Some(11),
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
        drop(b.admit("t", &l, l.calls_per_minute, 1, &g).unwrap());
        drop(b.admit("t", &l, l.calls_per_minute, 1, &g).unwrap());
        assert!(matches!(
            b.admit("t", &l, l.calls_per_minute, 1, &g),
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
        let first = b.admit("t", &l, l.calls_per_minute, 1, &g).unwrap();
        assert!(matches!(
            b.admit("t", &l, l.calls_per_minute, 1, &g),
            Err(Refusal::Budget {
                budget: Budget::ConcurrentCalls,
                ..
            })
        ));
        drop(first);
        assert!(b.admit("t", &l, l.calls_per_minute, 1, &g).is_ok());
        assert_eq!(g.0.load(Ordering::Acquire), 0, "all slots free again");
    }

    #[test]
    fn global_concurrency_spans_sessions() {
        let g = Arc::new(GlobalCalls::default());
        let l = limits("maxConcurrentCallsTotal: 1");
        let (a, b) = (SessionBudget::default(), SessionBudget::default());
        let _held = a.admit("t", &l, l.calls_per_minute, 1, &g).unwrap();
        assert!(matches!(
            b.admit("t", &l, l.calls_per_minute, 1, &g),
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
            drop(b.admit("t", &l, l.calls_per_minute, 1, &g).unwrap());
        }
        assert!(matches!(
            b.admit("t", &l, l.calls_per_minute, 1, &g),
            Err(Refusal::Budget {
                budget: Budget::CallsPerMinute,
                ..
            })
        ));
    }

    #[test]
    fn a_tool_with_its_own_rate_does_not_throttle_the_others() {
        let b = SessionBudget::default();
        let g = Arc::new(GlobalCalls::default());
        let profile = limits("callsPerMinute: 600");
        let slow = limits("callsPerMinute: 2");
        for _ in 0..2 {
            drop(b.admit("slow", &slow, 600, 1, &g).unwrap());
        }
        let refused = b.admit("slow", &slow, 600, 1, &g).err().unwrap();
        assert!(matches!(
            refused,
            Refusal::Budget {
                budget: Budget::CallsPerMinute,
                limit: 2,
                observed: None,
                ..
            }
        ));
        for _ in 0..10 {
            drop(b.admit("fast", &profile, 600, 1, &g).unwrap());
        }
    }
}
