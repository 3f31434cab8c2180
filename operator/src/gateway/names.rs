//! Names, labels and URLs of an MCPGateway's objects, and the files its
//! pod and its backends' pods read. Pure.
//!
//! ```text
//! MCPGateway <gw> ─┬─ Deployment, Service, NetworkPolicy  <gw>   (label mcpwarden.dev/gateway=<gw>)
//!                  ├─ ConfigMap <gw>-policy      the gateway's compiled policy
//!                  ├─ ConfigMap <gw>-jwks        the cluster's service-account keys (callers' tokens)
//!                  ├─ ConfigMap <gw>-issuers     the keys read from the profile's JWT issuers
//!                  ├─ ConfigMap <gw>-backend-ca  the CAs of the backends served with TLS
//!                  ├─ Secret    <gw>-gateway-key the signing key (made once, mounted by the gateway only)
//!                  ├─ Secret    <gw>-peer-key    replicas sign session ids with it
//!                  ├─ Secret    <gw>-admin-token the operator reads the pods' `/gateway` with it
//!                  └─ ConfigMap <gw>-gateway-pub the public half and the callers' issuers, read by the
//!                                                MCPServer reconcile of each selected backend only
//! ```

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use mcp_warden_crds::MCPGateway;

use crate::{config::BuildConfig, names::FACADE_PORT};

/// The label naming the gateway on its objects and pods (the selector).
pub const GATEWAY_LABEL: &str = "mcpwarden.dev/gateway";
/// Where the gateway's pod finds its signing key.
pub const KEY_DIR: &str = "/etc/mcp-warden/gateway";
/// The signing key's key in its Secret (PKCS#8 PEM).
pub const KEY_KEY: &str = "key.pem";
/// The public key's key in the `-gateway-pub` ConfigMap (SPKI PEM).
pub const PUBLIC_KEY_KEY: &str = "public.pem";
/// The callers' issuers the gateway vouches for, one a line, in the same ConfigMap.
pub const CALLER_ISSUERS_KEY: &str = "caller-issuers";

pub fn namespace(gw: &MCPGateway) -> String {
    gw.namespace().unwrap_or_else(|| "default".into())
}

/// The Deployment's, Service's and NetworkPolicy's name.
pub fn object_name(gw: &MCPGateway) -> String {
    gw.name_any()
}

pub fn policy_config_map(gw: &MCPGateway) -> String {
    format!("{}-policy", gw.name_any())
}

pub fn jwks_config_map(gw: &MCPGateway) -> String {
    format!("{}-jwks", gw.name_any())
}

/// The keys the operator read from the profile's JWT issuers.
pub fn issuers_config_map(gw: &MCPGateway) -> String {
    format!("{}-issuers", gw.name_any())
}

/// The CAs of the backends served with TLS.
pub fn backend_ca_config_map(gw: &MCPGateway) -> String {
    format!("{}-backend-ca", gw.name_any())
}

pub fn key_secret(gw: &MCPGateway) -> String {
    format!("{}-gateway-key", gw.name_any())
}

pub fn peer_key_secret(gw: &MCPGateway) -> String {
    format!("{}-peer-key", gw.name_any())
}

/// The Secret holding the token the operator reads the gateway pods'
/// `/gateway` with (made once, mounted by the gateway's pod only).
pub fn admin_token_secret(gw: &MCPGateway) -> String {
    format!("{}-admin-token", gw.name_any())
}

/// The ConfigMap of the public key, by the gateway's name (the backends'
/// reconcile knows only that).
pub fn public_config_map(gateway: &str) -> String {
    format!("{gateway}-gateway-pub")
}

/// The gateway's `iss`: unique in the cluster, and never a JWT issuer URL
/// or `static`, so a backend cannot confuse it with a caller's issuer.
pub fn issuer(namespace: &str, gateway: &str) -> String {
    format!("mcpwarden.dev/{namespace}/mcpgateway/{gateway}")
}

/// The audience a caller's projected service-account token must carry to
/// call the gateway (distinct from any MCPServer's, whatever the names).
pub fn token_audience(gw: &MCPGateway) -> String {
    issuer(&namespace(gw), &gw.name_any())
}

/// Where a backend's facade reads a gateway's public key: a key of its own
/// policy ConfigMap, mounted with it.
pub fn backend_public_key_file(gateway: &str) -> String {
    format!(
        "{}/{}",
        crate::names::POLICY_DIR,
        backend_public_key_key(gateway)
    )
}

