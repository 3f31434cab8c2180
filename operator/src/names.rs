//! Names, labels, paths and ports shared by the builders: the one place that
//! says what an MCPServer's objects are called and where things are mounted.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use mcp_warden_crds::MCPServer;

use crate::config::BuildConfig;

/// The facade's MCP port (contract: `http://X.ns.svc:8080/mcp`).
pub const FACADE_PORT: i32 = 8080;
/// The facade's admin port: `/metrics`, `/healthz`, `/readyz`.
pub const ADMIN_PORT: i32 = 9090;
/// Where the policy ConfigMap is mounted in the facade. The facade's mounts
/// are siblings under `/etc/mcp-warden`, never nested in one another (a
/// ConfigMap volume is read-only, so no mount point can be made inside it).
pub const POLICY_DIR: &str = "/etc/mcp-warden/policy";
/// The policy file's key in the ConfigMap.
pub const POLICY_KEY: &str = "policy.yaml";
/// The server's writable home (an emptyDir): `HOME` and the package
/// runners' caches point into it.
pub const HOME_DIR: &str = "/home/mcp";
/// The unix socket the stdio bridge serves.
pub const SOCKET_DIR: &str = "/run/mcp";
/// The bridge's socket path.
pub const SOCKET_PATH: &str = "/run/mcp/server.sock";
/// Where the init container drops the static bridge binary.
pub const BRIDGE_DIR: &str = "/mcp-warden/bin";
/// The sidecar binary inside its image.
pub const SIDECAR_BIN: &str = "/usr/local/bin/mcp-warden-sidecar";
/// Where the JWKS ConfigMap is mounted in the facade.
pub const JWKS_DIR: &str = "/etc/mcp-warden/jwks";
/// The JWKS file's key in its ConfigMap.
pub const JWKS_KEY: &str = "jwks.json";
/// Where the facade reads the cluster's service-account JWKS (the operator
/// publishes it into the `<name>-jwks` ConfigMap).
pub const JWKS_FILE: &str = "/etc/mcp-warden/jwks/jwks.json";
/// Where the admin-token Secret is mounted in the facade, and its key.
pub const ADMIN_TOKEN_DIR: &str = "/etc/mcp-warden/admin";
pub const ADMIN_TOKEN_KEY: &str = "token";

/// Where the ToolProfile's static-token Secrets are mounted in the facade:
/// `<dir>/<secretName>/<key>`, only the keys the profile names.
pub const TOKENS_DIR: &str = "/etc/mcp-warden/tokens";
/// Where the ToolProfile's JWT issuers' JWKS ConfigMaps are mounted in the
/// facade: `<dir>/<position in auth.jwt>/jwks.json`.
pub const ISSUERS_DIR: &str = "/etc/mcp-warden/issuers";

/// The file a static token Secret key is mounted as.
pub fn token_file(secret: &str, key: &str) -> String {
    format!("{TOKENS_DIR}/{secret}/{key}")
}

/// The file the JWKS of the `index`-th JWT issuer is mounted as.
pub fn issuer_jwks_file(index: usize) -> String {
    format!("{ISSUERS_DIR}/{index}/{JWKS_KEY}")
}

/// Where the listener's TLS Secret (`spec.expose.tls`) is mounted in the facade.
pub const TLS_DIR: &str = "/etc/mcp-warden/tls";

/// Where the Secrets of `spec.remote.auth` are mounted in the facade, one
/// directory per Secret: `<dir>/<secret>/<key>`.
pub const UPSTREAM_SECRETS_DIR: &str = "/etc/mcp-warden/upstream";
/// Where `spec.remote.tls.caConfigMap` is mounted in the facade.
pub const UPSTREAM_CA_DIR: &str = "/etc/mcp-warden/upstream-ca";

/// The file a `spec.remote.auth` Secret key is read from in the facade.
pub fn upstream_secret_file(r: &mcp_warden_crds::remote::KeyRef) -> String {
    format!("{UPSTREAM_SECRETS_DIR}/{}/{}", r.name, r.key)
}

/// The Secrets `spec.remote.auth` names, with the keys read from each.
pub fn remote_secrets(server: &MCPServer) -> BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut out: BTreeMap<String, std::collections::BTreeSet<String>> = BTreeMap::new();
    let Some(auth) = server.spec.remote.as_ref().and_then(|r| r.auth.as_ref()) else {
        return out;
    };
    let mut add = |r: &mcp_warden_crds::remote::KeyRef| {
        out.entry(r.name.clone()).or_default().insert(r.key.clone());
    };
    for rule in &auth.rules {
        if let Some(r) = &rule.token_secret_ref {
            add(r);
        }
        if let Some(c) = &rule.client_credentials {
            add(&c.client_secret_ref);
        }
        if let Some(r) = rule
            .token_exchange
            .as_ref()
            .and_then(|t| t.client_secret_ref.as_ref())
        {
            add(r);
        }
    }
    if let Some(f) = &auth.facade {
        if let Some(r) = &f.token_secret_ref {
            add(r);
        }
        if let Some(c) = &f.client_credentials {
            add(&c.client_secret_ref);
        }
    }
    out
}

