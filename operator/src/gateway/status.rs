//! Status: the gateway's conditions and backends (pure, [`desired_status`]),
//! written only when they changed, with an Event for each condition that
//! changed (a Warning when the gateway is not Ready or is Degraded).
//!
//! `Conflicts`: whether the gateway withholds names, how many and of which
//! kinds: computed from the backends' inventories by the facade's rules,
//! merged with what the gateway's pods report ([`super::conflicts`],
//! [`super::observe`]); an Event each time the withheld set changes.
//! `Ready`: the gateway's pods serve (`Available`), or why not
//! (`Progressing`, `Paused`, an invalid spec's reason, `NotOwned`,
//! `KeyUnavailable`). `Degraded`: it serves, but a backend is missing or not
//! Ready (`BackendsNotReady`), a backend served with TLS has no CA the
//! operator found (`BackendCANotFound`), a JWT issuer's keys were never read
//! (`IssuerKeysUnavailable`, as for an MCPServer), or `expose.httpRoute` asks for an HTTPRoute
//! the cluster does not serve (`GatewayAPINotInstalled`). Each backend shows its own Ready and how many
//! tools its facades expose (its `status.tools`); the signing key is never
//! shown.

use k8s_openapi::{
    api::apps::v1::Deployment,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
};
use kube::{
    runtime::events::{Event, EventType, Recorder},
    Api, Resource, ResourceExt,
};
use mcp_warden_crds::{
    mcpgateway::{GatewayBackendStatus, GatewayConflictStatus, MCPGatewayStatus},
    MCPGateway,
};

use super::{resolve::Backend, validate::GatewayInvalid};
use crate::reconcile::status_write::apply_status;

