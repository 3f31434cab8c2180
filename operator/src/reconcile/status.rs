//! Status: compute the MCPServer's conditions (pure, [`desired_status`]),
//! then write them and publish Events only when something changed. A
//! condition keeps its `lastTransitionTime` while its status stays the same,
//! so an unchanged state compares equal and causes no write.
//!
//! Conditions: `PolicyCompiled` (the profiles resolved, validated and
//! compiled), `Ready` (the Deployment has its replicas available),
//! `CapabilitiesApproved` (everything requested above the baseline is
//! approved; else `PendingApproval` with the command to approve, or
//! `ApprovalPending` when a changed workload waits and the last approved one
//! keeps running), `Degraded`
//! (running, but worse than asked: a missing Secret, a JWT issuer whose keys
//! were never read, a stuck rollout, or
//! capabilities that wait for approval).
//!
//! Capability transitions (approved, revoked, a new digest pending) are each
//! an Event and a log line ([`capability_events`]); the approval Event names
//! the approver the webhook recorded in `mcpwarden.dev/approved-by`.

use k8s_openapi::{
    api::apps::v1::Deployment,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
};
use kube::{
    runtime::events::{Event, EventType, Recorder},
    Api, Resource, ResourceExt,
};
use mcp_warden_crds::{
    mcpserver::{ObservedServer, ObservedTool, PinnedImage},
    MCPServer, MCPServerStatus,
};
use tracing::info;

use crate::{
    capabilities::{ApprovalState, Decision, APPROVED_BY_ANNOTATION, HOLD_REASON, PENDING_REASON},
    names,
    plan::PlanError,
};

/// What the pipeline reached.
#[derive(Clone, Copy, Debug)]
pub enum Outcome<'a> {
    /// Nothing could be built; the server waits for a change.
    Waiting {
        /// Why (a missing profile, an invalid spec).
        error: &'a PlanError,
        /// The Deployment this server applied before, still running the
        /// last applied workload (nothing is torn down while it waits).
        live: Option<&'a Deployment>,
    },
    /// The objects are applied.
    Applied {
        /// The live Deployment (before this apply), if any.
        deployment: Option<&'a Deployment>,
        /// Approved `network.egress.host:…` capabilities no engine enforces.
        unenforced_hosts: &'a [String],
        /// The engine that enforces the approved host egress, when any is
        /// in force (the `HostEgress` condition's reason).
        host_egress: Option<HostEgress>,
        /// `secretEnv` Secrets that do not exist.
        missing_secrets: &'a [String],
        /// JWT issuers whose keys were never read, and why (`crate::reconcile::oidc`).
        unread_issuers: &'a [String],
        /// The capabilities asked for and in force.
        capabilities: &'a Decision,
        /// The tools the facades report (`None`: keep what status has).
        tools: Option<&'a [ObservedTool]>,
        /// The upstream's identity as a facade reports it (`None`: keep
        /// what status has).
        server: Option<&'a ObservedServer>,
        /// The URL agents connect to.
        endpoint: &'a str,
        /// The peer-key Secret exists but holds no usable key.
        peer_key_unusable: bool,
        /// Existing objects under this server's names that it does not own
        /// (`Kind/name`); when any, nothing was applied.
        not_owned: &'a [String],
        /// `expose.httpRoute` asks for an HTTPRoute the cluster does not serve.
        route_unavailable: bool,
        /// What `status.approvedPolicy` records (`crate::reconcile::hold`).
        approved_policy: Option<&'a str>,
        /// The image digest the Deployment pins (`crate::pin`).
        pinned_image: Option<&'a PinnedImage>,
        /// The contents that run under one tag when they differ from the
        /// pin or from each other (`crate::pin::disagreement`).
        image_moved: &'a [String],
    },
}

