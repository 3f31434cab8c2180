//! Apply: server-side apply of every desired object with one field manager,
//! skipping objects that already match. "Match" means the live object
//! contains the desired one ([`contains`]), so a steady state makes no writes
//! and the defaults the API server adds do not count as drift.
//!
//! Every object is read first, and if one that exists is not controlled by
//! this MCPServer (no controller owner reference with its uid) nothing at all
//! is written: the server would otherwise run with someone else's policy,
//! Service or NetworkPolicy, or force-apply over an object another team made.
//! The status says which objects are in the way ([`Applied::not_owned`]).
//!
//! `hold` (a changed workload waits for approval, `crate::capabilities`
//! rule 3): the live policy ConfigMap and Deployment are left exactly as
//! they are — the last approved workload keeps running, no rollout — while
//! everything else (NetworkPolicy narrowed to what is still in force,
//! Service, …) is applied as usual. The caller holds only when both exist.

use std::fmt::Debug;

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::Secret},
    NamespaceResourceScope,
};
use kube::{
    api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    Api, Client, Resource, ResourceExt,
};
use mcp_warden_crds::MCPServer;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

use crate::{
    build::{
        secret::{
            admin_token, desired_admin_token_secret, desired_peer_key_secret, has_usable_peer_key,
        },
        DesiredObjects,
    },
    config::FIELD_MANAGER,
    names,
};

/// An apply failed (transient: the reconcile backs off and retries).
#[derive(Debug, thiserror::Error)]
#[error("cannot apply {kind} {name}: {source}")]
pub struct ApplyError {
    /// The object's kind.
    pub kind: &'static str,
    /// The object's name.
    pub name: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// What apply did.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// `Kind/name` of every object written (empty in a steady state).
    pub written: Vec<String>,
    /// The live Deployment as read before applying (for `Ready`), if any.
    pub deployment: Option<Deployment>,
    /// The peer-key Secret exists but holds no usable key; the operator
    /// never overwrites a Secret, so this is reported.
    pub peer_key_unusable: bool,
    /// `Kind/name` of existing objects with a desired name that this server
    /// does not control; when any, nothing was written.
    pub not_owned: Vec<String>,
    /// The token the facades ask for on `/tools` (from the admin-token
    /// Secret); `None` when that Secret holds no usable token.
    pub admin_token: Option<String>,
    /// The server asks for an HTTPRoute and the cluster does not serve the
    /// Gateway API (the rest is applied; the status says so).
    pub route_unavailable: bool,
}

/// One desired object and what the API server has under its name.
struct Read<'a, K> {
    desired: &'a K,
    live: Option<K>,
}

impl<K> Read<'_, K>
where
    K: Resource<DynamicType = ()> + k8s_openapi::Resource,
{
    /// `Kind/name` if the live object exists and `server` does not control it.
    fn foreign(&self, server: &MCPServer) -> Option<String> {
        let live = self.live.as_ref()?;
        (!controlled_by(live, server))
            .then(|| format!("{}/{}", <K as k8s_openapi::Resource>::KIND, live.name_any()))
    }
}

/// Whether `server` is `object`'s controller (by uid: a same-named server
/// that was deleted and re-created is someone else).
pub fn controlled_by<K: Resource>(object: &K, server: &MCPServer) -> bool {
    server.uid().is_some_and(|uid| {
        object
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true))
    })
}

/// The Deployment this server applied earlier, if it still exists and is
/// this server's (read while the spec cannot be built, to say in status
/// that the last applied workload keeps running).
pub async fn live_deployment(
    client: &Client,
    server: &MCPServer,
) -> Result<Option<Deployment>, ApplyError> {
    let ns = names::namespace(server);
    let name = names::object_name(server);
    let found = Api::<Deployment>::namespaced(client.clone(), &ns)
        .get_opt(&name)
        .await
        .map_err(|source| ApplyError {
            kind: "Deployment",
            name: name.clone(),
            source,
        })?;
    Ok(found.filter(|d| controlled_by(d, server)))
}

