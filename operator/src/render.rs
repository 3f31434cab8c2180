//! `render -f FILE…`: without a cluster, print every object the operator
//! would apply for the MCPServers in the files, as one multi-document YAML
//! stream. Profiles are looked up among the same files (same namespace).
//! Output order: servers by namespace/name, then each server's objects in
//! apply order — deterministic, so it can be snapshot-tested and diffed.
//! Each server starts with a comment block saying which capabilities it
//! requests, their digest, and what an admin would run to approve them (the
//! objects show only what is in force: the annotation in the file counts).

use std::{collections::BTreeMap, path::PathBuf};

use mcp_warden_crds::{MCPGateway, MCPServer, SandboxProfile, ToolProfile};
use serde::Deserialize;

use crate::{
    capabilities::{approve_command, ApprovalState, Decision},
    config::BuildConfig,
    plan,
};

/// Why render failed.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A document is not valid YAML or not a valid resource of its kind.
    #[error("{path}, document {index}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based document index.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// An MCPServer cannot be built.
    #[error("MCPServer {namespace}/{name}: {source}")]
    Plan {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Why.
        source: plan::PlanError,
    },
    /// The files hold no MCPServer.
    #[error("MCPGateway {namespace}/{name}: {reason}: {source}", reason = source.reason())]
    Gateway {
        namespace: String,
        name: String,
        source: Box<crate::gateway::validate::GatewayInvalid>,
    },
    #[error("no MCPServer in the given files")]
    NoServers,
}

type Key = (String, String);

/// The mcp-warden resources of some files, by (namespace, name).
#[derive(Default)]
pub struct Catalog {
    /// The MCPServers.
    pub servers: BTreeMap<Key, MCPServer>,
    /// The ToolProfiles.
    pub tool_profiles: BTreeMap<Key, ToolProfile>,
    /// The SandboxProfiles.
    pub sandbox_profiles: BTreeMap<Key, SandboxProfile>,
    pub gateways: BTreeMap<Key, MCPGateway>,
}

/// Read the mcp-warden resources of `files` (other kinds are skipped).
pub fn load_files(files: &[PathBuf]) -> Result<Catalog, RenderError> {
    let mut catalog = Catalog::default();
    for path in files {
        let text = std::fs::read_to_string(path).map_err(|source| RenderError::Read {
            path: path.clone(),
            source,
        })?;
        load(&mut catalog, path, &text)?;
    }
    Ok(catalog)
}

/// Render the files into a YAML stream.
pub fn render(files: &[PathBuf], config: &BuildConfig) -> Result<String, RenderError> {
    let catalog = load_files(files)?;
    if catalog.servers.is_empty() {
        return Err(RenderError::NoServers);
    }
    let mut out = String::new();
    // The egress proxy's clients by namespace (the proxy engine only).
    let mut proxy_clients: BTreeMap<String, Vec<crate::build::egress_proxy::ProxyClient>> =
        BTreeMap::new();
    for ((ns, name), server) in &catalog.servers {
        let tool_key = (ns.clone(), server.spec.tool_profile_ref.name.clone());
        let sandbox_key = server
            .spec
            .sandbox_profile_ref
            .as_ref()
            .map(|r| (ns.clone(), r.name.clone()));
        let inputs = plan::Inputs {
            server,
            tool_profile: catalog.tool_profiles.get(&tool_key).map(|p| &p.spec),
            sandbox_profile: sandbox_key
                .and_then(|k| catalog.sandbox_profiles.get(&k))
                .map(|p| &p.spec),
            // No cluster, no issuer keys: the JWKS ConfigMap is not rendered.
            jwks: None,
            issuer_jwks: None,
            content: None,
            revoke: false,
            peers: &[],
            reported_image: &crate::pin::Reported::Nothing,
        };
        let plan = plan::plan(&inputs, config).map_err(|source| RenderError::Plan {
            namespace: ns.clone(),
            name: name.clone(),
            source,
        })?;
        out.push_str(&capabilities_comment(server, &plan.capabilities));
        for value in plan.objects.to_values() {
            out.push_str(&format!("---\n# MCPServer {ns}/{name}\n"));
            out.push_str(&serde_yaml_ng::to_string(&value).expect("objects serialize"));
        }
        if let Some(entry) = &plan.objects.egress_proxy_entry {
            proxy_clients.entry(ns.clone()).or_default().push(
                crate::build::egress_proxy::ProxyClient {
                    name: format!("{ns}/{name}"),
                    // The tokens are made in the cluster.
                    token_sha256: String::new(),
                    entry: entry.clone(),
                },
            );
        }
    }
    out.push_str(&render_egress_proxies(&proxy_clients, config));
    for ((ns, name), gw) in &catalog.gateways {
        out.push_str(&render_gateway(&catalog, gw, config).map_err(|source| {
            RenderError::Gateway {
                namespace: ns.clone(),
                name: name.clone(),
                source: Box::new(source),
            }
        })?);
    }
    Ok(out)
}