/// Writing the status or an Event failed (transient).
#[derive(Debug, thiserror::Error)]
#[error("cannot update status of {name}: {source}")]
pub struct StatusError {
    /// The MCPServer.
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The status the server should have. `now` stamps conditions that change.
pub fn desired_status(server: &MCPServer, outcome: Outcome<'_>, now: &Time) -> MCPServerStatus {
    let old = server.status.clone().unwrap_or_default();
    let generation = server.metadata.generation;
    let mut capability_fields = (
        old.requested_capabilities.clone(),
        old.capability_digest.clone(),
        old.approved_digest.clone(),
        old.approved_capabilities.clone(),
    );
    let mut workload_fields = (
        old.workload.clone(),
        old.approved_workload.clone(),
        old.approved_policy.clone(),
    );
    let mut pinned_now = old.pinned_image.clone();
    let mut tools_now = old.tools.clone();
    let mut server_now = old.server.clone();
    // Kept as it was while the spec cannot be built.
    let mut host_egress_now = old
        .conditions
        .iter()
        .find(|c| c.type_ == "HostEgress")
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.clone()));
    let (compiled, ready, approved, degraded, endpoint) = match outcome {
        Outcome::Waiting { error: e, live } => (
            ("False", e.reason(), e.to_string()),
            match live {
                // It still serves, with what was applied last.
                Some(deployment) => ready_condition(server, Some(deployment)),
                None => (
                    "False",
                    e.reason(),
                    format!("waiting for a valid spec: {e}"),
                ),
            },
            (
                "Unknown",
                "SpecInvalid",
                "capabilities are computed once the spec is valid".to_string(),
            ),
            match live {
                Some(_) => (
                    "True",
                    e.reason(),
                    format!(
                        "{e}; the last applied workload keeps running unchanged (Deployment {}, policy ConfigMap {}) until this is fixed",
                        names::object_name(server),
                        names::policy_config_map(server)
                    ),
                ),
                None => (
                    "False",
                    "NotApplied",
                    "nothing is applied while the spec is invalid".to_string(),
                ),
            },
            old.endpoint.clone(),
        ),
        Outcome::Applied {
            deployment,
            unenforced_hosts,
            host_egress,
            missing_secrets,
            unread_issuers,
            capabilities,
            tools,
            server: observed_server,
            endpoint,
            peer_key_unusable,
            not_owned,
            route_unavailable,
            approved_policy,
            pinned_image,
            image_moved,
        } => {
            pinned_now = pinned_image.cloned();
            host_egress_now = host_egress.map(HostEgress::condition);
            capability_fields = (
                capabilities.requested.iter().cloned().collect(),
                Some(capabilities.digest.clone()),
                capabilities.approved_digest.clone(),
                capabilities.in_force.iter().cloned().collect(),
            );
            workload_fields = (
                capabilities.workload.clone(),
                capabilities.approved_workload.clone(),
                approved_policy.map(str::to_string),
            );
            if let Some(tools) = tools {
                tools_now = tools.to_vec();
            }
            if let Some(observed) = observed_server {
                server_now = Some(observed.clone());
            }
            (
                compiled_condition(server, capabilities, not_owned),
                match not_owned_condition(not_owned) {
                    Some((_, reason, message)) => ("False", reason, message),
                    None => ready_condition(server, deployment),
                },
                capabilities.condition(server),
                not_owned_condition(not_owned).unwrap_or_else(|| {
                    degraded_condition(
                        server,
                        deployment,
                        missing_secrets,
                        capabilities,
                        peer_key_unusable,
                    )
                    .or_issuer_keys_unread(unread_issuers)
                    .or_unenforced(unenforced_hosts)
                    .or_route_unavailable(route_unavailable)
                    .or_image_moved(&server.spec.image, image_moved)
                }),
                Some(endpoint.to_string()),
            )
        }
    };
    let condition = |type_: &str, (status, reason, message): (&str, &str, String)| {
        let previous = old.conditions.iter().find(|c| c.type_ == type_);
        let last_transition_time = match previous {
            Some(p) if p.status == status => p.last_transition_time.clone(),
            _ => now.clone(),
        };
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time,
        }
    };
    MCPServerStatus {
        conditions: vec![
            condition("Ready", ready),
            condition("PolicyCompiled", compiled),
            condition("CapabilitiesApproved", approved),
            condition("Degraded", degraded),
        ]
        .into_iter()
        .chain(host_egress_now.map(|c| condition("HostEgress", c)))
        .collect(),
        observed_generation: generation,
        endpoint,
        requested_capabilities: capability_fields.0,
        capability_digest: capability_fields.1,
        approved_digest: capability_fields.2,
        approved_capabilities: capability_fields.3,
        workload: workload_fields.0,
        approved_workload: workload_fields.1,
        approved_policy: workload_fields.2,
        pinned_image: pinned_now,
        tools: tools_now,
        server: server_now,
    }
}

/// `PolicyCompiled`: compiled, and where it is — never a ConfigMap that was
/// not written (someone else's object in the way, or a held change).
fn compiled_condition(
    server: &MCPServer,
    capabilities: &Decision,
    not_owned: &[String],
) -> (&'static str, &'static str, String) {
    let cm = names::policy_config_map(server);
    let message = if !not_owned.is_empty() {
        format!(
            "policy compiled, not written: ConfigMap {cm} was not applied ({} in the way)",
            not_owned.join(", ")
        )
    } else if capabilities.hold {
        format!("policy compiled, not written until approved: ConfigMap {cm} keeps the last approved policy")
    } else {
        format!("policy compiled into ConfigMap {cm}")
    };
    ("True", "Compiled", message)
}

