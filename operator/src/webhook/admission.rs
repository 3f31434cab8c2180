//! The admission decision for MCPServer CREATE/UPDATE (DESIGN.md §5):
//! who may set or change `mcpwarden.dev/approve`, the `approved-by` record,
//! and what a user whose only right is approving may change. Only the
//! SubjectAccessReviews are I/O; they sit behind [`Authorizer`] so every path
//! is testable with AdmissionReview JSON.
//!
//! | change to the annotations                | validate                      | mutate |
//! |---|---|---|
//! | none                                     | allow, no SubjectAccessReview | nothing |
//! | `approve` set or changed to a non-digest | deny: must be `sha256:` + 64 hex | — |
//! | `approve` set or changed                 | allow iff the SAR allows (verb `approve`, `mcpservers/approval`) and `approved-by` is absent or the requester | `approved-by` := requester |
//! | `approve` removed (revocation)           | allow                         | remove `approved-by` |
//! | only `approved-by` changed               | deny: only the webhook writes it | restore the old value |
//!
//! And, for every UPDATE (validate): a change to anything but the two
//! approval annotations — `spec`, labels, other annotations, finalizers,
//! owner references — needs verb `update` on the MCPServer (a second SAR).
//! Approvers are granted `patch` (what `kubectl annotate` needs) but not
//! `update`, so they can approve and revoke and change nothing else; editors
//! (`update` and `patch`, e.g. the built-in `edit` role) are not affected.
//! The chart's `matchConditions` send the API server's requests here only
//! when one of the two rules can apply: the approval annotations change, or
//! the user lacks `update`.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use crate::capabilities::{is_digest, APPROVED_BY_ANNOTATION, APPROVE_ANNOTATION};

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

/// What the webhook asks the API server a user may do to one MCPServer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Verb `approve` on `mcpservers/approval`: set or change `mcpwarden.dev/approve`.
    Approve,
    /// Verb `update` on `mcpservers`: change anything besides the approval annotations.
    Update,
}

impl Access {
    /// `(verb, subresource)` of the SubjectAccessReview.
    pub fn verb_and_subresource(self) -> (&'static str, Option<&'static str>) {
        match self {
            Access::Approve => ("approve", Some("approval")),
            Access::Update => ("update", None),
        }
    }
}

/// Asks the API server whether a user may do something to one MCPServer.
pub trait Authorizer: Send + Sync {
    /// SubjectAccessReview: group `mcpwarden.dev`, resource `mcpservers`, the
    /// verb and subresource of `access`, in `namespace`, for `name`.
    fn allowed<'a>(
        &'a self,
        user: &'a UserInfo,
        namespace: &'a str,
        name: &'a str,
        access: Access,
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
    /// An UPDATE that changes more than the approval annotations.
    other_changes: bool,
}

/// What a user edits of an MCPServer, without the approval annotations and
/// without what the API server itself maintains (resourceVersion,
/// managedFields, generation, status…).
fn editable(object: &Value) -> Value {
    let meta = |f: &str| object.pointer(&format!("/metadata/{f}")).cloned();
    let mut annotations = meta("annotations").unwrap_or(Value::Null);
    if let Some(map) = annotations.as_object_mut() {
        map.remove(APPROVE_ANNOTATION);
        map.remove(APPROVED_BY_ANNOTATION);
    }
    let empty_is_absent = |v: Option<Value>| match v {
        Some(Value::Object(m)) if m.is_empty() => Value::Null,
        Some(Value::Array(a)) if a.is_empty() => Value::Null,
        Some(v) => v,
        None => Value::Null,
    };
    json!({
        "spec": object.get("spec").cloned().unwrap_or(Value::Null),
        "labels": empty_is_absent(meta("labels")),
        "annotations": empty_is_absent(Some(annotations)),
        "finalizers": empty_is_absent(meta("finalizers")),
        "ownerReferences": empty_is_absent(meta("ownerReferences")),
    })
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
        other_changes: old_object.is_some_and(|old| editable(old) != editable(object)),
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
    let reason = match code {
        403 => "Forbidden",
        422 => "Invalid",
        _ => "InternalError",
    };
    response(
        req,
        json!({"allowed": false, "status": {"code": code, "reason": reason, "message": message}}),
    )
}

