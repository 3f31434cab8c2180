//! Wiring: what triggers a gateway's reconcile, and a server's because of
//! a gateway.
//!
//! ```text
//! MCPGateway ─────────────────────────────────────────────▶ reconcile(gateway)
//! owned Deployment/ConfigMap/Service/NetworkPolicy/Ingress ─(owner ref)─▶ reconcile(owner)
//! owned HTTPRoute, while the Gateway API is installed ─(owner ref)─▶ reconcile(owner)
//! MCPServer (created, relabelled, status changed, deleted) ─(gateways_for_server)─▶ reconcile(each
//!   gateway that selects it now or lists it in its status)
//! ToolProfile ─(the gateways whose toolProfileRef names it)─▶ reconcile(each)
//! MCPGateway ─(servers_for_gateway, in the MCPServer controller)─▶ reconcile(each server it
//!   selects or listed: their policies gain or lose its key)
//! the HTTPRoute kind starts (or stops) being served (reconcile::kinds) ─▶ reconcile(every gateway)
//! ```

use std::{future::Future, sync::Arc};

use futures::StreamExt;
use k8s_openapi::api::{
    apps::v1::Deployment,
    core::v1::{ConfigMap, Service},
    networking::v1::{Ingress, NetworkPolicy},
};
use kube::{
    api::DynamicObject,
    runtime::{controller, reflector::ObjectRef, watcher, Controller},
    Api, Client, ResourceExt,
};
use mcp_warden_crds::{MCPGateway, MCPServer, ToolProfile};
use tracing::{debug, warn};

use super::{error_policy, reconcile, resolve};
use crate::reconcile::{kinds, Context};

/// The gateways (of `gateways`) a change of `server` concerns: those that
/// select it, and those whose status lists it (it may have stopped matching).
pub fn gateways_for_server<'a>(
    gateways: impl IntoIterator<Item = &'a MCPGateway>,
    server: &MCPServer,
) -> Vec<ObjectRef<MCPGateway>> {
    let name = server.name_any();
    gateways
        .into_iter()
        .filter(|g| g.namespace() == server.namespace())
        .filter(|g| {
            resolve::selects(g, server)
                || g.status
                    .iter()
                    .flat_map(|s| &s.backends)
                    .any(|b| b.name == name)
        })
        .map(ObjectRef::from_obj)
        .collect()
}

/// The servers (of `servers`) whose trust a change of `gw` concerns: those
/// it selects, and those its status lists.
pub fn servers_for_gateway<'a>(
    servers: impl IntoIterator<Item = &'a MCPServer>,
    gw: &MCPGateway,
) -> Vec<ObjectRef<MCPServer>> {
    let listed: Vec<&str> = gw
        .status
        .iter()
        .flat_map(|s| &s.backends)
        .map(|b| b.name.as_str())
        .collect();
    servers
        .into_iter()
        .filter(|s| s.namespace() == gw.namespace())
        .filter(|s| resolve::selects(gw, s) || listed.contains(&s.name_any().as_str()))
        .map(ObjectRef::from_obj)
        .collect()
}

