//! The policy ConfigMap: the compiled FacadePolicy under `policy.yaml`. The
//! facade watches the mounted file and reloads it, so a profile change never
//! restarts the pod.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::BuildInput;
use crate::names;

/// The ConfigMap holding the compiled policy.
pub fn desired_config_map(input: BuildInput<'_>) -> ConfigMap {
    ConfigMap {
        metadata: names::metadata(input.server, names::policy_config_map(input.server)),
        data: Some(BTreeMap::from([(
            names::POLICY_KEY.to_string(),
            input.policy_yaml.to_string(),
        )])),
        ..ConfigMap::default()
    }
}
