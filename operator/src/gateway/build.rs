//! Build (pure): the objects of one MCPGateway, each whole, from the
//! resolved backends, the gateway's profile and the public key apply made.
//!
//! ```text
//! MCPGateway ─┬─ ConfigMap <gw>-policy      the gateway's policy (compile_gateway_policy)
//!             ├─ ConfigMap <gw>-jwks        the cluster's service-account keys, when read
//!             ├─ ConfigMap <gw>-issuers     the keys of the profile's JWT issuers that name no
//!             │                             JWKS ConfigMap, read from the issuers (issuers.rs)
//!             ├─ ConfigMap <gw>-backend-ca  the CAs of the backends served with TLS (backend_ca.rs)
//!             ├─ ConfigMap <gw>-gateway-pub public key + callers' issuers (the backends' reconciles read it)
//!             │  (Secrets <gw>-gateway-key, -peer-key, -admin-token: random, made once by apply.rs)
//!             ├─ Deployment <gw>            the facade in gateway mode (pod.rs)
//!             ├─ Service <gw>               8080 /mcp, 9090 metrics
//!             ├─ NetworkPolicy <gw>         in: 8080 (+9090 operator, monitoring);
//!             │                             out: each backend's pods on 8080, and the cluster DNS
//!             └─ Ingress/HTTPRoute <gw>     expose.hosts → the Service, when asked (the
//!                                           MCPServer's builders, build/exposure.rs)
//! ```
//! The gateway's policy adds to the backends' and never replaces one: its
//! risk ceiling and sandbox grant are open because each backend already
//! applies its own approvals and sandbox to every call that reaches it.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec},
        networking::v1::{
            Ingress, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule,
            NetworkPolicyPeer, NetworkPolicySpec,
        },
    },
    apimachinery::pkg::util::intstr::IntOrString,
    ByteString,
};
use kube::api::DynamicObject;
use mcp_warden_crds::{
    DefaultAction, FacadePolicy, MCPGateway, RiskLevel, SandboxGrant, ServerRef, ToolProfileSpec,
};

use super::{names, resolve::Backend};
use crate::{
    build::{
        exposure,
        network_policy::{dns_rule, labels, tcp},
    },
    compile::compile_auth_for,
    config::BuildConfig,
    names::{ADMIN_PORT, ADMIN_TOKEN_KEY, FACADE_PORT, JWKS_KEY, PEER_KEY_KEY, POLICY_KEY},
};

/// Everything a gateway builder may look at.
#[derive(Clone, Copy, Debug)]
pub struct GatewayInput<'a> {
    /// The gateway.
    pub gateway: &'a MCPGateway,
    /// Its backends, by name.
    pub backends: &'a [Backend],
    /// Its ToolProfile, if it names one.
    pub profile: Option<&'a ToolProfileSpec>,
    /// The cluster's service-account issuer JWKS, if the operator read it.
    pub jwks: Option<&'a str>,
    /// The keys the operator read from the profile's JWT issuers that name
    /// no JWKS ConfigMap, by issuer (`crate::reconcile::oidc`).
    pub issuer_jwks: &'a BTreeMap<String, String>,
    /// The CA of each backend served with TLS whose CA was found, by server.
    pub backend_cas: &'a BTreeMap<String, String>,
    /// The public half of the signing key (SPKI PEM), once it exists.
    pub public_key: Option<&'a str>,
    /// Operator settings.
    pub config: &'a BuildConfig,
}

/// The objects of one gateway, in apply order.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayObjects {
    pub policy: ConfigMap,
    pub jwks: Option<ConfigMap>,
    /// The fetched issuers' keys; `None` while none was read (the pod's
    /// optional mounts wait, and those issuers' tokens are refused).
    pub issuers: Option<ConfigMap>,
    /// The CAs of the TLS backends (`backend_ca.rs`).
    pub backend_ca: Option<ConfigMap>,
    pub public_key: Option<ConfigMap>,
    pub deployment: k8s_openapi::api::apps::v1::Deployment,
    pub service: Service,
    pub network_policy: NetworkPolicy,
    /// The Ingress of `expose.ingress` (apply removes a stale one).
    pub ingress: Option<Ingress>,
    /// The HTTPRoute of `expose.httpRoute` (apply removes a stale one).
    pub http_route: Option<DynamicObject>,
}

