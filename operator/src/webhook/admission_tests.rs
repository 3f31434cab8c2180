//! Tests of `admission`: AdmissionReview JSON in, the decision out, with a fake authorizer.
use super::*;
use std::sync::Mutex;

/// `alice` may approve (and patch, so she is an approver only); `erin`
/// may update (an editor); nobody else may do either. Records every question.
#[derive(Default)]
struct Fake {
    asked: Mutex<Vec<(String, String, String, Access)>>,
    /// `approval.allowSelfApproval`.
    allow_self: bool,
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
            Access::Approve => user.username == "alice" || user.username == "dave",
            Access::Update => user.username == "erin" || user.username == "dave",
            // dave edits and approves: he could have changed a profile
            Access::Edit(_) => user.username == "dave",
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

    fn allow_self_approval(&self) -> bool {
        self.allow_self
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
    let ask = |access| {
        (
            "alice".to_string(),
            "team-a".to_string(),
            "fetch".to_string(),
            access,
        )
    };
    // could alice have changed the ToolProfile (no record says who did)? no
    assert_eq!(
        *fake.asked.lock().unwrap(),
        [
            ask(Access::Approve),
            ask(Access::Edit(Unrecorded::ToolProfile))
        ]
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
    // a create, with the record the mutating webhook adds, too
    let create = review_json("bob", None, json!({CHANGED_BY_ANNOTATION: r#"["bob"]"#}));
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
    let body = review_with_spec(
        "mallory",
        None,
        (
            json!({"x": "y", CHANGED_BY_ANNOTATION: r#"["mallory"]"#}),
            spec(1),
        ),
    );
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

fn message(v: &Value) -> &str {
    v["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default()
}

#[tokio::test]
async fn whoever_changed_a_workload_may_not_approve_it() {
    let fake = Fake::default();
    let spec = |image: &str| json!({"image": image, "toolProfileRef": {"name": "t"}});
    // dave (edit + approver) changes the image: the mutating webhook records him
    let change = review_with_spec("dave", Some((json!({}), spec("a"))), (json!({}), spec("b")));
    let m = review(&change, Mode::Mutate, &fake).await.unwrap();
    assert_eq!(
        decoded_patch(&m),
        json!([{"op": "add", "path": "/metadata/annotations/mcpwarden.dev~1changed-by", "value": "[\"dave\"]"}])
    );
    let recorded = json!({CHANGED_BY_ANNOTATION: "[\"dave\"]"});
    let change = review_with_spec(
        "dave",
        Some((json!({}), spec("a"))),
        (recorded.clone(), spec("b")),
    );
    assert_eq!(
        review(&change, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
        true
    );
    // …then approves: refused, naming him
    // (as the mutating webhook leaves it: an approval clears the record)
    let approve = json!({APPROVE_ANNOTATION: D});
    let body = review_with_spec(
        "dave",
        Some((recorded.clone(), spec("b"))),
        (approve.clone(), spec("b")),
    );
    let v = review(&body, Mode::Validate, &fake).await.unwrap();
    assert_eq!(v["response"]["allowed"], false, "{v}");
    assert!(
        message(&v).contains("changed since the last approval by \"dave\""),
        "{}",
        message(&v)
    );
    assert!(
        message(&v).contains("approval.allowSelfApproval"),
        "{}",
        message(&v)
    );
    // changing and approving in one write is the same
    let both = json!({APPROVE_ANNOTATION: D, CHANGED_BY_ANNOTATION: "[\"dave\"]"});
    let body = review_with_spec("dave", Some((json!({}), spec("a"))), (both, spec("b")));
    let v = review(&body, Mode::Validate, &fake).await.unwrap();
    assert!(message(&v).contains("by \"dave\""), "{}", message(&v));
    assert_eq!(v["response"]["allowed"], false);
    // alice, who changed nothing and cannot edit profiles, approves; the record is cleared
    let approve_clean = json!({APPROVE_ANNOTATION: D});
    let sent = json!({APPROVE_ANNOTATION: D, CHANGED_BY_ANNOTATION: "[\"dave\"]"});
    let body = review_with_spec(
        "alice",
        Some((recorded.clone(), spec("b"))),
        (sent, spec("b")),
    );
    let m = review(&body, Mode::Mutate, &fake).await.unwrap();
    let ops = decoded_patch(&m);
    assert!(
        ops.as_array().unwrap().contains(
            &json!({"op": "remove", "path": "/metadata/annotations/mcpwarden.dev~1changed-by"})
        ),
        "{ops}"
    );
    let body = review_with_spec(
        "alice",
        Some((recorded.clone(), spec("b"))),
        (approve_clean, spec("b")),
    );
    assert_eq!(
        review(&body, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
        true
    );
    // with allowSelfApproval, dave may
    let lenient = Fake {
        allow_self: true,
        ..Fake::default()
    };
    let body = review_with_spec(
        "dave",
        Some((recorded, spec("b"))),
        (json!({APPROVE_ANNOTATION: D}), spec("b")),
    );
    assert_eq!(
        review(&body, Mode::Validate, &lenient).await.unwrap()["response"]["allowed"],
        true
    );
}

#[tokio::test]
async fn only_the_webhook_writes_the_record() {
    let fake = Fake::default();
    let spec = json!({"image": "a"});
    let recorded = json!({CHANGED_BY_ANNOTATION: "[\"carol\"]"});
    // erin (an editor) drops the record with a label-only write: put back, and refused if it got through
    let body = review_with_spec(
        "erin",
        Some((recorded.clone(), spec.clone())),
        (json!({}), spec.clone()),
    );
    let m = review(&body, Mode::Mutate, &fake).await.unwrap();
    assert_eq!(
        decoded_patch(&m),
        json!([{"op": "add", "path": "/metadata/annotations/mcpwarden.dev~1changed-by", "value": "[\"carol\"]"}])
    );
    let v = review(&body, Mode::Validate, &fake).await.unwrap();
    assert_eq!(v["response"]["allowed"], false);
    assert!(
        message(&v).contains("changed-by is written by the mcp-warden admission webhook only"),
        "{}",
        message(&v)
    );
    // replicas are not covered: no one joins the record
    let scaled = review_with_spec(
        "erin",
        Some((recorded.clone(), json!({"image": "a", "replicas": 1}))),
        (recorded.clone(), json!({"image": "a", "replicas": 3})),
    );
    assert_eq!(
        review(&scaled, Mode::Validate, &fake).await.unwrap()["response"]["allowed"],
        true
    );
}

#[tokio::test]
async fn an_unrecorded_change_needs_an_approver_who_could_not_have_made_it() {
    let fake = Fake::default();
    let object = |annotations: Value| {
        json!({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
               "metadata": {"name": "fetch", "namespace": "team-a", "annotations": annotations},
               "spec": {"image": "a", "toolProfileRef": {"name": "t"}},
               "status": {"workload": {"toolProfile": "sha256:2", "image": "sha256:1"},
                          "approvedWorkload": {"toolProfile": "sha256:1", "image": "sha256:1"}}})
    };
    let body = |user: &str| {
        serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "namespace": "team-a", "name": "fetch", "operation": "UPDATE",
                    "userInfo": {"username": user},
                    "object": object(json!({APPROVE_ANNOTATION: D})),
                    "oldObject": object(json!({}))}}))
        .unwrap()
    };
    // dave could have edited the ToolProfile (verb update on toolprofiles): refused
    let v = review(&body("dave"), Mode::Validate, &fake).await.unwrap();
    assert_eq!(v["response"]["allowed"], false);
    assert!(
        message(&v).contains("its toolProfile changed since the last approval"),
        "{}",
        message(&v)
    );
    assert!(
        message(&v).contains("toolprofiles.mcpwarden.dev"),
        "{}",
        message(&v)
    );
    // alice could not: accepted
    let v = review(&body("alice"), Mode::Validate, &fake).await.unwrap();
    assert_eq!(v["response"]["allowed"], true, "{v}");
}
