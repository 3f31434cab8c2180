//! The ConfigMap `<gw>-issuers`: the signing keys of the gateway profile's
//! JWT issuers that name no JWKS ConfigMap, as the operator read them from
//! the issuers (`crate::reconcile::oidc`, the MCPServer's path and cache).
//! The pod's `issuer-<i>` volumes (`crate::build::facade_auth`) read them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::{build::GatewayInput, names};

/// The keys of the profile's JWT issuers that name no JWKS ConfigMap,
/// under `<position in auth.jwt>.json`, where the pod's `issuer-<i>`
/// volumes read them (an issuer that names one is mounted from it as it
/// is: no approval binds a gateway's profile, so there is no copy to keep).
pub fn desired_config_map(input: GatewayInput<'_>) -> Option<ConfigMap> {
    let gw = input.gateway;
    let data: BTreeMap<String, String> = input
        .profile
        .iter()
        .flat_map(|p| p.auth.jwt.iter().enumerate())
        .filter(|(_, j)| j.jwks.is_none())
        .filter_map(|(i, j)| {
            Some((
                format!("{i}.json"),
                input.issuer_jwks.get(&j.issuer)?.clone(),
            ))
        })
        .collect();
    (!data.is_empty()).then(|| ConfigMap {
        metadata: names::metadata(gw, names::issuers_config_map(gw), "issuers"),
        data: Some(data),
        ..ConfigMap::default()
    })
}

#[cfg(test)]
mod tests {
    use mcp_warden_crds::{MCPGateway, ToolProfileSpec};
    use serde_json::json;

    use super::super::build::GatewayInput;
    use super::*;
    use crate::{build::typed_value, config::BuildConfig};

    #[test]
    fn issuers_without_a_jwks_config_map_get_the_keys_the_operator_read() {
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a, uid: u-gw}\n\
             spec: {backends: [], toolProfileRef: {name: p}}\n",
        )
        .unwrap();
        let profile: ToolProfileSpec = serde_yaml_ng::from_str(
            "auth: {jwt: [{issuer: 'https://a.example.com', audiences: [m], jwks: {configMap: {name: a-keys, key: k}}},\n\
                          {issuer: 'https://b.example.com', audiences: [m]}]}\n",
        )
        .unwrap();
        let read = BTreeMap::from([
            // Read for another purpose (an MCPServer's profile): never copied
            // over a ConfigMap the gateway's profile names.
            (
                "https://a.example.com".to_string(),
                r#"{"keys":["a"]}"#.to_string(),
            ),
            (
                "https://b.example.com".to_string(),
                r#"{"keys":["b"]}"#.to_string(),
            ),
        ]);
        let (no_cas, config) = (BTreeMap::new(), BuildConfig::default());
        let input = |issuer_jwks| GatewayInput {
            gateway: &gw,
            backends: &[],
            profile: Some(&profile),
            jwks: None,
            issuer_jwks,
            backend_cas: &no_cas,
            public_key: None,
            config: &config,
        };
        let build = |issuer_jwks| super::super::build::desired_objects(input(issuer_jwks));
        // Only such an issuer is one the gateway may vouch for at its
        // backends: keys in a ConfigMap are any namespace editor's to swap.
        assert_eq!(
            super::super::build::caller_issuers(input(&read)),
            // (with the cluster's service-account issuer, whose keys the
            // operator reads too)
            [
                "https://b.example.com",
                "https://kubernetes.default.svc.cluster.local"
            ]
        );
        let built = build(&read);
        let want_meta = names::front_metadata("front-issuers", "issuers");
        assert_eq!(
            typed_value(built.issuers.as_ref().expect("the keys read")),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": want_meta,
                   "data": {"1.json": r#"{"keys":["b"]}"#}})
        );
        assert!(built
            .to_values()
            .iter()
            .any(|v| v["metadata"]["name"] == "front-issuers"));
        let pod = built.deployment.spec.unwrap().template.spec.unwrap();
        let volume = |name: &str| {
            let v = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == name)
                .unwrap();
            serde_json::to_value(v.config_map.clone().unwrap()).unwrap()
        };
        assert_eq!(
            volume("issuer-0"),
            json!({"name": "a-keys", "items": [{"key": "k", "path": "jwks.json"}], "optional": true})
        );
        assert_eq!(
            volume("issuer-1"),
            json!({"name": "front-issuers", "items": [{"key": "1.json", "path": "jwks.json"}], "optional": true})
        );
        let policy = super::super::build::compile_gateway_policy(GatewayInput {
            gateway: &gw,
            backends: &[],
            profile: Some(&profile),
            jwks: None,
            issuer_jwks: &read,
            backend_cas: &BTreeMap::new(),
            public_key: None,
            config: &BuildConfig::default(),
        });
        assert_eq!(
            policy.auth.jwt[1].jwks_file,
            "/etc/mcp-warden/issuers/1/jwks.json"
        );
        // Nothing read yet: no ConfigMap (the optional mount waits).
        assert!(build(&BTreeMap::new()).issuers.is_none());
    }
}
