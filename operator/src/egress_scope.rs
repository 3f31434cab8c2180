//! Egress scope (pure): how wide an approved CIDR reaches, so that broad
//! egress is named as such before an admin approves it.
//!
//! ```text
//! SandboxProfile rule cidr × port ─┐
//! ClusterRanges (flags + ServiceCIDR objects + Node.spec.podCIDRs, resolve) ┴▶ scope
//!   broad ───────────────▶ network.egress.internet:<cidr>:<port>  (ipBlock.except: the cluster ranges)
//!   overlaps the cluster ▶ network.egress.cluster:<cidr>:<port>   (no except: that is what it asks for)
//!   else ────────────────▶ network.egress:<cidr>:<port>
//! ```
//!
//! *Broad* means the block covers a large share of public address space: an
//! IPv4 prefix shorter than [`BROAD_V4_PREFIX`] (`/8`), an IPv6 prefix
//! shorter than [`BROAD_V6_PREFIX`] (`/16`); `0.0.0.0/0` and `::/0` are the
//! usual cases. A broad block always contains the cluster's ranges, so its
//! rendered `ipBlock` excepts them (and link-local, where cloud metadata
//! services answer): reaching the cluster is asked for by naming a cluster
//! range, which becomes `network.egress.cluster:…` and renders its own rule
//! (NetworkPolicy rules add up, so that approval is not taken away by the
//! except of a broad rule).
//!
//! Ports that reach node or control-plane services are called out in the
//! approval message whatever the scope: [`SENSITIVE_PORTS`].

use ipnet::IpNet;

/// IPv4 blocks with a prefix shorter than this are broad.
pub const BROAD_V4_PREFIX: u8 = 8;
/// IPv6 blocks with a prefix shorter than this are broad.
pub const BROAD_V6_PREFIX: u8 = 16;

/// Ports of node and control-plane services, with what answers there.
pub const SENSITIVE_PORTS: &[(i32, &str)] = &[
    (22, "ssh"),
    (2379, "etcd"),
    (2380, "etcd peers"),
    (6443, "kube-apiserver"),
    (10250, "kubelet"),
    (10255, "kubelet read-only"),
    (10256, "kube-proxy health"),
    (10257, "kube-controller-manager"),
    (10259, "kube-scheduler"),
];

/// Link-local blocks, always excepted from broad egress (cloud metadata).
const LINK_LOCAL: &[&str] = &["169.254.0.0/16", "fe80::/10"];

/// The cluster's own address ranges (CIDR strings; unparsable ones ignored).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterRanges {
    /// Pod ranges (`--cluster-pod-cidrs`, `Node.spec.podCIDRs`).
    pub pods: Vec<String>,
    /// Service ranges (`--cluster-service-cidrs`, `ServiceCIDR` objects).
    pub services: Vec<String>,
    /// The node network, where kubelets and the API server listen
    /// (`--cluster-node-cidrs`).
    pub nodes: Vec<String>,
}

impl ClusterRanges {
    /// Every range, sorted and without duplicates, normalised (`10.1.2.3/8`
    /// → `10.0.0.0/8`).
    pub fn all(&self) -> Vec<String> {
        let mut all: Vec<IpNet> = self
            .pods
            .iter()
            .chain(&self.services)
            .chain(&self.nodes)
            .filter_map(|c| c.trim().parse::<IpNet>().ok())
            .map(|n| n.trunc())
            .collect();
        all.sort();
        all.dedup();
        all.iter().map(IpNet::to_string).collect()
    }

    /// Add what the cluster reports to what the flags said.
    pub fn merge(&mut self, other: &ClusterRanges) {
        for (mine, theirs) in [
            (&mut self.pods, &other.pods),
            (&mut self.services, &other.services),
            (&mut self.nodes, &other.nodes),
        ] {
            for c in theirs {
                if !mine.contains(c) {
                    mine.push(c.clone());
                }
            }
        }
    }
}

/// How far an egress block reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Neither broad nor overlapping the cluster's ranges.
    Plain,
    /// Overlaps a pod, service or node range.
    Cluster,
    /// Broad: covers a large share of public address space.
    Internet,
}

