//! The admission decision for MCPServer CREATE/UPDATE (DESIGN.md §5):
//! who may set or change `mcpwarden.dev/approve`, and the `approved-by`
//! record. Only the SubjectAccessReview is I/O; it sits behind
//! [`Authorizer`] so every path is testable with AdmissionReview JSON.
//!
//! | change to the annotations                | validate                      | mutate |
//! |---|---|---|
//! | none                                     | allow, no SubjectAccessReview | nothing |
//! | `approve` set or changed                 | allow iff the SAR allows (verb `approve`, `mcpservers/approval`) and `approved-by` is absent or the requester | `approved-by` := requester |
//! | `approve` removed (revocation)           | allow                         | remove `approved-by` |
//! | only `approved-by` changed               | deny: only the webhook writes it | restore the old value |

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::capabilities::{APPROVED_BY_ANNOTATION, APPROVE_ANNOTATION};

/// The requesting user, as the API server authenticated it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// `userInfo.username`.
    pub username: String,
    /// `userInfo.uid`.
    pub uid: Option<String>,
    /// `userInfo.groups`.
    pub groups: Vec<String>,
    /// `userInfo.extra`.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The SubjectAccessReview's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessDecision {
    /// `status.allowed`.
    pub allowed: bool,
    /// `status.reason` (and `evaluationError`), for the denial message.
    pub reason: String,
}

/// Asks the API server whether a user may approve capabilities of one MCPServer.
pub trait Authorizer: Send + Sync {
    /// SubjectAccessReview: verb `approve`, group `mcpwarden.dev`, resource
    /// `mcpservers`, subresource `approval`, in `namespace`, for `name`.
    fn may_approve<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<AccessDecision, String>>;
}

/// Which webhook path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `/validate-mcpserver`.
    Validate,
    /// `/mutate-mcpserver`.
    Mutate,
}

/// The body is not an AdmissionReview the webhook can answer (HTTP 400).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("malformed AdmissionReview: {0}")]
pub struct Malformed(pub String);

struct Request {
    uid: String,
    api_version: String,
    namespace: String,
    name: String,
    user: UserInfo,
    new: BTreeMap<String, String>,
    old: BTreeMap<String, String>,
    has_annotations: bool,
}

fn annotations(object: &Value) -> Result<BTreeMap<String, String>, Malformed> {
    match object.pointer("/metadata/annotations") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(a) => serde_json::from_value(a.clone())
            .map_err(|e| Malformed(format!("metadata.annotations: {e}"))),
    }
}

fn parse(body: &[u8]) -> Result<Request, Malformed> {
    let review: Value =
        serde_json::from_slice(body).map_err(|e| Malformed(format!("not JSON: {e}")))?;
    if review.get("kind").and_then(Value::as_str) != Some("AdmissionReview") {
        return Err(Malformed("kind must be AdmissionReview".into()));
    }
    let api_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("admission.k8s.io/v1")
        .to_string();
    let request = review
        .get("request")
        .filter(|r| r.is_object())
        .ok_or_else(|| Malformed("no request".into()))?;
    let text = |field: &str| request.get(field).and_then(Value::as_str);
    let uid = text("uid")
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Malformed("request.uid is missing".into()))?
        .to_string();
    let object = request.get("object").filter(|o| o.is_object());
    let old_object = request.get("oldObject").filter(|o| o.is_object());
    let object = object.ok_or_else(|| {
        Malformed("request.object is missing (only CREATE and UPDATE are handled)".into())
    })?;
    let user: Value = request.get("userInfo").cloned().unwrap_or(Value::Null);
    let user = UserInfo {
        username: user
            .get("username")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        uid: user.get("uid").and_then(Value::as_str).map(str::to_string),
        groups: serde_json::from_value(user.get("groups").cloned().unwrap_or(json!([])))
            .map_err(|e| Malformed(format!("userInfo.groups: {e}")))?,
        extra: serde_json::from_value(user.get("extra").cloned().unwrap_or(json!({})))
            .map_err(|e| Malformed(format!("userInfo.extra: {e}")))?,
    };
    let meta_text = |o: &Value, f: &str| {
        o.pointer(&format!("/metadata/{f}"))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    Ok(Request {
        uid,
        api_version,
        namespace: text("namespace")
            .map(str::to_string)
            .or_else(|| meta_text(object, "namespace"))
            .unwrap_or_default(),
        name: text("name")
            .map(str::to_string)
            .or_else(|| meta_text(object, "name"))
            .unwrap_or_default(),
        user,
        new: annotations(object)?,
        old: old_object.map(annotations).transpose()?.unwrap_or_default(),
        has_annotations: object
            .pointer("/metadata/annotations")
            .is_some_and(Value::is_object),
    })
}

