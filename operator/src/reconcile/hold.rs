//! Hold (reads only): whether the last approved workload can be kept while a
//! changed one waits for approval (`crate::capabilities`, rule 3).
//!
//! ```text
//! plan.hold ─▶ live Deployment + policy ConfigMap, both ours?
//!   ├─ no  → NothingToKeep: re-plan with nothing approved (the new workload at the baseline)
//!   └─ yes → only the ToolProfile changed, the JWT issuers' keys are the live ones
//!            (<name>-issuers), the live policy is the one recorded in
//!            status.approvedPolicy, the new compiled policy differs from it (or is the
//!            tightening the last reconcile applied, nothing changed since) and only
//!            takes away from it (crate::tightening)?  yes → Tightening (apply at once) ;
//!            no → Hold
//! ```
//!
//! What is kept lives in the cluster (the live Deployment and ConfigMap)
//! and what it is checked against in the MCPServer's status, which only the
//! operator writes; so a restart finds the same answer, and an edit of the
//! MCPServer cannot change what is kept.

use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap};
use kube::{Api, Client};
use mcp_warden_crds::{mcpserver::MCPServerStatus, FacadePolicy, MCPServer};

use super::{apply::controlled_by, resolve::ResolveError};
use crate::{names, plan::Plan, workload};

/// What to do with a planned hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// Keep the live Deployment and policy.
    Hold,
    /// Apply: the change only takes away from the approved policy.
    Tightening,
    /// Nothing approved is live to keep.
    NothingToKeep,
}

/// Read the live objects and decide.
pub async fn check(
    client: &Client,
    server: &MCPServer,
    plan: &Plan,
) -> Result<Check, ResolveError> {
    let ns = names::namespace(server);
    let err = |what: String| move |source| ResolveError { what, source };
    let name = names::object_name(server);
    let deployment = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(err(format!("Deployment {ns}/{name}")))?;
    let cm_name = names::policy_config_map(server);
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get_opt(&cm_name)
        .await
        .map_err(err(format!("ConfigMap {ns}/{cm_name}")))?;
    let (Some(deployment), Some(config_map)) = (deployment, config_map) else {
        return Ok(Check::NothingToKeep);
    };
    if !controlled_by(&deployment, server) || !controlled_by(&config_map, server) {
        return Ok(Check::NothingToKeep);
    }
    let issuers_name = names::issuers_config_map(server);
    let live_issuers = Api::<ConfigMap>::namespaced(client.clone(), &ns)
        .get_opt(&issuers_name)
        .await
        .map_err(err(format!("ConfigMap {ns}/{issuers_name}")))?
        .filter(|cm| controlled_by(cm, server))
        .and_then(|cm| cm.data);
    let live = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(names::POLICY_KEY));
    // The recorded policy as the API server has it now: the watch cache may
    // not have seen the status the previous reconcile wrote with the
    // tightening it applied (the ConfigMap's own event can arrive first).
    let fresh = Api::<MCPServer>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(err(format!("MCPServer {ns}/{name}")))?
        .and_then(|s| s.status)
        .or_else(|| server.status.clone());
    let live = Live {
        policy: live.map(String::as_str),
        issuers: live_issuers.as_ref(),
    };
    Ok(decide(plan, fresh.as_ref(), &live))
}

/// What runs now, as the cluster has it: the policy YAML, and the JWT
/// issuers' keys the facade verifies tokens with (`<name>-issuers`).
pub struct Live<'a> {
    pub policy: Option<&'a str>,
    pub issuers: Option<&'a std::collections::BTreeMap<String, String>>,
}

/// The pure part of [`check`], given the server's latest status (its
/// `approvedPolicy`, and what the previous reconcile concluded) and the live
/// policy and issuers' keys.
pub fn decide(plan: &Plan, previous: Option<&MCPServerStatus>, live: &Live<'_>) -> Check {
    let recorded = previous.and_then(|s| s.approved_policy.as_deref());
    let only_profile = plan.capabilities.changed == ["toolProfile"];
    // A profile change the compiled policy does not show (the content of a
    // JWKS ConfigMap it names) cannot be shown to take away: it waits. The
    // exception is a tightening already applied: the next reconcile finds the
    // policy it wrote, with nothing changed since, and it stays applied.
    let policy_changed = recorded != Some(plan.policy_hash.as_str());
    let tightened_and_unchanged = previous.is_some_and(|s| {
        s.workload == plan.capabilities.workload
            && s.conditions
                .iter()
                .any(|c| c.type_ == "CapabilitiesApproved" && c.reason == "Tightened")
    });
    // The keys that decide who a token's caller is are not in the compiled
    // policy (it names their files): a profile change that also swaps them
    // is never a tightening, whatever the policy shows.
    let same_keys = plan
        .objects
        .issuers_config_map
        .as_ref()
        .and_then(|cm| cm.data.as_ref())
        == live.issuers;
    let tightening = only_profile
        && same_keys
        && (policy_changed || tightened_and_unchanged)
        && live.policy.is_some_and(|yaml| {
            Some(workload::hash_bytes(yaml.as_bytes()).as_str()) == recorded
                && serde_yaml_ng::from_str::<FacadePolicy>(yaml)
                    .is_ok_and(|old| crate::tightening::only_takes_away(&old, &plan.policy))
        });
    if tightening {
        Check::Tightening
    } else {
        Check::Hold
    }
}

/// What `status.approvedPolicy` records after this reconcile: the policy
/// written under an approval in force, the earlier one while holding, none
/// without an approval.
pub fn approved_policy(server: &MCPServer, plan: &Plan) -> Option<String> {
    match (&plan.capabilities.approved_digest, plan.capabilities.hold) {
        (None, _) => None,
        (Some(_), true) => server.status.as_ref()?.approved_policy.clone(),
        (Some(_), false) => Some(plan.policy_hash.clone()),
    }
}
