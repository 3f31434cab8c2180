//! Resolve: which MCPServers are a gateway's backends, with what prefix
//! ([`select`], pure, also what the backends' side and the watches use),
//! and the reads the pipeline needs ([`resolve`]).
//!
//! An entry with `name` names one server (its `prefix` applies); an entry
//! with `selector` adds every server of the namespace whose labels match,
//! prefixed `<server>__`. A server both named and selected is one backend,
//! with the named entry's prefix. Servers being deleted are no backends.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use kube::{
    api::ListParams,
    core::{Selector, SelectorExt},
    Api, Client, ResourceExt,
};
use mcp_warden_crds::{mcpgateway::PREFIX_NONE, MCPGateway, MCPServer, ToolProfile};

use super::names;

/// One backend: a server and the prefix of its names (`""`: none).
#[derive(Clone, Debug, PartialEq)]
pub struct Backend {
    /// The MCPServer.
    pub server: MCPServer,
    /// What its names start with at the gateway (`""` for `none`).
    pub prefix: String,
}

impl Backend {
    /// The backend's (and its server's) name.
    pub fn name(&self) -> String {
        self.server.name_any()
    }

    /// The prefix as the spec and status write it (`none` for no prefix).
    pub fn prefix_label(&self) -> String {
        if self.prefix.is_empty() {
            PREFIX_NONE.into()
        } else {
            self.prefix.clone()
        }
    }
}

/// The backends of a gateway among `servers`, sorted by name, and the
/// servers its entries name that do not exist.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selection {
    /// The backends, by name.
    pub backends: Vec<Backend>,
    /// Named servers not found (sorted).
    pub missing: Vec<String>,
}

/// The default prefix of a backend's names.
pub fn default_prefix(server: &str) -> String {
    format!("{server}__")
}

fn prefix_of(server: &str, written: Option<&str>) -> String {
    match written {
        Some(p) if p == PREFIX_NONE => String::new(),
        Some(p) => p.to_string(),
        None => default_prefix(server),
    }
}

/// Whether `server` matches any selector of the gateway's entries (an
/// unparsable selector matches nothing; validation reports it).
fn selected(gw: &MCPGateway, server: &MCPServer) -> bool {
    let labels = server.labels();
    gw.spec
        .backends
        .iter()
        .filter_map(|b| b.selector.clone())
        .filter_map(|s| Selector::try_from(s).ok())
        .any(|s| s.matches(labels))
}

/// The backends of `gw` among `servers` (any namespace; only the gateway's counts).
pub fn select<'a>(gw: &MCPGateway, servers: impl IntoIterator<Item = &'a MCPServer>) -> Selection {
    let ns = names::namespace(gw);
    let live: BTreeMap<String, &MCPServer> = servers
        .into_iter()
        .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .map(|s| (s.name_any(), s))
        .collect();
    let mut chosen: BTreeMap<String, Backend> = BTreeMap::new();
    let mut missing = Vec::new();
    for entry in &gw.spec.backends {
        let Some(name) = &entry.name else { continue };
        match live.get(name) {
            Some(server) => {
                chosen.entry(name.clone()).or_insert_with(|| Backend {
                    server: (*server).clone(),
                    prefix: prefix_of(name, entry.prefix.as_deref()),
                });
            }
            None => missing.push(name.clone()),
        }
    }
    for (name, server) in &live {
        if !chosen.contains_key(name) && selected(gw, server) {
            chosen.insert(
                name.clone(),
                Backend {
                    server: (*server).clone(),
                    prefix: default_prefix(name),
                },
            );
        }
    }
    missing.sort();
    missing.dedup();
    Selection {
        backends: chosen.into_values().collect(),
        missing,
    }
}

/// Whether `gw` has `server` among its backends (or would, once it exists).
pub fn selects(gw: &MCPGateway, server: &MCPServer) -> bool {
    if gw.namespace() != server.namespace() {
        return false;
    }
    let name = server.name_any();
    gw.spec
        .backends
        .iter()
        .any(|b| b.name.as_deref() == Some(name.as_str()))
        || selected(gw, server)
}

/// What the resolve step read.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// Every MCPServer of the gateway's namespace.
    pub servers: Vec<MCPServer>,
    /// The gateway's ToolProfile, if it names one and it exists.
    pub tool_profile: Option<ToolProfile>,
    /// The gateway's pods (its selector's label), whose `/gateway` the
    /// observe step reads.
    pub pods: Vec<Pod>,
}

/// A read failed (transient).
#[derive(Debug, thiserror::Error)]
#[error("cannot read {what}: {source}")]
pub struct ResolveError {
    /// What was read.
    pub what: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// Read the namespace's MCPServers, the gateway's ToolProfile and pods.
pub async fn resolve(client: &Client, gw: &MCPGateway) -> Result<Resolved, ResolveError> {
    let ns = names::namespace(gw);
    let servers = Api::<MCPServer>::namespaced(client.clone(), &ns)
        .list(&Default::default())
        .await
        .map_err(|source| ResolveError {
            what: format!("the MCPServers of namespace {ns}"),
            source,
        })?
        .items;
    let tool_profile = match &gw.spec.tool_profile_ref {
        Some(r) => Api::<ToolProfile>::namespaced(client.clone(), &ns)
            .get_opt(&r.name)
            .await
            .map_err(|source| ResolveError {
                what: format!("ToolProfile {ns}/{}", r.name),
                source,
            })?,
        None => None,
    };
    let selector = format!("{}={}", names::GATEWAY_LABEL, gw.name_any());
    let pods = Api::<Pod>::namespaced(client.clone(), &ns)
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| ResolveError {
            what: format!("the pods of MCPGateway {ns}/{}", gw.name_any()),
            source,
        })?
        .items;
    Ok(Resolved {
        servers,
        tool_profile,
        pods,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(ns: &str, name: &str, labels: &str) -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\n\
             metadata: {{name: {name}, namespace: {ns}, labels: {{{labels}}}}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}}}\n"
        ))
        .unwrap()
    }

    fn gateway(backends: &str) -> MCPGateway {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {{name: gw, namespace: a}}\n\
             spec: {{backends: {backends}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn named_and_selected_servers_are_backends_once_with_the_named_prefix() {
        let servers = [
            server("a", "git", "team: x"),
            server("a", "fs", "team: x"),
            server("a", "time", "team: y"),
            server("b", "other", "team: x"),
        ];
        let gw = gateway(
            "[{name: git, prefix: vcs_}, {name: gone}, {selector: {matchLabels: {team: x}}}]",
        );
        let selection = select(&gw, &servers);
        let got: Vec<(String, String)> = selection
            .backends
            .iter()
            .map(|b| (b.name(), b.prefix.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("fs".to_string(), "fs__".to_string()),
                ("git".to_string(), "vcs_".to_string())
            ]
        );
        assert_eq!(selection.missing, ["gone"]);
        assert!(selects(&gw, &servers[0]) && selects(&gw, &servers[1]));
        assert!(!selects(&gw, &servers[2]), "another team's label");
        assert!(!selects(&gw, &servers[3]), "another namespace");
    }

    #[test]
    fn prefix_none_is_the_empty_prefix_and_reads_back_as_none() {
        let servers = [server("a", "git", "")];
        let selection = select(&gateway("[{name: git, prefix: none}]"), &servers);
        assert_eq!(selection.backends[0].prefix, "");
        assert_eq!(selection.backends[0].prefix_label(), "none");
    }
}