/// Objects under the server's names that belong to someone else: nothing
/// was applied, and nothing is taken over.
fn not_owned_condition(not_owned: &[String]) -> Option<(&'static str, &'static str, String)> {
    (!not_owned.is_empty()).then(|| {
        (
            "True",
            "ObjectNotOwned",
            format!(
                "not applied: {} already exist and this MCPServer does not own them (no controller owner reference to it); the operator does not take over other objects. Delete or rename them, or rename the MCPServer",
                not_owned.join(", ")
            ),
        )
    })
}

fn ready_condition(
    server: &MCPServer,
    deployment: Option<&Deployment>,
) -> (&'static str, &'static str, String) {
    let want = server.spec.replicas;
    if want == 0 {
        return ("False", "ScaledToZero", "spec.replicas is 0".into());
    }
    let status = deployment
        .and_then(|d| d.status.clone())
        .unwrap_or_default();
    let available = status.available_replicas.unwrap_or(0);
    if available >= want {
        (
            "True",
            "Available",
            format!("{available}/{want} replicas available"),
        )
    } else {
        (
            "False",
            "Progressing",
            format!("{available}/{want} replicas available"),
        )
    }
}

pub use super::egress_proxy::HostEgress;

/// `Degraded` for approved host names nothing enforces, unless something
/// worse is already reported.
trait OrUnenforced {
    fn or_unenforced(self, hosts: &[String]) -> Self;
}

impl OrUnenforced for (&'static str, &'static str, String) {
    fn or_unenforced(self, hosts: &[String]) -> Self {
        if self.0 == "True" || hosts.is_empty() {
            return self;
        }
        (
            "True",
            "NamedEgressNotEnforced",
            format!(
                "approved but not applied: {}. This cluster serves neither CiliumNetworkPolicy nor Calico's NetworkPolicy, and a NetworkPolicy cannot allow a host name (only DNS and the port to every address, which is not what was approved), so these hosts stay unreachable",
                hosts.join(", ")
            ),
        )
    }
}

/// `Degraded` for an HTTPRoute the cluster cannot take, unless something
/// worse is already reported.
trait OrRouteUnavailable {
    fn or_route_unavailable(self, unavailable: bool) -> Self;
    /// `Degraded` while a JWT issuer's keys were never read.
    fn or_issuer_keys_unread(self, unread: &[String]) -> Self;
    /// `Degraded` for pods that run different content under one tag.
    fn or_image_moved(self, image: &str, digests: &[String]) -> Self;
}

impl OrRouteUnavailable for (&'static str, &'static str, String) {
    fn or_route_unavailable(self, unavailable: bool) -> Self {
        if self.0 == "True" || !unavailable {
            return self;
        }
        (
            "True",
            "GatewayAPINotInstalled",
            "spec.expose.httpRoute asks for an HTTPRoute, but this cluster does not serve gateway.networking.k8s.io/v1 HTTPRoutes: install the Gateway API (and a Gateway), or use expose.ingress".into(),
        )
    }

    fn or_issuer_keys_unread(self, unread: &[String]) -> Self {
        if self.0 == "True" || unread.is_empty() {
            return self;
        }
        (
            "True",
            super::oidc::UNAVAILABLE_REASON,
            super::oidc::unavailable_message(unread),
        )
    }

    fn or_image_moved(self, image: &str, digests: &[String]) -> Self {
        if self.0 == "True" || digests.len() < 2 {
            return self;
        }
        (
            "True",
            "ImageTagMoved",
            format!(
                "the pods run different content under {image}: {} (the tag moved between two pulls); pods started from now on run the pinned digest (status.pinnedImage) if there is one, else nothing is pinned until they agree. Name the image by digest in spec.image (a change that waits for approval), or delete the pods that run content you did not approve",
                digests.join(", ")
            ),
        )
    }
}

