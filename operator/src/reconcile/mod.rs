//! The controller's reconcile: the named pipeline for one MCPServer.
//!
//! ```text
//! resolve (resolve.rs, reads; + issuer JWKS, observe.rs; the cluster's ranges,
//!   cluster_ranges.rs; the gateways that select it, crate::gateway::trust) → plan (crate::plan, pure:
//!   capabilities, validate, compile, build)
//!   ├─ invalid / missing profile → status PolicyCompiled=False + Event → wait for a change
//!   └─ ok → hold? (a changed workload waits for approval: keep the live Deployment and
//!        policy, unless the change only tightens the policy, or there is nothing live to keep)
//!        → apply (apply.rs, SSA, skips matching objects; egress_proxy.rs, the proxy engine's
//!        shared objects) → observe the facades' /tools
//!        (observe.rs) → status (status.rs) → requeue later
//! ```
//! Transient API errors back off per object ([`error_policy`]); invalid specs
//! do not retry. Watches and wiring live in [`controller`]; the profiles'
//! own status (valid? used by whom?) is the small pipeline of [`profiles`].

pub mod apply;
pub mod cluster_ranges;
pub mod controller;
pub mod egress_proxy;
pub mod hold;
pub mod kinds;
pub mod nudge;
pub mod observe;
pub mod oidc;
pub mod profiles;
pub mod references;
pub mod resolve;
pub mod status;
pub mod status_write;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    runtime::{controller::Action, events::Recorder},
    Api, Client, ResourceExt,
};
use mcp_warden_crds::MCPServer;
use tracing::{info, warn};

use crate::{config::BuildConfig, names, plan, runtime::metrics::Metrics};

/// Everything `reconcile` needs, shared across reconciles.
pub struct Context {
    /// The API client.
    pub client: Client,
    /// Publishes Events.
    pub recorder: Recorder,
    /// Operator metrics.
    pub metrics: Metrics,
    /// Build settings.
    pub config: BuildConfig,
    /// Consecutive failures per `namespace/name`, for the backoff.
    pub failures: Mutex<BTreeMap<String, u32>>,
    /// Reads the facades' `/tools` and the gateways' `/gateway` (mocked in tests).
    pub admin: Arc<dyn observe::AdminSource>,
    /// The cluster's service-account issuer keys.
    pub jwks: observe::JwksCache,
    /// The cluster's policy engine for egress by host name.
    pub engine: observe::EngineCache,
    /// The signing keys of JWT issuers read from the issuers themselves.
    pub issuer_keys: oidc::IssuerKeys,
    /// The pod and Service ranges the cluster reports.
    pub cluster_ranges: cluster_ranges::ClusterRangesCache,
    /// Which servers reference which ConfigMaps and Secrets (the watches'
    /// map back to servers).
    pub references: Arc<references::Index>,
}

impl Context {
    /// A context with the production facade reader and an empty JWKS cache.
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: Metrics,
        config: BuildConfig,
    ) -> Context {
        Context {
            client,
            recorder,
            metrics,
            config,
            failures: Default::default(),
            admin: Arc::new(observe::HttpAdmin),
            jwks: Default::default(),
            engine: observe::EngineCache::new(true),
            issuer_keys: Default::default(),
            cluster_ranges: Default::default(),
            references: Default::default(),
        }
    }
}

