//! Status: the gateway's conditions and backends (pure, [`desired_status`]),
//! written only when they changed, with an Event for each condition that
//! changed (a Warning when the gateway is not Ready or is Degraded).
//!
//! `Conflicts`: whether the gateway withholds tool names, computed from
//! the backends' inventories by the facade's rules ([`super::conflicts`]).
//! `Ready`: the gateway's pods serve (`Available`), or why not
//! (`Progressing`, `Paused`, an invalid spec's reason, `NotOwned`,
//! `KeyUnavailable`). `Degraded`: it serves, but a backend is missing or not
//! Ready (`BackendsNotReady`). Each backend shows its own Ready and how many
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
    /// Applied; the Deployment as read before the apply.
    Applied(Option<&'a Deployment>),
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
        Outcome::Applied(d) => available(d, gw.spec.replicas),
    };
    let not_ready: Vec<String> = lines
        .iter()
        .filter(|b| !b.ready)
        .map(|b| b.name.clone())
        .chain(missing.iter().map(|m| format!("{m} (not found)")))
        .collect();
    let degraded = if not_ready.is_empty() {
        ("False", "AsExpected", "every backend is Ready".to_string())
    } else {
        (
            "True",
            "BackendsNotReady",
            format!("backends not Ready: {}", not_ready.join(", ")),
        )
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
