//! Resolve (reads only): the address ranges the cluster reports about
//! itself, added to those the operator's flags name
//! (`crate::egress_scope::ClusterRanges`).
//!
//! ```text
//! ServiceCIDR objects (networking.k8s.io/v1)  ─┐
//! Node.spec.podCIDRs                           ─┴▶ ClusterRangesCache (60 s; a failure keeps the
//!                                                   last answer) ─▶ merged into BuildConfig per reconcile
//! ```
//! A cluster without `ServiceCIDR` (before 1.33) answers 404: that source
//! is empty, not an error. Reading Nodes needs `list nodes` (the chart's
//! ClusterRole grants it); without it the flags alone count.

use std::{
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_openapi::api::{core::v1::Node, networking::v1::ServiceCIDR};
use kube::{api::ListParams, Api, Client};
use tracing::warn;

use crate::egress_scope::ClusterRanges;

/// How long an answer is kept.
pub const RANGES_REFRESH: Duration = Duration::from_secs(60);

/// The cluster's ranges as last read.
#[derive(Default)]
pub struct ClusterRangesCache {
    state: Mutex<Option<(Instant, ClusterRanges)>>,
}

impl ClusterRangesCache {
    /// The ranges the cluster reports (read at most every [`RANGES_REFRESH`]).
    pub async fn get(&self, client: &Client) -> ClusterRanges {
        let cached = self.state.lock().expect("ranges lock").clone();
        if let Some((at, ranges)) = &cached {
            if at.elapsed() < RANGES_REFRESH {
                return ranges.clone();
            }
        }
        let ranges = match read(client).await {
            Ok(ranges) => ranges,
            Err(e) => {
                warn!(error = %e, "cannot read the cluster's ServiceCIDRs or Nodes' podCIDRs; keeping the last answer");
                cached.map(|(_, r)| r).unwrap_or_default()
            }
        };
        *self.state.lock().expect("ranges lock") = Some((Instant::now(), ranges.clone()));
        ranges
    }
}

fn absent(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

async fn read(client: &Client) -> Result<ClusterRanges, kube::Error> {
    let mut ranges = ClusterRanges::default();
    match Api::<ServiceCIDR>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => {
            for cidr in list.items.into_iter().filter_map(|s| s.spec?.cidrs) {
                ranges.services.extend(cidr);
            }
        }
        Err(e) if absent(&e) => {}
        Err(e) => return Err(e),
    }
    let nodes = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    for node in nodes.items {
        let spec = node.spec.unwrap_or_default();
        ranges.pods.extend(spec.pod_cidrs.unwrap_or_default());
        ranges.pods.extend(spec.pod_cidr);
    }
    ranges.pods.sort();
    ranges.pods.dedup();
    ranges.services.sort();
    ranges.services.dedup();
    Ok(ranges)
}
