//! Apply, egress proxy engine: the server's credential Secret and the
//! namespace's shared proxy objects (`crate::build::egress_proxy`), after
//! the server's own objects (its policy ConfigMap carries its approved
//! entry, written only with an approved policy: a held change keeps the old).
//! Under the `server` scope the server gets a proxy of its own instead
//! (`egress_proxy_own.rs`). Each scope's apply removes the other's objects,
//! so a switch converges as every server is reconciled: the namespace's
//! proxy goes once a server applies its own, a server's own proxy goes when
//! it joins the namespace's (only what the server controls; the Services
//! stay, their cluster IPs being in the credentials' URLs).
//!
//! ```text
//! every <name>-egress-proxy Secret in the namespace whose controller is a live MCPServer
//!   + that server's entry (its policy ConfigMap's annotation; this server: as just built,
//!     or the live one while its change is held)
//! ├─ no entry with a host → the shared objects go (the Service stays while a credential
//! │   does; the garbage collector removes everything with the last owner)
//! └─ some → Service (its cluster IP goes into the URL) → this server's Secret (created once)
//!           → clients ConfigMap (written: its hash on the proxy's pods, so the kubelet
//!             refreshes their copy at once), NetworkPolicy, Deployment (owners: every server served)
//! ```
//! A server that goes takes its Secret with it (owner reference); the
//! controller watches those Secrets and reconciles the namespace's other
//! servers, which rewrite the clients file without it.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Pod, Secret},
        networking::v1::NetworkPolicy,
    },
    NamespaceResourceScope,
};
use kube::{
    api::{ListParams, Patch, PatchParams, PostParams},
    Api, Client, Resource, ResourceExt,
};
use mcp_warden_crds::MCPServer;
use serde::{de::DeserializeOwned, Serialize};

use super::{
    apply::{contains, controlled_by, random_key, remove_if, ApplyError},
    nudge,
};
use crate::{
    build::{
        egress_proxy::{
            self as proxy, desired_proxy_objects, desired_token_secret, read_entry, read_token,
            token_secret_name, token_secret_name_for, token_sha256, ClientEntry, ProxyClient,
            ProxyInput, ProxyObjects, ProxyOf,
        },
        typed_value,
    },
    config::{BuildConfig, EgressProxyScope, FIELD_MANAGER},
    names,
};

#[path = "egress_proxy_own.rs"]
mod own;
pub use own::remove_own;

fn api_error(kind: &'static str, name: &str) -> impl FnOnce(kube::Error) -> ApplyError {
    let name = name.to_string();
    move |source| ApplyError { kind, name, source }
}

/// Apply this server's part and its proxy: the namespace's shared one or,
/// under the `server` scope, its own; the other scope's objects go.
/// `entry`: what this server's approved policy lets it reach (`None` while
/// held: the live ConfigMap's entry counts).
pub async fn apply_proxy(
    client: &Client,
    server: &MCPServer,
    entry: Option<&ClientEntry>,
    hold: bool,
    config: &BuildConfig,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    match config.egress_proxy_scope {
        EgressProxyScope::Server => {
            own::apply_own(client, server, entry, hold, config, written).await?;
            // No server uses the namespace's proxy under this scope.
            remove_shared(client, &names::namespace(server), written).await
        }
        EgressProxyScope::Namespace => {
            apply_shared(client, server, entry, hold, config, written).await?;
            remove_own(client, server, written).await
        }
    }
}

