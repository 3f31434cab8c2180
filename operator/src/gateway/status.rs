//! Status: the gateway's conditions and backends (pure, [`desired_status`]),
//! written only when they changed, with an Event for each condition that
//! changed (a Warning when the gateway is not Ready or is Degraded).
//!
//! `Conflicts`: whether the gateway withholds tool names, computed from
//! the backends' inventories by the facade's rules ([`super::conflicts`]).
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
    api::{Patch, PatchParams},
    runtime::events::{Event, EventType, Recorder},
    Api, Resource, ResourceExt,
};
use mcp_warden_crds::{
    mcpgateway::{GatewayBackendStatus, MCPGatewayStatus},
    MCPGateway,
};

use super::{resolve::Backend, validate::GatewayInvalid};
use crate::config::FIELD_MANAGER;

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

/// The status the gateway should have.
pub fn desired_status(
    gw: &MCPGateway,
    backends: &[Backend],
    missing: &[String],
    endpoint: &str,
    outcome: Outcome<'_>,
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
    let mut conflicts = super::conflicts::tool_conflicts(backends, &gw.spec.resolve);
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

/// The Events for the conditions that changed (status or reason). Pure.
pub fn condition_events(old: &MCPGatewayStatus, new: &MCPGatewayStatus) -> Vec<Event> {
    new.conditions
        .iter()
        .filter(|c| {
            !old.conditions
                .iter()
                .any(|o| o.type_ == c.type_ && o.status == c.status && o.reason == c.reason)
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
    let patch = serde_json::json!({
        "apiVersion": MCPGateway::api_version(&()),
        "kind": MCPGateway::kind(&()),
        "status": desired,
    });
    match api
        .patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
    {
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
        desired_status(&gw, &[backend(ready)], &[], "e", outcome, &now)
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
}