/// The name of the MCP server's container in its pod.
pub const SERVER_CONTAINER: &str = "server";
/// Where the peers ConfigMap is mounted in the facade.
pub const PEERS_DIR: &str = "/etc/mcp-warden/peers";
/// The replicas' addresses' key in the peers ConfigMap.
pub const PEERS_KEY: &str = "peers";
/// Where the peer-key Secret is mounted in the facade.
pub const PEER_KEY_DIR: &str = "/etc/mcp-warden/peer";
/// The peer key's key in its Secret.
pub const PEER_KEY_KEY: &str = "peer.key";
/// Seconds a stopping facade keeps serving live sessions (`--drain-timeout-secs`).
pub const DRAIN_SECONDS: i64 = 20;
/// Seconds a stopping pod waits before SIGTERM, so that the endpoints
/// controller and every kube-proxy have dropped it first (`preStop` sleep).
pub const PRESTOP_SECONDS: i64 = 5;
/// The pod's grace period: preStop + drain + time for the server to exit.
pub const TERMINATION_GRACE_SECONDS: i64 = PRESTOP_SECONDS + DRAIN_SECONDS + 10;
/// The most replicas an MCPServer may ask for (the CRD says the same).
pub const MAX_REPLICAS: i32 = 10;

/// Label every object carries; also the pod selector.
pub const SERVER_LABEL: &str = "mcpwarden.dev/server";

/// The MCPServer's namespace (`default` when a file omits it).
pub fn namespace(server: &MCPServer) -> String {
    server.namespace().unwrap_or_else(|| "default".into())
}

/// Name of the ServiceAccount, Deployment, Service and NetworkPolicy.
pub fn object_name(server: &MCPServer) -> String {
    server.name_any()
}

/// Name of the policy ConfigMap.
pub fn policy_config_map(server: &MCPServer) -> String {
    format!("{}-policy", server.name_any())
}

/// Name of the JWKS ConfigMap (the cluster's service-account issuer keys).
pub fn jwks_config_map(server: &MCPServer) -> String {
    format!("{}-jwks", server.name_any())
}

/// Name of the ConfigMap holding the JWKS the operator fetched for the
/// ToolProfile's JWT issuers that name no ConfigMap (key `<position>.json`).
pub fn issuers_config_map(server: &MCPServer) -> String {
    format!("{}-issuers", server.name_any())
}

/// Name of the Secret holding the replicas' shared peer key (session-id HMAC).
pub fn peer_key_secret(server: &MCPServer) -> String {
    format!("{}-peer-key", server.name_any())
}

/// Name of the Secret holding the token the facades ask for on `/tools`
/// (the operator reads it back to fetch `status.tools`).
pub fn admin_token_secret(server: &MCPServer) -> String {
    format!("{}-admin-token", server.name_any())
}

/// Name of the Cilium or Calico policy allowing egress by host name.
pub fn egress_policy(server: &MCPServer) -> String {
    format!("{}-egress", server.name_any())
}

/// Name of the ConfigMap listing every replica's peer address (replicas > 1).
pub fn peers_config_map(server: &MCPServer) -> String {
    format!("{}-peers", server.name_any())
}

/// Name of the headless Service the replicas find each other by.
pub fn peers_service(server: &MCPServer) -> String {
    format!("{}-peers", server.name_any())
}

/// Labels of the pods and of the objects named after the server (Kubernetes'
/// recommended `app.kubernetes.io/*` set: `component: server`).
pub fn labels(server: &MCPServer) -> BTreeMap<String, String> {
    labels_with_component(server, "server")
}

/// The recommended labels with `component` saying what the object is for.
/// `managed-by` is also how the controller finds the objects it owns.
fn labels_with_component(server: &MCPServer, component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), "mcp-server".into()),
        ("app.kubernetes.io/instance".into(), server.name_any()),
        ("app.kubernetes.io/component".into(), component.into()),
        ("app.kubernetes.io/part-of".into(), "mcp-warden".into()),
        (
            "app.kubernetes.io/managed-by".into(),
            "mcp-warden-operator".into(),
        ),
        (SERVER_LABEL.into(), server.name_any()),
    ])
}

/// What an owned object named `name` is for: the suffix after the server's
/// name (`policy`, `jwks`, `peers`, `peer-key`), else `server`.
fn component(server: &MCPServer, name: &str) -> String {
    name.strip_prefix(&server.name_any())
        .and_then(|rest| rest.strip_prefix('-'))
        .filter(|rest| !rest.is_empty())
        .unwrap_or("server")
        .to_string()
}

/// The pod selector (a stable subset of [`labels`]).
pub fn selector(server: &MCPServer) -> BTreeMap<String, String> {
    BTreeMap::from([(SERVER_LABEL.into(), server.name_any())])
}