/// Read every object; unless one is in the way, apply them in order, make
/// the peer key, and remove the scale-out objects of a server that no longer
/// has more than one replica.
pub async fn apply_all(
    client: &Client,
    server: &MCPServer,
    objects: &DesiredObjects,
    hold: bool,
) -> Result<Applied, ApplyError> {
    let ns = &names::namespace(server);
    // 1. read (and check ownership of) everything before writing anything
    let sa = read(client, ns, &objects.service_account).await?;
    let cm = read(client, ns, &objects.config_map).await?;
    let jwks = read_opt(client, ns, objects.jwks_config_map.as_ref()).await?;
    let issuers = read_opt(client, ns, objects.issuers_config_map.as_ref()).await?;
    let deployment = read(client, ns, &objects.deployment).await?;
    let service = read(client, ns, &objects.service).await?;
    let peers = read_opt(client, ns, objects.peers_service.as_ref()).await?;
    let peers_cm = read(client, ns, &objects.peers_config_map).await?;
    let np = read(client, ns, &objects.network_policy).await?;
    let pdb = read_opt(client, ns, objects.pod_disruption_budget.as_ref()).await?;
    let key_name = names::peer_key_secret(server);
    let key = read_secret(client, ns, &key_name).await?;
    let token_name = names::admin_token_secret(server);
    let token = read_secret(client, ns, &token_name).await?;
    // The egress-by-name policy's kind exists only where the engine does.
    let engine = objects.named_egress_engine.api_resource();
    let egress_name = names::egress_policy(server);
    let egress = match &engine {
        Some(api) => read_dynamic(client, ns, api, &egress_name).await?,
        None => None,
    };
    // The routes of `expose`: read even when not asked for, to remove ours
    // when `expose` drops them (an absent Gateway API answers 404: none).
    let ingress = read_opt(client, ns, objects.ingress.as_ref()).await?;
    let route_api = crate::build::exposure::http_route_api();
    let route_name = names::object_name(server);
    // A cluster without the Gateway API answers a bare 404 (no Status body),
    // which get_opt does not read as "absent": it is.
    let route = match read_dynamic(client, ns, &route_api, &route_name).await {
        Err(ApplyError {
            source: kube::Error::Api(e),
            ..
        }) if e.code == 404 => None,
        read => read?,
    };
    // Someone else's route under this name blocks only a server that wants one.
    let route_foreign =
        objects.http_route.is_some() && route.as_ref().is_some_and(|r| !controlled_by(r, server));
    let not_owned: Vec<String> = [
        ingress.as_ref().and_then(|r| r.foreign(server)),
        route_foreign.then(|| format!("HTTPRoute/{route_name}")),
        sa.foreign(server),
        cm.foreign(server),
        jwks.as_ref().and_then(|r| r.foreign(server)),
        issuers.as_ref().and_then(|r| r.foreign(server)),
        deployment.foreign(server),
        service.foreign(server),
        peers.as_ref().and_then(|r| r.foreign(server)),
        peers_cm.foreign(server),
        np.foreign(server),
        pdb.as_ref().and_then(|r| r.foreign(server)),
        key.as_ref()
            .filter(|k| !controlled_by(*k, server))
            .map(|_| format!("Secret/{key_name}")),
        token
            .as_ref()
            .filter(|t| !controlled_by(*t, server))
            .map(|_| format!("Secret/{token_name}")),
        engine.as_ref().and_then(|api| {
            egress
                .as_ref()
                .filter(|e| !controlled_by(*e, server))
                .map(|_| format!("{}/{egress_name}", api.kind))
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !not_owned.is_empty() {
        return Ok(Applied {
            not_owned,
            ..Applied::default()
        });
    }
    // 2. write what differs
    let mut applied = Applied::default();
    let written = &mut applied.written;
    // The ServiceAccount is part of what the approval binds (its
    // annotations name cloud identities a webhook hands the pod): held like
    // the Deployment, written only where none is live.
    if !hold || sa.live.is_none() {
        write(client, ns, sa, written).await?;
    }
    if !hold {
        write(client, ns, cm, written).await?;
    }
    if let Some(jwks) = jwks {
        write(client, ns, jwks, written).await?;
    }
    // The issuers' keys are part of what the approval binds (a copy of the
    // profile's JWKS ConfigMaps): held like the policy.
    if let Some(issuers) = issuers.filter(|_| !hold) {
        write(client, ns, issuers, written).await?;
    }
    // Not held: which pods run is not a capability.
    write(client, ns, peers_cm, written).await?;
    let peer_key = || desired_peer_key_secret(server, random_key());
    let usable = |s: &Secret| has_usable_peer_key(s);
    applied.peer_key_unusable = !ensure_secret(client, server, key, peer_key, usable, written)
        .await?
        .is_some_and(|s| usable(&s));
    let new_token = || desired_admin_token_secret(server, hex::encode(random_key()));
    applied.admin_token = ensure_secret(
        client,
        server,
        token,
        new_token,
        |s| admin_token(s).is_some(),
        written,
    )
    .await?
    .and_then(|s| admin_token(&s));
    applied.deployment = if hold {
        deployment.live
    } else {
        write(client, ns, deployment, written).await?
    };
    write(client, ns, service, written).await?;
    match peers {
        Some(peers) => drop(write(client, ns, peers, written).await?),
        None => {
            let name = names::peers_service(server);
            let ours = |s: &_| controlled_by(s, server);
            remove_if::<k8s_openapi::api::core::v1::Service>(client, ns, &name, ours, written)
                .await?
        }
    }
    write(client, ns, np, written).await?;
    if let Some(api) = &engine {
        let desired = objects.named_egress.as_ref();
        write_dynamic(client, ns, api, &egress_name, desired, egress, written).await?;
    }
    match pdb {
        Some(pdb) => drop(write(client, ns, pdb, written).await?),
        None => {
            let name = names::object_name(server);
            let ours = |p: &_| controlled_by(p, server);
            remove_if::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
                client, ns, &name, ours, written,
            )
            .await?
        }
    }
    match ingress {
        Some(ingress) => drop(write(client, ns, ingress, written).await?),
        None => {
            let name = names::object_name(server);
            let ours = |i: &_| controlled_by(i, server);
            remove_if::<k8s_openapi::api::networking::v1::Ingress>(client, ns, &name, ours, written)
                .await?
        }
    }
    // Not wanted and not ours: leave it alone.
    let route = route.filter(|r| objects.http_route.is_some() || controlled_by(r, server));
    let desired_route = objects.http_route.as_ref();
    let routed = write_dynamic(
        client,
        ns,
        &route_api,
        &route_name,
        desired_route,
        route,
        written,
    )
    .await;
    match routed {
        Ok(()) => {}
        // No HTTPRoute kind here: not an error to retry, a fact to report.
        Err(ApplyError {
            source: kube::Error::Api(e),
            ..
        }) if e.code == 404 => applied.route_unavailable = true,
        Err(e) => return Err(e),
    }
    Ok(applied)
}

/// Make a random Secret once (`live` is what was read): created (never
/// patched) so a running key or token is never replaced. Returns the Secret
/// in force: the live one, ours, or (when another writer won the race to
/// create it) the winner's, read back.
async fn ensure_secret(
    client: &Client,
    server: &MCPServer,
    live: Option<Secret>,
    desired: impl FnOnce() -> Secret,
    usable: impl Fn(&Secret) -> bool,
    written: &mut Vec<String>,
) -> Result<Option<Secret>, ApplyError> {
    if let Some(live) = live {
        return Ok(Some(live));
    }
    let secret = desired();
    let name = secret.name_any();
    let ns = names::namespace(server);
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            written.push(format!("Secret/{name}"));
            Ok(Some(secret))
        }
        // Another writer won the race; its bytes are as good as ours.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let theirs = read_secret(client, &ns, &name).await?;
            Ok(theirs.filter(|s| usable(s)))
        }
        Err(source) => Err(ApplyError {
            kind: "Secret",
            name,
            source,
        }),
    }
}