async fn apply_shared(
    client: &Client,
    server: &MCPServer,
    entry: Option<&ClientEntry>,
    hold: bool,
    config: &BuildConfig,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let ns = names::namespace(server);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let servers: Api<MCPServer> = Api::namespaced(client.clone(), &ns);
    let live_servers = servers
        .list(&ListParams::default())
        .await
        .map_err(api_error("MCPServer", &ns))?;
    let by_uid: BTreeMap<String, &MCPServer> = live_servers
        .items
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter_map(|s| Some((s.uid()?, s)))
        .collect();
    let labelled = secrets
        .list(&ListParams::default().labels(&format!("{}=true", proxy::TOKEN_LABEL)))
        .await
        .map_err(api_error("Secret", proxy::TOKEN_LABEL))?;
    // (server, its token, its entry if it has host egress)
    let mut holders: Vec<(&MCPServer, Option<String>, Option<ClientEntry>)> = Vec::new();
    let mut own_token = None;
    for secret in &labelled.items {
        let Some(owner) = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .and_then(|o| by_uid.get(&o.uid).copied())
        else {
            continue;
        };
        if secret.name_any() != token_secret_name(owner) {
            continue;
        }
        if owner.uid() == server.uid() {
            own_token = read_token(secret);
            continue;
        }
        let cm_name = names::policy_config_map(owner);
        let cm = config_maps
            .get_opt(&cm_name)
            .await
            .map_err(api_error("ConfigMap", &cm_name))?;
        let entry = cm
            .filter(|c| controlled_by(c, owner))
            .and_then(|c| read_entry(&c));
        holders.push((owner, read_token(secret), entry));
    }
    let own_name = token_secret_name(server);
    let own_exists = labelled.items.iter().any(|s| s.name_any() == own_name);
    let mine = if hold {
        let cm_name = names::policy_config_map(server);
        config_maps
            .get_opt(&cm_name)
            .await
            .map_err(api_error("ConfigMap", &cm_name))?
            .filter(|c| controlled_by(c, server))
            .and_then(|c| read_entry(&c))
    } else {
        entry.filter(|e| !e.hosts.is_empty()).cloned()
    };
    // A held server without a credential has no approved entry to keep.
    let mine = mine.filter(|_| !hold || own_token.is_some());
    if mine.is_some() || own_exists {
        holders.push((server, own_token.clone(), mine.clone()));
    }
    holders.sort_by_key(|(s, _, _)| s.name_any());
    let owner_of = |s: &MCPServer| {
        names::owner_reference(s).map(|mut o| {
            o.controller = None;
            o.block_owner_deletion = None;
            o
        })
    };
    let served: Vec<_> = holders.iter().filter(|(_, _, e)| e.is_some()).collect();
    if served.is_empty() {
        return remove_shared(client, &ns, written).await;
    }
    let service_owners: Vec<_> = holders.iter().filter_map(|(s, _, _)| owner_of(s)).collect();
    let owners: Vec<_> = served.iter().filter_map(|(s, _, _)| owner_of(s)).collect();
    // This server's token: the live one, or a new one (its Secret is made below).
    let new_token = (mine.is_some() && own_token.is_none()).then(|| hex::encode(random_key()));
    let clients: Vec<ProxyClient> = served
        .iter()
        .filter_map(|(s, token, entry)| {
            let token = token.as_ref().or(if s.uid() == server.uid() {
                new_token.as_ref()
            } else {
                None
            })?;
            Some(ProxyClient {
                name: format!("{ns}/{}", s.name_any()),
                token_sha256: token_sha256(token),
                entry: entry.clone()?,
            })
        })
        .collect();
    let objects = desired_proxy_objects(ProxyInput {
        namespace: &ns,
        of: ProxyOf::Namespace,
        clients: &clients,
        owners: &owners,
        service_owners: &service_owners,
        config,
    });
    apply_objects(
        client,
        server,
        ProxyOf::Namespace,
        &objects,
        new_token.as_ref(),
        written,
    )
    .await
}

/// Apply one proxy's objects, in order: its Service (whose cluster IP goes
/// into a new credential's URL), the server's credential Secret when
/// `new_token` is a new one, the clients file (its hash then put on the
/// proxy's pods, so the kubelet refreshes their copy at once instead of at
/// its periodic sync and a server approved now is not refused for a
/// minute), the NetworkPolicy and the Deployment.
pub(super) async fn apply_objects(
    client: &Client,
    server: &MCPServer,
    of: ProxyOf<'_>,
    objects: &ProxyObjects,
    new_token: Option<&String>,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let ns = names::namespace(server);
    let scope = match of {
        ProxyOf::Namespace => EgressProxyScope::Namespace,
        ProxyOf::Server(_) => EgressProxyScope::Server,
    };
    let service = apply_one(client, &ns, &objects.service, written).await?;
    if let Some(token) = new_token {
        let ip = service
            .spec
            .and_then(|s| s.cluster_ip)
            .filter(|ip| !ip.is_empty() && ip != "None")
            .unwrap_or_else(|| format!("{}.{ns}.svc", of.proxy_name()));
        let secret = desired_token_secret(server, scope, token, &ip);
        let secret_name = token_secret_name_for(server, scope);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        match secrets.create(&PostParams::default(), &secret).await {
            Ok(_) => written.push(format!("Secret/{secret_name}")),
            // Someone else's (or a racing reconcile's) Secret: its token is
            // not in the clients file this time; the next reconcile reads it.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(source) => return Err(api_error("Secret", &secret_name)(source)),
        }
    }
    let before = written.len();
    apply_one(client, &ns, &objects.clients_config_map, written).await?;
    if written.len() > before {
        let hash = nudge::data_hash(&objects.clients_config_map, proxy::CLIENTS_KEY);
        let selector = of
            .selector()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
        let live = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(api_error("Pod", &of.proxy_name()))?;
        let behind = nudge::proxy_pods_behind(&live.items, &hash);
        let nudged =
            nudge::annotate(client, &ns, behind, nudge::EGRESS_CLIENTS_ANNOTATION, &hash).await?;
        written.extend(nudged);
    }
    apply_one(client, &ns, &objects.network_policy, written).await?;
    apply_one(client, &ns, &objects.deployment, written).await?;
    Ok(())
}