fn response(req: &Request, body: Value) -> Value {
    let mut body = body;
    body["uid"] = json!(req.uid);
    json!({"apiVersion": req.api_version, "kind": "AdmissionReview", "response": body})
}

fn allow(req: &Request) -> Value {
    response(req, json!({"allowed": true}))
}

fn deny(req: &Request, code: u16, message: String) -> Value {
    response(
        req,
        json!({"allowed": false, "status": {"code": code, "reason": if code == 403 { "Forbidden" } else { "InternalError" }, "message": message}}),
    )
}

/// Answer one AdmissionReview: the response review (allowed or denied with
/// a reason), or [`Malformed`] when there is nothing to answer.
pub async fn review(
    body: &[u8],
    mode: Mode,
    authorizer: &dyn Authorizer,
) -> Result<Value, Malformed> {
    let req = parse(body)?;
    let approve_new = req.new.get(APPROVE_ANNOTATION);
    let approve_old = req.old.get(APPROVE_ANNOTATION);
    let by_new = req.new.get(APPROVED_BY_ANNOTATION);
    let by_old = req.old.get(APPROVED_BY_ANNOTATION);
    let approve_changed = approve_new.is_some() && approve_new != approve_old;
    let revoked = approve_new.is_none() && approve_old.is_some();
    let who = format!("MCPServer {}/{}", req.namespace, req.name);
    match mode {
        Mode::Mutate => {
            let key = format!(
                "/metadata/annotations/{}",
                APPROVED_BY_ANNOTATION.replace('/', "~1")
            );
            let want: Option<&String> = if approve_changed {
                Some(&req.user.username)
            } else if revoked {
                None
            } else {
                by_old
            };
            let mut ops = Vec::new();
            if !req.has_annotations && want.is_some() {
                ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
            }
            match (by_new, want) {
                (a, b) if a == b => {}
                (_, Some(v)) => ops.push(json!({"op": "add", "path": key, "value": v})),
                (Some(_), None) => ops.push(json!({"op": "remove", "path": key})),
                (None, None) => {}
            }
            if ops.is_empty() {
                return Ok(allow(&req));
            }
            let patch = serde_json::to_vec(&ops).expect("a JSON patch serializes");
            let encoded = serde_json::to_value(k8s_openapi::ByteString(patch))
                .expect("bytes serialize as base64");
            Ok(response(
                &req,
                json!({"allowed": true, "patchType": "JSONPatch", "patch": encoded}),
            ))
        }
        Mode::Validate => {
            if !approve_changed {
                if !revoked && by_new != by_old {
                    return Ok(deny(
                        &req,
                        403,
                        format!("{who}: {APPROVED_BY_ANNOTATION} is written by the mcp-warden admission webhook only"),
                    ));
                }
                return Ok(allow(&req));
            }
            if by_new.is_some_and(|b| *b != req.user.username) {
                return Ok(deny(
                    &req,
                    403,
                    format!(
                        "{who}: {APPROVED_BY_ANNOTATION} must name the approving user ({:?})",
                        req.user.username
                    ),
                ));
            }
            match authorizer
                .may_approve(&req.user, &req.namespace, &req.name)
                .await
            {
                Ok(d) if d.allowed => Ok(allow(&req)),
                Ok(d) => Ok(deny(
                    &req,
                    403,
                    format!(
                        "user {:?} may not approve capabilities of {who}: setting {APPROVE_ANNOTATION} needs verb \"approve\" on resource \"mcpservers/approval\" in API group \"mcpwarden.dev\"{}",
                        req.user.username,
                        if d.reason.is_empty() { String::new() } else { format!(" ({})", d.reason) }
                    ),
                )),
                Err(e) => Ok(deny(
                    &req,
                    500,
                    format!("{who}: cannot check approval rights (SubjectAccessReview failed: {e})"),
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Allows only `alice`; records every question.
    #[derive(Default)]
    struct Fake {
        asked: Mutex<Vec<(String, String, String)>>,
    }

    impl Authorizer for Fake {
        fn may_approve<'a>(
            &'a self,
            user: &'a UserInfo,
            namespace: &'a str,
            name: &'a str,
        ) -> BoxFuture<'a, Result<AccessDecision, String>> {
            self.asked
                .lock()
                .unwrap()
                .push((user.username.clone(), namespace.into(), name.into()));
            let allowed = user.username == "alice";
            Box::pin(async move {
                Ok(AccessDecision {
                    allowed,
                    reason: if allowed {
                        ""
                    } else {
                        "no RBAC policy matched"
                    }
                    .into(),
                })
            })
        }
    }

    fn review_json(user: &str, old: Option<Value>, new: Value) -> Vec<u8> {
        let meta = |a: Value| json!({"name": "fetch", "namespace": "team-a", "annotations": a});
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "mcpwarden.dev", "version": "v1alpha1", "kind": "MCPServer"},
                "resource": {"group": "mcpwarden.dev", "version": "v1alpha1", "resource": "mcpservers"},
                "namespace": "team-a", "name": "fetch",
                "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
                "userInfo": {"username": user, "groups": ["system:authenticated"]},
                "object": {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": meta(new), "spec": {}},
                "oldObject": old.map(|o| json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": meta(o), "spec": {}})),
            }
        }))
        .unwrap()
    }

    fn decoded_patch(resp: &Value) -> Value {
        let bytes: k8s_openapi::ByteString =
            serde_json::from_value(resp["response"]["patch"].clone()).unwrap();
        serde_json::from_slice(&bytes.0).unwrap()
    }

    const D: &str = "sha256:aaaa";

    #[tokio::test]
    async fn an_approver_passes_and_is_recorded() {
        let fake = Fake::default();
        let body = review_json("alice", Some(json!({})), json!({APPROVE_ANNOTATION: D}));
        let v = review(&body, Mode::Validate, &fake).await.unwrap();
        assert_eq!(v["response"]["allowed"], true);
        assert_eq!(v["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(
            *fake.asked.lock().unwrap(),
            [(
                "alice".to_string(),
                "team-a".to_string(),
                "fetch".to_string()
            )]
        );
        let m = review(&body, Mode::Mutate, &fake).await.unwrap();
        assert_eq!(m["response"]["patchType"], "JSONPatch");
        assert_eq!(
            decoded_patch(&m),
            json!([{"op": "add", "path": "/metadata/annotations/mcpwarden.dev~1approved-by", "value": "alice"}])
        );
    }

    #[tokio::test]
    async fn another_user_is_denied_with_the_reason() {
        let fake = Fake::default();
        let body = review_json(
            "mallory",
            Some(json!({APPROVE_ANNOTATION: "sha256:old"})),
            json!({APPROVE_ANNOTATION: D}),
        );
        let v = review(&body, Mode::Validate, &fake).await.unwrap();
        assert_eq!(v["response"]["allowed"], false);
        assert_eq!(v["response"]["status"]["code"], 403);
        let msg = v["response"]["status"]["message"].as_str().unwrap();
        assert!(
            msg.contains("\"mallory\" may not approve capabilities of MCPServer team-a/fetch"),
            "{msg}"
        );
        assert!(
            msg.contains("\"approve\" on resource \"mcpservers/approval\""),
            "{msg}"
        );
        assert!(msg.contains("no RBAC policy matched"), "{msg}");
    }

    #[tokio::test]
    async fn updates_that_leave_the_annotation_alone_need_no_review() {
        let fake = Fake::default();
        let same = json!({APPROVE_ANNOTATION: D, APPROVED_BY_ANNOTATION: "alice", "other": "x"});
        let body = review_json("bob", Some(same.clone()), same);
        for mode in [Mode::Validate, Mode::Mutate] {
            let v = review(&body, mode, &fake).await.unwrap();
            assert_eq!(v["response"]["allowed"], true);
            assert!(v["response"].get("patch").is_none());
        }
        // a create without any annotation, too
        let create = review_json("bob", None, Value::Null);
        assert_eq!(
            review(&create, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
            true
        );
        assert_eq!(
            review(&create, Mode::Mutate, &fake).await.unwrap()["response"]["allowed"],
            true
        );
        assert!(
            fake.asked.lock().unwrap().is_empty(),
            "no SubjectAccessReview"
        );
    }

    #[tokio::test]
    async fn revoking_is_allowed_and_clears_the_approver() {
        let fake = Fake::default();
        let body = review_json(
            "bob",
            Some(json!({APPROVE_ANNOTATION: D, APPROVED_BY_ANNOTATION: "alice"})),
            json!({APPROVED_BY_ANNOTATION: "alice"}),
        );
        assert_eq!(
            review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
            true
        );
        let m = review(&body, Mode::Mutate, &fake).await.unwrap();
        assert_eq!(
            decoded_patch(&m),
            json!([{"op": "remove", "path": "/metadata/annotations/mcpwarden.dev~1approved-by"}])
        );
        assert!(fake.asked.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn forging_the_approver_is_refused_or_undone() {
        let fake = Fake::default();
        let before = json!({APPROVE_ANNOTATION: D, APPROVED_BY_ANNOTATION: "alice"});
        let forged = json!({APPROVE_ANNOTATION: D, APPROVED_BY_ANNOTATION: "mallory"});
        let body = review_json("mallory", Some(before), forged);
        let v = review(&body, Mode::Validate, &fake).await.unwrap();
        assert_eq!(v["response"]["allowed"], false);
        let m = review(&body, Mode::Mutate, &fake).await.unwrap();
        assert_eq!(
            decoded_patch(&m),
            json!([{"op": "add", "path": "/metadata/annotations/mcpwarden.dev~1approved-by", "value": "alice"}])
        );
        // an approver cannot name someone else either
        let body = review_json(
            "alice",
            Some(json!({})),
            json!({APPROVE_ANNOTATION: D, APPROVED_BY_ANNOTATION: "carol"}),
        );
        assert_eq!(
            review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
            false
        );
    }

    #[tokio::test]
    async fn malformed_requests_get_a_clear_error() {
        let fake = Fake::default();
        for (body, expect) in [
            (&b"{not json"[..], "not JSON"),
            (br#"{"kind": "Pod"}"#, "kind must be AdmissionReview"),
            (br#"{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}"#, "no request"),
            (br#"{"kind": "AdmissionReview", "request": {"object": {}}}"#, "request.uid is missing"),
            (br#"{"kind": "AdmissionReview", "request": {"uid": "u"}}"#, "request.object is missing"),
            (br#"{"kind": "AdmissionReview", "request": {"uid": "u", "object": {"metadata": {"annotations": [1]}}}}"#, "metadata.annotations"),
        ] {
            let err = review(body, Mode::Validate, &fake).await.unwrap_err();
            assert!(err.to_string().starts_with("malformed AdmissionReview: "), "{err}");
            assert!(err.to_string().contains(expect), "{err} (wanted {expect})");
        }
    }
}