/// What the pipeline reached.
#[derive(Clone, Copy, Debug)]
pub enum Outcome<'a> {
    /// The spec cannot be built; nothing was applied.
    Invalid(&'a GatewayInvalid),
    /// Objects with the gateway's names belong to someone else.
    NotOwned(&'a [String]),
    /// Applied.
    Applied {
        /// The Deployment as read before the apply.
        deployment: Option<&'a Deployment>,
        /// `expose.httpRoute` asks for an HTTPRoute the cluster does not serve.
        route_unavailable: bool,
        /// The profile's JWT issuers whose keys were never read, and why.
        unread_issuers: &'a [String],
        /// The TLS backends whose CA was not found, and why.
        cas_not_found: &'a [String],
    },
}

/// A backend's status line.
pub fn backend_status(b: &Backend) -> GatewayBackendStatus {
    let status = b.server.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .cloned();
    let is_ready = ready.as_ref().is_some_and(|c| c.status == "True");
    let tools = status
        .filter(|s| !s.tools.is_empty())
        .map(|s| s.tools.iter().filter(|t| t.state == "exposed").count() as i32);
    GatewayBackendStatus {
        name: b.name(),
        prefix: b.prefix_label(),
        ready: is_ready,
        tools,
        reason: (!is_ready).then(|| {
            ready
                .map(|c| c.reason)
                .unwrap_or_else(|| "NotReported".into())
        }),
    }
}

fn available(d: Option<&Deployment>, replicas: i32) -> (&'static str, &'static str, String) {
    if replicas == 0 {
        return ("False", "Paused", "replicas is 0".into());
    }
    let ready = d
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    if ready >= 1 {
        (
            "True",
            "Available",
            format!("{ready}/{replicas} gateway pods available"),
        )
    } else {
        (
            "False",
            "Progressing",
            "waiting for the gateway's pods to become available".into(),
        )
    }
}

/// The status the gateway should have. `live`: what the gateway's pods
/// withhold (`None`: no pod answered, so the entries status has from them
/// are kept).
pub fn desired_status(
    gw: &MCPGateway,
    backends: &[Backend],
    missing: &[String],
    endpoint: &str,
    outcome: Outcome<'_>,
    live: Option<&[GatewayConflictStatus]>,
    now: &Time,
) -> MCPGatewayStatus {
    let old = gw.status.clone().unwrap_or_default();
    let lines: Vec<GatewayBackendStatus> = backends.iter().map(backend_status).collect();
    let ready_count = lines.iter().filter(|b| b.ready).count();
    let total = lines.len() + missing.len();
    let ready = match outcome {
        Outcome::Invalid(e) => ("False", e.reason(), e.to_string()),
        Outcome::NotOwned(objects) => (
            "False",
            "NotOwned",
            format!(
                "objects with the gateway's names belong to someone else: {}",
                objects.join(", ")
            ),
        ),
        Outcome::Applied { deployment, .. } => available(deployment, gw.spec.replicas),
    };
    let not_ready: Vec<String> = lines
        .iter()
        .filter(|b| !b.ready)
        .map(|b| b.name.clone())
        .chain(missing.iter().map(|m| format!("{m} (not found)")))
        .collect();
    let (route_unavailable, unread_issuers, cas_not_found) = match outcome {
        Outcome::Applied {
            route_unavailable,
            unread_issuers,
            cas_not_found,
            ..
        } => (route_unavailable, unread_issuers, cas_not_found),
        _ => (false, &[][..], &[][..]),
    };
    // Every problem is said; the reason is the first: the backends', which
    // change by themselves, then a backend the gateway cannot verify, the
    // issuers' (their callers are refused), then the route, which waits
    // for the cluster's admin.
    let mut problems: Vec<(&str, String)> = Vec::new();
    if !not_ready.is_empty() {
        problems.push((
            "BackendsNotReady",
            format!("backends not Ready: {}", not_ready.join(", ")),
        ));
    }
    if !cas_not_found.is_empty() {
        problems.push((
            super::backend_ca::NOT_FOUND_REASON,
            super::backend_ca::not_found_message(cas_not_found),
        ));
    }
    if !unread_issuers.is_empty() {
        problems.push((
            crate::reconcile::oidc::UNAVAILABLE_REASON,
            crate::reconcile::oidc::unavailable_message(unread_issuers),
        ));
    }
    if route_unavailable {
        problems.push((
            "GatewayAPINotInstalled",
            "spec.expose.httpRoute asks for an HTTPRoute, but this cluster does not serve gateway.networking.k8s.io/v1 HTTPRoutes: install the Gateway API (and a Gateway), or use expose.ingress".into(),
        ));
    }
    let degraded = match problems.first() {
        Some((reason, _)) => (
            "True",
            *reason,
            problems
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        ),
        None => ("False", "AsExpected", "every backend is Ready".to_string()),
    };
    let condition = |type_: &str, (status, reason, message): (&str, &str, String)| {
        let previous = old.conditions.iter().find(|c| c.type_ == type_);
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.chars().take(1000).collect(),
            observed_generation: gw.metadata.generation,
            last_transition_time: match previous {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => now.clone(),
            },
        }
    };
    let live = match live {
        Some(live) => live.to_vec(),
        None => old
            .conflicts
            .iter()
            .filter(|c| c.reported_by_gateway)
            .cloned()
            .collect(),
    };
    let inventory = super::conflicts::tool_conflicts(backends, &gw.spec.resolve);
    let mut conflicts = super::conflicts::union(vec![inventory, live]);
    let conflicted = super::conflicts::condition(&conflicts);
    conflicts.truncate(super::conflicts::MAX_LISTED);
    MCPGatewayStatus {
        conditions: vec![
            condition("Ready", ready),
            condition("Degraded", degraded),
            condition("Conflicts", conflicted),
        ],
        observed_generation: gw.metadata.generation,
        endpoint: Some(endpoint.to_string()),
        backends_ready: Some(format!("{ready_count}/{total}")),
        backends: lines,
        conflicts,
    }
}

