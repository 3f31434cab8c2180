//! Apply: the gateway's Secrets made once, then server-side apply of every
//! desired object with the operator's field manager, skipping objects that
//! already match; an Ingress or HTTPRoute of ours that `expose` no longer
//! asks for is deleted. As for an MCPServer, every object is read first and
//! nothing at all is written when one that exists is not controlled by
//! this gateway (its status names them).
//!
//! The signing key is made here (Ed25519, from the OS's CSPRNG through
//! ring), stored in `<gw>-gateway-key` with `create` only — never patched,
//! so a running key is never replaced — and never leaves that Secret but as
//! its public half. The peer key and the admin token (which the operator
//! presents on the pods' `/gateway`) are random bytes, made the same way.

use std::fmt::Debug;

use k8s_openapi::{
    api::{
        apps::v1::Deployment,
        core::v1::{ConfigMap, Secret, Service},
        networking::v1::{Ingress, NetworkPolicy},
    },
    NamespaceResourceScope,
};
use kube::{
    api::{DeleteParams, Patch, PatchParams, PostParams},
    Api, Client, Resource, ResourceExt,
};
use mcp_warden_crds::MCPGateway;
use serde::{de::DeserializeOwned, Serialize};

use super::{build, names};
use crate::{
    config::FIELD_MANAGER,
    reconcile::apply::{read_dynamic, write_dynamic, ApplyError},
};

/// Whether `gw` is `object`'s controller (by uid).
pub fn controlled_by<K: Resource>(object: &K, gw: &MCPGateway) -> bool {
    gw.uid().is_some_and(|uid| {
        object
            .owner_references()
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true))
    })
}

/// What apply did.
#[derive(Clone, Debug, Default)]
pub struct Applied {
    /// `Kind/name` of every object written (empty in a steady state).
    pub written: Vec<String>,
    /// The Deployment as it was read (its status says whether pods run).
    pub deployment: Option<Deployment>,
    /// `Kind/name` of objects in the way (not ours); nothing was written.
    pub not_owned: Vec<String>,
    /// `expose.httpRoute` asks for an HTTPRoute and the cluster does not
    /// serve the Gateway API (the rest is applied; the status says so).
    pub route_unavailable: bool,
}

/// The signing key's public half, once the key exists, and the admin token.
#[derive(Clone, Debug, Default)]
pub struct Keys {
    /// SPKI PEM.
    pub public_key: Option<String>,
    /// The token the operator reads the pods' `/gateway` with (`None`: the
    /// Secret holds no usable one). Never in status, an Event or a log.
    pub admin_token: Option<String>,
    /// `Kind/name` written.
    pub written: Vec<String>,
    /// A Secret with one of the keys' names that is not ours.
    pub not_owned: Vec<String>,
}

fn api_err<K: k8s_openapi::Resource>(name: &str) -> impl Fn(kube::Error) -> ApplyError + '_ {
    move |source| ApplyError {
        kind: K::KIND,
        name: name.to_string(),
        source,
    }
}

/// A fresh Ed25519 signing key as PKCS#8 PEM.
pub fn new_signing_key() -> String {
    rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)
        .expect("ring generates Ed25519 keys")
        .serialize_pem()
}

/// The public half (SPKI PEM) of a PKCS#8 PEM private key.
pub fn public_half(private_pem: &str) -> Option<String> {
    rcgen::KeyPair::from_pem(private_pem)
        .ok()
        .map(|k| k.public_key_pem())
}

/// Create `desired` unless a Secret of its name exists; returns the one in force.
async fn ensure_secret(
    client: &Client,
    gw: &MCPGateway,
    name: &str,
    desired: impl FnOnce() -> Secret,
    keys: &mut Keys,
) -> Result<Option<Secret>, ApplyError> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &names::namespace(gw));
    if let Some(live) = api.get_opt(name).await.map_err(api_err::<Secret>(name))? {
        if !controlled_by(&live, gw) {
            keys.not_owned.push(format!("Secret/{name}"));
            return Ok(None);
        }
        return Ok(Some(live));
    }
    let secret = desired();
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => {
            keys.written.push(format!("Secret/{name}"));
            Ok(Some(secret))
        }
        // Another replica of the operator won the race: its key is as good.
        Err(kube::Error::Api(e)) if e.code == 409 => {
            api.get_opt(name).await.map_err(api_err::<Secret>(name))
        }
        Err(source) => Err(api_err::<Secret>(name)(source)),
    }
}

