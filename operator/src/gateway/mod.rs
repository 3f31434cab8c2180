//! The MCPGateway reconcile: its own named pipeline, beside the MCPServer's.
//!
//! ```text
//! resolve (resolve.rs: the namespace's MCPServers, the gateway's ToolProfile; + the cluster's
//!   issuer JWKS, and the profile's JWT issuers' keys read as an MCPServer's are, reconcile::oidc)
//!   → select backends (resolve::select, pure) → the TLS backends' CAs (backend_ca.rs, reads) → validate (validate.rs, pure)
//!   ├─ invalid → status Ready=False <reason> + Event → wait for a change
//!   └─ ok → keys (apply::ensure_keys: the signing key, peer key and admin token, made once)
//!        → build (build.rs + pod.rs, pure) → apply (apply.rs, SSA, skips matching objects)
//!        → observe (observe.rs: each Ready pod's `GET /gateway`, with the admin token)
//!        → status (status.rs: each backend's Ready and tool count; the withheld names, from the
//!          backends' inventories and the pods' views; Ready/Degraded/Conflicts + Events)
//! ```
//! The other half lives in the MCPServer reconcile: [`trust::for_server`]
//! reads the gateways that select a server and puts their public keys into
//! its policy (`auth.gateways`), so only a gateway's backends trust it.
//! Watches are in [`controller`]: a server that starts (or stops) matching,
//! or changes its status, re-reconciles the gateways that select it.

pub mod apply;
pub mod backend_ca;
pub mod build;
pub mod conflicts;
pub mod controller;
pub mod issuers;
pub mod names;
pub mod observe;
pub mod pod;
pub mod resolve;
pub mod status;
pub mod trust;
pub mod validate;

use std::{sync::Arc, time::Instant};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{runtime::controller::Action, ResourceExt};
use mcp_warden_crds::MCPGateway;
use tracing::info;

use crate::reconcile::{backoff, Context, RESYNC, SECRET_RECHECK, SETTLE_RECHECK};

/// A gateway reconcile failed; every variant is transient and retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading the servers or the profile failed.
    #[error(transparent)]
    Resolve(#[from] resolve::ResolveError),
    /// Applying an object failed.
    #[error(transparent)]
    Apply(#[from] crate::reconcile::apply::ApplyError),
    /// Writing the status or an Event failed.
    #[error(transparent)]
    Status(#[from] status::StatusError),
}

impl Error {
    /// The `result` label of `mcpwarden_reconcile_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Resolve(_) => "resolve_error",
            Error::Apply(_) => "apply_error",
            Error::Status(_) => "status_error",
        }
    }
}

/// What one pass reached.
enum Outcome {
    /// Applied; `settling` while pods or backends are not ready yet;
    /// `secrets_missing` while a TLS backend's CA is not found.
    Applied {
        settling: bool,
        secrets_missing: bool,
    },
    /// Invalid or in someone else's way: wait for a change.
    Waiting,
}

/// Reconcile one MCPGateway, recording metrics.
#[tracing::instrument(skip_all, fields(
    namespace = %names::namespace(&gw),
    gateway = %gw.name_any(),
    result = tracing::field::Empty,
))]
pub async fn reconcile(gw: Arc<MCPGateway>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = pipeline(&gw, &ctx).await;
    let label = match &result {
        Ok(Outcome::Applied { .. }) => "applied",
        Ok(Outcome::Waiting) => "waiting",
        Err(e) => e.metric_label(),
    };
    tracing::Span::current().record("result", label);
    ctx.metrics.observe(label, started.elapsed());
    let key = format!("mcpgateway/{}/{}", names::namespace(&gw), gw.name_any());
    match result {
        Ok(outcome) => {
            ctx.failures.lock().expect("failures lock").remove(&key);
            Ok(match outcome {
                Outcome::Waiting => Action::await_change(),
                Outcome::Applied { settling: true, .. } => Action::requeue(SETTLE_RECHECK),
                Outcome::Applied {
                    secrets_missing: true,
                    ..
                } => Action::requeue(SECRET_RECHECK),
                Outcome::Applied { .. } => Action::requeue(RESYNC),
            })
        }
        Err(e) => Err(e),
    }
}

