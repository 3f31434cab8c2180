//! Build (pure): one `desired_*` function per Kubernetes object, one object
//! per file. Each takes the same [`BuildInput`] and returns the whole object
//! the operator applies; nothing here reads the clock or the cluster, so the
//! output is deterministic and snapshot-tested.
//!
//! ```text
//! MCPServer ─┬─ ServiceAccount  (service_account.rs)  no token automount
//!            ├─ ConfigMap       (config_map.rs)       the compiled FacadePolicy
//!            ├─ Deployment      (deployment.rs)       server + facade (+ bridge init)
//!            ├─ Service         (service.rs)          8080 /mcp, 9090 metrics
//!            └─ NetworkPolicy   (network_policy.rs)   ingress 8080 (+9090), no egress
//! ```

pub mod config_map;
pub mod deployment;
pub mod network_policy;
pub mod service;
pub mod service_account;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Service, ServiceAccount},
    networking::v1::NetworkPolicy,
};
use mcp_warden_crds::{MCPServer, SandboxProfileSpec};

use crate::config::BuildConfig;

/// Everything a builder may look at.
#[derive(Clone, Copy, Debug)]
pub struct BuildInput<'a> {
    /// The MCPServer being built.
    pub server: &'a MCPServer,
    /// Its sandbox (the referenced SandboxProfile, or the defaults).
    pub sandbox: &'a SandboxProfileSpec,
    /// The compiled policy, as YAML.
    pub policy_yaml: &'a str,
    /// Operator settings.
    pub config: &'a BuildConfig,
}

/// The objects of one MCPServer, in apply (and render) order.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredObjects {
    /// The pod's identity.
    pub service_account: ServiceAccount,
    /// The compiled policy.
    pub config_map: ConfigMap,
    /// The pod.
    pub deployment: Deployment,
    /// The in-cluster endpoint.
    pub service: Service,
    /// The pod's firewall.
    pub network_policy: NetworkPolicy,
}

/// Build every object.
pub fn desired_objects(input: BuildInput<'_>) -> DesiredObjects {
    DesiredObjects {
        service_account: service_account::desired_service_account(input),
        config_map: config_map::desired_config_map(input),
        deployment: deployment::desired_deployment(input),
        service: service::desired_service(input),
        network_policy: network_policy::desired_network_policy(input),
    }
}

impl DesiredObjects {
    /// The objects as JSON values with `apiVersion`/`kind`, in order.
    pub fn to_values(&self) -> Vec<serde_json::Value> {
        vec![
            typed_value(&self.service_account),
            typed_value(&self.config_map),
            typed_value(&self.deployment),
            typed_value(&self.service),
            typed_value(&self.network_policy),
        ]
    }
}

/// A k8s-openapi object as JSON with its `apiVersion` and `kind`.
pub fn typed_value<K>(obj: &K) -> serde_json::Value
where
    K: k8s_openapi::Resource + serde::Serialize,
{
    let mut value = serde_json::to_value(obj).expect("Kubernetes objects serialize");
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".into(), K::API_VERSION.into());
        map.insert("kind".into(), K::KIND.into());
    }
    value
}
