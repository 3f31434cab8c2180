//! Planning mode as a caller asks for it (the policy's own `mode` and
//! `roleRestrictions` are the decision function's to read).
//!
//! Where it sits: the HTTP transport reads the header of each POST into
//! [`HEADER_ASKS`] around the work it starts; the session's intake reads
//! [`asks`] for every request (the `_meta` key, else the header) and, on a
//! legacy `initialize`, remembers it for the whole session. The decision
//! function gets the result as [`mcp_warden_policy::Query::planning`]; a
//! caller can only turn planning mode on: any other value, or none, leaves
//! the policy's mode as it is.

use mcp_warden_crds::policy::SideEffect;
use mcp_warden_policy::risk::Effects;
use serde_json::Value;

/// The `_meta` key of a request (or of `initialize`, for the session):
/// `"mcpwarden.dev/mode": "planning"`.
pub const META_KEY: &str = "mcpwarden.dev/mode";
/// The HTTP header of a request (or of the POST carrying `initialize`, for
/// the session): `Mcp-Warden-Mode: planning`.
pub const HEADER: &str = "mcp-warden-mode";

tokio::task_local! {
    /// The HTTP request that brought a message asked for planning mode.
    pub static HEADER_ASKS: bool;
}

/// The `_meta` key of a request naming effect tags to refuse
/// (`"mcpwarden.dev/denySideEffects": ["network", "delete"]`): what a
/// gateway's `denySideEffects` asks of its backends. Like planning mode,
/// it only ever takes away; a tag the facade does not know is ignored.
pub const DENY_META_KEY: &str = "mcpwarden.dev/denySideEffects";

/// The effect tags a request asks to have refused ([`DENY_META_KEY`]).
pub fn asks_denied(request: &Value) -> Effects {
    let tags: Vec<SideEffect> = request
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(DENY_META_KEY))
        .and_then(Value::as_array)
        .map(|tags| {
            tags.iter()
                .filter_map(|t| serde_json::from_value(t.clone()).ok())
                .collect()
        })
        .unwrap_or_default();
    Effects::from_tags(&tags)
}

/// Whether `value` names planning mode (case-insensitive).
fn is_planning(value: &str) -> bool {
    value.trim().eq_ignore_ascii_case("planning")
}

/// Whether an HTTP request's headers ask for planning mode.
pub fn header_asks(headers: &hyper::HeaderMap) -> bool {
    headers
        .get_all(HEADER)
        .iter()
        .any(|v| v.to_str().is_ok_and(is_planning))
}

/// Whether a request asks for planning mode: its `_meta` key, or the
/// header of the HTTP request that brought it.
pub fn asks(request: &Value) -> bool {
    let meta = request
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(META_KEY))
        .and_then(Value::as_str)
        .is_some_and(is_planning);
    meta || HEADER_ASKS.try_with(|b| *b).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn meta_or_header_asks_and_nothing_else_does() {
        let with = |v: Value| json!({"params": {"_meta": {META_KEY: v}}});
        assert!(asks(&with(json!("planning"))));
        assert!(asks(&with(json!("Planning"))));
        assert!(!asks(&with(json!("normal"))));
        assert!(!asks(&with(json!(true))));
        assert!(!asks(&json!({"params": {}})));
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(rt.block_on(HEADER_ASKS.scope(true, async { asks(&json!({})) })));
        assert!(!rt.block_on(HEADER_ASKS.scope(false, async { asks(&json!({})) })));
        let mut h = hyper::HeaderMap::new();
        assert!(!header_asks(&h));
        h.insert(HEADER, "planning".parse().unwrap());
        assert!(header_asks(&h));
    }

    #[test]
    fn denied_tags_are_read_from_meta_and_unknown_ones_ignored() {
        let with = |v: Value| json!({"params": {"_meta": {DENY_META_KEY: v}}});
        let asked = asks_denied(&with(json!(["network", "delete", "teleport", 7])));
        assert!(asked.network && asked.delete && !asked.write && !asked.exec);
        assert_eq!(asks_denied(&with(json!("network"))), Effects::NONE);
        assert_eq!(asks_denied(&json!({"params": {}})), Effects::NONE);
    }
}
