//! The CA each backend served with `expose.tls` is trusted by at the
//! gateway: found in the backend's TLS Secret (its `ca.crt`, which
//! cert-manager writes for CA and self-signed issuers), copied into the
//! gateway's ConfigMap `<gw>-backend-ca`, and passed to the gateway's pod
//! as `--backend-ca <server>=<file>`, that backend's whole trust.
//!
//! ```text
//! resolve: backend.expose.tls.secretName ─get─▶ Secret data["ca.crt"] ─PEM?─▶ Found(pem)
//!                                                        └ absent / not PEM / no Secret ─▶ NotFound(why)
//! build:   Found ─▶ ConfigMap <gw>-backend-ca {<server>.crt} ─mount─▶ /etc/mcp-warden/backend-ca/<server>.crt
//!                   + the pod template's digest annotation (a new CA restarts the pods: the gateway reads it at start)
//! status:  NotFound ─▶ Degraded=True, BackendCANotFound (the backend's calls fail until the CA is found)
//! ```
//! The copy, not a mount of the backend's Secret: the gateway's pod then
//! never holds a volume of another workload's Secret (whose `tls.key` is
//! beside `ca.crt`), and a CA that is not a certificate is refused here.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use rustls::pki_types::{pem::PemObject, CertificateDer};

use super::{names, resolve::Backend};

/// Where the gateway's pod reads the backends' CAs.
pub const DIR: &str = "/etc/mcp-warden/backend-ca";
/// The key of the CA in a `kubernetes.io/tls` Secret.
pub const CA_KEY: &str = "ca.crt";
/// The pod template annotation that changes with the CAs.
pub const DIGEST_ANNOTATION: &str = "mcpwarden.dev/backend-ca-digest";
/// The `Degraded` reason while a TLS backend's CA is not found.
pub const NOT_FOUND_REASON: &str = "BackendCANotFound";

/// What resolve found for one backend with `expose.tls`.
#[derive(Clone, Debug, PartialEq)]
pub enum BackendCa {
    /// The CA bundle (PEM).
    Found(String),
    /// Why there is none.
    NotFound(String),
}

/// The file a backend's CA is mounted as.
pub fn file(server: &str) -> String {
    format!("{DIR}/{server}.crt")
}

/// The CA of each backend with `expose.tls`, by server name (a server
/// without TLS has no entry).
pub async fn resolve(
    client: &Client,
    backends: &[Backend],
) -> Result<BTreeMap<String, BackendCa>, super::resolve::ResolveError> {
    let mut out = BTreeMap::new();
    for b in backends {
        let Some(secret) = crate::names::tls_secret(&b.server) else {
            continue;
        };
        let ns = crate::names::namespace(&b.server);
        let read = Api::<Secret>::namespaced(client.clone(), &ns)
            .get_opt(secret)
            .await
            .map_err(|source| super::resolve::ResolveError {
                what: format!("Secret {ns}/{secret}"),
                source,
            })?;
        out.insert(b.name(), of_secret(secret, read.as_ref()));
    }
    Ok(out)
}

/// The CA a backend's TLS Secret names (pure).
pub fn of_secret(name: &str, secret: Option<&Secret>) -> BackendCa {
    let Some(secret) = secret else {
        return BackendCa::NotFound(format!("its TLS Secret {name} does not exist"));
    };
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(CA_KEY)) else {
        return BackendCa::NotFound(format!("its TLS Secret {name} has no {CA_KEY}"));
    };
    let certs: Result<Vec<CertificateDer<'_>>, _> =
        CertificateDer::pem_slice_iter(&bytes.0).collect();
    match (certs, std::str::from_utf8(&bytes.0)) {
        (Ok(certs), Ok(pem)) if !certs.is_empty() => BackendCa::Found(pem.to_string()),
        _ => BackendCa::NotFound(format!(
            "{CA_KEY} of its TLS Secret {name} holds no PEM certificate"
        )),
    }
}

/// The backends (of `backends`) whose CA was found, with it.
pub fn found(cas: &BTreeMap<String, BackendCa>) -> BTreeMap<String, String> {
    cas.iter()
        .filter_map(|(server, ca)| match ca {
            BackendCa::Found(pem) => Some((server.clone(), pem.clone())),
            BackendCa::NotFound(_) => None,
        })
        .collect()
}

/// One line per backend whose CA was not found (the condition's message).
pub fn not_found(cas: &BTreeMap<String, BackendCa>) -> Vec<String> {
    cas.iter()
        .filter_map(|(server, ca)| match ca {
            BackendCa::NotFound(why) => Some(format!("{server}: {why}")),
            BackendCa::Found(_) => None,
        })
        .collect()
}

/// The message of [`NOT_FOUND_REASON`].
pub fn not_found_message(lines: &[String]) -> String {
    format!(
        "backends served with expose.tls whose CA the gateway is not given, so their calls fail (put the CA in the Secret's {CA_KEY}, as cert-manager does): {}",
        lines.join("; ")
    )
}

/// The ConfigMap of the found CAs, `<server>.crt` each; `None` without any.
pub fn desired_config_map(
    gw: &mcp_warden_crds::MCPGateway,
    cas: &BTreeMap<String, String>,
) -> Option<ConfigMap> {
    (!cas.is_empty()).then(|| ConfigMap {
        metadata: names::metadata(gw, names::backend_ca_config_map(gw), "backend-ca"),
        data: Some(
            cas.iter()
                .map(|(server, pem)| (format!("{server}.crt"), pem.clone()))
                .collect(),
        ),
        ..ConfigMap::default()
    })
}

