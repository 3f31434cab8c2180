//! The admission decision for MCPServer CREATE/UPDATE (capability approvals):
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

use super::duties::{self, Unrecorded, CHANGED_BY_ANNOTATION};
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

/// What the webhook asks the API server a user may do to one MCPServer
/// (or, for [`Access::Edit`], in its namespace).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Verb `approve` on `mcpservers/approval`: set or change `mcpwarden.dev/approve`.
    Approve,
    /// Verb `update` on `mcpservers`: change anything besides the approval annotations.
    Update,
    /// Verb `update` on the kind behind an unrecorded covered part (any
    /// object of it in the namespace): could this user have made the change?
    Edit(Unrecorded),
}

impl Access {
    /// `(verb, subresource)` of the SubjectAccessReview.
    pub fn verb_and_subresource(self) -> (&'static str, Option<&'static str>) {
        match self {
            Access::Approve => ("approve", Some("approval")),
            Access::Update | Access::Edit(_) => ("update", None),
        }
    }

    /// `(API group, resource, whether the review names the MCPServer)`.
    pub fn resource(self) -> (&'static str, &'static str, bool) {
        match self {
            Access::Approve | Access::Update => (mcp_warden_crds::GROUP, "mcpservers", true),
            Access::Edit(part) => {
                let (group, resource) = part.resource();
                (group, resource, false)
            }
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

    /// Whether someone who changed covered content may approve it
    /// (`approval.allowSelfApproval`; off unless configured).
    fn allow_self_approval(&self) -> bool {
        false
    }
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
    /// A CREATE, or an UPDATE that changes what an approval covers.
    covered_changed: bool,
    /// Covered parts changed since the last approval without a record.
    unrecorded: Vec<Unrecorded>,
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
        map.remove(CHANGED_BY_ANNOTATION);
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

/// What every AdmissionReview carries, whatever it is about: its
/// `apiVersion` (echoed in the response), the request and its uid.
pub(super) struct Envelope {
    pub api_version: String,
    pub request: Value,
    pub uid: String,
}

/// Read an AdmissionReview's envelope (the one reading both webhooks use).
pub(super) fn envelope(body: &[u8]) -> Result<Envelope, Malformed> {
    let mut review: Value =
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
        .get_mut("request")
        .filter(|r| r.is_object())
        .map(Value::take)
        .ok_or_else(|| Malformed("no request".into()))?;
    let uid = request
        .get("uid")
        .and_then(Value::as_str)
        .filter(|u| !u.is_empty())
        .ok_or_else(|| Malformed("request.uid is missing".into()))?
        .to_string();
    Ok(Envelope {
        api_version,
        request,
        uid,
    })
}

fn parse(body: &[u8]) -> Result<Request, Malformed> {
    let Envelope {
        api_version,
        request,
        uid,
    } = envelope(body)?;
    let request = &request;
    let text = |field: &str| request.get(field).and_then(Value::as_str);
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
        covered_changed: old_object
            .is_none_or(|old| duties::covered(old) != duties::covered(object)),
        unrecorded: duties::unrecorded(object),
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

/// `changed-by` after this write (see `duties::expected`).
fn expected_changers(req: &Request, approve_changed: bool) -> std::collections::BTreeSet<String> {
    let old = duties::changers(req.old.get(CHANGED_BY_ANNOTATION));
    duties::expected(
        &old,
        &req.user.username,
        req.covered_changed,
        approve_changed,
    )
}

/// Refuse an approval by someone who changed what it covers: recorded in
/// `changed-by` (or changing it in this very write), or able to have made
/// a change no record names.
async fn self_approval(req: &Request, authorizer: &dyn Authorizer) -> Option<Value> {
    let user = &req.user.username;
    let who = format!("MCPServer {}/{}", req.namespace, req.name);
    let mut made = duties::changers(req.old.get(CHANGED_BY_ANNOTATION));
    if req.covered_changed {
        made.insert(user.clone());
    }
    if made.contains(user) {
        let names = made
            .iter()
            .map(|u| format!("{u:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Some(deny(req, 403, format!(
            "user {user:?} may not approve {who}: it was changed since the last approval by {names}, and whoever changed a workload may not approve it (separation of duties; the chart's approval.allowSelfApproval turns this off)"
        )));
    }
    for part in &req.unrecorded {
        let (group, resource) = part.resource();
        let allowed = authorizer
            .allowed(&req.user, &req.namespace, &req.name, Access::Edit(*part))
            .await;
        let could = match allowed {
            Ok(d) => d.allowed,
            Err(e) => {
                return Some(deny(
                    req,
                    500,
                    format!(
                        "{who}: cannot check the user's rights (SubjectAccessReview failed: {e})"
                    ),
                ))
            }
        };
        if could {
            let kind = if group.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}.{group}")
            };
            return Some(deny(req, 403, format!(
                "user {user:?} may not approve {who}: its {} changed since the last approval where no record says who changed it, and {user:?} could have (verb \"update\" on {kind} in namespace {:?}); an approver who cannot edit it must approve (separation of duties; the chart's approval.allowSelfApproval turns this off)",
                part.part(), req.namespace
            )));
        }
    }
    None
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
            let changers_key = format!(
                "/metadata/annotations/{}",
                CHANGED_BY_ANNOTATION.replace('/', "~1")
            );
            let changers_want = duties::encode(&expected_changers(&req, approve_changed));
            let changers_new = req.new.get(CHANGED_BY_ANNOTATION);
            let mut ops = Vec::new();
            if !req.has_annotations && (want.is_some() || changers_want.is_some()) {
                ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": {}}));
            }
            match (by_new, want) {
                (a, b) if a == b => {}
                (_, Some(v)) => ops.push(json!({"op": "add", "path": key, "value": v})),
                (Some(_), None) => ops.push(json!({"op": "remove", "path": key})),
                (None, None) => {}
            }
            match (changers_new, changers_want.as_ref()) {
                (a, b) if a == b => {}
                (_, Some(v)) => ops.push(json!({"op": "add", "path": changers_key, "value": v})),
                (Some(_), None) => ops.push(json!({"op": "remove", "path": changers_key})),
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
            let changers_want = duties::encode(&expected_changers(&req, approve_changed));
            if req.new.get(CHANGED_BY_ANNOTATION) != changers_want.as_ref() {
                return Ok(deny(
                    &req,
                    403,
                    format!("{who}: {CHANGED_BY_ANNOTATION} is written by the mcp-warden admission webhook only"),
                ));
            }
            let user = &req.user.username;
            if approve_changed {
                if let Err(denial) = require(&req, authorizer, Access::Approve, |who| format!(
                    "user {user:?} may not approve capabilities of {who}: setting {APPROVE_ANNOTATION} needs verb \"approve\" on resource \"mcpservers/approval\" in API group \"mcpwarden.dev\""
                )).await {
                    return Ok(denial);
                }
                if !authorizer.allow_self_approval() {
                    if let Some(denial) = self_approval(&req, authorizer).await {
                        return Ok(denial);
                    }
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
#[path = "admission_tests.rs"]
mod tests;