/// The MCPGateway controller, until `shutdown` resolves.
pub async fn run(
    client: Client,
    ctx: Arc<Context>,
    served: kinds::Served,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let owned =
        || watcher::Config::default().labels("app.kubernetes.io/managed-by=mcp-warden-operator");
    let controller = Controller::new(
        Api::<MCPGateway>::all(client.clone()),
        watcher::Config::default(),
    );
    let (server_store, profile_store) = (controller.store(), controller.store());
    let route = crate::build::exposure::http_route_api();
    controller
        .owns(Api::<Deployment>::all(client.clone()), owned())
        .owns(Api::<ConfigMap>::all(client.clone()), owned())
        .owns(Api::<Service>::all(client.clone()), owned())
        .owns(Api::<NetworkPolicy>::all(client.clone()), owned())
        // A route deleted or edited by hand is put back at once, not at the
        // next resync. Where the Gateway API is not installed the HTTPRoute
        // watch fails and retries (backing off to 30 s), so the kind is
        // watched soon after it is installed; that watch sees no route of
        // ours yet, so the kind's arrival itself (reconcile_all_on below)
        // is what makes the routes.
        .owns(Api::<Ingress>::all(client.clone()), owned())
        .owns_with(
            Api::<DynamicObject>::all_with(client.clone(), &route),
            route,
            owned(),
        )
        .watches(
            Api::<MCPServer>::all(client.clone()),
            watcher::Config::default(),
            move |server| {
                let gateways = server_store.state();
                gateways_for_server(gateways.iter().map(|g| g.as_ref()), &server)
            },
        )
        .watches(
            Api::<ToolProfile>::all(client),
            watcher::Config::default(),
            move |profile| {
                let name = profile.name_any();
                profile_store
                    .state()
                    .iter()
                    .filter(|g| g.namespace() == profile.namespace())
                    .filter(|g| {
                        g.spec
                            .tool_profile_ref
                            .as_ref()
                            .is_some_and(|r| r.name == name)
                    })
                    .map(|g| ObjectRef::from_obj(g.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        // A gateway that said `GatewayAPINotInstalled` gets its route when
        // the kind is installed, not at its next resync (ten minutes once Ready).
        .reconcile_all_on(kinds::triggers(served, &[kinds::HTTP_ROUTE]))
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            match result {
                Ok((obj, action)) => debug!(object = %obj, ?action, "gateway reconciled"),
                // A gateway deleted while a reconcile of it was queued (a
                // server's change woke it): nothing to do.
                Err(controller::Error::ObjectNotFound(obj)) => {
                    debug!(object = %obj, "gateway gone before its reconcile")
                }
                // The HTTPRoute watch on a cluster without the Gateway API
                // (Degraded=GatewayAPINotInstalled says so where it matters).
                Err(controller::Error::QueueError(e)) if kind_not_served(&e) => {
                    debug!(error = %e, "a watched kind is not served (yet)")
                }
                Err(e) => warn!(error = %e, "gateway reconcile error"),
            }
        })
        .await;
}

/// Whether a watch failed because the API server does not serve its kind.
fn kind_not_served(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.code == 404,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(name: &str, labels: &str) -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\n\
             metadata: {{name: {name}, namespace: a, labels: {{{labels}}}}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}}}\n"
        ))
        .unwrap()
    }

    fn gateway(name: &str, backends: &str, listed: &[&str]) -> MCPGateway {
        let mut gw: MCPGateway = serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {{name: {name}, namespace: a}}\n\
             spec: {{backends: {backends}}}\n"
        ))
        .unwrap();
        gw.status = Some(
            serde_json::from_value(serde_json::json!({"backends": listed
                .iter()
                .map(|n| serde_json::json!({"name": n, "prefix": format!("{n}__"), "ready": true}))
                .collect::<Vec<_>>()}))
            .unwrap(),
        );
        gw
    }

    #[test]
    fn a_server_that_starts_or_stops_matching_wakes_its_gateways() {
        let gateways = [
            gateway("by-label", "[{selector: {matchLabels: {team: x}}}]", &[]),
            gateway("was", "[{selector: {matchLabels: {team: y}}}]", &["fs"]),
            gateway("unrelated", "[{name: git}]", &[]),
        ];
        let names =
            |refs: Vec<ObjectRef<MCPGateway>>| refs.into_iter().map(|r| r.name).collect::<Vec<_>>();
        // a new server with the label: picked up
        assert_eq!(
            names(gateways_for_server(&gateways, &server("fs", "team: x"))),
            ["by-label", "was"]
        );
        // its label removed: the gateway that listed it still hears of it
        assert_eq!(
            names(gateways_for_server(&gateways, &server("fs", ""))),
            ["was"]
        );
        let servers = [
            server("git", ""),
            server("fs", "team: x"),
            server("time", ""),
        ];
        let to_servers = |gw: &MCPGateway| {
            servers_for_gateway(&servers, gw)
                .into_iter()
                .map(|r| r.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(to_servers(&gateways[0]), ["fs"]);
        assert_eq!(
            to_servers(&gateways[1]),
            ["fs"],
            "listed, no longer selected"
        );
        assert_eq!(to_servers(&gateways[2]), ["git"]);
    }
}
