//! Wiring: what triggers a reconcile.
//!
//! ```text
//! MCPServer ───────────────────────────────▶ reconcile(server)
//! owned Deployment/ConfigMap/Service/SA/NetworkPolicy/PDB ─(owner ref)─▶ reconcile(owner)
//! ToolProfile / SandboxProfile ─(servers_referencing)─▶ reconcile(each referencing server)
//! ToolProfile / SandboxProfile, MCPServer ─(its refs)─▶ profiles::reconcile_profile (profile status)
//! Cilium / Calico policy or HTTPRoute kind appears or goes (kinds.rs) ─▶ reconcile(every server)
//! ConfigMap / Secret (metadata only) ─(references::Index)─▶ reconcile(each server whose
//!   approved content it holds: secretEnv keys, the profile's JWKS; a gateway's public key)
//! Pod with mcpwarden.dev/server=<name> (metadata only) ─▶ reconcile(<name>): a replica
//!   came, got its address or goes, so the peers ConfigMap is rewritten
//! MCPGateway ─(gateway::controller::servers_for_gateway)─▶ reconcile(each server it selects or listed)
//! <name>-egress-proxy Secret (metadata only) ─▶ reconcile(every server in its namespace): the
//!   egress proxy's clients file follows a server that goes
//! the MCPGateway controller itself: crate::gateway::controller
//! ```
//! The ConfigMap, Secret and Pod watches are metadata-only (`PartialObjectMeta`):
//! an edit changes `resourceVersion`, which is all a trigger needs, and no
//! Secret value is ever held in a watch cache.

use std::{future::Future, sync::Arc};

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Service, ServiceAccount},
    networking::v1::NetworkPolicy,
    policy::v1::PodDisruptionBudget,
};
use kube::{
    core::PartialObjectMeta,
    runtime::{reflector::ObjectRef, watcher, Controller},
    Api, Client, ResourceExt,
};
use mcp_warden_crds::{MCPGateway, MCPServer, SandboxProfile, ToolProfile};
use tracing::{debug, warn};

use super::{
    error_policy,
    profiles::{profile_error_policy, reconcile_profile, Profile, ProfileContext},
    reconcile,
    references::Kind,
    Context,
};

/// Which profile reference to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileKind {
    /// `spec.toolProfileRef`.
    Tool,
    /// `spec.sandboxProfileRef`.
    Sandbox,
}

/// The servers in `namespace` whose `kind` reference names `name`.
pub fn servers_referencing<'a>(
    servers: impl IntoIterator<Item = &'a MCPServer>,
    kind: ProfileKind,
    namespace: &str,
    name: &str,
) -> Vec<ObjectRef<MCPServer>> {
    servers
        .into_iter()
        .filter(|s| s.namespace().as_deref() == Some(namespace))
        .filter(|s| match kind {
            ProfileKind::Tool => s.spec.tool_profile_ref.name == name,
            ProfileKind::Sandbox => s
                .spec
                .sandbox_profile_ref
                .as_ref()
                .is_some_and(|r| r.name == name),
        })
        .map(ObjectRef::from_obj)
        .collect()
}

/// The profile-status controller of one kind: its profiles, and every
/// MCPServer mapped to the profile it references.
async fn run_profiles<K: Profile>(
    client: Client,
    ctx: Arc<ProfileContext>,
    refs: fn(&MCPServer) -> Option<String>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    Controller::new(Api::<K>::all(client.clone()), watcher::Config::default())
        .watches(
            Api::<MCPServer>::all(client),
            watcher::Config::default(),
            move |s| {
                let ns = s.namespace().unwrap_or_default();
                refs(&s).map(|name| ObjectRef::new(&name).within(&ns))
            },
        )
        .graceful_shutdown_on(shutdown)
        .run(reconcile_profile::<K>, profile_error_policy::<K>, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                debug!(error = %e, "profile reconcile error");
            }
        })
        .await;
}

/// Run the controllers (servers, and the two profile kinds' status) until
/// `shutdown` resolves.
pub async fn run(
    client: Client,
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = shutdown.shared();
    let profile_ctx = Arc::new(ProfileContext {
        client: client.clone(),
        recorder: ctx.recorder.clone(),
    });
    let tool_status = run_profiles::<ToolProfile>(
        client.clone(),
        profile_ctx.clone(),
        |s| Some(s.spec.tool_profile_ref.name.clone()),
        shutdown.clone(),
    );
    let sandbox_status = run_profiles::<SandboxProfile>(
        client.clone(),
        profile_ctx,
        |s| s.spec.sandbox_profile_ref.as_ref().map(|r| r.name.clone()),
        shutdown.clone(),
    );
    // One discovery loop for both controllers; it ends with them.
    let engine_ctx = ctx.clone();
    let (looks, served) = super::kinds::watch(client.clone(), move || engine_ctx.engine.forget());
    let gateways = crate::gateway::controller::run(
        client.clone(),
        ctx.clone(),
        served.clone(),
        shutdown.clone(),
    );
    futures::join!(
        run_servers(client, ctx, served, shutdown),
        tool_status,
        sandbox_status,
        gateways,
        looks
    );
}

