"""Profile status and egress by host name, on a real API server, with the
operator running as the chart's ServiceAccount.

- Every example profile says it is valid and which servers use it. (Every
  check behind `Valid=False` is also a CEL rule of the CRD, so this API server
  never stores an invalid profile; the pure tests in
  operator/src/reconcile/profiles.rs cover that branch, for older CRDs.)
- Named egress: approved while the cluster serves neither Cilium nor Calico,
  the operator's egress proxy enforces it (`HostEgress=EgressProxy`): the
  proxy's Deployment, Service, NetworkPolicy and clients file appear, the
  clients file holds exactly the approved host (a held change does not widen
  it; a second server's entry comes with its approval and goes with the
  server), the server's NetworkPolicy lets it reach only the proxy and its
  credential Secret exists; once the API server
  serves CiliumNetworkPolicy (its CRD, installed here with a schema that keeps
  any field: the API is what the operator discovers and writes, Cilium's agent
  is not here to enforce it) the operator writes `<name>-egress` naming exactly
  the approved host, with the chart's RBAC, without anything touching the
  server (the operator notices the new kind and reconciles the servers
  waiting for it); revoking deletes it.
"""
from __future__ import annotations

import base64
import hashlib
import json
import time

from k8s_cluster import wait_for
from k8s_fixtures import EXAMPLE_NAMESPACE, RESTRICTED, approver_binding, npm_sandbox

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
        approver_binding(NS),
        npm_sandbox(NS),
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
    wait_for("HostEgress=EgressProxy", lambda: (lambda c: c and c["reason"] == "EgressProxy")(
        condition(cluster.get("mcpserver", "pkg", NS), "HostEgress")), timeout=60)

    def clients() -> dict:
        cm = cluster.get("configmap", "mcp-warden-egress-clients", NS)
        return {c["name"]: c for c in json.loads(cm["data"]["clients.json"])["clients"]} if cm else {}

    listed = wait_for("the clients file", lambda: clients() or None, timeout=60)
    assert list(listed) == [f"{NS}/pkg"]
    assert listed[f"{NS}/pkg"]["hosts"] == [{"host": "registry.npmjs.org", "port": 443}]
    secret = cluster.get("secret", "pkg-egress-proxy", NS)
    token = base64.b64decode(secret["data"]["token"]).decode()
    assert listed[f"{NS}/pkg"]["tokenSha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert token not in json.dumps(listed), "only the token's hash"
    proxy = cluster.get("deployment", "mcp-warden-egress", NS)
    assert [o["name"] for o in proxy["metadata"]["ownerReferences"]] == ["pkg"]
    assert cluster.get("service", "mcp-warden-egress", NS)["spec"]["ports"][0]["port"] == 3128
    proxy_np = cluster.get("networkpolicy", "mcp-warden-egress", NS)
    assert proxy_np["spec"]["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0]["values"] == ["pkg"]
    np = cluster.get("networkpolicy", "pkg", NS)
    assert np["spec"]["egress"] == [{"ports": [{"port": 3128, "protocol": "TCP"}], "to": [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-egress"}}}]}], np["spec"]
    env = {e["name"]: e for e in cluster.get("deployment", "pkg", NS)["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HTTPS_PROXY"]["valueFrom"]["secretKeyRef"] == {"name": "pkg-egress-proxy", "key": "url",
                                                              "optional": False}
    # A change that asks for more waits for approval, and the clients file does not widen.
    cluster.apply([npm_sandbox(NS, hosts=[{"name": "example.org", "ports": [443]}])])
    wait_for("the change held", lambda: (lambda c: c and c["status"] == "False")(
        condition(cluster.get("mcpserver", "pkg", NS), "CapabilitiesApproved")), timeout=60)
    time.sleep(3)
    assert clients()[f"{NS}/pkg"]["hosts"] == [{"host": "registry.npmjs.org", "port": 443}]
    cluster.apply([npm_sandbox(NS)])
    wait_for("approved again", lambda: (lambda c: c and c["status"] == "True")(
        condition(cluster.get("mcpserver", "pkg", NS), "CapabilitiesApproved")), timeout=60)
    # A second server: listed once approved, gone with the server.
    cluster.apply([{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                    "metadata": {"name": "pkg2", "namespace": NS},
                    "spec": {"image": "node:22-slim", "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
                             "toolProfileRef": {"name": "t"}, "sandboxProfileRef": {"name": "npm"}}}])
    digest2 = wait_for("pkg2's digest", lambda: ((cluster.get("mcpserver", "pkg2", NS) or {}).get("status", {})
                                                .get("capabilityDigest")), timeout=60)
    assert f"{NS}/pkg2" not in clients(), "not approved: not listed"
    cluster.kubectl("annotate", "mcpserver", "pkg2", "-n", NS, f"{APPROVE}={digest2}", "--overwrite", user="bob")
    wait_for("pkg2 listed", lambda: f"{NS}/pkg2" in clients(), timeout=60)
    cluster.kubectl("delete", "mcpserver", "pkg2", "-n", NS, "--wait=true")
    wait_for("pkg2 gone from the clients file", lambda: list(clients()) == [f"{NS}/pkg"], timeout=90, interval=2)

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
    # Cilium enforces the hosts now: the proxy goes.
    wait_for("the proxy removed", lambda: cluster.get("deployment", "mcp-warden-egress", NS) is None
             and cluster.get("configmap", "mcp-warden-egress-clients", NS) is None, timeout=60)
    # Revoking removes it.
    cluster.kubectl("annotate", "mcpserver", "pkg", "-n", NS, f"{APPROVE}-")
    wait_for("the policy deleted", lambda: cluster.get("ciliumnetworkpolicy", "pkg-egress", NS) is None,
             timeout=60)
