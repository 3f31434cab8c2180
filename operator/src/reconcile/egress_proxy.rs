//! Apply, egress proxy engine: the server's credential Secret and the
//! namespace's shared proxy objects (`crate::build::egress_proxy`), after
//! the server's own objects.
//!
//! ```text
//! this server: held → its <name>-egress-proxy as it is (old entry, old token)
//!              approved, uses the proxy → token kept (or made), entry as approved
//!              approved, no host egress → its Secret removed
//! the others: every <name>-egress-proxy in the namespace whose controller is a live MCPServer
//!   ├─ none → the shared objects go (the garbage collector also removes them with the last owner)
//!   └─ some → Service (its cluster IP goes into the URL) → this server's Secret → clients Secret,
//!             Deployment, NetworkPolicy (owner references: every server served)
//! ```
//! A server that goes takes its Secret with it (owner reference); the
//! controller watches those Secrets and reconciles the namespace's other
//! servers, which rewrite the clients file without it.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{Secret, Service},
        networking::v1::NetworkPolicy,
    },
    NamespaceResourceScope,
};
use kube::{
    api::{DeleteParams, ListParams, Patch, PatchParams},
    Api, Client, Resource, ResourceExt,
};
use mcp_warden_crds::MCPServer;
use serde::{de::DeserializeOwned, Serialize};

use super::apply::{contains, controlled_by, random_key, ApplyError};
use crate::{
    build::{
        egress_proxy::{
            self as proxy, desired_proxy_objects, desired_token_secret, read_token_secret,
            token_secret_name, token_sha256, ClientEntry, ProxyClient, ProxyInput,
        },
        typed_value,
    },
    config::{BuildConfig, FIELD_MANAGER},
    names,
};

/// Apply this server's part and the namespace's shared objects.
pub async fn apply_proxy(
    client: &Client,
    server: &MCPServer,
    entry: Option<&ClientEntry>,
    hold: bool,
    config: &BuildConfig,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let ns = names::namespace(server);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let own_name = token_secret_name(server);
    let err = |kind: &'static str, name: &str| {
        let name = name.to_string();
        move |source| ApplyError { kind, name, source }
    };
    let own = secrets
        .get_opt(&own_name)
        .await
        .map_err(err("Secret", &own_name))?;
    if own.as_ref().is_some_and(|s| !controlled_by(s, server)) {
        // Someone else's Secret under this name: nothing of it is used.
        return Ok(());
    }
    // This server's token and entry as they should be after this apply.
    let mine: Option<(String, ClientEntry)> = match (hold, entry) {
        (true, _) => own.as_ref().and_then(read_token_secret),
        (false, None) => {
            if own.is_some() {
                secrets
                    .delete(&own_name, &DeleteParams::default())
                    .await
                    .map_err(err("Secret", &own_name))?;
                written.push(format!("-Secret/{own_name}"));
            }
            None
        }
        (false, Some(entry)) => {
            let token = own
                .as_ref()
                .and_then(read_token_secret)
                .map(|(t, _)| t)
                .unwrap_or_else(|| hex::encode(random_key()));
            Some((token, entry.clone()))
        }
    };
    let servers: Api<MCPServer> = Api::namespaced(client.clone(), &ns);
    let live_servers = servers
        .list(&ListParams::default())
        .await
        .map_err(err("MCPServer", &ns))?;
    let by_uid: BTreeMap<String, &MCPServer> = live_servers
        .items
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter_map(|s| Some((s.uid()?, s)))
        .collect();
    let labelled = secrets
        .list(&ListParams::default().labels(&format!("{}=true", proxy::TOKEN_LABEL)))
        .await
        .map_err(err("Secret", proxy::TOKEN_LABEL))?;
    let mut served: Vec<(&MCPServer, String, ClientEntry)> = Vec::new();
    for secret in &labelled.items {
        let Some(owner) = secret
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .and_then(|o| by_uid.get(&o.uid))
        else {
            continue;
        };
        if owner.uid() == server.uid() || secret.name_any() != token_secret_name(owner) {
            continue;
        }
        if let Some((token, entry)) = read_token_secret(secret) {
            served.push((owner, token, entry));
        }
    }
    if let Some((token, entry)) = &mine {
        served.push((server, token.clone(), entry.clone()));
    }
    served.sort_by_key(|(s, _, _)| s.name_any());
    if served.is_empty() {
        return remove_shared(client, &ns, written).await;
    }
    let clients: Vec<ProxyClient> = served
        .iter()
        .map(|(s, token, entry)| ProxyClient {
            name: format!("{ns}/{}", s.name_any()),
            token_sha256: token_sha256(token),
            entry: entry.clone(),
        })
        .collect();
    let owners: Vec<_> = served
        .iter()
        .filter_map(|(s, _, _)| names::owner_reference(s))
        .map(|mut o| {
            o.controller = None;
            o.block_owner_deletion = None;
            o
        })
        .collect();
    let objects = desired_proxy_objects(ProxyInput {
        namespace: &ns,
        clients: &clients,
        owners: &owners,
        config,
    });
    let service = apply_one(client, &ns, &objects.service, written).await?;
    let service_ip = service
        .spec
        .and_then(|s| s.cluster_ip)
        .unwrap_or_else(|| format!("{}.{ns}.svc", proxy::PROXY_NAME));
    if let (false, Some((token, entry))) = (hold, &mine) {
        let desired = desired_token_secret(server, token, &service_ip, entry);
        apply_one(client, &ns, &desired, written).await?;
    }
    apply_one(client, &ns, &objects.clients_secret, written).await?;
    apply_one(client, &ns, &objects.network_policy, written).await?;
    apply_one(client, &ns, &objects.deployment, written).await?;
    Ok(())
}

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

/// Delete the shared objects (only ours: the operator's label).
async fn remove_shared(client: &Client, ns: &str, written: &mut Vec<String>) -> Result<(), ApplyError> {
    remove::<Deployment>(client, ns, proxy::PROXY_NAME, written).await?;
    remove::<NetworkPolicy>(client, ns, proxy::PROXY_NAME, written).await?;
    remove::<Service>(client, ns, proxy::PROXY_NAME, written).await?;
    remove::<Secret>(client, ns, proxy::CLIENTS_SECRET, written).await
}

async fn remove<K>(client: &Client, ns: &str, name: &str, written: &mut Vec<String>) -> Result<(), ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + std::fmt::Debug
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let err = |source| ApplyError {
        kind: <K as k8s_openapi::Resource>::KIND,
        name: name.to_string(),
        source,
    };
    let Some(live) = api.get_opt(name).await.map_err(err)? else {
        return Ok(());
    };
    let ours = live.labels().get("app.kubernetes.io/managed-by").map(String::as_str)
        == Some("mcp-warden-operator");
    if ours {
        api.delete(name, &DeleteParams::default()).await.map_err(err)?;
        written.push(format!("-{}/{name}", <K as k8s_openapi::Resource>::KIND));
    }
    Ok(())
}
