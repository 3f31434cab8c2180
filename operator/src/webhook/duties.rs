//! Separation of duties (pure; called by `admission`): nobody approves a
//! workload they changed.
//!
//! ```text
//! UPDATE/CREATE of an MCPServer ─▶ covered content changed? (spec but `replicas`, `expose`)
//!    └─ yes: the requester joins mcpwarden.dev/changed-by (kept by the mutating webhook)
//! approval (mcpwarden.dev/approve set or changed) ─▶ refused, unless allowSelfApproval, when
//!    ├─ the approver is in changed-by (or changes covered content in the same write), or
//!    └─ a covered part changed that no record names (the ToolProfile, the SandboxProfile, a
//!       secretEnv Secret: their writes do not pass this webhook) and the approver could
//!       have made it (a SubjectAccessReview for `update` on that kind in the namespace)
//! ```
//!
//! `changed-by` is a JSON array of user names, sorted: every identity that
//! changed covered content since the last accepted approval, which clears
//! it. Only the webhook writes it — a client's value is replaced by the
//! mutating webhook and refused by the validating one — and it is not read
//! from `managedFields`, which a client can forge. Which parts changed
//! without a record comes from the MCPServer's status (`workload` against
//! `approvedWorkload`), which only the operator writes.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// The annotation the webhook keeps: who changed covered content since the
/// last approval (contract).
pub const CHANGED_BY_ANNOTATION: &str = "mcpwarden.dev/changed-by";

/// The spec fields an approval does not cover: how many pods and who may
/// reach them, not what runs.
const NOT_COVERED: [&str; 2] = ["replicas", "expose"];

/// The covered part of an object: its spec without [`NOT_COVERED`].
pub fn covered(object: &Value) -> Value {
    let mut spec = object.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(map) = spec.as_object_mut() {
        for key in NOT_COVERED {
            map.remove(key);
        }
    }
    spec
}

/// The recorded identities (an unreadable value counts as none: the
/// validating webhook refuses any value it did not write).
pub fn changers(value: Option<&String>) -> BTreeSet<String> {
    value
        .and_then(|v| serde_json::from_str::<Vec<String>>(v).ok())
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The annotation value for a set (`None`: no annotation).
pub fn encode(set: &BTreeSet<String>) -> Option<String> {
    (!set.is_empty()).then(|| json!(set).to_string())
}

/// What `changed-by` must hold after this write: cleared by an accepted
/// approval, then joined by the requester if this write changes covered content.
pub fn expected(
    old: &BTreeSet<String>,
    user: &str,
    covered_changed: bool,
    approve_changed: bool,
) -> BTreeSet<String> {
    let mut set = if approve_changed {
        BTreeSet::new()
    } else {
        old.clone()
    };
    if covered_changed {
        set.insert(user.to_string());
    }
    set
}

/// A covered part that changes without passing this webhook, and the
/// resource whose `update` right could have changed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unrecorded {
    /// `status.workload.toolProfile`: the ToolProfile (or a JWKS ConfigMap).
    ToolProfile,
    /// `status.workload.sandboxProfile`: the SandboxProfile.
    SandboxProfile,
    /// `status.workload.secretEnv`: a referenced Secret's content.
    SecretEnv,
}

impl Unrecorded {
    /// `(API group, resource)` whose `update` could have made the change.
    pub fn resource(self) -> (&'static str, &'static str) {
        match self {
            Unrecorded::ToolProfile => (mcp_warden_crds::GROUP, "toolprofiles"),
            Unrecorded::SandboxProfile => (mcp_warden_crds::GROUP, "sandboxprofiles"),
            Unrecorded::SecretEnv => ("", "secrets"),
        }
    }

    /// The part's name in `status.workload`.
    pub fn part(self) -> &'static str {
        match self {
            Unrecorded::ToolProfile => "toolProfile",
            Unrecorded::SandboxProfile => "sandboxProfile",
            Unrecorded::SecretEnv => "secretEnv",
        }
    }
}