async fn pipeline(gw: &MCPGateway, ctx: &Context) -> Result<Outcome, Error> {
    let now = Time(Timestamp::now());
    // 1. resolve (reads)
    let resolved = resolve::resolve(&ctx.client, gw).await?;
    let issuer_keys = ctx.jwks.get(&ctx.client).await;
    let mut config = ctx.config.clone();
    if let Some(keys) = &issuer_keys {
        config.service_account_issuer = keys.issuer.clone();
    }
    config
        .cluster_ranges
        .merge(&ctx.cluster_ranges.get(&ctx.client).await);
    // The profile's JWT issuers without a JWKS ConfigMap: their keys read
    // from the issuers by the MCPServer's path and cache (same refresh).
    let issuers = match &resolved.tool_profile {
        Some(p) => ctx.issuer_keys.unnamed(&p.spec.auth).await,
        None => Default::default(),
    };
    let selection = resolve::select(gw, &resolved.servers);
    // The CA of each backend served with TLS (its TLS Secret's `ca.crt`).
    let cas = backend_ca::resolve(&ctx.client, &selection.backends).await?;
    let (found_cas, cas_not_found) = (backend_ca::found(&cas), backend_ca::not_found(&cas));
    let endpoint = names::endpoint(gw, &config);
    let profile = resolved.tool_profile.as_ref().map(|p| &p.spec);
    // 2. validate (pure)
    let checked = validate::check(gw, profile, &selection);
    let (backends, missing, at, now_ref) =
        (&selection.backends, &selection.missing, &endpoint, &now);
    let waiting = |invalid: validate::GatewayInvalid| async move {
        info!(reason = invalid.reason(), error = %invalid, "gateway cannot be built; waiting for a change");
        let desired = status::desired_status(
            gw,
            backends,
            missing,
            at,
            status::Outcome::Invalid(&invalid),
            None,
            now_ref,
        );
        status::publish(&ctx.client, &ctx.recorder, gw, desired, &[]).await?;
        Ok::<_, Error>(Outcome::Waiting)
    };
    if let Err(invalid) = checked {
        return waiting(invalid).await;
    }
    // 3. the keys (made once), then build (pure)
    let keys = apply::ensure_keys(&ctx.client, gw).await?;
    let input = build::GatewayInput {
        gateway: gw,
        backends: &selection.backends,
        profile,
        jwks: issuer_keys.as_ref().map(|k| k.jwks.as_str()),
        issuer_jwks: &issuers.keys,
        backend_cas: &found_cas,
        public_key: keys.public_key.as_deref(),
        config: &config,
    };
    if let Err(invalid) = build::check_policy(input) {
        return waiting(invalid).await;
    }
    let objects = build::desired_objects(input);
    // 4. apply
    let mut applied = apply::apply_all(&ctx.client, gw, &objects).await?;
    applied.not_owned.extend(keys.not_owned.iter().cloned());
    let mut written = keys.written.clone();
    written.extend(applied.written.iter().cloned());
    // 5. observe: what the running pods withhold. A paused gateway has no
    // pod and withholds nothing; otherwise no answer keeps what status had.
    let live = if gw.spec.replicas == 0 {
        Some(Vec::new())
    } else {
        observe::observe_view(
            ctx.admin.as_ref(),
            &resolved.pods,
            keys.admin_token.as_deref(),
        )
        .await
    };
    // 6. status
    let outcome = if applied.not_owned.is_empty() {
        status::Outcome::Applied {
            deployment: applied.deployment.as_ref(),
            route_unavailable: applied.route_unavailable,
            unread_issuers: &issuers.unread,
            cas_not_found: &cas_not_found,
        }
    } else {
        status::Outcome::NotOwned(&applied.not_owned)
    };
    let desired = status::desired_status(
        gw,
        &selection.backends,
        &selection.missing,
        &endpoint,
        outcome,
        live.as_deref(),
        &now,
    );
    // Look again soon while the pods come up, or while objects in the way
    // (not watched: they are not ours) may go; backends are watched.
    let settling = desired
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status != "True");
    status::publish(&ctx.client, &ctx.recorder, gw, desired, &written).await?;
    Ok(Outcome::Applied {
        settling,
        // A TLS Secret (or its CA) is not watched: look again in a minute.
        secrets_missing: !cas_not_found.is_empty(),
    })
}

/// After a transient error: back off per gateway.
pub fn error_policy(gw: Arc<MCPGateway>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = format!("mcpgateway/{}/{}", names::namespace(&gw), gw.name_any());
    let mut failures = ctx.failures.lock().expect("failures lock");
    let n = failures.entry(key).or_insert(0);
    *n = n.saturating_add(1);
    let delay = backoff(*n);
    tracing::warn!(error = %error, attempt = *n, retry_in_s = delay.as_secs(), "gateway reconcile failed");
    Action::requeue(delay)
}
