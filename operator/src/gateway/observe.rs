//! Observe (reads only, after apply): the names the gateway's own pods
//! withhold, as each one's admin view says.
//!
//! ```text
//! pods (label mcpwarden.dev/gateway=<gw>, as resolve listed them; Running and Ready, with an IP)
//!   └─ AdminSource::get("<podIP>:9090", "/gateway", the gateway's admin token)
//!        ─▶ one list per pod ─▶ conflicts::union (withheld on any replica: listed withheld)
//!        ─▶ status (merged with the conflicts read from the backends' inventories)
//! ```
//! The same fetch as an MCPServer's `/tools` ([`crate::reconcile::observe`]),
//! so reconcile tests mock both alike. The view is the facade's own table:
//! it knows what the inventories cannot (shadowing definitions, prompts,
//! resource templates, the names a backend really lists to the gateway).
//!
//! The token goes to any Ready pod with the gateway's label, as an
//! MCPServer's goes to its pods: whoever can create such a pod in the
//! namespace can as well mount the token's Secret, so the label grants
//! nothing more. What a pod answers only fills status; it opens nothing.

use k8s_openapi::api::core::v1::Pod;
use mcp_warden_crds::mcpgateway::GatewayConflictStatus;
use serde::Deserialize;
use tracing::debug;

use super::conflicts;
use crate::reconcile::observe::{admin_addrs, AdminSource};

/// Longest `detail` kept (the CRD's bound).
const MAX_DETAIL: usize = 512;
/// Most names and backends kept per conflict (the CRD's bounds).
const MAX_NAMES: usize = 16;
const MAX_BACKENDS: usize = 32;

/// `GET /gateway`, the part the status needs.
#[derive(Deserialize)]
struct View {
    conflicts: Vec<ViewConflict>,
}

#[derive(Deserialize)]
struct ViewConflict {
    kind: String,
    catalog: String,
    names: Vec<String>,
    backends: Vec<String>,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    resolved: Option<ViewResolved>,
}

#[derive(Deserialize)]
struct ViewResolved {
    backend: String,
}

/// Decode a gateway's `/gateway` document into status entries, cut to the
/// CRD's bounds (a longer list would make the status write fail, and the
/// condition still counts every conflict).
pub fn parse_view(body: &[u8]) -> Result<Vec<GatewayConflictStatus>, String> {
    let view: View =
        serde_json::from_slice(body).map_err(|e| format!("not a /gateway document: {e}"))?;
    Ok(view
        .conflicts
        .into_iter()
        .map(|c| GatewayConflictStatus {
            kind: c.kind,
            catalog: c.catalog,
            names: c.names.into_iter().take(MAX_NAMES).collect(),
            backends: c.backends.into_iter().take(MAX_BACKENDS).collect(),
            detail: (!c.detail.is_empty()).then(|| c.detail.chars().take(MAX_DETAIL).collect()),
            resolved_by: c.resolved.map(|r| r.backend),
            reported_by_gateway: true,
        })
        .collect())
}

/// What every Ready gateway pod withholds, merged; `None` when there is no
/// token to ask with or no pod answered (the status then keeps the live
/// entries it had: a restart or a slow answer is no reason to drop them).
///
/// Merged across replicas as a union, a name withheld on any replica
/// listed withheld: each replica lists its backends on its own schedule
/// (and during a rollout runs its own flags), so for a while they can
/// disagree, and a client routed to the replica that withholds a name
/// cannot call it — the status must not say it is served.
pub async fn observe_view(
    source: &dyn AdminSource,
    pods: &[Pod],
    token: Option<&str>,
) -> Option<Vec<GatewayConflictStatus>> {
    let token = token?;
    let mut views = Vec::new();
    for addr in &admin_addrs(pods) {
        match source.get(addr, "/gateway", token).await {
            Ok(body) => match parse_view(&body) {
                Ok(view) => views.push(view),
                Err(e) => debug!(%addr, error = %e, "no /gateway from this gateway pod"),
            },
            Err(e) => debug!(%addr, error = %e, "no /gateway from this gateway pod"),
        }
    }
    (!views.is_empty()).then(|| conflicts::union(views))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_becomes_status_entries_within_the_crds_bounds() {
        let many: Vec<String> = (0..20).map(|i| format!("n{i:02}")).collect();
        let body = serde_json::json!({
            "backends": [{"name": "a", "tools": 3, "answering": true}],
            "conflicts": [
                {"kind": "shadowing", "catalog": "tool", "names": ["a__read"], "backends": ["a"],
                 "detail": "x".repeat(600), "resolved": null},
                {"kind": "collision", "catalog": "prompt", "names": many, "backends": ["a", "b"],
                 "detail": "", "resolved": {"name": "n00", "backend": "b"}},
            ]
        });
        let parsed = parse_view(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            parsed,
            vec![
                GatewayConflictStatus {
                    kind: "shadowing".into(),
                    catalog: "tool".into(),
                    names: vec!["a__read".into()],
                    backends: vec!["a".into()],
                    detail: Some("x".repeat(512)),
                    resolved_by: None,
                    reported_by_gateway: true,
                },
                GatewayConflictStatus {
                    kind: "collision".into(),
                    catalog: "prompt".into(),
                    names: many[..16].to_vec(),
                    backends: vec!["a".into(), "b".into()],
                    detail: None,
                    resolved_by: Some("b".into()),
                    reported_by_gateway: true,
                },
            ]
        );
        assert!(parse_view(b"{\"tools\": []}").is_err(), "a /tools document");
        assert!(parse_view(b"not json").is_err());
    }
}