/// A reconcile failed; every variant is transient and retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a referenced object failed.
    #[error(transparent)]
    Resolve(#[from] resolve::ResolveError),
    /// Applying an object failed.
    #[error(transparent)]
    Apply(#[from] apply::ApplyError),
    /// Writing the status or an Event failed.
    #[error(transparent)]
    Status(#[from] status::StatusError),
    /// Reading the gateways that select the server failed.
    #[error(transparent)]
    Gateways(#[from] crate::gateway::trust::TrustError),
}

impl Error {
    /// The `result` label of `mcpwarden_reconcile_total`.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Resolve(_) | Error::Gateways(_) => "resolve_error",
            Error::Apply(_) => "apply_error",
            Error::Status(_) => "status_error",
        }
    }
}

/// How long a healthy server waits before it is looked at again (drift check).
pub const RESYNC: Duration = Duration::from_secs(600);
/// How long a server with a missing Secret, or whose objects' names are
/// taken by someone else's objects, waits (neither is watched; the content
/// of referenced Secrets and ConfigMaps is, see [`references`]).
pub const SECRET_RECHECK: Duration = Duration::from_secs(60);
/// How soon to look again while a facade has not loaded the policy in
/// force (the kubelet refreshes a mounted ConfigMap within about a minute).
pub const SETTLE_RECHECK: Duration = Duration::from_secs(10);

/// Reconcile one MCPServer, recording metrics. Logs inside carry the
/// server's namespace and name (the span's fields).
/// With tracing on, the span is exported (`reconcile`, attributes
/// `namespace`, `name`, `generation`, `result`; the steps as events).
#[tracing::instrument(skip_all, fields(
    namespace = %names::namespace(&server),
    name = %server.name_any(),
    generation = server.metadata.generation.unwrap_or_default(),
    result = tracing::field::Empty,
    otel.status_code = tracing::field::Empty,
))]
pub async fn reconcile(server: Arc<MCPServer>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = pipeline(&server, &ctx).await;
    let label = match &result {
        Ok(Outcome::Applied { .. }) => "applied",
        Ok(Outcome::Waiting) => "waiting",
        Err(e) => e.metric_label(),
    };
    let span = tracing::Span::current();
    span.record("result", label);
    if let Err(e) = &result {
        span.record("otel.status_code", "ERROR");
        tracing::debug!(error = %e, "reconcile failed");
    }
    ctx.metrics.observe(label, started.elapsed());
    let key = format!("{}/{}", names::namespace(&server), server.name_any());
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
                Outcome::Applied {
                    secrets_missing: false,
                    ..
                } => Action::requeue(RESYNC),
            })
        }
        Err(e) => Err(e),
    }
}

enum Outcome {
    Applied {
        secrets_missing: bool,
        /// A facade still runs an older policy: look again soon, so
        /// `status.tools` shows the policy in force.
        settling: bool,
    },
    Waiting,
}