/// Each namespace's egress proxy, or each server's own under the `server`
/// scope: Deployment, Service, NetworkPolicy (its clients file holds hashes
/// of tokens made in the cluster: not printed).
fn render_egress_proxies(
    by_namespace: &BTreeMap<String, Vec<crate::build::egress_proxy::ProxyClient>>,
    config: &BuildConfig,
) -> String {
    use crate::build::{
        egress_proxy::{self, ProxyOf},
        typed_value,
    };
    use crate::config::EgressProxyScope;
    let mut out = String::new();
    for (ns, clients) in by_namespace {
        let proxies: Vec<(ProxyOf<'_>, &[egress_proxy::ProxyClient], String)> =
            match config.egress_proxy_scope {
                EgressProxyScope::Namespace => {
                    vec![(ProxyOf::Namespace, clients, format!("namespace {ns}"))]
                }
                EgressProxyScope::Server => clients
                    .iter()
                    .map(|c| {
                        (
                            ProxyOf::Server(c.server()),
                            std::slice::from_ref(c),
                            format!("MCPServer {}", c.name),
                        )
                    })
                    .collect(),
            };
        for (of, clients, whose) in proxies {
            let objects = egress_proxy::desired_proxy_objects(egress_proxy::ProxyInput {
                namespace: ns,
                of,
                clients,
                owners: &[],
                service_owners: &[],
                config,
            });
            for value in [
                typed_value(&objects.deployment),
                typed_value(&objects.service),
                typed_value(&objects.network_policy),
            ] {
                out.push_str(&format!("---\n# egress proxy of {whose}\n"));
                out.push_str(&serde_yaml_ng::to_string(&value).expect("objects serialize"));
            }
        }
    }
    out
}

/// A gateway's objects among the files' servers. The signing key is made
/// in the cluster, so its public ConfigMap is not printed, and the
/// backends' policies print without the gateway's trust (a cluster read).
fn render_gateway(
    catalog: &Catalog,
    gw: &MCPGateway,
    config: &BuildConfig,
) -> Result<String, crate::gateway::validate::GatewayInvalid> {
    use crate::gateway::{build, names, resolve, validate};
    let ns = names::namespace(gw);
    let selection = resolve::select(gw, catalog.servers.values());
    let profile = gw
        .spec
        .tool_profile_ref
        .as_ref()
        .and_then(|r| catalog.tool_profiles.get(&(ns.clone(), r.name.clone())))
        .map(|p| &p.spec);
    validate::check(gw, profile, &selection)?;
    let input = build::GatewayInput {
        gateway: gw,
        backends: &selection.backends,
        profile,
        jwks: None,
        issuer_jwks: &Default::default(),
        backend_cas: &Default::default(),
        public_key: None,
        config,
    };
    build::check_policy(input)?;
    let name = gw.metadata.name.clone().unwrap_or_default();
    let mut out = format!(
        "# MCPGateway {ns}/{name}
"
    );
    for value in build::desired_objects(input).to_values() {
        out.push_str(&format!("---\n# MCPGateway {ns}/{name}\n"));
        out.push_str(&serde_yaml_ng::to_string(&value).expect("objects serialize"));
    }
    Ok(out)
}

fn load(catalog: &mut Catalog, path: &std::path::Path, text: &str) -> Result<(), RenderError> {
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let parse = |message: String| RenderError::Parse {
            path: path.to_path_buf(),
            index: i + 1,
            message,
        };
        let value = serde_json::Value::deserialize(doc).map_err(|e| parse(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .unwrap_or_default()
            .to_string();
        let key = |v: &serde_json::Value| -> Key {
            let meta = &v["metadata"];
            (
                meta["namespace"].as_str().unwrap_or("default").to_string(),
                meta["name"].as_str().unwrap_or_default().to_string(),
            )
        };
        let k = key(&value);
        match kind.as_str() {
            "MCPServer" => {
                let mut server: MCPServer =
                    serde_json::from_value(value).map_err(|e| parse(e.to_string()))?;
                server.metadata.namespace = Some(k.0.clone());
                catalog.servers.insert(k, server);
            }
            "ToolProfile" => {
                let p = serde_json::from_value(value).map_err(|e| parse(e.to_string()))?;
                catalog.tool_profiles.insert(k, p);
            }
            "MCPGateway" => {
                let mut gw: MCPGateway =
                    serde_json::from_value(value).map_err(|e| parse(e.to_string()))?;
                gw.metadata.namespace = Some(k.0.clone());
                catalog.gateways.insert(k, gw);
            }
            "SandboxProfile" => {
                let p = serde_json::from_value(value).map_err(|e| parse(e.to_string()))?;
                catalog.sandbox_profiles.insert(k, p);
            }
            // Other objects (Secrets, PVCs…) may sit in the same file; they are not ours.
            _ => {}
        }
    }
    Ok(())
}

/// The comment block in front of a server's objects.
fn capabilities_comment(server: &MCPServer, decision: &Decision) -> String {
    let mut out = format!(
        "# MCPServer {}/{}\n",
        crate::names::namespace(server),
        crate::names::object_name(server)
    );
    if decision.requested.is_empty() {
        out.push_str("#   requestedCapabilities: [] (baseline)\n");
        return out;
    }
    out.push_str("#   requestedCapabilities:\n");
    for name in &decision.requested {
        let mark = if decision.in_force.contains(name) {
            "in force"
        } else {
            "pending"
        };
        out.push_str(&format!("#     - {name}  ({mark})\n"));
    }
    out.push_str(&format!("#   capabilityDigest: {}\n", decision.digest));
    match decision.state {
        ApprovalState::Pending => out.push_str(&format!(
            "#   CapabilitiesApproved: False (PendingApproval); to approve:\n#     {}\n",
            approve_command(server, &decision.digest)
        )),
        _ => out.push_str("#   CapabilitiesApproved: True (Approved)\n"),
    }
    out
}