/// Ask `authorizer`; `Err` is the denial to send (refused, or the SAR failed).
async fn require(
    req: &Request,
    authorizer: &dyn Authorizer,
    access: Access,
    refusal: impl FnOnce(&str) -> String,
) -> Result<(), Value> {
    let who = format!("MCPServer {}/{}", req.namespace, req.name);
    match authorizer
        .allowed(&req.user, &req.namespace, &req.name, access)
        .await
    {
        Ok(d) if d.allowed => Ok(()),
        Ok(d) => {
            let reason = if d.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", d.reason)
            };
            Err(deny(req, 403, format!("{}{reason}", refusal(&who))))
        }
        Err(e) => Err(deny(
            req,
            500,
            format!("{who}: cannot check the user's rights (SubjectAccessReview failed: {e})"),
        )),
    }
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
            if !approve_changed && !revoked && by_new != by_old {
                return Ok(deny(
                    &req,
                    403,
                    format!("{who}: {APPROVED_BY_ANNOTATION} is written by the mcp-warden admission webhook only"),
                ));
            }
            if let Some(value) = approve_new.filter(|v| approve_changed && !is_digest(v)) {
                return Ok(deny(
                    &req,
                    422,
                    format!(
                        "{who}: {APPROVE_ANNOTATION} must be \"sha256:\" followed by 64 lowercase hex digits, the digest in the server's status.capabilityDigest; got {value:?}. To revoke an approval, remove the annotation"
                    ),
                ));
            }
            if approve_changed && by_new.is_some_and(|b| *b != req.user.username) {
                return Ok(deny(
                    &req,
                    403,
                    format!(
                        "{who}: {APPROVED_BY_ANNOTATION} must name the approving user ({:?})",
                        req.user.username
                    ),
                ));
            }
            let user = &req.user.username;
            if approve_changed {
                if let Err(denial) = require(&req, authorizer, Access::Approve, |who| format!(
                    "user {user:?} may not approve capabilities of {who}: setting {APPROVE_ANNOTATION} needs verb \"approve\" on resource \"mcpservers/approval\" in API group \"mcpwarden.dev\""
                )).await {
                    return Ok(denial);
                }
            }
            if req.other_changes {
                if let Err(denial) = require(&req, authorizer, Access::Update, |who| format!(
                    "user {user:?} may change only the approval annotations of {who}: changing anything besides the {APPROVE_ANNOTATION} annotation needs verb \"update\" on resource \"mcpservers\" in API group \"mcpwarden.dev\" (\"patch\" alone, as the approver role grants, does not allow it)"
                )).await {
                    return Ok(denial);
                }
            }
            Ok(allow(&req))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// `alice` may approve (and patch, so she is an approver only); `erin`
    /// may update (an editor); nobody else may do either. Records every question.
    #[derive(Default)]
    struct Fake {
        asked: Mutex<Vec<(String, String, String, Access)>>,
    }

    impl Authorizer for Fake {
        fn allowed<'a>(
            &'a self,
            user: &'a UserInfo,
            namespace: &'a str,
            name: &'a str,
            access: Access,
        ) -> BoxFuture<'a, Result<AccessDecision, String>> {
            self.asked.lock().unwrap().push((
                user.username.clone(),
                namespace.into(),
                name.into(),
                access,
            ));
            let allowed = match access {
                Access::Approve => user.username == "alice",
                Access::Update => user.username == "erin",
            };
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
        review_with_spec(user, old.map(|o| (o, json!({}))), (new, json!({})))
    }

    /// An AdmissionReview whose old and new objects have these annotations and specs.
    fn review_with_spec(user: &str, old: Option<(Value, Value)>, new: (Value, Value)) -> Vec<u8> {
        let meta = |a: Value| json!({"name": "fetch", "namespace": "team-a", "annotations": a});
        let object = |(a, spec): (Value, Value)| json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": meta(a), "spec": spec});
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "mcpwarden.dev", "version": "v1alpha1", "kind": "MCPServer"},
                "resource": {"group": "mcpwarden.dev", "version": "v1alpha1", "resource": "mcpservers"},
                "namespace": "team-a", "name": "fetch",
                "operation": if old.is_some() { "UPDATE" } else { "CREATE" },
                "userInfo": {"username": user, "groups": ["system:authenticated"]},
                "object": object(new),
                "oldObject": old.map(object),
            }
        }))
        .unwrap()
    }

    fn decoded_patch(resp: &Value) -> Value {
        let bytes: k8s_openapi::ByteString =
            serde_json::from_value(resp["response"]["patch"].clone()).unwrap();
        serde_json::from_slice(&bytes.0).unwrap()
    }

    const D: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

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
                "fetch".to_string(),
                Access::Approve
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
    async fn a_value_that_is_not_a_digest_is_refused() {
        let fake = Fake::default();
        for bad in ["yes", "sha256:aaaa", "SHA256:AAAA"] {
            let body = review_json("alice", Some(json!({})), json!({APPROVE_ANNOTATION: bad}));
            let v = review(&body, Mode::Validate, &fake).await.unwrap();
            assert_eq!(v["response"]["allowed"], false, "{bad}");
            assert_eq!(v["response"]["status"]["code"], 422);
            let msg = v["response"]["status"]["message"].as_str().unwrap();
            assert!(
                msg.contains("must be \"sha256:\" followed by 64 lowercase hex digits"),
                "{msg}"
            );
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
        }
        // An old malformed value that stays is not re-judged.
        let same = json!({APPROVE_ANNOTATION: "yes", "x": "1"});
        let body = review_json("bob", Some(same.clone()), same);
        assert_eq!(
            review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
            true
        );
    }

    #[tokio::test]
    async fn an_approver_changes_nothing_else() {
        let fake = Fake::default();
        let spec = |r: i64| json!({"image": "i", "replicas": r});
        // approve and, in the same write, change the spec: refused (no `update`)
        let body = review_with_spec(
            "alice",
            Some((json!({}), spec(1))),
            (json!({APPROVE_ANNOTATION: D}), spec(5)),
        );
        let v = review(&body, Mode::Validate, &fake).await.unwrap();
        assert_eq!(v["response"]["allowed"], false);
        let msg = v["response"]["status"]["message"].as_str().unwrap();
        assert!(
            msg.contains(
                "\"alice\" may change only the approval annotations of MCPServer team-a/fetch"
            ),
            "{msg}"
        );
        assert!(msg.contains("verb \"update\""), "{msg}");
        // a label or another annotation is a change too
        for (old, new) in [
            (json!({}), json!({"team": "x"})),
            (
                json!({APPROVE_ANNOTATION: D}),
                json!({APPROVE_ANNOTATION: D, "note": "x"}),
            ),
        ] {
            let body = review_with_spec("alice", Some((old, spec(1))), (new, spec(1)));
            assert_eq!(
                review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
                false
            );
        }
        // approving alone, or revoking, is fine
        for (old, new) in [
            (json!({}), json!({APPROVE_ANNOTATION: D})),
            (
                json!({APPROVE_ANNOTATION: D, APPROVED_BY_ANNOTATION: "alice"}),
                json!({}),
            ),
        ] {
            let body = review_with_spec("alice", Some((old, spec(1))), (new, spec(1)));
            assert_eq!(
                review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
                true
            );
        }
    }

    #[tokio::test]
    async fn an_editor_edits_without_approving() {
        let fake = Fake::default();
        let spec = |r: i64| json!({"image": "i", "replicas": r});
        let body = review_with_spec("erin", Some((json!({}), spec(1))), (json!({}), spec(3)));
        assert_eq!(
            review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
            true
        );
        assert_eq!(
            fake.asked.lock().unwrap().last().map(|a| a.3),
            Some(Access::Update)
        );
        // …but may not approve
        let body = review_with_spec(
            "erin",
            Some((json!({}), spec(1))),
            (json!({APPROVE_ANNOTATION: D}), spec(3)),
        );
        let v = review(&body, Mode::Validate, &fake).await.unwrap();
        assert_eq!(v["response"]["allowed"], false);
        assert!(v["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("may not approve"));
        // a CREATE is RBAC's business (verb create): no update check
        let fake = Fake::default();
        let body = review_with_spec("mallory", None, (json!({"x": "y"}), spec(1)));
        assert_eq!(
            review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
            true
        );
        assert!(fake.asked.lock().unwrap().is_empty());
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
