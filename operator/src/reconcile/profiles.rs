//! Profile status: a second, small pipeline for ToolProfiles and
//! SandboxProfiles, so `kubectl get tp,sbp` answers "is this profile usable,
//! and which servers would a change affect?" even before any server uses it.
//!
//! ```text
//! ToolProfile / SandboxProfile ──────────────┐
//! MCPServer (its toolProfileRef / sandboxProfileRef) ─┴▶ reconcile_profile
//!   validate (pure, the same checks the server pipeline makes) + list the
//!   namespace's MCPServers that reference it ─▶ desired_profile_status (pure)
//!   ─▶ status (server-side apply, only when it changed) + a Warning Event when it turns invalid
//! ```
//! A profile problem is also reported on every server that uses it
//! (`PolicyCompiled=False`); here it is visible where it is fixed.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{
    api::ListParams,
    runtime::{
        controller::Action,
        events::{Event, EventType, Recorder},
    },
    Api, Client, Resource, ResourceExt,
};
use mcp_warden_crds::{profile_status::ProfileStatus, MCPServer, SandboxProfile, ToolProfile};

use crate::{
    reconcile::controller::{servers_referencing, ProfileKind},
    validate::{validate_sandbox_profile, validate_tools, ValidateError},
};

/// Writing a profile's status failed (transient).
#[derive(Debug, thiserror::Error)]
#[error("cannot update the status of {kind} {name}: {source}")]
pub struct ProfileError {
    /// `ToolProfile` or `SandboxProfile`.
    pub kind: &'static str,
    /// Its name.
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// What a profile's reconcile needs.
pub struct ProfileContext {
    /// The API client.
    pub client: Client,
    /// Publishes Events.
    pub recorder: Recorder,
}

/// A profile kind this pipeline writes the status of.
pub trait Profile:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + serde::Serialize
    + Send
    + Sync
    + 'static
{
    /// Which server reference points at it.
    const KIND: ProfileKind;
    /// The kind's name (Events, errors).
    const NAME: &'static str;
    /// The pure validation of its spec.
    fn check(&self) -> Result<(), ValidateError>;
    /// Its current status.
    fn current(&self) -> Option<&ProfileStatus>;
}

impl Profile for ToolProfile {
    const KIND: ProfileKind = ProfileKind::Tool;
    const NAME: &'static str = "ToolProfile";
    fn check(&self) -> Result<(), ValidateError> {
        validate_tools(&self.spec)?;
        crate::validate::facade_accepts(&self.spec)
    }
    fn current(&self) -> Option<&ProfileStatus> {
        self.status.as_ref()
    }
}

impl Profile for SandboxProfile {
    const KIND: ProfileKind = ProfileKind::Sandbox;
    const NAME: &'static str = "SandboxProfile";
    fn check(&self) -> Result<(), ValidateError> {
        validate_sandbox_profile(&self.spec)
    }
    fn current(&self) -> Option<&ProfileStatus> {
        self.status.as_ref()
    }
}

/// The status a profile should have (pure). `Valid` keeps its
/// `lastTransitionTime` while its status stays, so an unchanged profile
/// compares equal and is not written.
pub fn desired_profile_status(
    old: Option<&ProfileStatus>,
    generation: Option<i64>,
    check: &Result<(), ValidateError>,
    mut used_by: Vec<String>,
    now: &Time,
) -> ProfileStatus {
    let (status, reason, message) = match check {
        Ok(()) => (
            "True",
            "Valid",
            "servers referencing this profile can be built with it".to_string(),
        ),
        Err(e) => ("False", e.reason(), e.to_string()),
    };
    let last_transition_time = old
        .and_then(|o| o.conditions.iter().find(|c| c.type_ == "Valid"))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    used_by.sort();
    used_by.dedup();
    ProfileStatus {
        conditions: vec![Condition {
            type_: "Valid".into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time,
        }],
        observed_generation: generation,
        used_by,
    }
}

/// Reconcile one profile's status.
pub async fn reconcile_profile<K: Profile>(
    profile: Arc<K>,
    ctx: Arc<ProfileContext>,
) -> Result<Action, ProfileError> {
    let ns = profile.namespace().unwrap_or_default();
    let name = profile.name_any();
    let err = |source| ProfileError {
        kind: K::NAME,
        name: name.clone(),
        source,
    };
    let servers: Api<MCPServer> = Api::namespaced(ctx.client.clone(), &ns);
    let list = servers.list(&ListParams::default()).await.map_err(err)?;
    let used_by = servers_referencing(&list.items, K::KIND, &ns, &name)
        .into_iter()
        .map(|r| r.name)
        .collect();
    let check = profile.check();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let old = profile.current();
    let desired = desired_profile_status(old, profile.meta().generation, &check, used_by, &now);
    // A server that moved to another profile is not an event of this one:
    // look again now and then so `usedBy` catches up.
    let again = Action::requeue(std::time::Duration::from_secs(300));
    if old == Some(&desired) {
        return Ok(again);
    }
    let was_valid = old
        .and_then(|o| o.conditions.iter().find(|c| c.type_ == "Valid"))
        .map(|c| c.status == "True");
    if let Err(e) = &check {
        if was_valid != Some(false) {
            let event = Event {
                type_: EventType::Warning,
                reason: e.reason().into(),
                note: Some(e.to_string().chars().take(1000).collect()),
                action: "Validate".into(),
                secondary: None,
            };
            ctx.recorder
                .publish(&event, &profile.object_ref(&()))
                .await
                .map_err(err)?;
        }
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    match super::status_write::apply_status(&api, &name, &desired).await {
        Ok(_) => Ok(again),
        // Deleted since the reconcile read it: no status to write, nothing
        // to retry (its deletion is an event of its own).
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(err(e)),
    }
}

/// After a failed status write: retry in 10 s.
pub fn profile_error_policy<K: Profile>(
    _profile: Arc<K>,
    error: &ProfileError,
    _ctx: Arc<ProfileContext>,
) -> Action {
    tracing::warn!(error = %error, "profile status not written");
    Action::requeue(std::time::Duration::from_secs(10))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn valid_profile_lists_its_servers_sorted() {
        let s = desired_profile_status(
            None,
            Some(3),
            &Ok(()),
            vec!["b".into(), "a".into(), "b".into()],
            &at(1),
        );
        assert_eq!(s.used_by, ["a", "b"]);
        assert_eq!(s.observed_generation, Some(3));
        let c = &s.conditions[0];
        assert_eq!(
            (c.type_.as_str(), c.status.as_str(), c.reason.as_str()),
            ("Valid", "True", "Valid")
        );
        assert_eq!(c.last_transition_time, at(1));
    }

    #[test]
    fn unchanged_state_compares_equal_and_invalid_says_why() {
        let first = desired_profile_status(None, Some(1), &Ok(()), vec!["a".into()], &at(1));
        let again =
            desired_profile_status(Some(&first), Some(1), &Ok(()), vec!["a".into()], &at(9));
        assert_eq!(first, again, "no write in a steady state");
        let bad = Err(ValidateError::DuplicateExposedName("x".into()));
        let invalid = desired_profile_status(Some(&first), Some(2), &bad, vec![], &at(9));
        let c = &invalid.conditions[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "InvalidToolProfile")
        );
        assert!(c.message.contains("\"x\""));
        assert_eq!(c.last_transition_time, at(9));
    }
}