async fn read_secret(client: &Client, ns: &str, name: &str) -> Result<Option<Secret>, ApplyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    api.get_opt(name).await.map_err(|source| ApplyError {
        kind: "Secret",
        name: name.to_string(),
        source,
    })
}

/// 32 bytes from the operating system's CSPRNG.
pub(crate) fn random_key() -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut key = vec![0u8; crate::build::secret::PEER_KEY_MIN_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .expect("the OS random number generator works");
    key
}

/// Delete `name` if it exists and `ours` says it is ours to delete (this
/// server controls it; the namespace's shared egress proxy objects: the
/// operator's label). Anything else under that name is left alone.
pub(super) async fn remove_if<K>(
    client: &Client,
    ns: &str,
    name: &str,
    ours: impl Fn(&K) -> bool,
    written: &mut Vec<String>,
) -> Result<(), ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
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
    if ours(&live) {
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(err)?;
        written.push(format!("-{}/{name}", <K as k8s_openapi::Resource>::KIND));
    }
    Ok(())
}

/// Read what the API server has under `desired`'s name.
async fn read<'a, K>(client: &Client, ns: &str, desired: &'a K) -> Result<Read<'a, K>, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + DeserializeOwned,
{
    let name = desired.name_any();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let live = api.get_opt(&name).await.map_err(|source| ApplyError {
        kind: <K as k8s_openapi::Resource>::KIND,
        name,
        source,
    })?;
    Ok(Read { desired, live })
}

async fn read_opt<'a, K>(
    client: &Client,
    ns: &str,
    desired: Option<&'a K>,
) -> Result<Option<Read<'a, K>>, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + DeserializeOwned,
{
    match desired {
        Some(d) => read(client, ns, d).await.map(Some),
        None => Ok(None),
    }
}