impl GatewayObjects {
    /// The objects as JSON values with `apiVersion`/`kind`, in apply order.
    pub fn to_values(&self) -> Vec<serde_json::Value> {
        use crate::build::typed_value;
        let mut values = vec![typed_value(&self.policy)];
        values.extend(self.jwks.as_ref().map(typed_value));
        values.extend(self.issuers.as_ref().map(typed_value));
        values.extend(self.backend_ca.as_ref().map(typed_value));
        values.extend(self.public_key.as_ref().map(typed_value));
        values.extend([
            typed_value(&self.deployment),
            typed_value(&self.service),
            typed_value(&self.network_policy),
        ]);
        values.extend(self.ingress.as_ref().map(typed_value));
        values.extend(
            self.http_route
                .as_ref()
                .map(|r| serde_json::to_value(r).expect("an HTTPRoute serializes")),
        );
        values
    }
}

/// Build every object.
pub fn desired_objects(input: GatewayInput<'_>) -> GatewayObjects {
    GatewayObjects {
        policy: desired_policy_config_map(input),
        jwks: desired_jwks_config_map(input),
        issuers: super::issuers::desired_config_map(input),
        backend_ca: super::backend_ca::desired_config_map(input.gateway, input.backend_cas),
        public_key: desired_public_config_map(input),
        deployment: super::pod::desired_deployment(input),
        service: desired_service(input),
        network_policy: desired_network_policy(input),
        ingress: desired_ingress(input),
        http_route: desired_http_route(input),
    }
}

/// The Ingress of `expose.ingress`, to the gateway's Service.
fn desired_ingress(input: GatewayInput<'_>) -> Option<Ingress> {
    let gw = input.gateway;
    let name = names::object_name(gw);
    exposure::ingress_for(
        names::metadata(gw, name.clone(), "gateway"),
        &name,
        gw.spec.expose.as_ref()?,
    )
}

/// The HTTPRoute of `expose.httpRoute`, to the gateway's Service.
fn desired_http_route(input: GatewayInput<'_>) -> Option<DynamicObject> {
    let gw = input.gateway;
    let name = names::object_name(gw);
    exposure::http_route_for(
        names::metadata(gw, name.clone(), "gateway"),
        &name,
        gw.spec.expose.as_ref()?,
    )
}

/// The profile the gateway runs with: its own, or one that passes every
/// name the backends allow the caller.
fn profile(input: GatewayInput<'_>) -> ToolProfileSpec {
    input.profile.cloned().unwrap_or_else(|| ToolProfileSpec {
        default_action: DefaultAction::Allow,
        ..ToolProfileSpec::default()
    })
}

/// The gateway's own policy.
pub fn compile_gateway_policy(input: GatewayInput<'_>) -> FacadePolicy {
    let gw = input.gateway;
    let p = profile(input);
    FacadePolicy {
        server: Some(ServerRef {
            namespace: names::namespace(gw),
            name: names::object_name(gw),
        }),
        default_action: p.default_action,
        tools: p.tools.clone(),
        limits: p.limits.clone(),
        resources: p.resources.clone(),
        prompts: p.prompts.clone(),
        redaction: p.redaction.clone(),
        risk_prefix: p.risk_prefix,
        quarantine_on_drift: p.quarantine_on_drift,
        poisoning_scan: p.poisoning_scan,
        // Each backend applies its own approvals: the gateway only takes away.
        risk_ceiling: RiskLevel::Critical,
        roles: p.roles.clone(),
        auth: compile_auth_for(
            names::token_audience(gw),
            names::resource_urls(gw, input.config),
            &p.auth,
            input.config,
        ),
        sandbox: SandboxGrant {
            write_allowed: true,
        },
        ..FacadePolicy::default()
    }
}

