//! Operator-wide settings the builders need (from flags/env in `run`, from
//! defaults in `render` and tests).

use std::collections::BTreeMap;

use crate::egress_scope::ClusterRanges;

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
    /// Replicas of each egress proxy Deployment.
    pub egress_proxy_replicas: i32,
    /// Whose egress proxy a server uses: its namespace's shared one, or its own.
    pub egress_proxy_scope: EgressProxyScope,
    /// Where the facades send spans and audit records (the platform's
    /// choice, from the chart; not a server's capability).
    pub facade_telemetry: FacadeTelemetry,
    /// The cluster's pod, service and node ranges: from flags, plus what
    /// the cluster reports (`ServiceCIDR` objects, `Node.spec.podCIDRs`),
    /// merged in at each reconcile. They name egress into the cluster
    /// `network.egress.cluster` and are excepted from broad egress.
    pub cluster_ranges: ClusterRanges,
    /// The MCPGateways that select the server being built, read at each
    /// reconcile: its policy trusts their assertions (`auth.gateways`).
    /// Empty outside a server's reconcile.
    pub trusted_gateways: Vec<TrustedGatewayKey>,
}

/// A gateway a backend trusts: what its `auth.gateways` entry needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedGatewayKey {
    /// The MCPGateway's name.
    pub name: String,
    /// Its `iss`.
    pub issuer: String,
    /// Its public key (SPKI PEM).
    pub public_key_pem: String,
    /// The issuers of the callers it may vouch for.
    pub caller_issuers: Vec<String>,
}

/// The facades' OpenTelemetry and audit destinations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FacadeTelemetry {
    /// OTLP endpoint (`http://host:port`); tracing is off without one.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` or `grpc`.
    pub otlp_protocol: Option<String>,
    /// The ratio of new traces sampled (`parentbased_traceidratio`: a
    /// caller's sampled trace is always continued), e.g. `0.01`.
    pub trace_sampling: String,
    /// The audit store the facades also send records to (`--audit-http`).
    pub audit_http: Option<String>,
    /// (CIDR, port) the facades' NetworkPolicy lets the pod reach: the
    /// collector and the audit store.
    pub egress: Vec<(String, i32)>,
}

impl FacadeTelemetry {
    /// Whether an endpoint names a host by DNS name (the pod then needs DNS).
    pub fn needs_dns(&self) -> bool {
        [&self.otlp_endpoint, &self.audit_http]
            .into_iter()
            .flatten()
            .any(|url| {
                let host = url
                    .split("://")
                    .nth(1)
                    .unwrap_or(url)
                    .split(['/', '?'])
                    .next()
                    .unwrap_or("");
                let host = match host.rsplit_once(':') {
                    Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
                    _ => host,
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                !host.is_empty() && host.parse::<std::net::IpAddr>().is_err()
            })
    }
}

/// Parse `cidr,cidr` (for `--cluster-pod-cidrs` and its siblings).
pub fn parse_cidrs(text: &str) -> Result<Vec<String>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|cidr| {
            cidr.parse::<ipnet::IpNet>()
                .map(|_| cidr.to_string())
                .map_err(|_| format!("expected a CIDR (a.b.c.d/n or x::/n), found {cidr:?}"))
        })
        .collect()
}

/// Parse `cidr:port,cidr:port` (for `--facade-telemetry-egress`).
pub fn parse_egress(text: &str) -> Result<Vec<(String, i32)>, String> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|pair| {
            let (cidr, port) = pair
                .trim()
                .rsplit_once(':')
                .ok_or_else(|| format!("expected CIDR:PORT, found {pair:?}"))?;
            let port: i32 = port
                .parse()
                .ok()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| format!("bad port in {pair:?}"))?;
            let (ip, bits) = cidr
                .split_once('/')
                .ok_or_else(|| format!("expected a CIDR (a.b.c.d/n) in {pair:?}"))?;
            ip.parse::<std::net::IpAddr>()
                .map_err(|_| format!("bad address in {pair:?}"))?;
            bits.parse::<u8>()
                .map_err(|_| format!("bad prefix length in {pair:?}"))?;
            Ok((cidr.to_string(), port))
        })
        .collect()
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
    /// The operator's egress proxy (`mcp-warden-sidecar egress`), one per
    /// namespace: the server reaches only the proxy, which allows exactly
    /// its approved `host:port` pairs (`crate::build::egress_proxy`).
    Proxy,
}

/// Whose egress proxy a server's host egress goes through (the proxy
/// engine only). Either way the server reaches only its proxy and the
/// proxy allows only that server's approved pairs; they differ in what is
/// shared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EgressProxyScope {
    /// One proxy per namespace, serving every server there with host egress
    /// (fewer pods; one process holds every server's credential hash).
    #[default]
    Namespace,
    /// One proxy per server, holding only that server's credential hash: no
    /// process shared between servers, a fault or compromise of a proxy
    /// reaches one server's egress only.
    Server,
}

impl NamedEgress {
    /// The name status and docs use (`status.egressEngine`).
    pub fn as_str(self) -> &'static str {
        match self {
            NamedEgress::None => "none",
            NamedEgress::Cilium => "cilium",
            NamedEgress::Calico => "calico",
            NamedEgress::Proxy => "proxy",
        }
    }

    /// The kind the operator writes, as an API resource, if any.
    pub fn api_resource(self) -> Option<kube::discovery::ApiResource> {
        let (group, version, kind, plural) = match self {
            NamedEgress::None | NamedEgress::Proxy => return None,
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
            egress_proxy_replicas: 1,
            egress_proxy_scope: EgressProxyScope::Namespace,
            facade_telemetry: FacadeTelemetry::default(),
            cluster_ranges: ClusterRanges::default(),
            trusted_gateways: Vec::new(),
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

    #[test]
    fn parses_egress_and_knows_when_dns_is_needed() {
        assert_eq!(
            parse_egress("10.0.0.0/8:4317, 192.168.1.5/32:8080").unwrap(),
            vec![("10.0.0.0/8".into(), 4317), ("192.168.1.5/32".into(), 8080)]
        );
        for bad in [
            "10.0.0.0/8",
            "collector:4317",
            "10.0.0.0/8:0",
            "10.0.0.0/x:1",
        ] {
            assert!(parse_egress(bad).is_err(), "{bad}");
        }
        let t = |otlp: Option<&str>, audit: Option<&str>| FacadeTelemetry {
            otlp_endpoint: otlp.map(str::to_string),
            audit_http: audit.map(str::to_string),
            ..FacadeTelemetry::default()
        };
        assert!(!t(None, None).needs_dns());
        assert!(!t(
            Some("http://10.1.2.3:4318"),
            Some("http://[fd00::1]:8080/audit")
        )
        .needs_dns());
        assert!(t(
            Some("http://10.1.2.3:4318"),
            Some("http://store.audit.svc:8080/x")
        )
        .needs_dns());
        assert!(t(Some("http://otel-collector.observability:4317"), None).needs_dns());
    }
}