/// Apply the desired object unless the live one (as read) contains it.
/// Returns the live object as read.
async fn write<K>(
    client: &Client,
    ns: &str,
    read: Read<'_, K>,
    written: &mut Vec<String>,
) -> Result<Option<K>, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let Read { desired, live } = read;
    let name = desired.name_any();
    let want = crate::build::typed_value(desired);
    if let Some(live) = &live {
        if contains(&serde_json::to_value(live).unwrap_or_default(), &want) {
            return Ok(Some(live.clone()));
        }
    }
    // Every live object was checked to be ours, so forcing only takes fields
    // back from other managers of our own object (e.g. a `kubectl edit`).
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    api.patch(&name, &params, &Patch::Apply(&want))
        .await
        .map_err(|source| ApplyError {
            kind: <K as k8s_openapi::Resource>::KIND,
            name: name.clone(),
            source,
        })?;
    written.push(format!("{}/{name}", <K as k8s_openapi::Resource>::KIND));
    Ok(live)
}

/// Read a dynamically typed object (the Cilium or Calico policy).
pub(crate) async fn read_dynamic(
    client: &Client,
    ns: &str,
    api: &ApiResource,
    name: &str,
) -> Result<Option<DynamicObject>, ApplyError> {
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, api);
    objects.get_opt(name).await.map_err(|source| ApplyError {
        kind: kind_name(api),
        name: name.to_string(),
        source,
    })
}

/// Apply `desired` unless `live` contains it; with nothing desired, delete
/// `live` (it was checked to be ours): the approval that asked for it is gone.
pub(crate) async fn write_dynamic(
    client: &Client,
    ns: &str,
    api: &ApiResource,
    name: &str,
    desired: Option<&DynamicObject>,
    live: Option<DynamicObject>,
    written: &mut Vec<String>,
) -> Result<(), ApplyError> {
    let objects: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, api);
    let err = |source| ApplyError {
        kind: kind_name(api),
        name: name.to_string(),
        source,
    };
    match (desired, live) {
        (Some(want), live) => {
            let want = serde_json::to_value(want).unwrap_or_default();
            let current = live.map(|l| serde_json::to_value(l).unwrap_or_default());
            if current.is_some_and(|l| contains(&l, &want)) {
                return Ok(());
            }
            let params = PatchParams::apply(FIELD_MANAGER).force();
            objects
                .patch(name, &params, &Patch::Apply(&want))
                .await
                .map_err(err)?;
            written.push(format!("{}/{name}", api.kind));
        }
        (None, Some(_)) => {
            objects
                .delete(name, &DeleteParams::default())
                .await
                .map_err(err)?;
            written.push(format!("-{}/{name}", api.kind));
        }
        (None, None) => {}
    }
    Ok(())
}

/// The `kind` label of an [`ApplyError`] for a dynamic kind (a static str).
fn kind_name(api: &ApiResource) -> &'static str {
    match api.group.as_str() {
        "cilium.io" => "CiliumNetworkPolicy",
        "gateway.networking.k8s.io" => "HTTPRoute",
        _ => "NetworkPolicy (projectcalico.org)",
    }
}

/// Whether `live` holds every field of `want`: objects key by key, lists
/// element by element (same length), scalars equal. A zero value in `want`
/// (null, false, 0, "", [] or {}) also matches an absent field, because the
/// API server omits those.
pub fn contains(live: &Value, want: &Value) -> bool {
    match (live, want) {
        (Value::Object(l), Value::Object(w)) => w.iter().all(|(k, wv)| match l.get(k) {
            Some(lv) => contains(lv, wv),
            None => is_zero(wv),
        }),
        (Value::Array(l), Value::Array(w)) => {
            l.len() == w.len() && l.iter().zip(w).all(|(lv, wv)| contains(lv, wv))
        }
        (l, w) => l == w || (l.is_null() && is_zero(w)),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_defaults_are_not_drift() {
        let want =
            json!({"spec": {"ports": [{"port": 80}], "egress": []}, "metadata": {"name": "a"}});
        let live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}], "clusterIP": "10.0.0.1"},
                          "metadata": {"name": "a", "uid": "u", "resourceVersion": "7"}});
        assert!(contains(&live, &want));
    }

    #[test]
    fn changed_or_missing_fields_are_drift() {
        let want = json!({"data": {"policy.yaml": "new"}});
        assert!(!contains(&json!({"data": {"policy.yaml": "old"}}), &want));
        assert!(!contains(&json!({}), &want));
        assert!(
            !contains(&json!({"a": [1, 2]}), &json!({"a": [1]})),
            "list length matters"
        );
    }
}