/// The unrecorded parts that changed since the last approval, by the
/// object's status (all the server uses, before a first approval).
pub fn unrecorded(object: &Value) -> Vec<Unrecorded> {
    let status = object.get("status");
    let part = |p: &str| {
        status
            .and_then(|s| s.pointer(&format!("/workload/{p}")))
            .cloned()
    };
    let approved = |p: &str| {
        status
            .and_then(|s| s.pointer(&format!("/approvedWorkload/{p}")))
            .cloned()
    };
    let spec = object.get("spec");
    let uses = |field: &str| {
        spec.and_then(|s| s.get(field))
            .is_some_and(|v| !v.is_null() && v != &json!([]))
    };
    [
        (Unrecorded::ToolProfile, true),
        (Unrecorded::SandboxProfile, uses("sandboxProfileRef")),
        (Unrecorded::SecretEnv, uses("secretEnv")),
    ]
    .into_iter()
    .filter(|(u, used)| {
        *used && (approved(u.part()).is_none() || part(u.part()) != approved(u.part()))
    })
    .map(|(u, _)| u)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_and_expose_are_not_covered() {
        let a = json!({"spec": {"image": "a", "replicas": 1}});
        let b = json!({"spec": {"image": "a", "replicas": 3, "expose": {"hosts": ["x"]}}});
        assert_eq!(covered(&a), covered(&b));
        assert_ne!(covered(&a), covered(&json!({"spec": {"image": "b"}})));
    }

    #[test]
    fn the_record_grows_with_changes_and_an_approval_clears_it() {
        let none = BTreeSet::new();
        let carol = expected(&none, "carol", true, false);
        assert_eq!(encode(&carol).as_deref(), Some(r#"["carol"]"#));
        let both = expected(&carol, "dave", true, false);
        assert_eq!(encode(&both).as_deref(), Some(r#"["carol","dave"]"#));
        assert_eq!(changers(encode(&both).as_ref()), both);
        assert_eq!(
            expected(&both, "erin", false, false),
            both,
            "a label edit adds no one"
        );
        assert!(
            expected(&both, "bob", false, true).is_empty(),
            "an approval clears"
        );
        assert_eq!(
            expected(&both, "dave", true, true),
            BTreeSet::from(["dave".to_string()]),
            "a change in the approving write is not covered by that approval"
        );
        assert!(changers(Some(&"not json".to_string())).is_empty());
    }

    #[test]
    fn unrecorded_parts_come_from_the_status() {
        let spec = json!({"toolProfileRef": {"name": "t"}, "sandboxProfileRef": {"name": "s"},
                          "secretEnv": [{"name": "T", "secretName": "x", "key": "k"}]});
        let same = json!({"toolProfile": "sha256:1", "sandboxProfile": "sha256:2", "secretEnv": "sha256:3"});
        let object = |workload: Value, approved: Value| json!({"spec": spec, "status": {"workload": workload, "approvedWorkload": approved}});
        assert!(unrecorded(&object(same.clone(), same.clone())).is_empty());
        let moved = json!({"toolProfile": "sha256:9", "sandboxProfile": "sha256:2", "secretEnv": "sha256:8"});
        assert_eq!(
            unrecorded(&object(moved, same.clone())),
            [Unrecorded::ToolProfile, Unrecorded::SecretEnv]
        );
        // before a first approval, everything the server uses
        assert_eq!(
            unrecorded(&object(same, json!({}))),
            [
                Unrecorded::ToolProfile,
                Unrecorded::SandboxProfile,
                Unrecorded::SecretEnv
            ]
        );
        // a server without a SandboxProfile or secretEnv: only its ToolProfile
        assert_eq!(
            unrecorded(&json!({"spec": {"toolProfileRef": {"name": "t"}}})),
            [Unrecorded::ToolProfile]
        );
    }
}
