//! The admission decision for MCPGateway writes (`POST /validate-gateway`):
//! a spec the operator could never build from — a backend named twice, two
//! backends with the same prefix, a selector that does not parse — is
//! refused with the reason the gateway's `Ready` condition would give
//! ([`crate::gateway::validate::validate_spec`], the same function), so it
//! is never stored. What depends on other objects (does the server exist,
//! can `prefix: none` be shown safe) is the operator's, in status.
//!
//! ```text
//! AdmissionReview (CREATE/UPDATE of mcpgateways) ─▶ validate_spec ─▶ allow | deny 422 "MCPGateway ns/name: <Reason>: …"
//! ```

use mcp_warden_crds::MCPGateway;
use serde_json::{json, Value};

use super::admission::{envelope, Envelope, Malformed};
use crate::gateway::validate::validate_spec;

/// Path of the gateways' validating webhook (contract).
pub const VALIDATE_GATEWAY_PATH: &str = "/validate-gateway";

/// Decide one AdmissionReview for an MCPGateway.
pub fn review_gateway(body: &[u8]) -> Result<Value, Malformed> {
    let Envelope {
        api_version,
        request,
        uid,
    } = envelope(body)?;
    let reply = |mut body: Value| {
        body["uid"] = json!(uid);
        json!({"apiVersion": &api_version, "kind": "AdmissionReview", "response": body})
    };
    let Some(object) = request.get("object").filter(|o| o.is_object()) else {
        return Ok(reply(json!({"allowed": true})));
    };
    if object["kind"] != "MCPGateway" {
        return Ok(reply(json!({"allowed": true})));
    }
    let ns = request["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"]
        .as_str()
        .or_else(|| request["name"].as_str())
        .unwrap_or_default();
    let refused = |message: String| {
        reply(json!({"allowed": false, "status": {
            "code": 422, "reason": "Invalid",
            "message": format!("MCPGateway {ns}/{name}: {message}"),
        }}))
    };
    // The API server checked the schema first; what fails to parse here
    // is refused rather than let through.
    let gateway: MCPGateway = match serde_json::from_value(object.clone()) {
        Ok(g) => g,
        Err(e) => return Ok(refused(format!("cannot be read: {e}"))),
    };
    Ok(match validate_spec(&gateway.spec) {
        Ok(()) => reply(json!({"allowed": true})),
        Err(e) => refused(format!("{}: {e}", e.reason())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(spec: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "namespace": "team-a", "name": "front",
                "object": {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
                           "metadata": {"name": "front", "namespace": "team-a"}, "spec": spec},
                "userInfo": {"username": "carol"}}
        }))
        .unwrap()
    }

    #[test]
    fn a_gateway_whose_names_would_collide_is_refused_in_the_operators_words() {
        let out = review_gateway(&review(json!({"backends": [
            {"name": "git", "prefix": "fs__"}, {"name": "fs"}]})))
        .unwrap();
        let response = &out["response"];
        assert_eq!(response["uid"], "u1");
        assert_eq!(response["allowed"], false);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(
                "MCPGateway team-a/front: PrefixCollision: backends \"git\" and \"fs\""
            ),
            "{message}"
        );
        let dup = review_gateway(&review(
            json!({"backends": [{"name": "git"}, {"name": "git"}]}),
        ))
        .unwrap();
        assert_eq!(dup["response"]["allowed"], false);
    }

    #[test]
    fn a_route_without_hosts_is_refused_as_for_a_server() {
        let out = review_gateway(&review(json!({"backends": [{"name": "git"}],
            "expose": {"ingress": {"className": "nginx"}}})))
        .unwrap();
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(
            out["response"]["status"]["message"],
            "MCPGateway team-a/front: InvalidGatewaySpec: an Ingress or HTTPRoute needs expose.hosts: the names it routes"
        );
        let hosted = review_gateway(&review(json!({"backends": [{"name": "git"}],
            "expose": {"hosts": ["tools.example.com"], "ingress": {"className": "nginx"}}})))
        .unwrap();
        assert_eq!(hosted["response"]["allowed"], true);
    }

    #[test]
    fn a_buildable_gateway_is_allowed() {
        let out = review_gateway(&review(json!({"backends": [
            {"name": "git"}, {"selector": {"matchLabels": {"team": "a"}}}]})))
        .unwrap();
        assert_eq!(out["response"]["allowed"], true);
    }
}