/// Whether a block is broad (see the module header).
pub fn is_broad(cidr: &str) -> bool {
    match cidr.trim().parse::<IpNet>() {
        Ok(IpNet::V4(n)) => n.prefix_len() < BROAD_V4_PREFIX,
        Ok(IpNet::V6(n)) => n.prefix_len() < BROAD_V6_PREFIX,
        Err(_) => false,
    }
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

/// The scope of one block (broad wins over cluster: a broad block always
/// overlaps the cluster, and its rule excepts the cluster's ranges).
pub fn scope(cidr: &str, cluster: &ClusterRanges) -> Scope {
    if is_broad(cidr) {
        return Scope::Internet;
    }
    let Ok(block) = cidr.trim().parse::<IpNet>() else {
        return Scope::Plain;
    };
    let hits = cluster
        .all()
        .iter()
        .filter_map(|c| c.parse::<IpNet>().ok())
        .any(|range| overlaps(&block, &range));
    if hits {
        Scope::Cluster
    } else {
        Scope::Plain
    }
}

/// What a broad block's `ipBlock.except` lists: the cluster's ranges and
/// link-local that lie inside it (the API server refuses an except outside
/// the block), sorted.
pub fn except_for(cidr: &str, cluster: &ClusterRanges) -> Vec<String> {
    let Ok(block) = cidr.trim().parse::<IpNet>() else {
        return Vec::new();
    };
    let mut except: Vec<IpNet> = cluster
        .all()
        .iter()
        .map(String::as_str)
        .chain(LINK_LOCAL.iter().copied())
        .filter_map(|c| c.parse::<IpNet>().ok())
        .filter(|range| block.contains(range) && *range != block.trunc())
        .collect();
    except.sort();
    except.dedup();
    except.iter().map(IpNet::to_string).collect()
}

/// What answers on `port` if it is a node or control-plane service port.
pub fn sensitive_port(port: i32) -> Option<&'static str> {
    SENSITIVE_PORTS
        .iter()
        .find(|(p, _)| *p == port)
        .map(|(_, what)| *what)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> ClusterRanges {
        ClusterRanges {
            pods: vec!["10.244.0.0/16".into(), "fd00:10:244::/56".into()],
            services: vec!["10.96.0.0/12".into()],
            nodes: vec!["192.168.49.0/24".into()],
        }
    }

    #[test]
    fn broad_is_a_short_prefix() {
        for broad in ["0.0.0.0/0", "::/0", "0.0.0.0/1", "128.0.0.0/7", "2000::/3"] {
            assert!(is_broad(broad), "{broad}");
            assert_eq!(scope(broad, &ClusterRanges::default()), Scope::Internet);
        }
        for narrow in ["10.0.0.0/8", "203.0.113.0/24", "2001:db8::/32", "nonsense"] {
            assert!(!is_broad(narrow), "{narrow}");
        }
    }

    #[test]
    fn cluster_is_any_overlap_with_a_cluster_range() {
        let c = cluster();
        assert_eq!(scope("10.96.0.1/32", &c), Scope::Cluster, "inside");
        assert_eq!(scope("10.0.0.0/8", &c), Scope::Cluster, "around");
        assert_eq!(scope("192.168.0.0/16", &c), Scope::Cluster, "the nodes");
        assert_eq!(scope("fd00:10:244::/64", &c), Scope::Cluster, "IPv6 pods");
        assert_eq!(scope("203.0.113.0/24", &c), Scope::Plain);
        assert_eq!(
            scope("10.0.0.0/8", &ClusterRanges::default()),
            Scope::Plain,
            "unknown ranges overlap nothing"
        );
    }

    #[test]
    fn a_broad_block_excepts_the_cluster_ranges_of_its_family() {
        let c = cluster();
        assert_eq!(
            except_for("0.0.0.0/0", &c),
            [
                "10.96.0.0/12",
                "10.244.0.0/16",
                "169.254.0.0/16",
                "192.168.49.0/24"
            ]
        );
        assert_eq!(except_for("::/0", &c), ["fd00:10:244::/56", "fe80::/10"]);
        assert_eq!(
            except_for("128.0.0.0/1", &c),
            ["169.254.0.0/16", "192.168.49.0/24"]
        );
    }

    #[test]
    fn ranges_merge_and_normalise() {
        let mut c = ClusterRanges {
            pods: vec!["10.244.1.7/24".into()],
            ..ClusterRanges::default()
        };
        c.merge(&ClusterRanges {
            pods: vec!["10.244.1.7/24".into(), "10.244.2.0/24".into()],
            services: vec!["bad".into()],
            nodes: vec![],
        });
        assert_eq!(c.pods.len(), 2);
        assert_eq!(c.all(), ["10.244.1.0/24", "10.244.2.0/24"]);
    }

    #[test]
    fn node_and_control_plane_ports_are_known() {
        assert_eq!(sensitive_port(6443), Some("kube-apiserver"));
        assert_eq!(sensitive_port(10250), Some("kubelet"));
        assert_eq!(sensitive_port(443), None);
    }
}
