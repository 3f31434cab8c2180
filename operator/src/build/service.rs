//! The Service agents connect to: `http://<name>.<ns>.svc:8080/mcp`, plus the
//! admin port for scraping. The server's own port is never exposed.

use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::BuildInput;
use crate::names::{self, ADMIN_PORT, FACADE_PORT};

/// The Service in front of the facade.
pub fn desired_service(input: BuildInput<'_>) -> Service {
    let port = |name: &str, port: i32| ServicePort {
        name: Some(name.into()),
        port,
        target_port: Some(IntOrString::String(name.into())),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    };
    Service {
        metadata: names::metadata(input.server, names::object_name(input.server)),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(names::selector(input.server)),
            ports: Some(vec![port("http", FACADE_PORT), port("admin", ADMIN_PORT)]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The headless Service the replicas find each other by (replicas > 1): every
/// pod's address on 8080, ready or not, so a draining owner stays reachable
/// for the sessions it still serves.
pub fn desired_peers_service(input: BuildInput<'_>) -> Option<Service> {
    (input.server.spec.replicas > 1).then(|| Service {
        metadata: names::metadata(input.server, names::peers_service(input.server)),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: Some("None".into()),
            publish_not_ready_addresses: Some(true),
            selector: Some(names::selector(input.server)),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: FACADE_PORT,
                target_port: Some(IntOrString::String("http".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    })
}
