//! The admission decision for ToolProfile and SandboxProfile writes
//! (`POST /validate-profile`): a profile the facade's policy loader would
//! refuse is refused here, with the loader's message, so it is never stored
//! and never reaches a server's ConfigMap.
//!
//! ```text
//! AdmissionReview (CREATE/UPDATE of toolprofiles|sandboxprofiles)
//!   ─▶ crate::check::profile_errors (validate_tools + the facade's loader;
//!      validate_sandbox_profile) ─▶ allow | deny 422 "<Kind> ns/name: InvalidPolicy: …"
//! ```
//! The same function backs `mcp-warden-operator validate` and the profile's
//! `Valid` condition, so the three never disagree. Pure: no API calls.

use serde_json::{json, Value};

use super::admission::Malformed;

/// Path of the profiles' validating webhook (contract).
pub const VALIDATE_PROFILE_PATH: &str = "/validate-profile";

/// Decide one AdmissionReview for a profile.
pub fn review_profile(body: &[u8]) -> Result<Value, Malformed> {
    let super::admission::Envelope {
        api_version,
        request,
        uid,
    } = super::admission::envelope(body)?;
    let reply = |body: Value| {
        let mut body = body;
        body["uid"] = json!(uid);
        json!({"apiVersion": &api_version, "kind": "AdmissionReview", "response": body})
    };
    // DELETE carries no object: nothing for the loader to refuse.
    let Some(object) = request.get("object").filter(|o| o.is_object()) else {
        return Ok(reply(json!({"allowed": true})));
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    if !matches!(kind, "ToolProfile" | "SandboxProfile") {
        return Ok(reply(json!({"allowed": true})));
    }
    match crate::check::profile_errors(object) {
        Ok(()) => Ok(reply(json!({"allowed": true}))),
        Err(message) => {
            let name = object["metadata"]["name"]
                .as_str()
                .or_else(|| request.get("name").and_then(Value::as_str))
                .unwrap_or_default();
            let ns = request
                .get("namespace")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Ok(reply(json!({"allowed": false, "status": {
                "code": 422, "reason": "Invalid",
                "message": format!("{kind} {ns}/{name}: {message}"),
            }})))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "namespace": "team-a",
                        "name": object["metadata"]["name"], "object": object,
                        "userInfo": {"username": "carol"}}
        }))
        .unwrap()
    }

    fn tool_profile(spec: Value) -> Value {
        json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
               "metadata": {"name": "fetch", "namespace": "team-a"}, "spec": spec})
    }

    #[test]
    fn a_profile_the_loader_refuses_is_refused_with_its_message() {
        let bad = tool_profile(json!({"tools": [{"name": "fetch", "arguments": [
            {"name": "url", "kind": "string", "allow": ["^https://(example\\.com/"]}]}]}));
        let out = review_profile(&review(bad)).unwrap();
        let response = &out["response"];
        assert_eq!(response["uid"], "u1");
        assert_eq!(response["allowed"], false);
        assert_eq!(response["status"]["code"], 422);
        let message = response["status"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("ToolProfile team-a/fetch: InvalidPolicy: "),
            "{message}"
        );
        assert!(message.contains("unclosed group"), "{message}");
        let empty = review_profile(&review(tool_profile(json!({})))).unwrap();
        assert!(empty["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("the allowlist is empty"));
    }

    #[test]
    fn a_good_profile_and_a_delete_pass() {
        let good = tool_profile(json!({"tools": [{"name": "fetch"}]}));
        assert_eq!(
            review_profile(&review(good)).unwrap()["response"]["allowed"],
            true
        );
        let sandbox = json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
                             "metadata": {"name": "s", "namespace": "team-a"}, "spec": {}});
        assert_eq!(
            review_profile(&review(sandbox)).unwrap()["response"]["allowed"],
            true
        );
        let delete = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview", "request": {"uid": "u2", "operation": "DELETE"}}))
        .unwrap();
        assert_eq!(
            review_profile(&delete).unwrap()["response"]["allowed"],
            true
        );
        assert!(review_profile(b"{}").is_err());
    }
}
