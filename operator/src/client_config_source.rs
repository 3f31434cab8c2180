//! Where `client-config` reads what it describes ([`crate::client_config`],
//! pure): an MCPServer and its ToolProfile, or an MCPGateway (with its
//! status, which names the backends) and its own ToolProfile — from YAML
//! files as `render` reads them, or from the cluster.

use std::path::PathBuf;

use kube::Api;
use mcp_warden_crds::{MCPGateway, MCPServer, ToolProfile};

use crate::{client_config, config::BuildConfig, render};

/// What NAME names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An MCPServer.
    Server,
    /// An MCPGateway (`--gateway`).
    Gateway,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Server => "MCPServer",
            Kind::Gateway => "MCPGateway",
        }
    }
}

/// The one object called `name` (in `namespace`, when given) of a map keyed by (namespace, name).
fn pick<'a, T>(
    map: &'a std::collections::BTreeMap<(String, String), T>,
    kind: Kind,
    name: &str,
    namespace: &Option<String>,
) -> Result<(&'a String, &'a T), String> {
    let found: Vec<_> = map
        .iter()
        .filter(|((ns, n), _)| n == name && namespace.as_ref().is_none_or(|want| want == ns))
        .collect();
    match found.as_slice() {
        [((ns, _), obj)] => Ok((ns, obj)),
        [] => Err(format!("no {} {name:?} in the files", kind.as_str())),
        _ => Err(format!(
            "{} {name:?} is in several namespaces: give -n",
            kind.as_str()
        )),
    }
}

/// `client-config` from files.
pub fn from_files(
    files: &[PathBuf],
    kind: Kind,
    name: &str,
    namespace: Option<String>,
    cfg: &BuildConfig,
) -> Result<String, String> {
    let catalog = render::load_files(files).map_err(|e| e.to_string())?;
    let profile = |ns: &String, profile: &str| {
        catalog
            .tool_profiles
            .get(&(ns.clone(), profile.to_string()))
            .map(|p| &p.spec)
    };
    Ok(match kind {
        Kind::Server => {
            let (ns, server) = pick(&catalog.servers, kind, name, &namespace)?;
            client_config::describe(server, profile(ns, &server.spec.tool_profile_ref.name), cfg)
        }
        Kind::Gateway => {
            let (ns, gw) = pick(&catalog.gateways, kind, name, &namespace)?;
            let p = gw
                .spec
                .tool_profile_ref
                .as_ref()
                .and_then(|r| profile(ns, &r.name));
            client_config::describe_gateway(gw, p, cfg)
        }
    })
}

/// `client-config` from the cluster (current kubeconfig).
pub async fn from_cluster(
    kind: Kind,
    name: &str,
    namespace: Option<String>,
    cfg: &BuildConfig,
) -> Result<String, String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("cannot connect to the API server: {e}"))?;
    let ns = namespace.unwrap_or_else(|| client.default_namespace().to_string());
    let missing = |plural: &str| {
        format!(
            "no {} {name:?} in namespace {ns:?} (kubectl get {plural} -n {ns})",
            kind.as_str()
        )
    };
    let read_profile = |profile_name: String| {
        let profiles: Api<ToolProfile> = Api::namespaced(client.clone(), &ns);
        let ns = ns.clone();
        async move {
            profiles.get_opt(&profile_name).await.map_err(|e| {
                client_config::api_error(&format!("ToolProfile {ns}/{profile_name}"), &e)
            })
        }
    };
    let what = format!("{} {ns}/{name}", kind.as_str());
    match kind {
        Kind::Server => {
            let server = Api::<MCPServer>::namespaced(client.clone(), &ns)
                .get_opt(name)
                .await
                .map_err(|e| client_config::api_error(&what, &e))?
                .ok_or_else(|| missing("mcpservers"))?;
            let profile = read_profile(server.spec.tool_profile_ref.name.clone()).await?;
            Ok(client_config::describe(
                &server,
                profile.as_ref().map(|p| &p.spec),
                cfg,
            ))
        }
        Kind::Gateway => {
            let gw = Api::<MCPGateway>::namespaced(client.clone(), &ns)
                .get_opt(name)
                .await
                .map_err(|e| client_config::api_error(&what, &e))?
                .ok_or_else(|| missing("mcpgateways"))?;
            let profile = match &gw.spec.tool_profile_ref {
                Some(r) => read_profile(r.name.clone()).await?,
                None => None,
            };
            Ok(client_config::describe_gateway(
                &gw,
                profile.as_ref().map(|p| &p.spec),
                cfg,
            ))
        }
    }
}
