//! The gateway side of the mock-API fixtures: the gateway `front` the
//! gateway tests reconcile, and what they read back from its written
//! objects (its container's args, its `Degraded` condition).

use mcp_warden_crds::MCPGateway;
use serde_json::{json, Value};

use super::{Fixture, NS};

/// Where the fake API holds `front`'s Deployment.
pub const FRONT_DEPLOYMENT: &str = "/apis/apps/v1/namespaces/team-a/deployments/front";
/// Where the fake API holds `front`'s status.
pub const FRONT_STATUS: &str =
    "/apis/mcpwarden.dev/v1alpha1/namespaces/team-a/mcpgateways/front/status";

/// The gateway `front` (uid `uid-front`, generation 1) with `spec`.
pub fn front(spec: Value) -> MCPGateway {
    serde_json::from_value(json!({
        "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
        "metadata": {"name": "front", "namespace": NS, "uid": "uid-front", "generation": 1},
        "spec": spec}))
    .unwrap()
}

/// The args of `front`'s container as applied, joined by spaces.
pub fn front_args(after: &Fixture) -> String {
    after.objects[FRONT_DEPLOYMENT]["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The volume `name` of `front`'s pod as applied.
pub fn front_volume<'a>(after: &'a Fixture, name: &str) -> &'a Value {
    after.objects[FRONT_DEPLOYMENT]["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no volume {name}"))
}

/// `front`'s status as written.
pub fn front_status(after: &Fixture) -> &Value {
    &after.objects[FRONT_STATUS]["status"]
}

/// The reason and message of the `Degraded` condition of a written status
/// (a gateway's or a server's).
pub fn degraded(status: &Value) -> (String, String) {
    let c = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Degraded")
        .unwrap();
    (
        c["reason"].as_str().unwrap().to_string(),
        c["message"].as_str().unwrap().to_string(),
    )
}
