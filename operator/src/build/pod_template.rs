//! `spec.podTemplate`: what the cluster needs of a pod (pull secrets,
//! placement, mesh or scraper labels and annotations), merged *under* the
//! operator's hardening. Only the keys of [`POD_TEMPLATE_SPEC_KEYS`] are
//! taken, and validation (`crate::validate`, and CEL in the CRD) has already
//! refused everything else with a message saying why; here the operator's
//! own labels and annotations are written last, so they win regardless.
//!
//! ```text
//! podTemplate.metadata.labels/annotations ─▶ pod template metadata (operator keys last)
//! podTemplate.spec.{affinity, imagePullSecrets, nodeSelector, priorityClassName,
//!                   schedulerName, tolerations, topologySpreadConstraints} ─▶ PodSpec
//! everything else (securityContext, host namespaces, containers, volumes…) ─▶ refused
//! ```

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use mcp_warden_crds::mcpserver::{PodTemplate, POD_TEMPLATE_SPEC_KEYS};

/// The allowed `podTemplate.spec` keys as a PodSpec (everything else
/// default), or why they do not read as one.
pub fn overrides(template: &PodTemplate) -> Result<PodSpec, String> {
    let mut fields = serde_json::Map::new();
    if let Some(spec) = &template.spec {
        for (key, value) in spec {
            if POD_TEMPLATE_SPEC_KEYS.contains(&key.as_str()) {
                fields.insert(key.clone(), value.clone());
            }
        }
    }
    // A PodSpec needs a container list to deserialize; it is discarded.
    fields.insert("containers".into(), serde_json::Value::Array(Vec::new()));
    serde_json::from_value(serde_json::Value::Object(fields)).map_err(|e| e.to_string())
}

/// Put the template's fields into the operator's pod spec. Only fields the
/// operator leaves unset are taken, so the hardening can never be undone.
pub fn merge_spec(pod: &mut PodSpec, template: Option<&PodTemplate>) {
    let Some(extra) = template.and_then(|t| overrides(t).ok()) else {
        return;
    };
    pod.affinity = pod.affinity.take().or(extra.affinity);
    pod.image_pull_secrets = pod.image_pull_secrets.take().or(extra.image_pull_secrets);
    pod.node_selector = pod.node_selector.take().or(extra.node_selector);
    pod.priority_class_name = pod.priority_class_name.take().or(extra.priority_class_name);
    pod.scheduler_name = pod.scheduler_name.take().or(extra.scheduler_name);
    pod.tolerations = pod.tolerations.take().or(extra.tolerations);
    pod.topology_spread_constraints = pod
        .topology_spread_constraints
        .take()
        .or(extra.topology_spread_constraints);
}

/// The template's labels (or annotations) with the operator's written over
/// them.
pub fn merge_map(
    template: Option<&BTreeMap<String, String>>,
    operator: BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut merged = template.cloned().unwrap_or_default();
    merged.extend(operator);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(spec: serde_json::Value) -> PodTemplate {
        PodTemplate {
            metadata: None,
            spec: spec.as_object().cloned(),
        }
    }

    #[test]
    fn takes_the_allowed_keys_and_ignores_the_rest() {
        let t = template(serde_json::json!({
            "nodeSelector": {"pool": "mcp"},
            "tolerations": [{"key": "mcp", "operator": "Exists", "effect": "NoSchedule"}],
            "imagePullSecrets": [{"name": "regcred"}],
            "hostNetwork": true,
            "securityContext": {"runAsUser": 0}
        }));
        let mut pod = PodSpec {
            host_network: None,
            ..PodSpec::default()
        };
        merge_spec(&mut pod, Some(&t));
        assert_eq!(pod.node_selector.unwrap()["pool"], "mcp");
        assert_eq!(pod.tolerations.unwrap()[0].key.as_deref(), Some("mcp"));
        assert_eq!(pod.image_pull_secrets.unwrap()[0].name, "regcred");
        assert_eq!(pod.host_network, None, "never taken");
        assert_eq!(pod.security_context, None, "never taken");
    }

    #[test]
    fn the_operators_values_win() {
        let t = template(serde_json::json!({"priorityClassName": "low"}));
        let mut pod = PodSpec {
            priority_class_name: Some("operator".into()),
            ..PodSpec::default()
        };
        merge_spec(&mut pod, Some(&t));
        assert_eq!(pod.priority_class_name.as_deref(), Some("operator"));
        let labels = merge_map(
            Some(&BTreeMap::from([
                ("team".to_string(), "a".to_string()),
                ("mcpwarden.dev/server".to_string(), "spoof".to_string()),
            ])),
            BTreeMap::from([("mcpwarden.dev/server".to_string(), "git".to_string())]),
        );
        assert_eq!(labels["mcpwarden.dev/server"], "git");
        assert_eq!(labels["team"], "a");
    }

    #[test]
    fn a_wrong_shape_is_an_error() {
        let t = template(serde_json::json!({"tolerations": "all"}));
        assert!(overrides(&t).is_err());
    }
}