/// Make the signing key, the peer key and the admin token once; return the
/// public half and the token.
pub async fn ensure_keys(client: &Client, gw: &MCPGateway) -> Result<Keys, ApplyError> {
    let mut keys = Keys::default();
    let key = ensure_secret(
        client,
        gw,
        &names::key_secret(gw),
        || build::desired_key_secret(gw, new_signing_key()),
        &mut keys,
    )
    .await?;
    keys.public_key = key
        .as_ref()
        .and_then(|s| s.data.as_ref()?.get(names::KEY_KEY).cloned())
        .and_then(|pem| String::from_utf8(pem.0).ok())
        .and_then(|pem| public_half(&pem));
    ensure_secret(
        client,
        gw,
        &names::peer_key_secret(gw),
        || build::desired_peer_key_secret(gw, random_bytes()),
        &mut keys,
    )
    .await?;
    let token = ensure_secret(
        client,
        gw,
        &names::admin_token_secret(gw),
        || build::desired_admin_token_secret(gw, hex::encode(random_bytes())),
        &mut keys,
    )
    .await?;
    keys.admin_token = token.as_ref().and_then(crate::build::secret::admin_token);
    Ok(keys)
}

fn random_bytes() -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut key = vec![0u8; crate::build::secret::PEER_KEY_MIN_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .expect("the OS random number generator works");
    key
}

async fn read<K>(client: &Client, ns: &str, desired: &K) -> Result<Option<K>, ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + DeserializeOwned,
{
    let name = desired.name_any();
    Api::<K>::namespaced(client.clone(), ns)
        .get_opt(&name)
        .await
        .map_err(api_err::<K>(&name))
}

