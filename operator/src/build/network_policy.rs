//! The pod's NetworkPolicy: ingress only to the facade port (and the admin
//! port from the monitoring namespace); no egress at all. Egress a
//! SandboxProfile asks for is a capability that needs an admin's approval
//! (the capability issue), so for now it is never opened.

use k8s_openapi::{
    api::networking::v1::{
        NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
        NetworkPolicySpec,
    },
    apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString},
};

use super::BuildInput;
use crate::names::{self, ADMIN_PORT, FACADE_PORT};

/// The NetworkPolicy around the server's pod.
pub fn desired_network_policy(input: BuildInput<'_>) -> NetworkPolicy {
    let tcp = |port: i32| NetworkPolicyPort {
        port: Some(IntOrString::Int(port)),
        protocol: Some("TCP".into()),
        ..NetworkPolicyPort::default()
    };
    let metrics_from = NetworkPolicyPeer {
        namespace_selector: Some(LabelSelector {
            match_labels: Some(input.config.metrics_namespace_labels.clone()),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    NetworkPolicy {
        metadata: names::metadata(input.server, names::object_name(input.server)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(names::selector(input.server)),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(FACADE_PORT)]),
                    from: None,
                },
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(ADMIN_PORT)]),
                    from: Some(vec![metrics_from]),
                },
            ]),
            // Present and empty: deny every egress.
            egress: Some(vec![]),
        }),
    }
}
