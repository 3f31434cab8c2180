//! Apply, egress proxy engine under the `server` scope: the server's own
//! proxy (`crate::build::egress_proxy`, [`ProxyOf::Server`]), serving it
//! alone, controlled by it (the garbage collector removes it with the
//! server).
//!
//! ```text
//! its entry (as just built; the live policy ConfigMap's while held)
//! ├─ none with a host → its proxy's Deployment, NetworkPolicy, clients ConfigMap go
//! │   (the Service stays: its cluster IP is in the credential's URL)
//! └─ some → Service <name>-egress-proxy → Secret <name>-egress-proxy-credential (created once)
//!           → clients ConfigMap (its own hash only; written: the hash on its pods)
//!           → NetworkPolicy, Deployment
//! ```
//! An object of one of these names that the server does not control is
//! left alone and nothing is written: the server would otherwise run
//! behind, or force-apply over, someone else's proxy.

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Secret, Service},
        networking::v1::NetworkPolicy,
    },
    NamespaceResourceScope,
};
use kube::{api::DeleteParams, Api, Client, Resource, ResourceExt};
use mcp_warden_crds::MCPServer;
use serde::de::DeserializeOwned;

use super::api_error;
use crate::{
    build::egress_proxy::{
        desired_proxy_objects, read_entry, read_token, token_secret_name_for, token_sha256,
        ClientEntry, ProxyClient, ProxyInput, ProxyOf,
    },
    config::{BuildConfig, EgressProxyScope},
    names,
    reconcile::apply::{controlled_by, random_key, ApplyError},
};

/// Apply the server's own proxy (or remove it when it has no host egress).
pub async fn apply_own(
    client: &Client,
    server: &MCPServer,
    entry: Option<&ClientEntry>,
    hold: bool,
    config: &BuildConfig,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let ns = names::namespace(server);
    let name = server.name_any();
    let of = ProxyOf::Server(&name);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let secret_name = token_secret_name_for(server, EgressProxyScope::Server);
    let own_token = secrets
        .get_opt(&secret_name)
        .await
        .map_err(api_error("Secret", &secret_name))?
        .filter(|s| controlled_by(s, server))
        .and_then(|s| read_token(&s));
    let mine = if hold {
        let cm_name = names::policy_config_map(server);
        Api::<ConfigMap>::namespaced(client.clone(), &ns)
            .get_opt(&cm_name)
            .await
            .map_err(api_error("ConfigMap", &cm_name))?
            .filter(|c| controlled_by(c, server))
            .and_then(|c| read_entry(&c))
    } else {
        entry.filter(|e| !e.hosts.is_empty()).cloned()
    };
    // A held server without a credential has no approved entry to keep.
    let Some(mine) = mine.filter(|_| !hold || own_token.is_some()) else {
        return remove_own(client, server, written).await;
    };
    if let Some(foreign) = foreign_object(client, server, of).await? {
        tracing::warn!(object = %foreign, "the server's egress proxy is not applied: an object of its name belongs to someone else");
        return Ok(());
    }
    let owners: Vec<_> = names::owner_reference(server).into_iter().collect();
    let new_token = own_token.is_none().then(|| hex::encode(random_key()));
    let token = own_token
        .as_ref()
        .or(new_token.as_ref())
        .expect("one is set");
    let clients = [ProxyClient {
        name: format!("{ns}/{name}"),
        token_sha256: token_sha256(token),
        entry: mine,
    }];
    let objects = desired_proxy_objects(ProxyInput {
        namespace: &ns,
        of,
        clients: &clients,
        owners: &owners,
        service_owners: &owners,
        config,
    });
    super::apply_objects(client, server, of, &objects, new_token.as_ref(), written).await
}

/// The first of the proxy's objects that exists and is not the server's.
async fn foreign_object(
    client: &Client,
    server: &MCPServer,
    of: ProxyOf<'_>,
) -> Result<Option<String>, ApplyError> {
    let ns = names::namespace(server);
    let (proxy_name, clients) = (of.proxy_name(), of.clients_config_map());
    let checks = [
        not_controlled::<Deployment>(client, &ns, &proxy_name, server).await?,
        not_controlled::<Service>(client, &ns, &proxy_name, server).await?,
        not_controlled::<NetworkPolicy>(client, &ns, &proxy_name, server).await?,
        not_controlled::<ConfigMap>(client, &ns, &clients, server).await?,
    ];
    Ok(checks.into_iter().flatten().next())
}

async fn not_controlled<K>(
    client: &Client,
    ns: &str,
    name: &str,
    server: &MCPServer,
) -> Result<Option<String>, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + std::fmt::Debug
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let live = api
        .get_opt(name)
        .await
        .map_err(api_error(<K as k8s_openapi::Resource>::KIND, name))?;
    Ok(live
        .filter(|l| !controlled_by(l, server))
        .map(|_| format!("{}/{name}", <K as k8s_openapi::Resource>::KIND)))
}

/// Delete the server's own proxy but its Service (only what the server
/// controls): no proxy process runs for a server that does not use it. The
/// Service keeps its cluster IP, which the credential's URL names, for as
/// long as the server exists; it selects no pod meanwhile.
pub async fn remove_own(
    client: &Client,
    server: &MCPServer,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let name = server.name_any();
    let of = ProxyOf::Server(&name);
    let ns = names::namespace(server);
    remove_controlled::<Deployment>(client, &ns, &of.proxy_name(), server, written).await?;
    remove_controlled::<NetworkPolicy>(client, &ns, &of.proxy_name(), server, written).await?;
    remove_controlled::<ConfigMap>(client, &ns, &of.clients_config_map(), server, written).await
}

async fn remove_controlled<K>(
    client: &Client,
    ns: &str,
    name: &str,
    server: &MCPServer,
    written: &mut Vec<String>,
) -> Result<(), ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + std::fmt::Debug
        + DeserializeOwned,
{
    let kind = <K as k8s_openapi::Resource>::KIND;
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let Some(live) = api.get_opt(name).await.map_err(api_error(kind, name))? else {
        return Ok(());
    };
    if controlled_by(&live, server) {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => written.push(format!("-{kind}/{name}")),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => return Err(api_error(kind, name)(source)),
        }
    }
    Ok(())
}
