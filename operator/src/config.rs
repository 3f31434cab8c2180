//! Operator-wide settings the builders need (from flags/env in `run`, from
//! defaults in `render` and tests).

use std::collections::BTreeMap;

/// The field manager of every server-side apply (one for all objects).
pub const FIELD_MANAGER: &str = "mcp-warden-operator";

/// Settings that shape the objects the operator builds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildConfig {
    /// Image of the facade sidecar (and of the bridge it ships).
    pub sidecar_image: String,
    /// Labels of the namespace allowed to scrape `:9090` (NetworkPolicy).
    pub metrics_namespace_labels: BTreeMap<String, String>,
    /// `iss` of the cluster's service-account tokens, for the facade's auth.
    pub service_account_issuer: String,
    /// The cluster DNS domain, for `status.endpoint` and `--allowed-host`.
    pub cluster_domain: String,
    /// The operator's namespace: its pods may read the facades' `:9090/tools`.
    pub operator_namespace: String,
    /// Labels of the operator's pods (NetworkPolicy peer for `:9090`).
    pub operator_pod_labels: BTreeMap<String, String>,
    /// The policy engine that can allow egress by host name, if the
    /// cluster has one (found by API discovery in `run`).
    pub named_egress: NamedEgress,
}

/// Which kind of policy, besides the NetworkPolicy, can allow egress to
/// host names (`network.egress.host:…`). A NetworkPolicy matches only IP
/// blocks and pods, so without one of these named egress opens nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum NamedEgress {
    /// No engine: named egress is not applied (the safe choice).
    #[default]
    None,
    /// Cilium: a `CiliumNetworkPolicy` (`cilium.io/v2`) with `toFQDNs`.
    Cilium,
    /// Calico: a `NetworkPolicy` (`projectcalico.org/v3`) with `domains`
    /// (enforced by Calico Enterprise and Calico Cloud).
    Calico,
}

impl NamedEgress {
    /// The kind the operator writes, as an API resource, if any.
    pub fn api_resource(self) -> Option<kube::discovery::ApiResource> {
        let (group, version, kind, plural) = match self {
            NamedEgress::None => return None,
            NamedEgress::Cilium => (
                "cilium.io",
                "v2",
                "CiliumNetworkPolicy",
                "ciliumnetworkpolicies",
            ),
            NamedEgress::Calico => (
                "projectcalico.org",
                "v3",
                "NetworkPolicy",
                "networkpolicies",
            ),
        };
        Some(kube::discovery::ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: plural.into(),
        })
    }
}

impl Default for BuildConfig {
    fn default() -> Self {
        BuildConfig {
            sidecar_image: default_sidecar_image(),
            metrics_namespace_labels: BTreeMap::from([(
                "kubernetes.io/metadata.name".to_string(),
                "monitoring".to_string(),
            )]),
            service_account_issuer: "https://kubernetes.default.svc.cluster.local".into(),
            cluster_domain: "cluster.local".into(),
            operator_namespace: "mcp-warden-system".into(),
            operator_pod_labels: BTreeMap::from([(
                "app.kubernetes.io/name".to_string(),
                "mcp-warden-operator".to_string(),
            )]),
            named_egress: NamedEgress::None,
        }
    }
}

/// `ghcr.io/mcp-warden/sidecar:<this operator's version>`.
pub fn default_sidecar_image() -> String {
    format!("ghcr.io/mcp-warden/sidecar:{}", env!("CARGO_PKG_VERSION"))
}

/// Parse `k=v,k2=v2` into labels (for `--metrics-namespace-labels`).
pub fn parse_labels(text: &str) -> Result<BTreeMap<String, String>, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => {
                Ok((k.trim().to_string(), v.trim().to_string()))
            }
            _ => Err(format!("expected key=value, found {pair:?}")),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_label_pairs() {
        let labels = parse_labels("a=b, c=d").unwrap();
        assert_eq!(
            labels,
            BTreeMap::from([("a".into(), "b".into()), ("c".into(), "d".into())])
        );
        assert!(parse_labels("oops").is_err());
    }
}