async fn pipeline(server: &MCPServer, ctx: &Context) -> Result<Outcome, Error> {
    let ns = names::namespace(server);
    let api: Api<MCPServer> = Api::namespaced(ctx.client.clone(), &ns);
    let now = Time(Timestamp::now());

    // 1. resolve (reads)
    tracing::debug!(step = "resolve", "reconcile step");
    let resolved = resolve::resolve(&ctx.client, server).await?;
    // The gateways that select this server: its policy trusts their keys.
    let (trusted_gateways, gateway_config_maps) =
        crate::gateway::trust::for_server(&ctx.client, server).await?;
    let mut referenced = resolved.referenced.clone();
    referenced.config_maps.extend(
        gateway_config_maps
            .into_iter()
            .map(|cm| (cm, crate::gateway::names::PUBLIC_KEY_KEY.to_string())),
    );
    ctx.references.record(&ns, &server.name_any(), &referenced);
    let issuer_keys = ctx.jwks.get(&ctx.client).await;
    let mut config = ctx.config.clone();
    config.trusted_gateways = trusted_gateways;
    if let Some(keys) = &issuer_keys {
        config.service_account_issuer = keys.issuer.clone();
    }
    config.named_egress = ctx.engine.get(&ctx.client, config.named_egress).await;
    config
        .cluster_ranges
        .merge(&ctx.cluster_ranges.get(&ctx.client).await);
    // Every JWT issuer's keys, for `<name>-issuers`: copied from the
    // profile's JWKS ConfigMap (as approved: the copy is not rewritten while
    // a change waits), or fetched from the issuer when it names none.
    let auth = resolved
        .tool_profile
        .as_ref()
        .map(|p| p.spec.auth.clone())
        .unwrap_or_default();
    let fetched = ctx.issuer_keys.unnamed(&auth).await;
    let mut issuer_jwks = fetched.keys;
    for issuer in &auth.jwt {
        let Some(source) = &issuer.jwks else { continue };
        let key = crate::workload::config_map_key(&source.config_map.name, &source.config_map.key);
        if let Some(keys) = resolved.config_map_text.get(&key) {
            issuer_jwks.insert(issuer.issuer.clone(), keys.clone());
        }
    }
    let mut inputs = plan::Inputs {
        server,
        tool_profile: resolved.tool_profile.as_ref().map(|p| &p.spec),
        sandbox_profile: resolved.sandbox_profile.as_ref().map(|p| &p.spec),
        jwks: issuer_keys.as_ref().map(|k| k.jwks.as_str()),
        issuer_jwks: Some(&issuer_jwks),
        content: Some(&resolved.content),
        revoke: false,
        peers: &resolved.peers,
        reported_image: &resolved.reported_image,
    };
    // 2.–4. validate, compile, build (pure)
    tracing::debug!(step = "plan", "reconcile step");
    let planned = match plan::plan(&inputs, &config) {
        Ok(mut plan) if plan.capabilities.hold => {
            match hold::check(&ctx.client, server, &plan).await? {
                hold::Check::Hold => Ok(plan),
                hold::Check::Tightening => {
                    info!("the profile change only takes away from the approved policy; applied at once");
                    plan.capabilities.hold = false;
                    Ok(plan)
                }
                hold::Check::NothingToKeep => {
                    info!("the last approved workload is gone; the new one runs at the baseline until approved");
                    inputs.revoke = true;
                    plan::plan(&inputs, &config)
                }
            }
        }
        other => other,
    };
    let plan = match planned {
        Ok(plan) => plan,
        Err(invalid) => {
            info!(reason = invalid.reason(), error = %invalid, "spec cannot be built; waiting for a change");
            // Nothing is torn down: what was applied last keeps running, and status says so.
            let live = apply::live_deployment(&ctx.client, server).await?;
            let outcome = status::Outcome::Waiting {
                error: &invalid,
                live: live.as_ref(),
            };
            let desired = status::desired_status(server, outcome, &now);
            status::publish(&api, &ctx.recorder, server, desired, &[]).await?;
            return Ok(Outcome::Waiting);
        }
    };
    // 5. apply (writes only what differs)
    tracing::debug!(step = "apply", "reconcile step");
    let hold = plan.capabilities.hold;
    if hold {
        info!(changed = ?plan.capabilities.changed, "the workload changed and waits for approval; the last approved one keeps running");
    }
    let mut applied = apply::apply_all(&ctx.client, server, &plan.objects, hold).await?;
    // The proxy engine's shared objects; after a switch to another engine,
    // a server the proxy served removes them.
    let proxy_engine = config.named_egress == crate::config::NamedEgress::Proxy;
    let was_proxy = server
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .any(|c| c.type_ == "HostEgress" && c.reason == "EgressProxy");
    if applied.not_owned.is_empty() && server.spec.remote.is_none() {
        // Only a server the proxy serves (or served) looks at its objects.
        let uses = plan.objects.egress_proxy_entry.is_some() || was_proxy;
        if proxy_engine && uses {
            egress_proxy::apply_proxy(
                &ctx.client,
                server,
                plan.objects.egress_proxy_entry.as_ref(),
                hold,
                &config,
                &mut applied.written,
            )
            .await?;
        } else if was_proxy {
            egress_proxy::remove_shared(&ctx.client, &ns, &mut applied.written).await?;
            egress_proxy::remove_own(&ctx.client, server, &mut applied.written).await?;
        }
    }
    if applied.not_owned.is_empty() {
        let nudged = nudge::nudge(
            &ctx.client,
            &ns,
            &resolved.pods,
            &plan.objects.peers_config_map,
        )
        .await?;
        applied.written.extend(nudged);
    }
    if !applied.written.is_empty() {
        info!(written = ?applied.written, "applied");
    }
    // 6. observe what the facades report
    tracing::debug!(step = "observe", "reconcile step");
    let token = applied.admin_token.as_deref();
    // The policy in force: the one just applied (a held change leaves the
    // approved one in place, whose digest is not known here: no check).
    let in_force = (!hold)
        .then(|| policy_digest(&plan.objects.config_map))
        .flatten();
    let observed = observe::observe_tools(
        ctx.admin.as_ref(),
        &resolved.pods,
        token,
        in_force.as_deref(),
    )
    .await;
    let tools = observed.report;
    // 7. status + Events
    tracing::debug!(step = "status", "reconcile step");
    let endpoint = names::endpoint(server, &ctx.config);
    // Approved host names that nothing enforces (no Cilium, no Calico). A
    // remote server's are enforced by its facade, the pod's only container,
    // and reachable through the NetworkPolicy (build::network_policy).
    let unenforced: Vec<String> = if config.named_egress == crate::config::NamedEgress::None
        && server.spec.remote.is_none()
    {
        plan.capabilities
            .in_force
            .iter()
            .filter(|c| c.starts_with("network.egress.host:"))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let some_host = plan
        .capabilities
        .in_force
        .iter()
        .any(|c| c.starts_with("network.egress.host:"));
    let host_egress = some_host.then(|| {
        use crate::config::NamedEgress;
        use status::HostEgress;
        match config.named_egress {
            _ if server.spec.remote.is_some() => HostEgress::Facade,
            NamedEgress::Cilium => HostEgress::Cilium,
            NamedEgress::Calico => HostEgress::Calico,
            NamedEgress::Proxy => match config.egress_proxy_scope {
                crate::config::EgressProxyScope::Namespace => HostEgress::Proxy,
                crate::config::EgressProxyScope::Server => HostEgress::OwnProxy,
            },
            NamedEgress::None => HostEgress::NotEnforced,
        }
    });
    let approved_policy = hold::approved_policy(server, &plan);
    let outcome = status::Outcome::Applied {
        deployment: applied.deployment.as_ref(),
        unenforced_hosts: &unenforced,
        host_egress,
        missing_secrets: &resolved.missing_secrets,
        unread_issuers: &fetched.unread,
        capabilities: &plan.capabilities,
        tools: tools.as_ref().map(|r| r.tools.as_slice()),
        server: tools.as_ref().and_then(|r| r.server.as_ref()),
        endpoint: &endpoint,
        peer_key_unusable: applied.peer_key_unusable,
        not_owned: &applied.not_owned,
        route_unavailable: applied.route_unavailable,
        approved_policy: approved_policy.as_deref(),
        pinned_image: plan.pinned_image.as_ref(),
        image_moved: &crate::pin::disagreement(
            plan.pinned_image.as_ref(),
            &resolved.reported_image,
        ),
    };
    let desired = status::desired_status(server, outcome, &now);
    status::publish(&api, &ctx.recorder, server, desired, &applied.written).await?;
    if !applied.not_owned.is_empty() {
        // Objects in the way are not watched (they are not ours): look again later.
        info!(not_owned = ?applied.not_owned, "objects with this server's names belong to someone else; nothing applied");
    }
    Ok(Outcome::Applied {
        secrets_missing: !resolved.missing_secrets.is_empty() || !applied.not_owned.is_empty(),
        settling: observed.settling,
    })
}

/// `sha256:<hex>` of the policy file a ConfigMap holds, as the facade
/// reports the file it runs.
fn policy_digest(config_map: &k8s_openapi::api::core::v1::ConfigMap) -> Option<String> {
    use sha2::{Digest, Sha256};
    let text = config_map.data.as_ref()?.get(names::POLICY_KEY)?;
    Some(format!(
        "sha256:{}",
        hex::encode(Sha256::digest(text.as_bytes()))
    ))
}

/// After a transient error: back off exponentially per object (5s … 5min).
pub fn error_policy(server: Arc<MCPServer>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = format!("{}/{}", names::namespace(&server), server.name_any());
    let mut failures = ctx.failures.lock().expect("failures lock");
    let n = failures.entry(key).or_insert(0);
    *n = n.saturating_add(1);
    let delay = backoff(*n);
    warn!(error = %error, attempt = *n, retry_in_s = delay.as_secs(), "reconcile failed");
    Action::requeue(delay)
}

/// 5s, 10s, 20s … capped at 300s.
pub fn backoff(attempt: u32) -> Duration {
    let secs = 5u64.saturating_mul(1u64 << attempt.saturating_sub(1).min(6));
    Duration::from_secs(secs.min(300))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff(1), Duration::from_secs(5));
        assert_eq!(backoff(2), Duration::from_secs(10));
        assert_eq!(backoff(4), Duration::from_secs(40));
        assert_eq!(backoff(30), Duration::from_secs(300));
    }
}
