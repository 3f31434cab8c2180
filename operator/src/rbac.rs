//! Every Kubernetes API call the operator makes, as RBAC rules: the list the
//! Helm chart's ClusterRole is checked against (`operator/RBAC.md` is the
//! same table with the reasons). The mock-API reconcile tests map every
//! request they see to a rule here ([`allows`]), so a new call without a rule
//! fails a test.

/// One RBAC rule: API group (`""` for core), resource (`name/subresource`
/// for subresources), verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The API group.
    pub group: &'static str,
    /// The resource.
    pub resource: &'static str,
    /// The verbs.
    pub verbs: &'static [&'static str],
}

const fn rule(group: &'static str, resource: &'static str, verbs: &'static [&'static str]) -> Rule {
    Rule {
        group,
        resource,
        verbs,
    }
}

const WATCHED_OWNED: &[&str] = &["get", "list", "watch", "create", "patch"];
/// Owned, and deleted when nothing needs them (the egress proxy's objects).
const WATCHED_OWNED_DELETED: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// Resource rules (a ClusterRole: the operator watches every namespace).
pub const API_CALLS: &[Rule] = &[
    rule("mcpwarden.dev", "mcpservers", &["get", "list", "watch"]),
    rule("mcpwarden.dev", "mcpservers/status", &["get", "patch"]),
    rule("mcpwarden.dev", "mcpgateways", &["get", "list", "watch"]),
    rule("mcpwarden.dev", "mcpgateways/status", &["get", "patch"]),
    rule("mcpwarden.dev", "toolprofiles", &["get", "list", "watch"]),
    rule(
        "mcpwarden.dev",
        "sandboxprofiles",
        &["get", "list", "watch"],
    ),
    rule("mcpwarden.dev", "toolprofiles/status", &["get", "patch"]),
    rule("mcpwarden.dev", "sandboxprofiles/status", &["get", "patch"]),
    rule("", "serviceaccounts", WATCHED_OWNED),
    rule("", "configmaps", WATCHED_OWNED_DELETED),
    rule(
        "",
        "services",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    rule("", "secrets", &["get", "list", "watch", "create"]),
    rule("", "pods", &["list", "watch", "patch"]),
    rule("", "nodes", &["list"]),
    rule("networking.k8s.io", "servicecidrs", &["list"]),
    rule("apps", "deployments", WATCHED_OWNED_DELETED),
    rule(
        "networking.k8s.io",
        "networkpolicies",
        WATCHED_OWNED_DELETED,
    ),
    rule(
        "cilium.io",
        "ciliumnetworkpolicies",
        &["get", "create", "patch", "delete"],
    ),
    rule(
        "projectcalico.org",
        "networkpolicies",
        &["get", "create", "patch", "delete"],
    ),
    rule("networking.k8s.io", "ingresses", WATCHED_OWNED_DELETED),
    rule(
        "gateway.networking.k8s.io",
        "httproutes",
        WATCHED_OWNED_DELETED,
    ),
    rule(
        "policy",
        "poddisruptionbudgets",
        &["get", "list", "watch", "create", "patch", "delete"],
    ),
    rule(
        "coordination.k8s.io",
        "leases",
        &["get", "create", "update"],
    ),
    rule("events.k8s.io", "events", &["create", "patch"]),
    rule("authorization.k8s.io", "subjectaccessreviews", &["create"]),
    rule(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
        &["get", "patch"],
    ),
    rule(
        "admissionregistration.k8s.io",
        "mutatingwebhookconfigurations",
        &["get", "patch"],
    ),
];

/// Non-resource URLs read with `get`.
pub const NON_RESOURCE_URLS: &[&str] = &[
    "/.well-known/openid-configuration",
    "/openid/v1/jwks",
    "/apis/cilium.io/v2",
    "/apis/projectcalico.org/v3",
    "/apis/gateway.networking.k8s.io/v1",
];

/// What users need to approve capabilities (the chart's approver role):
/// `approve` is what the webhook's SubjectAccessReview asks for, `get` and
/// `patch` what `kubectl annotate` sends. Not `update`: without it the webhook
/// lets an approver change nothing but the approval annotations.
pub const APPROVER_RULES: &[Rule] = &[
    rule("mcpwarden.dev", "mcpservers/approval", &["approve"]),
    rule("mcpwarden.dev", "mcpservers", &["get", "patch"]),
];

/// The RBAC (group, resource, verb) of an HTTP request to the API server,
/// or `None` for a non-resource URL.
pub fn attributes(method: &str, path: &str) -> Option<(String, String, String)> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub] => (*resource, Some(*name), Some(*sub)),
        _ => return None,
    };
    let verb = match (method, name) {
        ("GET", None) => "list",
        ("GET", Some(_)) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => return None,
    };
    let resource = match sub {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    Some((group.to_string(), resource, verb.to_string()))
}

/// Whether [`API_CALLS`] / [`NON_RESOURCE_URLS`] cover an HTTP request.
pub fn allows(method: &str, path: &str) -> bool {
    match attributes(method, path) {
        Some((group, resource, verb)) => API_CALLS.iter().any(|r| {
            r.group == group && r.resource == resource && r.verbs.contains(&verb.as_str())
        }),
        None => method == "GET" && NON_RESOURCE_URLS.contains(&path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_requests_to_rules() {
        assert_eq!(
            attributes(
                "PATCH",
                "/apis/mcpwarden.dev/v1alpha1/namespaces/a/mcpservers/x/status"
            ),
            Some((
                "mcpwarden.dev".into(),
                "mcpservers/status".into(),
                "patch".into()
            ))
        );
        assert_eq!(
            attributes("GET", "/api/v1/namespaces/a/pods"),
            Some(("".into(), "pods".into(), "list".into()))
        );
        assert_eq!(
            attributes("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews"),
            Some((
                "authorization.k8s.io".into(),
                "subjectaccessreviews".into(),
                "create".into()
            ))
        );
        assert!(allows("GET", "/openid/v1/jwks"));
        assert!(allows(
            "PATCH",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/mcp-warden"
        ));
        assert!(
            !allows("DELETE", "/api/v1/namespaces/a/secrets/x"),
            "secrets are never deleted"
        );
        assert!(
            !allows("PATCH", "/api/v1/namespaces/a/secrets/x"),
            "secrets are never rewritten"
        );
    }

    #[test]
    fn the_documented_table_matches() {
        let doc = include_str!("../RBAC.md");
        for r in API_CALLS {
            let group = if r.group.is_empty() { "\"\"" } else { r.group };
            let row = format!("| `{group}` | `{}` | {} |", r.resource, r.verbs.join(", "));
            assert!(doc.contains(&row), "RBAC.md lacks the row {row}");
        }
        for url in NON_RESOURCE_URLS {
            assert!(doc.contains(url), "RBAC.md lacks {url}");
        }
        let people = doc.split("## 5.").nth(1).expect("RBAC.md has §5");
        for r in APPROVER_RULES {
            let row = format!(
                "| `{}` | `{}` | {} |",
                r.group,
                r.resource,
                r.verbs.join(", ")
            );
            assert!(people.contains(&row), "RBAC.md §5 lacks the row {row}");
        }
        assert!(
            !APPROVER_RULES.iter().any(|r| r.verbs.contains(&"update")),
            "approvers must not get update: the webhook's approval-only rule depends on it"
        );
    }
}
