"""Profile status and egress by host name, on a real API server, with the
operator running as the chart's ServiceAccount.

- Every example profile says it is valid and which servers use it. (Every
  check behind `Valid=False` is also a CEL rule of the CRD, so this API server
  never stores an invalid profile; the pure tests in
  operator/src/reconcile/profiles.rs cover that branch, for older CRDs.)
- Named egress: approved while the cluster has no engine, the NetworkPolicy
  stays closed and the server says NamedEgressNotEnforced; once the API server
  serves CiliumNetworkPolicy (its CRD, installed here with a schema that keeps
  any field: the API is what the operator discovers and writes, Cilium's agent
  is not here to enforce it) the operator writes `<name>-egress` naming exactly
  the approved host, with the chart's RBAC, without anything touching the
  server (the operator notices the new kind and reconciles the servers
  waiting for it); revoking deletes it.
"""
from __future__ import annotations

from k8s_cluster import wait_for
from k8s_fixtures import EXAMPLE_NAMESPACE, RESTRICTED

NS = "team-egress"
APPROVE = "mcpwarden.dev/approve"
CILIUM_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "ciliumnetworkpolicies.cilium.io"},
    "spec": {
        "group": "cilium.io", "scope": "Namespaced",
        "names": {"kind": "CiliumNetworkPolicy", "plural": "ciliumnetworkpolicies",
                  "singular": "ciliumnetworkpolicy", "shortNames": ["cnp"]},
        "versions": [{"name": "v2", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def condition(obj: dict | None, type_: str) -> dict | None:
    return next((c for c in (obj or {}).get("status", {}).get("conditions", []) if c["type"] == type_), None)


def test_example_profiles_say_they_are_valid_and_who_uses_them(cluster, examples_applied, controller):
    def status_of(kind: str, name: str):
        live = cluster.get(kind, name, EXAMPLE_NAMESPACE)
        valid = condition(live, "Valid")
        return live["status"] if valid and live["status"].get("usedBy") else None

    tp = wait_for("ToolProfile git-readonly status", lambda: status_of("toolprofile", "git-readonly"), timeout=60)
    assert tp["usedBy"] == ["git"]
    assert condition({"status": tp}, "Valid")["status"] == "True"
    sbp = wait_for("SandboxProfile pypi status", lambda: status_of("sandboxprofile", "pypi"), timeout=60)
    assert sbp["usedBy"] == ["git"]
    # `kubectl get` shows it in the printer columns.
    out = cluster.kubectl("get", "toolprofiles", "-n", EXAMPLE_NAMESPACE).stdout
    assert "VALID" in out and "USED-BY" in out, out


def test_named_egress_waits_for_an_engine_then_follows_the_approval(cluster, controller, webhook):
    cluster.namespace(NS, RESTRICTED)
    cluster.apply([
        # An approver who made none of it (separation of duties: the admin who creates cannot approve).
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "bob-approves", "namespace": NS},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "mcp-warden-approver"},
         "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile", "metadata": {"name": "npm", "namespace": NS},
         "spec": {"network": {"egress": {"presets": ["npm"]}}}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "t", "namespace": NS},
         "spec": {"tools": [{"name": "echo"}]}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "pkg", "namespace": NS},
         "spec": {"image": "node:22-slim", "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
                  "toolProfileRef": {"name": "t"}, "sandboxProfileRef": {"name": "npm"}}},
    ])

    def status():
        return (cluster.get("mcpserver", "pkg", NS) or {}).get("status", {})

    digest = wait_for("the digest", lambda: status().get("capabilityDigest"), timeout=60)
    assert status()["requestedCapabilities"] == ["network.egress.host:registry.npmjs.org:443"]
    cluster.kubectl("annotate", "mcpserver", "pkg", "-n", NS, f"{APPROVE}={digest}", "--overwrite", user="bob")
    degraded = wait_for("Degraded=NamedEgressNotEnforced", lambda: (lambda c: c if c and c["reason"] ==
                        "NamedEgressNotEnforced" else None)(condition(cluster.get("mcpserver", "pkg", NS), "Degraded")),
                        timeout=60)
    assert "registry.npmjs.org" in degraded["message"]
    np = cluster.get("networkpolicy", "pkg", NS)
    assert not np["spec"].get("egress"), "a NetworkPolicy cannot name a host: nothing is opened"

    # The kind stays served for the rest of the session (the tour shows it too).
    cluster.apply(CILIUM_CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/ciliumnetworkpolicies.cilium.io", "--timeout=30s")
    def written():
        # Nothing touches the server: the operator notices the new kind by itself (discovery every
        # 10 s) and reconciles the servers waiting for it, long before their resync.
        return cluster.get("ciliumnetworkpolicy", "pkg-egress", NS)

    cnp = wait_for("CiliumNetworkPolicy pkg-egress", written, timeout=45, interval=2)
    assert cnp["metadata"]["ownerReferences"][0]["name"] == "pkg"
    fqdns = [m["matchName"] for rule in cnp["spec"]["egress"] for m in rule.get("toFQDNs", [])]
    assert fqdns == ["registry.npmjs.org"], cnp["spec"]
    wait_for("Degraded=AsExpected", lambda: (lambda c: c and c["reason"] == "AsExpected")(
        condition(cluster.get("mcpserver", "pkg", NS), "Degraded")), timeout=60)
    # Revoking removes it.
    cluster.kubectl("annotate", "mcpserver", "pkg", "-n", NS, f"{APPROVE}-")
    wait_for("the policy deleted", lambda: cluster.get("ciliumnetworkpolicy", "pkg-egress", NS) is None,
             timeout=60)
