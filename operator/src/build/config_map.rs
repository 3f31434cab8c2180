//! The policy ConfigMap: the compiled FacadePolicy under `policy.yaml`. The
//! facade watches the mounted file and reloads it, so a profile change never
//! restarts the pod. The JWKS ConfigMap carries the cluster's service-account
//! issuer keys, which the facade verifies agents' tokens with. The peers
//! ConfigMap lists every replica's address, so each facade knows which
//! replica counts an identity's calls; the pods cannot look the replicas up
//! themselves (the NetworkPolicy closes DNS unless a capability opens it).

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
    let mut metadata = names::metadata(input.server, names::policy_config_map(input.server));
    if let Some((key, entry)) = super::egress_proxy::entry_annotation(input) {
        metadata.annotations = Some(BTreeMap::from([(key, entry)]));
    }
    ConfigMap {
        metadata,
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

/// The ConfigMap listing every replica's peer address, one per line. The
/// facade reads the mounted file every few seconds; an empty list (no pod
/// seen yet) leaves it counting as before. Kept for one replica too: the
/// last one left after a scale-in must learn that it counts alone.
pub fn desired_peers_config_map(input: BuildInput<'_>) -> ConfigMap {
    let mut text = String::from("# every replica's address; written by the operator\n");
    for peer in input.peers {
        text.push_str(peer);
        text.push('\n');
    }
    ConfigMap {
        metadata: names::metadata(input.server, names::peers_config_map(input.server)),
        data: Some(BTreeMap::from([(names::PEERS_KEY.to_string(), text)])),
        ..ConfigMap::default()
    }
}

/// The ConfigMap holding every JWT issuer's JWKS, under `<position in
/// auth.jwt>.json`: copied from the ConfigMap the profile names, or fetched
/// from the issuer when it names none (`None` when there is none yet: the
/// facade refuses those issuers' tokens until there is). The facade never
/// mounts the user's ConfigMap itself, so an edit of it (a key added, that
/// signs tokens for anyone) waits for approval like the rest of the profile.
pub fn desired_issuers_config_map(input: BuildInput<'_>) -> Option<ConfigMap> {
    let data: BTreeMap<String, String> = input
        .auth
        .jwt
        .iter()
        .enumerate()
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
