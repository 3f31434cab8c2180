//! Build (pure): one `desired_*` function per Kubernetes object, one object
//! per file. Each takes the same [`BuildInput`] and returns the whole object
//! the operator applies; nothing here reads the clock or the cluster, so the
//! output is deterministic and snapshot-tested.
//!
//! ```text
//! MCPServer ─┬─ ServiceAccount  (service_account.rs)  no token automount
//!            ├─ ConfigMap       (config_map.rs)       the compiled FacadePolicy
//!            ├─ Deployment      (deployment.rs)       server + facade (+ bridge init);
//!            │                  (facade_auth.rs)      the profile's token Secrets and JWKS, facade only
//!            ├─ Service         (service.rs)          8080 /mcp, 9090 metrics
//!            ├─ Service <n>-peers (service.rs)        headless, replicas > 1
//!            ├─ ConfigMap <n>-peers (config_map.rs)   every replica's address (identity budgets)
//!            ├─ NetworkPolicy   (network_policy.rs)   ingress 8080 (+9090), egress only as allowed
//!            ├─ <n>-egress      (named_egress.rs)     Cilium/Calico policy for approved host names
//!            ├─ <n>-egress-proxy (egress_proxy.rs)   or: the proxy credential and approved entry, and the
//!            │                                       namespace's shared proxy objects (assembled in apply)
//!            ├─ PDB             (pod_disruption_budget.rs)  maxUnavailable 1, replicas > 1
//!            ├─ Ingress/HTTPRoute <n> (exposure.rs)   expose.hosts → the Service, when asked
//!            └─ Secret <n>-peer-key (secret.rs)       shaped here, its random bytes made in apply
//! ```

pub mod config_map;
pub mod deployment;
pub mod egress_proxy;
pub mod exposure;
pub mod facade_auth;
pub mod named_egress;
pub mod network_policy;
pub mod pod_disruption_budget;
pub mod pod_template;
pub mod secret;
pub mod service;
pub mod service_account;
mod volumes;

use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Service, ServiceAccount},
    networking::v1::{Ingress, NetworkPolicy},
    policy::v1::PodDisruptionBudget,
};
use kube::api::DynamicObject;
use mcp_warden_crds::{toolprofile::ProfileAuth, MCPServer, SandboxProfileSpec};

use crate::{
    compile::Approved,
    config::{BuildConfig, NamedEgress},
};

/// Everything a builder may look at.
#[derive(Clone, Copy, Debug)]
pub struct BuildInput<'a> {
    /// The MCPServer being built.
    pub server: &'a MCPServer,
    /// Its sandbox (the referenced SandboxProfile, or the defaults).
    pub sandbox: &'a SandboxProfileSpec,
    /// The compiled policy, as YAML.
    pub policy_yaml: &'a str,
    /// The ToolProfile's authentication (its Secrets and ConfigMaps are
    /// mounted into the facade).
    pub auth: &'a ProfileAuth,
    /// The cluster's service-account issuer JWKS, if the operator read it.
    pub jwks: Option<&'a str>,
    /// The JWKS the operator fetched for the profile's JWT issuers that have
    /// no ConfigMap, by issuer URL.
    pub issuer_jwks: &'a std::collections::BTreeMap<String, String>,
    /// The capabilities in force (approved); everything else is baseline.
    pub approved: &'a Approved,
    /// Every replica's peer address, as last read from its pods.
    pub peers: &'a [String],
    /// The digest the server's image is pinned to (`crate::pin`).
    pub pinned_image: Option<&'a mcp_warden_crds::mcpserver::PinnedImage>,
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
    /// The issuer's JWKS (only when it was read).
    pub jwks_config_map: Option<ConfigMap>,
    /// The JWKS fetched for the profile's JWT issuers (only when any was).
    pub issuers_config_map: Option<ConfigMap>,
    /// The pod.
    pub deployment: Deployment,
    /// The in-cluster endpoint.
    pub service: Service,
    /// The headless Service of the replicas (replicas > 1).
    pub peers_service: Option<Service>,
    /// Every replica's peer address, for the facades.
    pub peers_config_map: ConfigMap,
    /// The pod's firewall.
    pub network_policy: NetworkPolicy,
    /// The cluster's policy engine for egress by host name, if it has one
    /// (apply removes a stale `<name>-egress` of that kind).
    pub named_egress_engine: NamedEgress,
    /// Egress to approved host names, where the engine exists.
    pub named_egress: Option<DynamicObject>,
    /// What the namespace's egress proxy lets this server reach (the proxy
    /// engine, approved host egress); apply keeps it in `<n>-egress-proxy`.
    pub egress_proxy_entry: Option<egress_proxy::ClientEntry>,
    /// At most one replica down at a time (replicas > 1).
    pub pod_disruption_budget: Option<PodDisruptionBudget>,
    /// The Ingress of `expose.ingress` (apply removes a stale one).
    pub ingress: Option<Ingress>,
    /// The HTTPRoute of `expose.httpRoute` (apply removes a stale one).
    pub http_route: Option<DynamicObject>,
}

/// Build every object.
pub fn desired_objects(input: BuildInput<'_>) -> DesiredObjects {
    DesiredObjects {
        service_account: service_account::desired_service_account(input),
        config_map: config_map::desired_config_map(input),
        jwks_config_map: config_map::desired_jwks_config_map(input),
        issuers_config_map: config_map::desired_issuers_config_map(input),
        deployment: deployment::desired_deployment(input),
        service: service::desired_service(input),
        peers_service: service::desired_peers_service(input),
        peers_config_map: config_map::desired_peers_config_map(input),
        network_policy: network_policy::desired_network_policy(input),
        named_egress_engine: input.config.named_egress,
        named_egress: named_egress::desired_named_egress_policy(input),
        egress_proxy_entry: egress_proxy::desired_entry(input),
        pod_disruption_budget: pod_disruption_budget::desired_pod_disruption_budget(input),
        ingress: exposure::desired_ingress(input),
        http_route: exposure::desired_http_route(input),
    }
}

impl DesiredObjects {
    /// The objects as JSON values with `apiVersion`/`kind`, in order.
    pub fn to_values(&self) -> Vec<serde_json::Value> {
        let mut values = vec![
            typed_value(&self.service_account),
            typed_value(&self.config_map),
        ];
        values.extend(self.jwks_config_map.as_ref().map(typed_value));
        values.extend(self.issuers_config_map.as_ref().map(typed_value));
        values.extend([typed_value(&self.deployment), typed_value(&self.service)]);
        values.extend(self.peers_service.as_ref().map(typed_value));
        values.push(typed_value(&self.peers_config_map));
        values.push(typed_value(&self.network_policy));
        values.extend(
            self.named_egress
                .as_ref()
                .map(|o| serde_json::to_value(o).expect("Kubernetes objects serialize")),
        );
        values.extend(self.pod_disruption_budget.as_ref().map(typed_value));
        values.extend(self.ingress.as_ref().map(typed_value));
        values.extend(
            self.http_route
                .as_ref()
                .map(|o| serde_json::to_value(o).expect("Kubernetes objects serialize")),
        );
        values
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
