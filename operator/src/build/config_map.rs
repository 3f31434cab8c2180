//! The policy ConfigMap: the compiled FacadePolicy under `policy.yaml`. The
//! facade watches the mounted file and reloads it, so a profile change never
//! restarts the pod. The JWKS ConfigMap carries the cluster's service-account
//! issuer keys, which the facade verifies agents' tokens with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::BuildInput;
use crate::names;

/// The ConfigMap holding the compiled policy.
/// Beside it, the public key of each gateway that selects the server
/// (`gateway-<name>.pem`), which the policy's `auth.gateways` names: the
/// key reaches only the backends of that gateway.
pub fn desired_config_map(input: BuildInput<'_>) -> ConfigMap {
    let mut data = BTreeMap::from([(names::POLICY_KEY.to_string(), input.policy_yaml.to_string())]);
    for g in &input.config.trusted_gateways {
        data.insert(
            crate::gateway::names::backend_public_key_key(&g.name),
            g.public_key_pem.clone(),
        );
    }
    ConfigMap {
        metadata: names::metadata(input.server, names::policy_config_map(input.server)),
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// The ConfigMap holding the issuer's JWKS, when the operator could read it
/// (`None` leaves whatever is live alone; the facade tolerates a missing file).
pub fn desired_jwks_config_map(input: BuildInput<'_>) -> Option<ConfigMap> {
    input.jwks.map(|jwks| ConfigMap {
        metadata: names::metadata(input.server, names::jwks_config_map(input.server)),
        data: Some(BTreeMap::from([(
            names::JWKS_KEY.to_string(),
            jwks.to_string(),
        )])),
        ..ConfigMap::default()
    })
}

/// The ConfigMap holding the JWKS the operator fetched for the profile's JWT
/// issuers that name no ConfigMap, under `<position in auth.jwt>.json`
/// (`None` when none was fetched: the facade refuses those issuers' tokens
/// until one is).
pub fn desired_issuers_config_map(input: BuildInput<'_>) -> Option<ConfigMap> {
    let data: BTreeMap<String, String> = input
        .auth
        .jwt
        .iter()
        .enumerate()
        .filter(|(_, j)| j.jwks.is_none())
        .filter_map(|(i, j)| {
            Some((
                format!("{i}.json"),
                input.issuer_jwks.get(&j.issuer)?.clone(),
            ))
        })
        .collect();
    (!data.is_empty()).then(|| ConfigMap {
        metadata: names::metadata(input.server, names::issuers_config_map(input.server)),
        data: Some(data),
        ..ConfigMap::default()
    })
}
