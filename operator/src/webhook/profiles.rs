//! The admission decision for ToolProfile and SandboxProfile writes
//! (`POST /validate-profile`): a profile the facade's policy loader would
//! refuse is refused here, with the loader's message, so it is never stored
//! and never reaches a server's ConfigMap; and a profile that an MCPServer
//! of its namespace still references cannot be deleted.
//!
//! ```text
//! AdmissionReview (CREATE/UPDATE of toolprofiles|sandboxprofiles)
//!   ─▶ crate::check::profile_errors (validate_tools + the facade's loader;
//!      validate_sandbox_profile) ─▶ allow | deny 422 "<Kind> ns/name: InvalidPolicy: …"
//! AdmissionReview (DELETE)
//!   ─▶ ProfileUsers::servers_using (the namespace's MCPServers, not being deleted)
//!      ─▶ none: allow | deny 409 "<Kind> ns/name is in use by MCPServer a, b: …"
//! ```
//! The loader check is the function behind `mcp-warden-operator validate`
//! and the profile's `Valid` condition, so the three never disagree. Only
//! the DELETE answer reads the API (behind [`ProfileUsers`]); if that read
//! fails the delete is refused (fail closed, as when the webhook is down).
//! Where no webhook is in the path, the operator keeps the last applied
//! workload and says which profile is missing (`crate::reconcile::status`).

use futures::future::BoxFuture;
use kube::{Api, Client};
use mcp_warden_crds::MCPServer;
use serde_json::{json, Value};

use super::admission::Malformed;
use crate::reconcile::controller::{servers_referencing, ProfileKind};

/// Path of the profiles' validating webhook (contract).
pub const VALIDATE_PROFILE_PATH: &str = "/validate-profile";

/// Which MCPServers use a profile (the API server in production).
pub trait ProfileUsers: Send + Sync {
    /// Names of the MCPServers in `namespace`, not being deleted, whose
    /// `kind` reference names `name` (sorted).
    fn servers_using<'a>(
        &'a self,
        namespace: &'a str,
        kind: ProfileKind,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>>;
}

/// [`ProfileUsers`] by listing the namespace's MCPServers.
pub struct KubeProfileUsers {
    /// The API client (the operator's ServiceAccount lists MCPServers).
    pub client: Client,
}

impl ProfileUsers for KubeProfileUsers {
    fn servers_using<'a>(
        &'a self,
        namespace: &'a str,
        kind: ProfileKind,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move {
            let api: Api<MCPServer> = Api::namespaced(self.client.clone(), namespace);
            let servers = api
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?;
            // A server on its way out no longer needs the profile (a
            // namespace being deleted removes both, in any order).
            let live = servers
                .items
                .iter()
                .filter(|s| s.metadata.deletion_timestamp.is_none());
            let mut names: Vec<String> = servers_referencing(live, kind, namespace, name)
                .into_iter()
                .map(|r| r.name)
                .collect();
            names.sort();
            Ok(names)
        })
    }
}

fn profile_kind(kind: &str) -> Option<ProfileKind> {
    match kind {
        "ToolProfile" => Some(ProfileKind::Tool),
        "SandboxProfile" => Some(ProfileKind::Sandbox),
        _ => None,
    }
}