/// The compiled policy passes the facade's own loader (as a server's must).
pub fn check_policy(input: GatewayInput<'_>) -> Result<(), super::validate::GatewayInvalid> {
    crate::validate::validate_policy(&compile_gateway_policy(input))
        .map_err(|e| super::validate::GatewayInvalid::InvalidPolicy(e.to_string()))
}

/// The issuers of the callers the gateway authenticates, which its
/// backends let it vouch for: static tokens, the cluster's service-account
/// issuer, and its JWT issuers whose keys the operator reads from the
/// issuer itself. Not an issuer whose keys the profile names in a JWKS
/// ConfigMap: anyone who may edit the namespace's ConfigMaps could put
/// their own keys there, and no approval binds a gateway's profile, so a
/// backend — whose own keys for that issuer its approval binds — would
/// take the gateway's word for a caller that issuer never signed for.
pub fn caller_issuers(input: GatewayInput<'_>) -> Vec<String> {
    let auth = compile_gateway_policy(input).auth;
    let keys_in_a_config_map = |issuer: &str| {
        input
            .profile
            .iter()
            .flat_map(|p| &p.auth.jwt)
            .any(|j| j.issuer == issuer && j.jwks.is_some())
    };
    let mut issuers: Vec<String> = Vec::new();
    if auth.static_tokens.is_some() {
        issuers.push("static".into());
    }
    issuers.extend(
        auth.jwt
            .iter()
            .filter(|j| !keys_in_a_config_map(&j.issuer))
            .map(|j| j.issuer.clone()),
    );
    issuers.extend(auth.service_account_tokens.iter().map(|s| s.issuer.clone()));
    issuers.sort();
    issuers.dedup();
    issuers
}

fn desired_policy_config_map(input: GatewayInput<'_>) -> ConfigMap {
    let gw = input.gateway;
    let yaml = crate::compile::policy_yaml(&compile_gateway_policy(input));
    ConfigMap {
        metadata: names::metadata(gw, names::policy_config_map(gw), "policy"),
        data: Some(BTreeMap::from([(POLICY_KEY.to_string(), yaml)])),
        ..ConfigMap::default()
    }
}

fn desired_jwks_config_map(input: GatewayInput<'_>) -> Option<ConfigMap> {
    let gw = input.gateway;
    input.jwks.map(|jwks| ConfigMap {
        metadata: names::metadata(gw, names::jwks_config_map(gw), "jwks"),
        data: Some(BTreeMap::from([(JWKS_KEY.to_string(), jwks.to_string())])),
        ..ConfigMap::default()
    })
}

/// The public key and the callers' issuers: public data, but only the
/// reconciles of this gateway's backends copy it into a policy.
fn desired_public_config_map(input: GatewayInput<'_>) -> Option<ConfigMap> {
    let gw = input.gateway;
    input.public_key.map(|pem| ConfigMap {
        metadata: names::metadata(
            gw,
            names::public_config_map(&gw.metadata.name.clone().unwrap_or_default()),
            "gateway-pub",
        ),
        data: Some(BTreeMap::from([
            (names::PUBLIC_KEY_KEY.to_string(), pem.to_string()),
            (
                names::CALLER_ISSUERS_KEY.to_string(),
                caller_issuers(input).join("\n"),
            ),
        ])),
        ..ConfigMap::default()
    })
}