/// `sha256:<hex>` over the CAs, for [`DIGEST_ANNOTATION`].
pub fn digest(cas: &BTreeMap<String, String>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (server, pem) in cas {
        h.update(server.as_bytes());
        h.update([0]);
        h.update(pem.as_bytes());
        h.update([0]);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;

    fn secret(ca: Option<&str>) -> Secret {
        Secret {
            data: Some(
                [("tls.crt", Some("x")), ("tls.key", Some("k")), (CA_KEY, ca)]
                    .into_iter()
                    .filter_map(|(k, v)| Some((k.to_string(), ByteString(v?.as_bytes().to_vec()))))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn the_ca_is_the_secrets_ca_crt_when_it_is_a_certificate() {
        let pem = crate::webhook::certs::generate(vec!["git.a.svc".into()])
            .unwrap()
            .cert_pem;
        assert_eq!(
            of_secret("git-tls", Some(&secret(Some(&pem)))),
            BackendCa::Found(pem.clone())
        );
        assert_eq!(
            of_secret("git-tls", Some(&secret(None))),
            BackendCa::NotFound("its TLS Secret git-tls has no ca.crt".into())
        );
        assert_eq!(
            of_secret("git-tls", Some(&secret(Some("not a certificate")))),
            BackendCa::NotFound("ca.crt of its TLS Secret git-tls holds no PEM certificate".into())
        );
        assert_eq!(
            of_secret("git-tls", None),
            BackendCa::NotFound("its TLS Secret git-tls does not exist".into())
        );
        let cas = BTreeMap::from([
            (
                "fs".to_string(),
                BackendCa::NotFound("its TLS Secret fs-tls has no ca.crt".into()),
            ),
            ("git".to_string(), BackendCa::Found(pem.clone())),
        ]);
        assert_eq!(found(&cas), BTreeMap::from([("git".to_string(), pem)]));
        assert_eq!(not_found(&cas), ["fs: its TLS Secret fs-tls has no ca.crt"]);
    }

    #[test]
    fn a_found_ca_is_copied_mounted_and_given_to_its_backend_alone() {
        use crate::{build::typed_value, config::BuildConfig, gateway::build};
        use mcp_warden_crds::{MCPGateway, MCPServer};
        use serde_json::json;
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a, uid: u-gw}\n\
             spec: {backends: [{name: git}, {name: fs}]}\n",
        )
        .unwrap();
        let server = |name: &str, expose: &str| -> MCPServer {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}, namespace: a}}\n\
                 spec: {{image: i, command: [x], toolProfileRef: {{name: p}}{expose}}}\n"
            ))
            .unwrap()
        };
        let servers = [
            server("git", ", expose: {tls: {secretName: git-tls}}"),
            server("fs", ", expose: {tls: {secretName: fs-tls}}"),
        ];
        let selection = super::super::resolve::select(&gw, &servers);
        let build = |cas: &BTreeMap<String, String>| {
            build::desired_objects(build::GatewayInput {
                gateway: &gw,
                backends: &selection.backends,
                profile: None,
                jwks: None,
                issuer_jwks: &BTreeMap::new(),
                backend_cas: cas,
                public_key: None,
                config: &BuildConfig::default(),
            })
        };
        let cas = BTreeMap::from([("git".to_string(), "PEM-1".to_string())]);
        let built = build(&cas);
        assert_eq!(
            typed_value(built.backend_ca.as_ref().unwrap()),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "front-backend-ca", "namespace": "a",
                    "labels": {"app.kubernetes.io/name": "mcp-gateway", "app.kubernetes.io/instance": "front",
                        "app.kubernetes.io/component": "backend-ca", "app.kubernetes.io/part-of": "mcp-warden",
                        "app.kubernetes.io/managed-by": "mcp-warden-operator", "mcpwarden.dev/gateway": "front"},
                    "ownerReferences": [{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
                        "name": "front", "uid": "u-gw", "controller": true}]},
                "data": {"git.crt": "PEM-1"}})
        );
        let template = built.deployment.spec.unwrap().template;
        let pod = template.spec.unwrap();
        let c = &pod.containers[0];
        let args = c.args.clone().unwrap();
        let given: Vec<&[String]> = args.windows(2).filter(|w| w[0] == "--backend-ca").collect();
        assert_eq!(
            given,
            [&[
                "--backend-ca".to_string(),
                "git=/etc/mcp-warden/backend-ca/git.crt".to_string()
            ][..]],
            "fs's CA was not found: it gets none"
        );
        assert!(args.contains(&"git=https://git.a.svc.cluster.local:8080/mcp".to_string()));
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "backend-ca")
            .unwrap();
        assert_eq!(
            serde_json::to_value(volume).unwrap(),
            json!({"name": "backend-ca", "configMap": {"name": "front-backend-ca"}})
        );
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "backend-ca")
            .unwrap();
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            ("/etc/mcp-warden/backend-ca", Some(true))
        );
        // A new CA rolls the pods (the gateway reads it at start).
        let annotation = |cas: &BTreeMap<String, String>| {
            let t = build(cas).deployment.spec.unwrap().template;
            t.metadata
                .unwrap()
                .annotations
                .unwrap()
                .get(DIGEST_ANNOTATION)
                .cloned()
        };
        let rotated = BTreeMap::from([("git".to_string(), "PEM-2".to_string())]);
        assert!(annotation(&cas).is_some());
        assert_ne!(annotation(&cas), annotation(&rotated));
        // No CA found at all: no ConfigMap, volume or annotation.
        let none = build(&BTreeMap::new());
        assert!(none.backend_ca.is_none());
        assert!(annotation(&BTreeMap::new()).is_none());
    }
}
