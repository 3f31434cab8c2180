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
