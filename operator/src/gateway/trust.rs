//! The backends' side: which gateways an MCPServer trusts. Read by the
//! MCPServer reconcile before it compiles the server's policy, so the
//! public key of a gateway reaches exactly the backends that gateway
//! selects (`auth.gateways`, and the key beside the policy in its
//! ConfigMap), and leaves a server's policy when the gateway stops
//! selecting it or is deleted.
//!
//! ```text
//! MCPServer reconcile ─▶ list MCPGateways of the namespace ─▶ select those that have the server
//!   as a backend (resolve::selects) ─▶ read each one's <gw>-gateway-pub ConfigMap
//!   ─▶ BuildConfig::trusted_gateways ─▶ compile (auth.gateways) + the policy ConfigMap (the key)
//! ```
//! A gateway whose key does not exist yet is left out; its ConfigMap's
//! creation re-reconciles the server (the ConfigMap watch, through the
//! references index the reconcile records it in).

use kube::{Api, Client, ResourceExt};
use mcp_warden_crds::{MCPGateway, MCPServer};

use super::{names, resolve};
use crate::config::TrustedGatewayKey;

/// A read failed (transient).
#[derive(Debug, thiserror::Error)]
#[error("cannot read the gateways of namespace {namespace}: {source}")]
pub struct TrustError {
    /// The namespace.
    pub namespace: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The names of the gateways of `gateways` that select `server`, sorted.
pub fn gateways_selecting<'a>(
    gateways: impl IntoIterator<Item = &'a MCPGateway>,
    server: &MCPServer,
) -> Vec<String> {
    let mut found: Vec<String> = gateways
        .into_iter()
        .filter(|g| g.metadata.deletion_timestamp.is_none())
        .filter(|g| resolve::selects(g, server))
        .map(|g| g.name_any())
        .collect();
    found.sort();
    found
}

/// A trusted gateway from its public ConfigMap's data (`None` without a key).
pub fn from_config_map(
    namespace: &str,
    gateway: &str,
    data: &std::collections::BTreeMap<String, String>,
) -> Option<TrustedGatewayKey> {
    let pem = data.get(names::PUBLIC_KEY_KEY)?.trim();
    (!pem.is_empty()).then(|| TrustedGatewayKey {
        name: gateway.to_string(),
        issuer: names::issuer(namespace, gateway),
        public_key_pem: format!("{pem}\n"),
        caller_issuers: data
            .get(names::CALLER_ISSUERS_KEY)
            .map(|s| {
                s.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// The gateways `server` trusts, by name, and the names of the public
/// ConfigMaps they were read from (wanted or not yet there), for the watch.
pub async fn for_server(
    client: &Client,
    server: &MCPServer,
) -> Result<(Vec<TrustedGatewayKey>, Vec<String>), TrustError> {
    let ns = crate::names::namespace(server);
    let err = |source| TrustError {
        namespace: ns.clone(),
        source,
    };
    let gateways = Api::<MCPGateway>::namespaced(client.clone(), &ns)
        .list(&Default::default())
        .await
        .map_err(err)?
        .items;
    let mut trusted = Vec::new();
    let mut config_maps = Vec::new();
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(client.clone(), &ns);
    for name in gateways_selecting(&gateways, server) {
        let cm_name = names::public_config_map(&name);
        let gw = gateways.iter().find(|g| g.name_any() == name);
        let found = cms.get_opt(&cm_name).await.map_err(err)?;
        // Only the gateway's own ConfigMap: a same-named one someone else
        // made must not plant a key in a backend's policy.
        let owned = found.filter(|cm| {
            gw.and_then(|g| g.uid()).is_some_and(|uid| {
                cm.owner_references()
                    .iter()
                    .any(|o| o.uid == uid && o.controller == Some(true))
            })
        });
        if let Some(key) = owned
            .and_then(|cm| cm.data)
            .and_then(|data| from_config_map(&ns, &name, &data))
        {
            trusted.push(key);
        }
        config_maps.push(cm_name);
    }
    Ok((trusted, config_maps))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_gateways_that_select_the_server_and_are_not_going() {
        let server: MCPServer = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\n\
             metadata: {name: git, namespace: a, labels: {tier: vcs}}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}}\n",
        )
        .unwrap();
        let gw = |name: &str, backends: &str, extra: &str| -> MCPGateway {
            serde_yaml_ng::from_str(&format!(
                "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\n\
                 metadata: {{name: {name}, namespace: a{extra}}}\nspec: {{backends: {backends}}}\n"
            ))
            .unwrap()
        };
        let gateways = [
            gw("by-name", "[{name: git}]", ""),
            gw("by-label", "[{selector: {matchLabels: {tier: vcs}}}]", ""),
            gw("other", "[{name: fs}]", ""),
            gw(
                "going",
                "[{name: git}]",
                ", deletionTimestamp: '2026-01-01T00:00:00Z'",
            ),
        ];
        assert_eq!(
            gateways_selecting(&gateways, &server),
            ["by-label", "by-name"]
        );
    }

    #[test]
    fn a_config_map_without_a_key_trusts_nothing() {
        let data = std::collections::BTreeMap::from([
            (
                "public.pem".to_string(),
                "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----".to_string(),
            ),
            (
                "caller-issuers".to_string(),
                "static\nhttps://kubernetes.default.svc\n".to_string(),
            ),
        ]);
        let key = from_config_map("a", "front", &data).unwrap();
        assert_eq!(key.issuer, "mcpwarden.dev/a/mcpgateway/front");
        assert_eq!(
            key.caller_issuers,
            ["static", "https://kubernetes.default.svc"]
        );
        assert!(key.public_key_pem.ends_with("-----END PUBLIC KEY-----\n"));
        assert!(from_config_map("a", "front", &Default::default()).is_none());
    }
}
