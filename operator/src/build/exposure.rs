//! The routes into the cluster that `spec.expose` asks for, of an MCPServer
//! or an MCPGateway (the same builders, [`ingress_for`] and
//! [`http_route_for`]): an Ingress and/or a Gateway API HTTPRoute, both
//! named `<name>`, both sending
//! `expose.hosts`, paths `/mcp` and the protected-resource metadata
//! (`/.well-known/oauth-protected-resource…`, where a client that got a 401
//! learns where to log in), to the Service's port 8080. The facade
//! accepts those host names (`names::allowed_hosts`); TLS is the Ingress's
//! (`tlsSecretName`) or the Gateway listener's, or, with `expose.tls`, also
//! the facade's own (then the proxy must speak TLS to the backend).
//!
//! ```text
//! expose.hosts + expose.ingress   ─▶ Ingress   <name>  (networking.k8s.io/v1)
//! expose.hosts + expose.httpRoute ─▶ HTTPRoute <name>  (gateway.networking.k8s.io/v1)
//! ```

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use mcp_warden_crds::mcpserver::Expose;
use serde_json::json;

use super::BuildInput;
use crate::names::{self, FACADE_PORT};

/// The path the facade serves MCP on.
const MCP_PATH: &str = "/mcp";
/// The facade's protected-resource metadata: the root form and the form
/// suffixed with `/mcp`, both under this prefix.
const METADATA_PATH: &str = mcp_warden_policy::login::METADATA_PATH;

/// The Gateway API HTTPRoute kind.
pub fn http_route_api() -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "HTTPRoute".into(),
        plural: "httproutes".into(),
    }
}

/// The Ingress of an MCPServer, when `expose.ingress` is set.
pub fn desired_ingress(input: BuildInput<'_>) -> Option<Ingress> {
    let server = input.server;
    let name = names::object_name(server);
    ingress_for(
        names::metadata(server, name.clone()),
        &name,
        server.spec.expose.as_ref()?,
    )
}

/// The HTTPRoute of an MCPServer, when `expose.httpRoute` is set.
pub fn desired_http_route(input: BuildInput<'_>) -> Option<DynamicObject> {
    let server = input.server;
    let name = names::object_name(server);
    http_route_for(
        names::metadata(server, name.clone()),
        &name,
        server.spec.expose.as_ref()?,
    )
}

/// The Ingress `expose.ingress` asks for, sending `expose.hosts` to the
/// facade port of Service `service`. An MCPServer and an MCPGateway both
/// build theirs here; `metadata` (name, labels, owner) is the owner's.
pub fn ingress_for(metadata: ObjectMeta, service: &str, expose: &Expose) -> Option<Ingress> {
    let ingress = expose.ingress.as_ref()?;
    let backend = IngressBackend {
        service: Some(IngressServiceBackend {
            name: service.to_string(),
            port: Some(ServiceBackendPort {
                name: None,
                number: Some(FACADE_PORT),
            }),
        }),
        resource: None,
    };
    let rules = expose
        .hosts
        .iter()
        .map(|host| IngressRule {
            host: Some(host.clone()),
            http: Some(HTTPIngressRuleValue {
                paths: [MCP_PATH, METADATA_PATH]
                    .into_iter()
                    .map(|path| HTTPIngressPath {
                        path: Some(path.into()),
                        path_type: "Prefix".into(),
                        backend: backend.clone(),
                    })
                    .collect(),
            }),
        })
        .collect();
    let mut metadata = metadata;
    if !ingress.annotations.is_empty() {
        metadata.annotations = Some(ingress.annotations.clone());
    }
    Some(Ingress {
        metadata,
        spec: Some(IngressSpec {
            ingress_class_name: ingress.class_name.clone(),
            rules: Some(rules),
            tls: ingress.tls_secret_name.as_ref().map(|secret| {
                vec![IngressTLS {
                    hosts: Some(expose.hosts.clone()),
                    secret_name: Some(secret.clone()),
                }]
            }),
            default_backend: None,
        }),
        status: None,
    })
}