/// Metadata of an owned object: name, namespace, labels and, when the server
/// has a uid (it came from the API server), the controller owner reference.
pub fn metadata(server: &MCPServer, name: String) -> ObjectMeta {
    ObjectMeta {
        labels: Some(labels_with_component(server, &component(server, &name))),
        name: Some(name),
        namespace: Some(namespace(server)),
        owner_references: owner_reference(server).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

/// The controller owner reference, if the server has a uid.
pub fn owner_reference(server: &MCPServer) -> Option<OwnerReference> {
    server.controller_owner_ref(&())
}

/// Host names agents may use (the facade's `--allowed-host`, against DNS
/// rebinding): the Service's names, then `spec.expose.hosts`.
pub fn allowed_hosts(server: &MCPServer, cfg: &BuildConfig) -> Vec<String> {
    let (svc, ns) = (object_name(server), namespace(server));
    let mut hosts = vec![
        svc.clone(),
        format!("{svc}.{ns}"),
        format!("{svc}.{ns}.svc"),
        format!("{svc}.{ns}.svc.{}", cfg.cluster_domain),
    ];
    hosts.extend(exposed_hosts(server).iter().cloned());
    hosts
}

/// `spec.expose.hosts` (empty when not exposed).
pub fn exposed_hosts(server: &MCPServer) -> &[String] {
    server
        .spec
        .expose
        .as_ref()
        .map(|e| e.hosts.as_slice())
        .unwrap_or_default()
}

/// The Secret of the facade listener's certificate (`spec.expose.tls`).
pub fn tls_secret(server: &MCPServer) -> Option<&str> {
    server
        .spec
        .expose
        .as_ref()
        .and_then(|e| e.tls.as_ref())
        .map(|t| t.secret_name.as_str())
}

/// The in-cluster URL: the Service's full name on the facade's port
/// (`https` when the facade serves TLS).
pub fn cluster_endpoint(server: &MCPServer, cfg: &BuildConfig) -> String {
    let scheme = if tls_secret(server).is_some() {
        "https"
    } else {
        "http"
    };
    format!(
        "{scheme}://{}.{}.svc.{}:{FACADE_PORT}/mcp",
        object_name(server),
        namespace(server),
        cfg.cluster_domain
    )
}

/// The URL agents connect to (`status.endpoint`): the first exposed host
/// (behind TLS-terminating Ingress or Gateway), else the in-cluster URL.
pub fn endpoint(server: &MCPServer, cfg: &BuildConfig) -> String {
    match exposed_hosts(server).first() {
        Some(host) => format!("https://{host}/mcp"),
        None => cluster_endpoint(server, cfg),
    }
}

/// Every URL agents reach the server by (the policy's `auth.resourceUrls`,
/// its OAuth resource): `status.endpoint`, the in-cluster URL and
/// `https://<host>/mcp` of each exposed host, each once.
pub fn resource_urls(server: &MCPServer, cfg: &BuildConfig) -> Vec<String> {
    let mut urls = vec![endpoint(server, cfg), cluster_endpoint(server, cfg)];
    urls.extend(
        exposed_hosts(server)
            .iter()
            .map(|host| format!("https://{host}/mcp")),
    );
    let mut seen = std::collections::BTreeSet::new();
    urls.retain(|u| seen.insert(u.clone()));
    urls
}

/// The audience a caller's projected service-account token must carry.
pub fn token_audience(server: &MCPServer) -> String {
    format!("mcpwarden.dev/{}/{}", namespace(server), server.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(expose: &str) -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: git, namespace: team-a}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}{expose}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn exposed_hosts_are_accepted_and_the_first_is_the_endpoint() {
        let cfg = BuildConfig::default();
        let inside = server("");
        assert_eq!(allowed_hosts(&inside, &cfg).len(), 4);
        assert_eq!(
            endpoint(&inside, &cfg),
            "http://git.team-a.svc.cluster.local:8080/mcp"
        );
        let outside = server(", expose: {hosts: [git.mcp.example.com, git.example.org]}");
        let hosts = allowed_hosts(&outside, &cfg);
        assert_eq!(hosts[4..], ["git.mcp.example.com", "git.example.org"]);
        assert_eq!(endpoint(&outside, &cfg), "https://git.mcp.example.com/mcp");
        assert_eq!(
            resource_urls(&outside, &cfg),
            [
                "https://git.mcp.example.com/mcp",
                "http://git.team-a.svc.cluster.local:8080/mcp",
                "https://git.example.org/mcp",
            ]
        );
        assert_eq!(
            resource_urls(&inside, &cfg),
            ["http://git.team-a.svc.cluster.local:8080/mcp"]
        );
        assert_eq!(
            cluster_endpoint(&outside, &cfg),
            "http://git.team-a.svc.cluster.local:8080/mcp"
        );
        let tls = server(", expose: {tls: {secretName: git-tls}}");
        assert_eq!(tls_secret(&tls), Some("git-tls"));
        assert_eq!(
            endpoint(&tls, &cfg),
            "https://git.team-a.svc.cluster.local:8080/mcp"
        );
    }
}