fn degraded_condition(
    server: &MCPServer,
    deployment: Option<&Deployment>,
    missing_secrets: &[String],
    capabilities: &Decision,
    peer_key_unusable: bool,
) -> (&'static str, &'static str, String) {
    if peer_key_unusable {
        return (
            "True",
            "PeerKeyInvalid",
            format!(
                "Secret {} has no key {:?} of at least 32 bytes; delete it and the operator makes a new one",
                names::peer_key_secret(server),
                names::PEER_KEY_KEY
            ),
        );
    }
    if !missing_secrets.is_empty() {
        return (
            "True",
            "SecretNotFound",
            format!("Secrets not found: {}", missing_secrets.join(", ")),
        );
    }
    let stuck = deployment
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
        });
    if stuck {
        return (
            "True",
            "ProgressDeadlineExceeded",
            "the rollout is stuck; see the Deployment's pods".into(),
        );
    }
    if capabilities.hold {
        let message = format!(
            "running the last approved workload; the changed one ({}) waits for approval",
            capabilities.changed.join(", ")
        );
        return ("True", "ChangeNotApplied", message);
    }
    if capabilities.state == ApprovalState::Pending && !capabilities.pending().is_empty() {
        let message = format!(
            "running without capabilities that wait for approval: {}",
            capabilities.pending().join(", ")
        );
        return ("True", "CapabilitiesNotApplied", message);
    }
    ("False", "AsExpected", "running as specified".into())
}

/// Write the status if it changed, and publish an Event per changed condition.
pub async fn publish(
    api: &Api<MCPServer>,
    recorder: &Recorder,
    server: &MCPServer,
    desired: MCPServerStatus,
    written: &[String],
) -> Result<(), StatusError> {
    let name = server.name_any();
    let err = |source| StatusError {
        name: name.clone(),
        source,
    };
    let old = server.status.clone().unwrap_or_default();
    let reference = server.object_ref(&());
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
    if old == desired {
        return Ok(());
    }
    for (type_, reason, note) in capability_events(server, &old, &desired) {
        info!(reason, "{note}");
        let event = Event {
            type_,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "Approval".into(),
            secondary: None,
        };
        recorder.publish(&event, &reference).await.map_err(err)?;
    }
    for c in &desired.conditions {
        if c.type_ == "CapabilitiesApproved" {
            continue; // its transitions are the capability events above
        }
        let before = old.conditions.iter().find(|o| o.type_ == c.type_);
        if before.is_some_and(|b| b.status == c.status && b.reason == c.reason) {
            continue;
        }
        let warn = (c.type_ == "PolicyCompiled" && c.status == "False")
            || (c.type_ == "Degraded" && c.status == "True");
        if before.is_none() && !warn {
            continue; // a first, healthy condition is not news
        }
        let event = Event {
            type_: if warn {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: c.reason.clone(),
            note: Some(c.message.chars().take(1000).collect()),
            action: format!(
                "{}{}",
                c.type_,
                if c.status == "True" { "" } else { "False" }
            ),
            secondary: None,
        };
        recorder.publish(&event, &reference).await.map_err(err)?;
    }
    super::status_write::apply_status(api, &name, &desired)
        .await
        .map_err(err)?;
    Ok(())
}

/// The Events (and log lines) for a change of the approval state: approved
/// (naming the approver), revoked, and a new digest pending. Pure.
pub fn capability_events(
    server: &MCPServer,
    old: &MCPServerStatus,
    new: &MCPServerStatus,
) -> Vec<(EventType, &'static str, String)> {
    let mut events = Vec::new();
    if new.approved_digest != old.approved_digest {
        match (&old.approved_digest, &new.approved_digest) {
            (_, Some(digest)) => {
                let by = server
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(APPROVED_BY_ANNOTATION))
                    .map(String::as_str)
                    .unwrap_or("an unrecorded user");
                events.push((
                    EventType::Normal,
                    "CapabilitiesApproved",
                    format!(
                        "{digest} approved by {by}; in force: {}",
                        new.approved_capabilities.join(", ")
                    ),
                ));
            }
            (Some(digest), None) => events.push((
                EventType::Warning,
                "CapabilitiesRevoked",
                format!("approval {digest} withdrawn; back to the baseline"),
            )),
            (None, None) => {}
        }
    }
    // Both waiting reasons: capabilities without approval, and a changed
    // workload held (`ApprovalPending`); the Event carries the same message.
    let waiting = |c: &&Condition| {
        c.type_ == "CapabilitiesApproved" && (c.reason == PENDING_REASON || c.reason == HOLD_REASON)
    };
    let pending = new.conditions.iter().find(waiting);
    if let Some(pending) = pending {
        let was_pending_same = old.capability_digest == new.capability_digest
            && old.conditions.iter().any(|c| waiting(&c));
        if !was_pending_same {
            events.push((
                EventType::Warning,
                "CapabilitiesPending",
                pending.message.clone(),
            ));
        }
    }
    events
}