/// The HTTPRoute `expose.httpRoute` asks for, sending `expose.hosts` to
/// the facade port of Service `service` (see [`ingress_for`]).
pub fn http_route_for(
    metadata: ObjectMeta,
    service: &str,
    expose: &Expose,
) -> Option<DynamicObject> {
    let route = expose.http_route.as_ref()?;
    let parents: Vec<serde_json::Value> = route
        .parent_refs
        .iter()
        .map(|p| {
            let mut parent =
                json!({"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": p.name});
            if let Some(ns) = &p.namespace {
                parent["namespace"] = json!(ns);
            }
            if let Some(section) = &p.section_name {
                parent["sectionName"] = json!(section);
            }
            parent
        })
        .collect();
    let api = http_route_api();
    let object = json!({
        "apiVersion": api.api_version,
        "kind": api.kind,
        "metadata": metadata,
        "spec": {
            "parentRefs": parents,
            "hostnames": expose.hosts,
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": MCP_PATH}},
                            {"path": {"type": "PathPrefix", "value": METADATA_PATH}}],
                "backendRefs": [{"name": service, "port": FACADE_PORT}],
            }],
        },
    });
    Some(serde_json::from_value(object).expect("an HTTPRoute deserializes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile::Approved, config::BuildConfig};
    use mcp_warden_crds::{MCPServer, SandboxProfileSpec};

    fn build(expose: &str) -> (Option<Ingress>, Option<serde_json::Value>) {
        let server: MCPServer = serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: git, namespace: team-a, uid: u-1}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}, expose: {expose}}}\n"
        ))
        .unwrap();
        let (sandbox, approved, config) = (
            SandboxProfileSpec::default(),
            Approved::default(),
            BuildConfig::default(),
        );
        let input = BuildInput {
            server: &server,
            sandbox: &sandbox,
            policy_yaml: "",
            auth: &Default::default(),
            jwks: None,
            issuer_jwks: &Default::default(),
            approved: &approved,
            peers: &[],
            pinned_image: None,
            config: &config,
        };
        (
            desired_ingress(input),
            desired_http_route(input).map(|o| serde_json::to_value(o).unwrap()),
        )
    }

    #[test]
    fn nothing_unless_asked() {
        assert_eq!(build("{hosts: [git.example.com]}"), (None, None));
    }

    #[test]
    fn ingress_routes_the_hosts_to_the_facade() {
        let (ingress, route) = build(
            "{hosts: [git.example.com, git.example.org], ingress: {className: nginx, \
             tlsSecretName: git-tls, annotations: {cert-manager.io/cluster-issuer: letsencrypt}}}",
        );
        assert!(route.is_none());
        let value = serde_json::to_value(ingress.unwrap()).unwrap();
        let rules: Vec<serde_json::Value> = ["git.example.com", "git.example.org"]
            .iter()
            .map(|h| {
                json!({
                    "host": h,
                    "http": {"paths": [{"path": "/mcp", "pathType": "Prefix",
                        "backend": {"service": {"name": "git", "port": {"number": 8080}}}},
                        {"path": "/.well-known/oauth-protected-resource", "pathType": "Prefix",
                        "backend": {"service": {"name": "git", "port": {"number": 8080}}}}]}
                })
            })
            .collect();
        assert_eq!(
            value,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {
                    "name": "git", "namespace": "team-a",
                    "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"},
                    "labels": value["metadata"]["labels"],
                    "ownerReferences": value["metadata"]["ownerReferences"],
                },
                "spec": {
                    "ingressClassName": "nginx",
                    "rules": rules,
                    "tls": [{"hosts": ["git.example.com", "git.example.org"], "secretName": "git-tls"}]
                }
            })
        );
        assert_eq!(value["metadata"]["ownerReferences"][0]["uid"], "u-1");
    }

    #[test]
    fn http_route_attaches_to_the_gateways() {
        let (ingress, route) = build(
            "{hosts: [git.example.com], httpRoute: {parentRefs: [{name: public, namespace: infra, sectionName: https}]}}",
        );
        assert!(ingress.is_none());
        let route = route.unwrap();
        assert_eq!(route["apiVersion"], "gateway.networking.k8s.io/v1");
        assert_eq!(route["kind"], "HTTPRoute");
        assert_eq!(route["metadata"]["name"], "git");
        assert_eq!(
            route["spec"],
            json!({
                "parentRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                                "name": "public", "namespace": "infra", "sectionName": "https"}],
                "hostnames": ["git.example.com"],
                "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/mcp"}},
                                       {"path": {"type": "PathPrefix", "value": "/.well-known/oauth-protected-resource"}}],
                           "backendRefs": [{"name": "git", "port": 8080}]}]
            })
        );
    }
}
