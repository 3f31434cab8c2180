//! The PodDisruptionBudget (replicas > 1): voluntary disruptions (node
//! drains, cluster upgrades) take at most one facade away at a time, so the
//! sessions of the others keep their owner.

use k8s_openapi::{
    api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec},
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
};

use super::BuildInput;
use crate::names;

/// The PDB, when the server has more than one replica.
pub fn desired_pod_disruption_budget(input: BuildInput<'_>) -> Option<PodDisruptionBudget> {
    (input.server.spec.replicas > 1).then(|| PodDisruptionBudget {
        metadata: names::metadata(input.server, names::object_name(input.server)),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(names::selector(input.server)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    })
}
