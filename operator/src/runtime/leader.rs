//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! operator replicas exactly one reconciles.
//!
//! Each replica loops: read the Lease, [`decide`] (pure), and write it back
//! with the `resourceVersion` it read — the API server refuses a write based
//! on a stale read (409), so two replicas cannot both win. The leader renews
//! every `renew_every`; if it cannot renew within `lease_duration` it stops
//! (the process exits and restarts as a candidate).

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta},
    jiff::Timestamp,
};
use kube::{api::PostParams, Api, Client};
use tracing::{info, warn};

/// Lease settings.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// Namespace of the Lease (the operator's own).
    pub namespace: String,
    /// Name of the Lease.
    pub name: String,
    /// This replica's identity (its pod name).
    pub identity: String,
    /// How long a lease is valid without renewal.
    pub lease_duration: Duration,
    /// How often the leader renews (and candidates retry).
    pub renew_every: Duration,
}

/// What to do with the Lease as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it, or the holder's lease expired: take it.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a valid lease: wait.
    Wait,
}

/// Decide from the Lease spec as read.
pub fn decide(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == me => Decision::Renew,
        None | Some("") => Decision::Acquire,
        Some(_) => {
            let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
            let renewed = spec
                .renew_time
                .as_ref()
                .or(spec.acquire_time.as_ref())
                .map(|t| t.0);
            match renewed {
                Some(t) if t + Duration::from_secs(duration.max(0) as u64) > now => Decision::Wait,
                _ => Decision::Acquire,
            }
        }
    }
}

/// One attempt: returns whether we hold the lease afterwards.
pub async fn try_acquire(api: &Api<Lease>, cfg: &LeaderConfig) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let current = api.get_opt(&cfg.name).await?;
    let decision = decide(
        current.as_ref().and_then(|l| l.spec.as_ref()),
        &cfg.identity,
        now,
    );
    if decision == Decision::Wait {
        return Ok(false);
    }
    let old = current
        .as_ref()
        .and_then(|l| l.spec.clone())
        .unwrap_or_default();
    let spec = LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(cfg.lease_duration.as_secs() as i32),
        acquire_time: if decision == Decision::Renew {
            old.acquire_time
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(
            old.lease_transitions.unwrap_or(0) + i32::from(decision == Decision::Acquire),
        ),
        ..LeaseSpec::default()
    };
    let result = match current {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec),
            };
            api.create(&PostParams::default(), &lease).await.map(|_| ())
        }
        Some(mut lease) => {
            lease.spec = Some(spec);
            // Carries the resourceVersion we read: a concurrent writer makes this fail with 409.
            api.replace(&cfg.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Block until this replica holds the lease.
pub async fn acquire(api: &Api<Lease>, cfg: &LeaderConfig) {
    loop {
        match try_acquire(api, cfg).await {
            Ok(true) => {
                info!(lease = %cfg.name, identity = %cfg.identity, "became leader");
                return;
            }
            Ok(false) => {}
            Err(e) => warn!(error = %e, "leader election: cannot read or write the lease"),
        }
        tokio::time::sleep(cfg.renew_every).await;
    }
}

/// Renew until a renewal has failed for a whole lease duration; then return
/// (leadership is lost).
pub async fn keep(api: Api<Lease>, cfg: LeaderConfig) {
    let mut last_ok = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(cfg.renew_every).await;
        match try_acquire(&api, &cfg).await {
            Ok(true) => last_ok = tokio::time::Instant::now(),
            Ok(false) => {
                warn!("leader election: another replica took the lease");
                return;
            }
            Err(e) => warn!(error = %e, "leader election: renewal failed"),
        }
        if last_ok.elapsed() >= cfg.lease_duration {
            warn!("leader election: could not renew within the lease duration");
            return;
        }
    }
}

/// Give the lease up on shutdown so a standby takes over at once.
pub async fn release(api: &Api<Lease>, cfg: &LeaderConfig) {
    if let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await {
        if let Some(spec) = lease
            .spec
            .as_mut()
            .filter(|s| s.holder_identity.as_deref() == Some(&cfg.identity))
        {
            spec.holder_identity = None;
            let _ = api.replace(&cfg.name, &PostParams::default(), &lease).await;
        }
    }
}

/// The Lease API for a client.
pub fn lease_api(client: Client, cfg: &LeaderConfig) -> Api<Lease> {
    Api::namespaced(client, &cfg.namespace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, renewed_secs_ago: i64) -> LeaseSpec {
        let now = Timestamp::from_second(1_000_000).unwrap();
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(
                now - Duration::from_secs(renewed_secs_ago as u64),
            )),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decides_like_a_lease() {
        let now = Timestamp::from_second(1_000_000).unwrap();
        assert_eq!(decide(None, "me", now), Decision::Acquire);
        assert_eq!(decide(Some(&lease(None, 1)), "me", now), Decision::Acquire);
        assert_eq!(
            decide(Some(&lease(Some("me"), 1)), "me", now),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&lease(Some("other"), 5)), "me", now),
            Decision::Wait
        );
        assert_eq!(
            decide(Some(&lease(Some("other"), 16)), "me", now),
            Decision::Acquire,
            "expired"
        );
    }
}
