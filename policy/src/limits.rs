//! Budgets resolved to concrete numbers.
//!
//! Flow: tool `limits` → profile `limits` → built-in default, field by field
//! ([`ResolvedLimits::resolve`], done once at compile time), so the sidecar
//! reads plain numbers on every call. The defaults are the ones documented
//! on `mcp_warden_crds::policy::Limits`.
//!
//! Validation: every configured value must be at least 1 (a zero budget is
//! a typo; to hide a tool, leave it out of the allowlist), and a call's
//! timeout may not exceed the session's wall time.

use std::time::Duration;

use mcp_warden_crds::policy::{IdentityBudget, Limits, OutputOverflow};

use crate::error::ConfigError;

/// Concrete budgets for one tool (or the profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResolvedLimits {
    /// Largest serialized `arguments`, bytes.
    pub max_arg_bytes: u64,
    /// Largest result, bytes.
    pub max_output_bytes: u64,
    /// What happens over `max_output_bytes`.
    pub output_overflow: OutputOverflow,
    /// Calls per session.
    pub max_calls_per_session: u64,
    /// Sustained calls per minute per session (token bucket).
    pub calls_per_minute: u64,
    /// Concurrent calls per session.
    pub max_concurrent_calls: u64,
    /// Concurrent calls across sessions.
    pub max_concurrent_calls_total: u64,
    /// Wall time of one call.
    pub call_timeout: Duration,
    /// Total wall time of a session.
    pub session_wall: Duration,
    /// Calls per identity (across its sessions) per window, if set.
    pub max_calls_per_identity: Option<IdentityBudget>,
}

impl ResolvedLimits {
    /// The built-in defaults.
    pub const DEFAULT: ResolvedLimits = ResolvedLimits {
        max_arg_bytes: 65_536,
        max_output_bytes: 1_048_576,
        output_overflow: OutputOverflow::Truncate,
        max_calls_per_session: 1000,
        calls_per_minute: 600,
        max_concurrent_calls: 16,
        max_concurrent_calls_total: 256,
        call_timeout: Duration::from_secs(60),
        session_wall: Duration::from_secs(28_800),
        max_calls_per_identity: None,
    };

    /// Tool value, else profile value, else default, per field.
    pub fn resolve(tool: Option<&Limits>, profile: &Limits) -> ResolvedLimits {
        let d = Self::DEFAULT;
        macro_rules! pick {
            ($f:ident, $def:expr) => {
                tool.and_then(|t| t.$f).or(profile.$f).unwrap_or($def)
            };
        }
        ResolvedLimits {
            max_arg_bytes: pick!(max_arg_bytes, d.max_arg_bytes),
            max_output_bytes: pick!(max_output_bytes, d.max_output_bytes),
            output_overflow: pick!(output_overflow, d.output_overflow),
            max_calls_per_session: pick!(max_calls_per_session, d.max_calls_per_session),
            calls_per_minute: pick!(calls_per_minute, d.calls_per_minute),
            max_concurrent_calls: pick!(max_concurrent_calls, d.max_concurrent_calls),
            max_concurrent_calls_total: pick!(
                max_concurrent_calls_total,
                d.max_concurrent_calls_total
            ),
            call_timeout: Duration::from_secs(pick!(
                call_timeout_seconds,
                d.call_timeout.as_secs()
            )),
            session_wall: Duration::from_secs(pick!(
                session_wall_seconds,
                d.session_wall.as_secs()
            )),
            max_calls_per_identity: tool
                .and_then(|t| t.max_calls_per_identity)
                .or(profile.max_calls_per_identity),
        }
    }

    /// Check one `limits` block found at `at`.
    pub(crate) fn validate(l: &Limits, at: &str, errors: &mut Vec<ConfigError>) {
        let fields = [
            ("maxArgBytes", l.max_arg_bytes),
            ("maxOutputBytes", l.max_output_bytes),
            ("maxCallsPerSession", l.max_calls_per_session),
            ("callsPerMinute", l.calls_per_minute),
            ("maxConcurrentCalls", l.max_concurrent_calls),
            ("maxConcurrentCallsTotal", l.max_concurrent_calls_total),
            ("callTimeoutSeconds", l.call_timeout_seconds),
            ("sessionWallSeconds", l.session_wall_seconds),
            (
                "maxCallsPerIdentity.calls",
                l.max_calls_per_identity.map(|b| b.calls),
            ),
        ];
        for (name, v) in fields {
            if v == Some(0) {
                errors.push(ConfigError::invalid(
                    format!("{at}.{name}"),
                    "must be at least 1",
                ));
            }
        }
    }

    /// The resolved limits must be coherent (checked after resolution).
    pub(crate) fn check_coherent(&self, at: &str, errors: &mut Vec<ConfigError>) {
        if self.call_timeout > self.session_wall {
            errors.push(ConfigError::invalid(
                format!("{at}.callTimeoutSeconds"),
                "must not exceed sessionWallSeconds",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_then_profile_then_default() {
        let profile = Limits {
            max_arg_bytes: Some(10),
            calls_per_minute: Some(5),
            ..Default::default()
        };
        let tool = Limits {
            max_arg_bytes: Some(20),
            output_overflow: Some(OutputOverflow::Fail),
            ..Default::default()
        };
        let r = ResolvedLimits::resolve(Some(&tool), &profile);
        assert_eq!(r.max_arg_bytes, 20);
        assert_eq!(r.calls_per_minute, 5);
        assert_eq!(r.output_overflow, OutputOverflow::Fail);
        assert_eq!(r.max_output_bytes, 1_048_576);
        assert_eq!(r.call_timeout, Duration::from_secs(60));
        assert_eq!(
            ResolvedLimits::resolve(None, &Limits::default()),
            ResolvedLimits::DEFAULT
        );
    }

    #[test]
    fn zero_and_incoherent_values_are_errors() {
        let mut errs = Vec::new();
        ResolvedLimits::validate(
            &Limits {
                calls_per_minute: Some(0),
                ..Default::default()
            },
            "limits",
            &mut errs,
        );
        let r = ResolvedLimits::resolve(
            Some(&Limits {
                call_timeout_seconds: Some(100),
                session_wall_seconds: Some(50),
                ..Default::default()
            }),
            &Limits::default(),
        );
        r.check_coherent("tools[0].limits", &mut errs);
        let ats: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            ats,
            [
                "limits.callsPerMinute: must be at least 1",
                "tools[0].limits.callTimeoutSeconds: must not exceed sessionWallSeconds"
            ]
        );
    }
}