/// The key of a backend's policy ConfigMap holding a gateway's public key.
pub fn backend_public_key_key(gateway: &str) -> String {
    format!("gateway-{gateway}.pem")
}

/// The pods' selector.
pub fn selector(gw: &MCPGateway) -> BTreeMap<String, String> {
    BTreeMap::from([(GATEWAY_LABEL.into(), gw.name_any())])
}

/// The recommended labels, with `component` saying what the object is for.
pub fn labels(gw: &MCPGateway, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), "mcp-gateway".into()),
        ("app.kubernetes.io/instance".into(), gw.name_any()),
        ("app.kubernetes.io/component".into(), component.into()),
        ("app.kubernetes.io/part-of".into(), "mcp-warden".into()),
        (
            "app.kubernetes.io/managed-by".into(),
            "mcp-warden-operator".into(),
        ),
        (GATEWAY_LABEL.into(), gw.name_any()),
    ])
}

/// Metadata of an owned object.
pub fn metadata(gw: &MCPGateway, name: String, component: &str) -> ObjectMeta {
    ObjectMeta {
        labels: Some(labels(gw, component)),
        name: Some(name),
        namespace: Some(namespace(gw)),
        owner_references: owner_reference(gw).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

/// The metadata the builders give object `name` of the tests' gateway
/// `front` (namespace `a`, uid `u-gw`), written out in full: the builders'
/// tests compare whole objects against it.
#[cfg(test)]
pub(crate) fn front_metadata(name: &str, component: &str) -> serde_json::Value {
    serde_json::json!({
        "name": name, "namespace": "a",
        "labels": {
            "app.kubernetes.io/name": "mcp-gateway",
            "app.kubernetes.io/instance": "front",
            "app.kubernetes.io/component": component,
            "app.kubernetes.io/part-of": "mcp-warden",
            "app.kubernetes.io/managed-by": "mcp-warden-operator",
            "mcpwarden.dev/gateway": "front",
        },
        "ownerReferences": [{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
            "name": "front", "uid": "u-gw", "controller": true}],
    })
}

/// The controller owner reference, if the gateway has a uid.
pub fn owner_reference(gw: &MCPGateway) -> Option<OwnerReference> {
    gw.controller_owner_ref(&())
}

fn exposed_hosts(gw: &MCPGateway) -> &[String] {
    gw.spec
        .expose
        .as_ref()
        .map(|e| e.hosts.as_slice())
        .unwrap_or_default()
}

/// The `expose.tls` Secret, if the gateway's listener serves TLS.
pub fn tls_secret(gw: &MCPGateway) -> Option<&str> {
    let tls = gw.spec.expose.as_ref()?.tls.as_ref()?;
    Some(tls.secret_name.as_str())
}

/// Host names clients may use: the Service's names, then `expose.hosts`.
pub fn allowed_hosts(gw: &MCPGateway, cfg: &BuildConfig) -> Vec<String> {
    let (svc, ns) = (object_name(gw), namespace(gw));
    let mut hosts = vec![
        svc.clone(),
        format!("{svc}.{ns}"),
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.{}", cfg.cluster_domain),
    ];
    hosts.extend(exposed_hosts(gw).iter().cloned());
    hosts
}

/// The in-cluster URL of the gateway.
pub fn cluster_endpoint(gw: &MCPGateway, cfg: &BuildConfig) -> String {
    let scheme = if tls_secret(gw).is_some() {
        "https"
    } else {
        "http"
    };
    format!(
        "{scheme}://{}.{}.svc.{}:{FACADE_PORT}/mcp",
        object_name(gw),
        namespace(gw),
        cfg.cluster_domain
    )
}

/// Every URL clients reach the gateway at (its protected-resource metadata
/// names one per host): the endpoint, the in-cluster URL, each exposed host.
pub fn resource_urls(gw: &MCPGateway, cfg: &BuildConfig) -> Vec<String> {
    let mut urls = vec![endpoint(gw, cfg), cluster_endpoint(gw, cfg)];
    urls.extend(exposed_hosts(gw).iter().map(|h| format!("https://{h}/mcp")));
    let mut seen = std::collections::BTreeSet::new();
    urls.retain(|u| seen.insert(u.clone()));
    urls
}

/// The URL agents connect to (`status.endpoint`).
pub fn endpoint(gw: &MCPGateway, cfg: &BuildConfig) -> String {
    match exposed_hosts(gw).first() {
        Some(host) => format!("https://{host}/mcp"),
        None => cluster_endpoint(gw, cfg),
    }
}