/// Decide one AdmissionReview for a profile.
pub async fn review_profile(body: &[u8], users: &dyn ProfileUsers) -> Result<Value, Malformed> {
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
    let text = |field: &str| {
        request
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let ns = text("namespace");
    if text("operation") == "DELETE" {
        let kind = request["kind"]["kind"].as_str().unwrap_or_default();
        let (Some(profile), name) = (profile_kind(kind), text("name")) else {
            return Ok(reply(json!({"allowed": true})));
        };
        let field = match profile {
            ProfileKind::Tool => "toolProfileRef",
            ProfileKind::Sandbox => "sandboxProfileRef",
        };
        let refused = |message: String| {
            reply(json!({"allowed": false, "status": {
                "code": 409, "reason": "Conflict", "message": message,
            }}))
        };
        return Ok(match users.servers_using(ns, profile, name).await {
            Ok(servers) if servers.is_empty() => reply(json!({"allowed": true})),
            Ok(servers) => refused(format!(
                "{kind} {ns}/{name} is in use by MCPServer {}: point their spec.{field} elsewhere or delete them first",
                servers.join(", ")
            )),
            Err(e) => refused(format!(
                "{kind} {ns}/{name}: cannot tell whether an MCPServer uses it ({e}); not deleted"
            )),
        });
    }
    let Some(object) = request.get("object").filter(|o| o.is_object()) else {
        return Ok(reply(json!({"allowed": true})));
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    if profile_kind(kind).is_none() {
        return Ok(reply(json!({"allowed": true})));
    }
    match crate::check::profile_errors(object) {
        Ok(()) => Ok(reply(json!({"allowed": true}))),
        Err(message) => {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or_else(|| text("name"));
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

    /// Stands in for the namespace's MCPServers (the real listing is
    /// tested against a real API server in tests/apiserver).
    struct Using(Result<Vec<String>, String>);

    impl ProfileUsers for Using {
        fn servers_using<'a>(
            &'a self,
            _: &'a str,
            _: ProfileKind,
            _: &'a str,
        ) -> BoxFuture<'a, Result<Vec<String>, String>> {
            let answer = self.0.clone();
            Box::pin(async move { answer })
        }
    }

    const NOBODY: Using = Using(Ok(Vec::new()));

    fn decide(body: &[u8], users: &Using) -> Result<Value, Malformed> {
        futures::executor::block_on(review_profile(body, users))
    }

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
        let out = decide(&review(bad), &NOBODY).unwrap();
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
        let empty = decide(&review(tool_profile(json!({}))), &NOBODY).unwrap();
        assert!(empty["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("the allowlist is empty"));
    }

    #[test]
    fn a_good_profile_and_a_delete_pass() {
        let good = tool_profile(json!({"tools": [{"name": "fetch"}]}));
        assert_eq!(
            decide(&review(good), &NOBODY).unwrap()["response"]["allowed"],
            true
        );
        let sandbox = json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
                             "metadata": {"name": "s", "namespace": "team-a"}, "spec": {}});
        assert_eq!(
            decide(&review(sandbox), &NOBODY).unwrap()["response"]["allowed"],
            true
        );
        assert_eq!(
            decide(&delete("ToolProfile"), &NOBODY).unwrap()["response"]["allowed"],
            true
        );
        assert!(decide(b"{}", &NOBODY).is_err());
    }

    fn delete(kind: &str) -> Vec<u8> {
        serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview", "request": {"uid": "u2", "operation": "DELETE",
            "kind": {"group": "mcpwarden.dev", "version": "v1alpha1", "kind": kind},
            "namespace": "team-a", "name": "fetch", "userInfo": {"username": "carol"}}}))
        .unwrap()
    }

    #[test]
    fn a_profile_in_use_is_not_deleted_and_the_message_names_the_servers() {
        let using = Using(Ok(vec!["fetch".into(), "fetch-2".into()]));
        let out = decide(&delete("ToolProfile"), &using).unwrap();
        assert_eq!(out["response"]["allowed"], false);
        assert_eq!(out["response"]["status"]["code"], 409);
        assert_eq!(
            out["response"]["status"]["message"],
            "ToolProfile team-a/fetch is in use by MCPServer fetch, fetch-2: point their spec.toolProfileRef elsewhere or delete them first"
        );
        let sandbox = decide(&delete("SandboxProfile"), &using).unwrap();
        assert!(sandbox["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("spec.sandboxProfileRef"));
        // Cannot tell: fail closed.
        let unknown = decide(&delete("ToolProfile"), &Using(Err("forbidden".into()))).unwrap();
        assert_eq!(unknown["response"]["allowed"], false);
        assert!(unknown["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot tell whether an MCPServer uses it (forbidden)"));
    }
}