/// The Secret holding the signing key (PKCS#8 PEM); made once by apply.
pub fn desired_key_secret(gw: &MCPGateway, pem: String) -> Secret {
    Secret {
        metadata: names::metadata(gw, names::key_secret(gw), "gateway-key"),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            names::KEY_KEY.to_string(),
            ByteString(pem.into_bytes()),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// The Secret holding the admin token (hex text) the operator presents on
/// the pods' `/gateway`; made once by apply, like an MCPServer's.
pub fn desired_admin_token_secret(gw: &MCPGateway, token: String) -> Secret {
    Secret {
        metadata: names::metadata(gw, names::admin_token_secret(gw), "admin-token"),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            ADMIN_TOKEN_KEY.to_string(),
            ByteString(token.into_bytes()),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

/// The Secret holding the replicas' peer key; made once by apply.
pub fn desired_peer_key_secret(gw: &MCPGateway, key: Vec<u8>) -> Secret {
    Secret {
        metadata: names::metadata(gw, names::peer_key_secret(gw), "peer-key"),
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            PEER_KEY_KEY.to_string(),
            ByteString(key),
        )])),
        immutable: Some(true),
        ..Secret::default()
    }
}

fn desired_service(input: GatewayInput<'_>) -> Service {
    let gw = input.gateway;
    let port = |name: &str, port: i32| ServicePort {
        name: Some(name.into()),
        port,
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    };
    Service {
        metadata: names::metadata(gw, names::object_name(gw), "gateway"),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(names::selector(gw)),
            ports: Some(vec![port("http", FACADE_PORT), port("admin", ADMIN_PORT)]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// In: agents on 8080 (and the replicas relaying to each other), the
/// operator and monitoring on 9090. Out: exactly the backends' facades
/// (their pods, port 8080) and the cluster DNS that names their Services.
fn desired_network_policy(input: GatewayInput<'_>) -> NetworkPolicy {
    let (gw, cfg) = (input.gateway, input.config);
    let operator_from = NetworkPolicyPeer {
        namespace_selector: labels(&BTreeMap::from([(
            "kubernetes.io/metadata.name".to_string(),
            cfg.operator_namespace.clone(),
        )])),
        pod_selector: labels(&cfg.operator_pod_labels),
        ..NetworkPolicyPeer::default()
    };
    let metrics_from = NetworkPolicyPeer {
        namespace_selector: labels(&cfg.metrics_namespace_labels),
        ..NetworkPolicyPeer::default()
    };
    let backends: Vec<NetworkPolicyPeer> = input
        .backends
        .iter()
        .map(|b| NetworkPolicyPeer {
            pod_selector: labels(&crate::names::selector(&b.server)),
            ..NetworkPolicyPeer::default()
        })
        .collect();
    let mut egress = Vec::new();
    if !backends.is_empty() {
        egress.push(NetworkPolicyEgressRule {
            ports: Some(vec![tcp(FACADE_PORT)]),
            to: Some(backends),
        });
        egress.push(dns_rule());
    }
    if gw.spec.replicas > 1 {
        egress.push(NetworkPolicyEgressRule {
            ports: Some(vec![tcp(FACADE_PORT)]),
            to: Some(vec![NetworkPolicyPeer {
                pod_selector: labels(&names::selector(gw)),
                ..NetworkPolicyPeer::default()
            }]),
        });
    }
    NetworkPolicy {
        metadata: names::metadata(gw, names::object_name(gw), "gateway"),
        spec: Some(NetworkPolicySpec {
            pod_selector: labels(&names::selector(gw)),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(FACADE_PORT)]),
                    from: None,
                },
                NetworkPolicyIngressRule {
                    ports: Some(vec![tcp(ADMIN_PORT)]),
                    from: Some(vec![metrics_from, operator_from]),
                },
            ]),
            egress: Some(egress),
        }),
    }
}

#[cfg(test)]
mod tests {
    use mcp_warden_crds::MCPServer;
    use serde_json::json;

    use super::*;
    use crate::gateway::resolve;

