//! Apply: server-side apply of every desired object with one field manager,
//! skipping objects that already match. "Match" means the live object
//! contains the desired one ([`contains`]), so a steady state makes no writes
//! and the defaults the API server adds do not count as drift.

use std::fmt::Debug;

use k8s_openapi::{
    api::{apps::v1::Deployment, core::v1::Secret},
    NamespaceResourceScope,
};
use kube::{
    api::{DeleteParams, Patch, PatchParams, PostParams},
    Api, Client, Resource, ResourceExt,
};
use mcp_warden_crds::MCPServer;
use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

use crate::{
    build::{
        secret::{desired_peer_key_secret, has_usable_peer_key},
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
    /// The peer-key Secret exists but holds no usable key (someone else made
    /// it); the operator never overwrites a Secret, so this is reported.
    pub peer_key_unusable: bool,
}

/// Apply every object in order; remove the scale-out objects of a server
/// that no longer has more than one replica.
pub async fn apply_all(
    client: &Client,
    server: &MCPServer,
    objects: &DesiredObjects,
) -> Result<Applied, ApplyError> {
    let ns = &names::namespace(server);
    let mut applied = Applied::default();
    apply_one(client, ns, &objects.service_account, &mut applied.written).await?;
    apply_one(client, ns, &objects.config_map, &mut applied.written).await?;
    if let Some(jwks) = &objects.jwks_config_map {
        apply_one(client, ns, jwks, &mut applied.written).await?;
    }
    applied.peer_key_unusable = !ensure_peer_key(client, server, &mut applied.written).await?;
    applied.deployment = apply_one(client, ns, &objects.deployment, &mut applied.written).await?;
    apply_one(client, ns, &objects.service, &mut applied.written).await?;
    match &objects.peers_service {
        Some(peers) => drop(apply_one(client, ns, peers, &mut applied.written).await?),
        None => {
            let name = names::peers_service(server);
            remove_owned::<k8s_openapi::api::core::v1::Service>(
                client,
                server,
                &name,
                &mut applied.written,
            )
            .await?
        }
    }
    apply_one(client, ns, &objects.network_policy, &mut applied.written).await?;
    match &objects.pod_disruption_budget {
        Some(pdb) => drop(apply_one(client, ns, pdb, &mut applied.written).await?),
        None => {
            let name = names::object_name(server);
            remove_owned::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(
                client,
                server,
                &name,
                &mut applied.written,
            )
            .await?
        }
    }
    Ok(applied)
}

/// Make the peer-key Secret once: 32 random bytes, created (never patched)
/// so a running key is never replaced. Returns whether a usable key exists.
async fn ensure_peer_key(
    client: &Client,
    server: &MCPServer,
    written: &mut Vec<String>,
) -> Result<bool, ApplyError> {
    let name = names::peer_key_secret(server);
    let api: Api<Secret> = Api::namespaced(client.clone(), &names::namespace(server));
    let err = |source| ApplyError {
        kind: "Secret",
        name: name.clone(),
        source,
    };
    if let Some(live) = api.get_opt(&name).await.map_err(err)? {
        return Ok(has_usable_peer_key(&live));
    }
    let secret = desired_peer_key_secret(server, random_key());
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        // Another writer won the race; its key is as good as ours.
        Err(kube::Error::Api(e)) if e.code == 409 => return Ok(true),
        Err(e) => return Err(err(e)),
    }
    written.push(format!("Secret/{name}"));
    Ok(true)
}

/// 32 bytes from the operating system's CSPRNG.
fn random_key() -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut key = vec![0u8; crate::build::secret::PEER_KEY_MIN_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .expect("the OS random number generator works");
    key
}

/// Delete `name` if it exists and this server controls it.
async fn remove_owned<K>(
    client: &Client,
    server: &MCPServer,
    name: &str,
    written: &mut Vec<String>,
) -> Result<(), ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), &names::namespace(server));
    let err = |source| ApplyError {
        kind: <K as k8s_openapi::Resource>::KIND,
        name: name.to_string(),
        source,
    };
    let Some(live) = api.get_opt(name).await.map_err(err)? else {
        return Ok(());
    };
    let ours = server.uid().is_some_and(|uid| {
        live.owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true))
    });
    if ours {
        api.delete(name, &DeleteParams::default())
            .await
            .map_err(err)?;
        written.push(format!("-{}/{name}", <K as k8s_openapi::Resource>::KIND));
    }
    Ok(())
}

/// Read the live object; apply the desired one unless the live one contains
/// it. Returns the live object as read.
async fn apply_one<K>(
    client: &Client,
    ns: &str,
    desired: &K,
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
    let name = desired.name_any();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let err = |source| ApplyError {
        kind: <K as k8s_openapi::Resource>::KIND,
        name: name.clone(),
        source,
    };
    let live = api.get_opt(&name).await.map_err(err)?;
    let want = crate::build::typed_value(desired);
    if let Some(live) = &live {
        if contains(&serde_json::to_value(live).unwrap_or_default(), &want) {
            return Ok(Some(live.clone()));
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(&want))
        .await
        .map_err(err)?;
    written.push(format!("{}/{name}", <K as k8s_openapi::Resource>::KIND));
    Ok(live)
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