/// The MCPServer controller.
async fn run_servers(
    client: Client,
    ctx: Arc<Context>,
    served: super::kinds::Served,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let owned =
        || watcher::Config::default().labels("app.kubernetes.io/managed-by=mcp-warden-operator");
    let controller = Controller::new(
        Api::<MCPServer>::all(client.clone()),
        watcher::Config::default(),
    );
    let store = controller.store();
    let pending_store = store.clone();
    ctx.metrics.count_pending_with(move || {
        pending_store
            .state()
            .iter()
            .filter(|s| crate::capabilities::is_pending(s))
            .count()
    });
    let proxy_store = store.clone();
    let (tool_store, sandbox_store, gateway_store) = (store.clone(), store.clone(), store);
    let (cm_index, secret_index) = (ctx.references.clone(), ctx.references.clone());
    controller
        .owns(Api::<Deployment>::all(client.clone()), owned())
        .owns(Api::<ConfigMap>::all(client.clone()), owned())
        .owns(Api::<Service>::all(client.clone()), owned())
        .owns(Api::<ServiceAccount>::all(client.clone()), owned())
        .owns(Api::<NetworkPolicy>::all(client.clone()), owned())
        .owns(Api::<PodDisruptionBudget>::all(client.clone()), owned())
        .watches(
            Api::<ToolProfile>::all(client.clone()),
            watcher::Config::default(),
            move |p| {
                let servers = tool_store.state();
                let ns = p.namespace().unwrap_or_default();
                servers_referencing(
                    servers.iter().map(|s| s.as_ref()),
                    ProfileKind::Tool,
                    &ns,
                    &p.name_any(),
                )
            },
        )
        .watches(
            Api::<SandboxProfile>::all(client.clone()),
            watcher::Config::default(),
            move |p| {
                let servers = sandbox_store.state();
                let ns = p.namespace().unwrap_or_default();
                servers_referencing(
                    servers.iter().map(|s| s.as_ref()),
                    ProfileKind::Sandbox,
                    &ns,
                    &p.name_any(),
                )
            },
        )
        // A gateway that selects (or stopped selecting) a server changes
        // whose key its policy trusts.
        .watches(
            Api::<MCPGateway>::all(client.clone()),
            watcher::Config::default(),
            move |gw| {
                let servers = gateway_store.state();
                crate::gateway::controller::servers_for_gateway(
                    servers.iter().map(|s| s.as_ref()),
                    &gw,
                )
            },
        )
        // `Api<PartialObjectMeta<_>>` lists and watches metadata only.
        .watches(
            Api::<PartialObjectMeta<ConfigMap>>::all(client.clone()),
            watcher::Config::default(),
            move |cm| {
                let ns = cm.namespace().unwrap_or_default();
                cm_index.servers_using(Kind::ConfigMap, &ns, &cm.name_any())
            },
        )
        .watches(
            Api::<PartialObjectMeta<Secret>>::all(client.clone()),
            watcher::Config::default(),
            move |secret| {
                let ns = secret.namespace().unwrap_or_default();
                secret_index.servers_using(Kind::Secret, &ns, &secret.name_any())
            },
        )
        // A server's egress proxy credential that changes or goes (its
        // server deleted): the namespace's other servers rewrite the
        // proxy's clients file.
        .watches(
            Api::<PartialObjectMeta<Secret>>::all(client.clone()),
            watcher::Config::default().labels(crate::build::egress_proxy::TOKEN_LABEL),
            move |secret| {
                let ns = secret.namespace().unwrap_or_default();
                proxy_store
                    .state()
                    .iter()
                    .filter(|s| s.namespace().as_deref() == Some(ns.as_str()))
                    .map(|s| ObjectRef::from_obj(s.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        // A pod's status changes its `resourceVersion` too, so its IP and
        // phase reach the peers ConfigMap without reading pods here.
        .watches(
            Api::<PartialObjectMeta<Pod>>::all(client),
            watcher::Config::default().labels(crate::names::SERVER_LABEL),
            server_of_pod,
        )
        .reconcile_all_on(super::kinds::triggers(served, super::kinds::KINDS))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, action)) => debug!(object = %obj, ?action, "reconciled"),
                Err(e) => warn!(error = %e, "reconcile error"),
            }
        })
        .await;
}

/// The MCPServer a pod is a replica of, by its `mcpwarden.dev/server` label.
fn server_of_pod(pod: PartialObjectMeta<Pod>) -> Option<ObjectRef<MCPServer>> {
    let name = pod.labels().get(crate::names::SERVER_LABEL)?;
    Some(ObjectRef::new(name).within(&pod.namespace()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_maps_to_the_server_its_label_names() {
        let mut pod = PartialObjectMeta::<Pod>::default();
        pod.metadata.namespace = Some("team-a".into());
        assert_eq!(server_of_pod(pod.clone()), None);
        pod.metadata.labels =
            Some([(crate::names::SERVER_LABEL.to_string(), "memory".to_string())].into());
        assert_eq!(
            server_of_pod(pod),
            Some(ObjectRef::new("memory").within("team-a"))
        );
    }

    fn server(ns: &str, name: &str, tool: &str, sandbox: Option<&str>) -> MCPServer {
        let sandbox = sandbox
            .map(|s| format!(", sandboxProfileRef: {{name: {s}}}"))
            .unwrap_or_default();
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: {tool}}}{sandbox}}}\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_profile_maps_to_the_servers_that_reference_it() {
        let servers = [
            server("a", "one", "tp", Some("sb")),
            server("a", "two", "tp", None),
            server("a", "three", "other", Some("sb")),
            server("b", "four", "tp", Some("sb")),
        ];
        let names =
            |refs: Vec<ObjectRef<MCPServer>>| refs.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(
            names(servers_referencing(&servers, ProfileKind::Tool, "a", "tp")),
            ["one", "two"]
        );
        assert_eq!(
            names(servers_referencing(
                &servers,
                ProfileKind::Sandbox,
                "a",
                "sb"
            )),
            ["one", "three"]
        );
        assert!(servers_referencing(&servers, ProfileKind::Tool, "c", "tp").is_empty());
    }
}