    /// The gateway `front` (uid u-gw) with `expose`, in front of `git`.
    fn objects(expose: &str) -> GatewayObjects {
        let gw: MCPGateway = serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {{name: front, namespace: a, uid: u-gw}}\n\
             spec: {{backends: [{{name: git}}], expose: {expose}}}\n"
        ))
        .unwrap();
        let server: MCPServer = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: a}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}}\n",
        )
        .unwrap();
        let selection = resolve::select(&gw, [&server]);
        desired_objects(GatewayInput {
            gateway: &gw,
            backends: &selection.backends,
            profile: None,
            jwks: None,
            issuer_jwks: &BTreeMap::new(),
            backend_cas: &BTreeMap::new(),
            public_key: None,
            config: &BuildConfig::default(),
        })
    }

    #[test]
    fn hosts_alone_make_no_route() {
        let built = objects("{hosts: [tools.example.com]}");
        assert!(built.ingress.is_none() && built.http_route.is_none());
        let kinds: Vec<String> = built
            .to_values()
            .iter()
            .map(|v| v["kind"].as_str().unwrap().to_string())
            .collect();
        assert!(!kinds.iter().any(|k| k == "Ingress" || k == "HTTPRoute"));
    }

    #[test]
    fn the_ingress_sends_the_hosts_to_the_gateways_service() {
        let built = objects(
            "{hosts: [tools.example.com], ingress: {className: nginx, tlsSecretName: tools-tls, \
             annotations: {cert-manager.io/cluster-issuer: letsencrypt}}}",
        );
        assert!(built.http_route.is_none());
        let values = built.to_values();
        let value = values.iter().find(|v| v["kind"] == "Ingress").unwrap();
        let path = |p: &str| {
            json!({"path": p, "pathType": "Prefix",
                   "backend": {"service": {"name": "front", "port": {"number": 8080}}}})
        };
        let mut want_meta = names::front_metadata("front", "gateway");
        want_meta["annotations"] = json!({"cert-manager.io/cluster-issuer": "letsencrypt"});
        assert_eq!(
            value,
            &json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": want_meta,
                "spec": {
                    "ingressClassName": "nginx",
                    "rules": [{"host": "tools.example.com", "http": {"paths": [
                        path("/mcp"), path("/.well-known/oauth-protected-resource")]}}],
                    "tls": [{"hosts": ["tools.example.com"], "secretName": "tools-tls"}]
                }
            })
        );
    }

    #[test]
    fn the_http_route_attaches_the_gateways_service_to_the_parents() {
        let built = objects(
            "{hosts: [tools.example.com, tools.example.org], httpRoute: {parentRefs: [{name: public, namespace: infra}]}}",
        );
        assert!(built.ingress.is_none());
        let values = built.to_values();
        let value = values.iter().find(|v| v["kind"] == "HTTPRoute").unwrap();
        let want_meta = names::front_metadata("front", "gateway");
        assert_eq!(
            value,
            &json!({
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": "HTTPRoute",
                "metadata": want_meta,
                "spec": {
                    "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                    "name": "public", "namespace": "infra"}],
                    "hostnames": ["tools.example.com", "tools.example.org"],
                    "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}},
                                           {"path": {"type": "PathPrefix", "value": "/.well-known/oauth-protected-resource"}}],
                               "backendRefs": [{"name": "front", "port": 8080}]}]
                }
            })
        );
    }

    /// The admin token's Secret, whole: the gateway's own, immutable, its
    /// token under the key the pod's `--admin-token-file` names.
    #[test]
    fn the_admin_token_secret_is_the_gateways_own() {
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a, uid: u-gw}\n\
             spec: {backends: [{name: git}]}\n",
        )
        .unwrap();
        let secret = desired_admin_token_secret(&gw, "ab".repeat(32));
        let want_meta = names::front_metadata("front-admin-token", "admin-token");
        assert_eq!(
            crate::build::typed_value(&secret),
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": want_meta,
                "type": "Opaque",
                "immutable": true,
                "data": {"token": base64_of(&"ab".repeat(32))},
            })
        );
        assert_eq!(
            crate::build::secret::admin_token(&secret),
            Some("ab".repeat(32))
        );
    }

    fn base64_of(text: &str) -> String {
        serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec()))
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }
}
