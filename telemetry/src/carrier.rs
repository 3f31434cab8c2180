//! W3C trace context in and out of string maps: an MCP request's `_meta`
//! (`traceparent`, `tracestate`, as the 2026-07-28 revision reserves them)
//! or HTTP headers. Only the two trace context keys are read or written;
//! `baggage` is the caller's business and passes through untouched.

use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;

pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

struct Get<'a, F>(F, std::marker::PhantomData<&'a str>);

impl<'a, F: Fn(&str) -> Option<&'a str>> Extractor for Get<'a, F> {
    fn get(&self, key: &str) -> Option<&str> {
        (self.0)(key)
    }
    fn keys(&self) -> Vec<&str> {
        vec![TRACEPARENT, TRACESTATE]
    }
}

/// The caller's trace context, read with `get` (`traceparent`, then
/// `tracestate`); `None` when there is none or it is not valid W3C.
pub fn extract<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Context> {
    let cx = TraceContextPropagator::new().extract(&Get(get, std::marker::PhantomData));
    cx.span().span_context().is_valid().then_some(cx)
}

/// The entries that carry `cx`'s span on: `traceparent`, and `tracestate`
/// when it is not empty.
pub fn inject(cx: &Context) -> Vec<(&'static str, String)> {
    struct Out(Vec<(&'static str, String)>);
    impl Injector for Out {
        fn set(&mut self, key: &str, value: String) {
            let key = match key {
                TRACEPARENT => TRACEPARENT,
                TRACESTATE => TRACESTATE,
                _ => return,
            };
            if !value.is_empty() {
                self.0.push((key, value));
            }
        }
    }
    let mut out = Out(Vec::with_capacity(2));
    TraceContextPropagator::new().inject_context(cx, &mut out);
    out.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";

    fn map(entries: &[(&'static str, &'static str)]) -> HashMap<&'static str, &'static str> {
        entries.iter().copied().collect()
    }

    #[test]
    fn a_valid_parent_round_trips_with_its_state() {
        let m = map(&[(TRACEPARENT, PARENT), (TRACESTATE, "vendor=abc")]);
        let cx = extract(|k| m.get(k).copied()).unwrap();
        let sc = cx.span().span_context().clone();
        assert!(sc.is_remote() && sc.is_sampled());
        assert_eq!(
            sc.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(
            inject(&cx),
            vec![
                (TRACEPARENT, PARENT.to_string()),
                (TRACESTATE, "vendor=abc".into())
            ]
        );
    }

    #[test]
    fn invalid_or_missing_context_is_none() {
        for bad in [
            "",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7",
            "arguments and results never look like this",
        ] {
            let m = map(&[(TRACEPARENT, bad)]);
            assert!(extract(|k| m.get(k).copied()).is_none(), "{bad:?}");
        }
        assert!(extract(|_| None).is_none());
    }
}