async fn write<K>(
    client: &Client,
    ns: &str,
    desired: &K,
    live: Option<&K>,
    written: &mut Vec<String>,
) -> Result<(), ApplyError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + k8s_openapi::Resource
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let name = desired.name_any();
    let want = crate::build::typed_value(desired);
    if let Some(live) = live {
        let live = serde_json::to_value(live).unwrap_or_default();
        if crate::reconcile::apply::contains(&live, &want) {
            return Ok(());
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    Api::<K>::namespaced(client.clone(), ns)
        .patch(&name, &params, &Patch::Apply(&want))
        .await
        .map_err(api_err::<K>(&name))?;
    written.push(format!("{}/{name}", K::KIND));
    Ok(())
}

fn in_the_way<K: Resource + k8s_openapi::Resource>(
    live: &Option<K>,
    gw: &MCPGateway,
    not_owned: &mut Vec<String>,
) {
    if let Some(live) = live.as_ref().filter(|l| !controlled_by(*l, gw)) {
        not_owned.push(format!("{}/{}", K::KIND, live.name_any()));
    }
}

/// Read every object; unless one is in the way, apply them in order.
pub async fn apply_all(
    client: &Client,
    gw: &MCPGateway,
    objects: &build::GatewayObjects,
) -> Result<Applied, ApplyError> {
    let ns = names::namespace(gw);
    let policy = read(client, &ns, &objects.policy).await?;
    let jwks = match &objects.jwks {
        Some(d) => read(client, &ns, d).await?,
        None => None,
    };
    let issuers = match &objects.issuers {
        Some(d) => read(client, &ns, d).await?,
        None => None,
    };
    let backend_ca = match &objects.backend_ca {
        Some(d) => read(client, &ns, d).await?,
        None => None,
    };
    let public_key = match &objects.public_key {
        Some(d) => read(client, &ns, d).await?,
        None => None,
    };
    let deployment = read(client, &ns, &objects.deployment).await?;
    let service = read(client, &ns, &objects.service).await?;
    let network_policy = read(client, &ns, &objects.network_policy).await?;
    // The routes of `expose`, as an MCPServer's: read even when not asked
    // for, to remove ours when `expose` drops them.
    let route_name = names::object_name(gw);
    let ingress = Api::<Ingress>::namespaced(client.clone(), &ns)
        .get_opt(&route_name)
        .await
        .map_err(api_err::<Ingress>(&route_name))?;
    let route_api = crate::build::exposure::http_route_api();
    // A cluster without the Gateway API answers a bare 404 (no Status
    // body), which get_opt does not read as "absent": it is.
    let route = match read_dynamic(client, &ns, &route_api, &route_name).await {
        Err(ApplyError {
            source: kube::Error::Api(e),
            ..
        }) if e.code == 404 => None,
        read => read?,
    };
    let mut applied = Applied::default();
    // Someone else's route under the gateway's name blocks only a gateway
    // that wants one; unwanted, it is left alone.
    if objects.ingress.is_some() {
        in_the_way::<Ingress>(&ingress, gw, &mut applied.not_owned);
    }
    if objects.http_route.is_some() && route.as_ref().is_some_and(|r| !controlled_by(r, gw)) {
        applied.not_owned.push(format!("HTTPRoute/{route_name}"));
    }
    for cm in [&policy, &jwks, &issuers, &backend_ca, &public_key] {
        in_the_way::<ConfigMap>(cm, gw, &mut applied.not_owned);
    }
    in_the_way::<Deployment>(&deployment, gw, &mut applied.not_owned);
    in_the_way::<Service>(&service, gw, &mut applied.not_owned);
    in_the_way::<NetworkPolicy>(&network_policy, gw, &mut applied.not_owned);
    if !applied.not_owned.is_empty() {
        return Ok(applied);
    }
    let w = &mut applied.written;
    write(client, &ns, &objects.policy, policy.as_ref(), w).await?;
    if let Some(d) = &objects.jwks {
        write(client, &ns, d, jwks.as_ref(), w).await?;
    }
    if let Some(d) = &objects.issuers {
        write(client, &ns, d, issuers.as_ref(), w).await?;
    }
    if let Some(d) = &objects.backend_ca {
        write(client, &ns, d, backend_ca.as_ref(), w).await?;
    }
    if let Some(d) = &objects.public_key {
        write(client, &ns, d, public_key.as_ref(), w).await?;
    }
    write(client, &ns, &objects.deployment, deployment.as_ref(), w).await?;
    write(client, &ns, &objects.service, service.as_ref(), w).await?;
    write(
        client,
        &ns,
        &objects.network_policy,
        network_policy.as_ref(),
        w,
    )
    .await?;
    match &objects.ingress {
        Some(desired) => write(client, &ns, desired, ingress.as_ref(), w).await?,
        None => {
            if let Some(live) = ingress.filter(|l| controlled_by(l, gw)) {
                Api::<Ingress>::namespaced(client.clone(), &ns)
                    .delete(&live.name_any(), &DeleteParams::default())
                    .await
                    .map_err(api_err::<Ingress>(&route_name))?;
                w.push(format!("-Ingress/{route_name}"));
            }
        }
    }
    let route = route.filter(|r| objects.http_route.is_some() || controlled_by(r, gw));
    let desired_route = objects.http_route.as_ref();
    match write_dynamic(
        client,
        &ns,
        &route_api,
        &route_name,
        desired_route,
        route,
        w,
    )
    .await
    {
        Ok(()) => {}
        // No HTTPRoute kind here: not an error to retry, a fact to report.
        Err(ApplyError {
            source: kube::Error::Api(e),
            ..
        }) if e.code == 404 => applied.route_unavailable = true,
        Err(e) => return Err(e),
    }
    applied.deployment = deployment;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signing_key_is_ed25519_and_its_public_half_is_derived() {
        let pem = new_signing_key();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----"), "{pem}");
        let public = public_half(&pem).unwrap();
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
        assert_ne!(new_signing_key(), pem, "a fresh key each time");
        assert!(public_half("not a key").is_none());
    }
}