/// What enforces a server's approved host egress (`HostEgress` condition,
/// present only while some host egress is in force). Not a capability: the
/// approved hosts and the digest are the same under every engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEgress {
    /// A `CiliumNetworkPolicy` with `toFQDNs`.
    Cilium,
    /// A Calico `NetworkPolicy` with `domains`.
    Calico,
    /// The namespace's egress proxy (`mcp-warden-egress`).
    Proxy,
    /// The server's own egress proxy (`<name>-egress-proxy`, `server` scope).
    OwnProxy,
    /// A remote server's facade, the pod's only container.
    Facade,
    /// Nothing (no engine): `Degraded` says so too.
    NotEnforced,
}

impl HostEgress {
    /// The condition's status, reason and message.
    pub fn condition(self) -> (&'static str, &'static str, String) {
        let (status, reason, how) = match self {
            HostEgress::Cilium => ("True", "Cilium", CILIUM),
            HostEgress::Calico => ("True", "Calico", CALICO),
            HostEgress::Proxy => ("True", "EgressProxy", PROXY),
            HostEgress::OwnProxy => ("True", "EgressProxy", OWN_PROXY),
            HostEgress::Facade => ("True", "Facade", FACADE),
            HostEgress::NotEnforced => ("False", "NotEnforced", NOTHING),
        };
        (
            status,
            reason,
            format!("approved host egress is enforced by {how}"),
        )
    }
}

const CILIUM: &str = "a CiliumNetworkPolicy with toFQDNs (<name>-egress)";
const CALICO: &str = "a Calico NetworkPolicy with domains (<name>-egress)";
const PROXY: &str = "the namespace's egress proxy (mcp-warden-egress): the pod may reach only the proxy, which allows only the approved host:port pairs";
const OWN_PROXY: &str = "the server's own egress proxy (<name>-egress-proxy): the pod may reach only that proxy, which serves no other server and allows only the approved host:port pairs";
const FACADE: &str = "the remote server's facade, which connects only to the approved hosts";
const NOTHING: &str =
    "nothing: the cluster has no engine for host names, so the approved hosts stay unreachable";

/// Server-side apply unless the live object already holds the desired one;
/// returns the live object after the apply.
async fn apply_one<K>(
    client: &Client,
    ns: &str,
    desired: &K,
    written: &mut Vec<String>,
) -> Result<K, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let name = desired.name_any();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let err = |source| ApplyError {
        kind: <K as k8s_openapi::Resource>::KIND,
        name: name.clone(),
        source,
    };
    let want = typed_value(desired);
    if let Some(live) = api.get_opt(&name).await.map_err(err)? {
        if contains(&serde_json::to_value(&live).unwrap_or_default(), &want) {
            return Ok(live);
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let live = api
        .patch(&name, &params, &Patch::Apply(&want))
        .await
        .map_err(err)?;
    written.push(format!("{}/{name}", <K as k8s_openapi::Resource>::KIND));
    Ok(live)
}

/// Delete the shared objects but the Service (only ours: the operator's
/// label); the Service goes with the last server holding a credential.
pub async fn remove_shared(
    client: &Client,
    ns: &str,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let (name, map) = (proxy::PROXY_NAME, proxy::CLIENTS_CONFIG_MAP);
    remove_if::<Deployment>(client, ns, name, managed_by_operator, written).await?;
    remove_if::<NetworkPolicy>(client, ns, name, managed_by_operator, written).await?;
    remove_if::<ConfigMap>(client, ns, map, managed_by_operator, written).await
}

/// Whose the shared objects are: they list every server they serve as an
/// owner and none as controller, so the operator's `managed-by` label says
/// it (an object of that name someone else made is left alone).
fn managed_by_operator<K: Resource>(object: &K) -> bool {
    object
        .labels()
        .get("app.kubernetes.io/managed-by")
        .map(String::as_str)
        == Some("mcp-warden-operator")
}