/// Writing the status or an Event failed (transient).
#[derive(Debug, thiserror::Error)]
#[error("cannot write the status of MCPGateway {name}: {source}")]
pub struct StatusError {
    /// The gateway.
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The Events for the conditions that changed (status or reason), and for
/// `Conflicts` also when the withheld set changed under the same reason
/// (a new shadowing definition while another name is withheld). Pure.
pub fn condition_events(old: &MCPGatewayStatus, new: &MCPGatewayStatus) -> Vec<Event> {
    // What is withheld, not where it was seen: a pod confirming what the
    // inventories showed is no news.
    let withheld = |s: &MCPGatewayStatus| {
        s.conflicts
            .iter()
            .filter(|c| c.resolved_by.is_none())
            .map(|c| {
                (
                    c.kind.clone(),
                    c.catalog.clone(),
                    c.names.clone(),
                    c.backends.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    let conflicts_changed = withheld(old) != withheld(new);
    new.conditions
        .iter()
        .filter(|c| {
            !old.conditions.iter().any(|o| {
                o.type_ == c.type_
                    && o.status == c.status
                    && o.reason == c.reason
                    && !(c.type_ == "Conflicts" && (conflicts_changed || o.message != c.message))
            })
        })
        .map(|c| {
            let bad = match c.type_.as_str() {
                "Ready" => c.status != "True",
                "Degraded" | "Conflicts" => c.status == "True",
                _ => false,
            };
            Event {
                type_: if bad {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: c.reason.clone(),
                note: Some(c.message.clone()),
                action: format!(
                    "{}{}",
                    c.type_,
                    if c.status == "True" { "" } else { "False" }
                ),
                secondary: None,
            }
        })
        .collect()
}

/// Write the status if it changed, with its Events (and one for what apply wrote).
pub async fn publish(
    client: &kube::Client,
    recorder: &Recorder,
    gw: &MCPGateway,
    desired: MCPGatewayStatus,
    written: &[String],
) -> Result<(), StatusError> {
    let name = gw.name_any();
    let err = |source| StatusError {
        name: name.clone(),
        source,
    };
    let reference = gw.object_ref(&());
    if !written.is_empty() {
        let event = Event {
            type_: EventType::Normal,
            reason: "Applied".into(),
            note: Some(format!("applied {}", written.join(", "))),
            action: "Apply".into(),
            secondary: None,
        };
        recorder.publish(&event, &reference).await.map_err(err)?;
    }
    let old = gw.status.clone().unwrap_or_default();
    if old == desired {
        return Ok(());
    }
    for event in condition_events(&old, &desired) {
        recorder.publish(&event, &reference).await.map_err(err)?;
    }
    let api: Api<MCPGateway> = Api::namespaced(client.clone(), &super::names::namespace(gw));
    match apply_status(&api, &name, &desired).await {
        // Deleted since this reconcile read it: there is no status to keep,
        // and retrying would only log the same miss again.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        other => other.map(drop).map_err(err),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use mcp_warden_crds::MCPServer;

    use super::*;

    fn backend(ready: bool) -> Backend {
        let server: MCPServer = serde_json::from_value(serde_json::json!({
            "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": "git", "namespace": "a"},
            "spec": {"image": "i", "command": ["x"], "toolProfileRef": {"name": "p"}},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" },
                "reason": if ready { "Available" } else { "Progressing" }, "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}))
        .unwrap();
        Backend {
            server,
            prefix: "git__".into(),
        }
    }

    fn degraded(ready: bool, route_unavailable: bool) -> Condition {
        degraded_with(ready, route_unavailable, &[])
    }

    fn degraded_with(ready: bool, route_unavailable: bool, unread: &[String]) -> Condition {
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a}\n\
             spec: {backends: [{name: git}]}\n",
        )
        .unwrap();
        let outcome = Outcome::Applied {
            deployment: None,
            route_unavailable,
            unread_issuers: unread,
            cas_not_found: &[],
        };
        let now = Time(Timestamp::UNIX_EPOCH);
        desired_status(&gw, &[backend(ready)], &[], "e", outcome, None, &now)
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Degraded")
            .unwrap()
    }

    #[test]
    fn an_http_route_the_cluster_cannot_take_degrades_the_gateway() {
        let fine = degraded(true, false);
        assert_eq!(
            (fine.status.as_str(), fine.reason.as_str()),
            ("False", "AsExpected")
        );
        let routeless = degraded(true, true);
        assert_eq!(
            (routeless.status.as_str(), routeless.reason.as_str()),
            ("True", "GatewayAPINotInstalled")
        );
        assert!(
            routeless.message.contains("install the Gateway API"),
            "{}",
            routeless.message
        );
        // With a backend down too, both are said; the reason is the backends'.
        let both = degraded(false, true);
        assert_eq!(both.reason, "BackendsNotReady");
        assert!(
            both.message
                .starts_with("backends not Ready: git; spec.expose.httpRoute"),
            "{}",
            both.message
        );
    }

    #[test]
    fn an_issuer_whose_keys_were_never_read_degrades_the_gateway() {
        let unread = ["https://login.example.com: timed out".to_string()];
        let c = degraded_with(true, true, &unread);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "IssuerKeysUnavailable")
        );
        assert!(
            c.message.contains("https://login.example.com: timed out")
                && c.message.ends_with("or use expose.ingress"),
            "{}",
            c.message
        );
        assert_eq!(
            degraded_with(false, false, &unread).reason,
            "BackendsNotReady"
        );
    }

    /// Two backends without prefixes, both Ready, with their inventories.
    fn unprefixed(name: &str, tools: &[&str]) -> Backend {
        let server: MCPServer = serde_json::from_value(serde_json::json!({
            "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": name, "namespace": "a"},
            "spec": {"image": "i", "command": ["x"], "toolProfileRef": {"name": "p"}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Available",
                "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                "tools": tools.iter().map(|t| serde_json::json!({"name": t, "state": "exposed"}))
                    .collect::<Vec<_>>()}}))
        .unwrap();
        Backend {
            server,
            prefix: String::new(),
        }
    }

    fn live(kind: &str, catalog: &str, name: &str, backends: &[&str]) -> GatewayConflictStatus {
        GatewayConflictStatus {
            kind: kind.into(),
            catalog: catalog.into(),
            names: vec![name.into()],
            backends: backends.iter().map(|b| b.to_string()).collect(),
            reported_by_gateway: true,
            ..GatewayConflictStatus::default()
        }
    }

    /// The inventories' collision, and what two replicas withhold: the
    /// same collision (one entry, not two), a shadowing tool (details of
    /// both replicas), a prompt collision one replica still serves from a
    /// mapping (withheld on the other: listed withheld).
    #[test]
    fn the_live_views_and_the_inventories_make_one_status() {
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a}\n\
             spec: {backends: [{name: git, prefix: none}, {name: fs, prefix: none}]}\n",
        )
        .unwrap();
        let backends = [
            unprefixed("fs", &["status", "read"]),
            unprefixed("git", &["status"]),
        ];
        let shadowing = |detail: &str| GatewayConflictStatus {
            detail: Some(detail.into()),
            ..live("shadowing", "tool", "read", &["fs"])
        };
        let replica_one = vec![
            live("collision", "tool", "status", &["fs", "git"]),
            shadowing("shadowing/names-other-tool"),
            live("collision", "prompt", "summarize", &["fs", "git"]),
        ];
        let replica_two = vec![
            shadowing("shadowing/imperative,shadowing/names-other-tool"),
            GatewayConflictStatus {
                resolved_by: Some("git".into()),
                ..live("collision", "prompt", "summarize", &["fs", "git"])
            },
        ];
        let views = super::super::conflicts::union(vec![replica_one, replica_two]);
        let outcome = Outcome::Applied {
            deployment: None,
            route_unavailable: false,
            unread_issuers: &[],
            cas_not_found: &[],
        };
        let now = Time(Timestamp::UNIX_EPOCH);
        let status = desired_status(&gw, &backends, &[], "e", outcome, Some(&views), &now);
        let condition = |type_: &str, status: &str, reason: &str, message: &str| {
            serde_json::json!({"type": type_, "status": status, "reason": reason, "message": message,
                "lastTransitionTime": "1970-01-01T00:00:00Z"})
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({
                "conditions": [
                    condition("Ready", "False", "Progressing", "waiting for the gateway's pods to become available"),
                    condition("Degraded", "False", "AsExpected", "every backend is Ready"),
                    condition("Conflicts", "True", "NamesWithheld",
                        "the gateway withholds 3 name(s) (tool 2, prompt 1; collision 2, shadowing 1) until a \
                         backend stops serving them, a prefix changes, or spec.resolve maps them (never a \
                         shadowing one): collision tool status (fs, git); collision prompt summarize (fs, git); \
                         shadowing tool read (fs)"),
                ],
                "endpoint": "e",
                "backendsReady": "2/2",
                "backends": [
                    {"name": "fs", "prefix": "none", "ready": true, "tools": 2},
                    {"name": "git", "prefix": "none", "ready": true, "tools": 1},
                ],
                "conflicts": [
                    {"kind": "collision", "catalog": "tool", "names": ["status"], "backends": ["fs", "git"],
                     "reportedByGateway": true},
                    {"kind": "collision", "catalog": "prompt", "names": ["summarize"], "backends": ["fs", "git"],
                     "reportedByGateway": true},
                    {"kind": "shadowing", "catalog": "tool", "names": ["read"], "backends": ["fs"],
                     "detail": "shadowing/imperative,shadowing/names-other-tool", "reportedByGateway": true},
                ],
            })
        );

        // A pod confirming the inventories' collision is no news.
        let inventory_only = desired_status(&gw, &backends, &[], "e", outcome, Some(&[]), &now);
        let mut confirmed = gw.clone();
        confirmed.status = Some(inventory_only.clone());
        let confirming = [live("collision", "tool", "status", &["fs", "git"])];
        let next = desired_status(
            &confirmed,
            &backends,
            &[],
            "e",
            outcome,
            Some(&confirming),
            &now,
        );
        assert!(next.conflicts[0].reported_by_gateway);
        assert!(condition_events(&inventory_only, &next).is_empty());
        // No pod answered: the live entries stay as they were.
        let mut seen = gw.clone();
        seen.status = Some(status.clone());
        let kept = desired_status(&seen, &backends, &[], "e", outcome, None, &now);
        assert_eq!(kept.conflicts, status.conflicts);
        assert!(condition_events(&status, &kept).is_empty());
        // The pods answer without the shadowing tool: one Event, though the
        // condition's reason stays.
        let fewer = vec![
            live("collision", "tool", "status", &["fs", "git"]),
            live("collision", "prompt", "summarize", &["fs", "git"]),
        ];
        let next = desired_status(&seen, &backends, &[], "e", outcome, Some(&fewer), &now);
        assert_eq!(next.conflicts.len(), 2);
        let events = condition_events(&status, &next);
        assert_eq!(events.len(), 1);
        assert!(matches!(events[0].type_, EventType::Warning));
        assert_eq!(events[0].reason, "NamesWithheld");
        assert!(events[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with("the gateway withholds 2 name(s) (tool 1, prompt 1; collision 2)"));
        // Paused (an empty view): the inventories' collision alone.
        let paused = desired_status(&seen, &backends, &[], "e", outcome, Some(&[]), &now);
        assert_eq!(
            paused.conflicts,
            [GatewayConflictStatus {
                reported_by_gateway: false,
                ..live("collision", "tool", "status", &["fs", "git"])
            }]
        );
    }
}
