"""Broad egress is named as such, on a real API server with the chart's RBAC,
webhook and operator:

A SandboxProfile asking for `0.0.0.0/0` on 443 and 6443 makes the server ask
for `network.egress.internet:…`, pending with a message (condition and Event)
that says "broad" and names 6443 as the API server's port. Once bob approves
it, the NetworkPolicy allows `0.0.0.0/0` with the cluster's Service range
excepted — read from the API server's own `ServiceCIDR` object (this control
plane runs with `--service-cluster-ip-range=10.0.0.0/24`), which the
operator's ServiceAccount may list through the chart's ClusterRole.
"""
from __future__ import annotations

from k8s_cluster import wait_for
from k8s_fixtures import RESTRICTED, approver_binding

NS = "team-broad"
APPROVE = "mcpwarden.dev/approve"


def condition(obj: dict | None, type_: str) -> dict:
    return next((c for c in (obj or {}).get("status", {}).get("conditions", []) if c["type"] == type_), {})


def test_internet_egress_is_broad_and_excepts_the_cluster(cluster, installed, controller, webhook):
    cluster.namespace(NS, RESTRICTED)
    service_ranges = [c for s in cluster.list("servicecidrs.networking.k8s.io") for c in s["spec"]["cidrs"]]
    assert service_ranges == ["10.0.0.0/24"], service_ranges
    cluster.apply([
        approver_binding(NS),
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile", "metadata": {"name": "wide", "namespace": NS},
         "spec": {"network": {"egress": {"rules": [{"cidr": "0.0.0.0/0", "ports": [443, 6443]}]}}}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "t", "namespace": NS},
         "spec": {"tools": [{"name": "fetch"}]}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "web", "namespace": NS},
         "spec": {"image": "mcp/fetch", "command": ["mcp-server-fetch"],
                  "toolProfileRef": {"name": "t"}, "sandboxProfileRef": {"name": "wide"}}},
    ])

    def server():
        return cluster.get("mcpserver", "web", NS) or {}

    digest = wait_for("the digest", lambda: server().get("status", {}).get("capabilityDigest"), timeout=60)
    assert server()["status"]["requestedCapabilities"] == [
        "network.egress.internet:0.0.0.0/0:443", "network.egress.internet:0.0.0.0/0:6443"]
    pending = condition(server(), "CapabilitiesApproved")
    assert pending["reason"] == "PendingApproval"
    assert "Broad egress to the internet" in pending["message"], pending["message"]
    assert "6443 (kube-apiserver)" in pending["message"], pending["message"]
    event = wait_for("the pending Event", lambda: next(
        (e for e in cluster.list("events.events.k8s.io", NS)
         if e.get("regarding", {}).get("name") == "web" and "Broad egress" in e.get("note", "")), None), timeout=30)
    assert "network.egress.internet:0.0.0.0/0:443" in event["note"]
    assert not cluster.get("networkpolicy", "web", NS)["spec"].get("egress"), "nothing opened before approval"

    out = cluster.kubectl("annotate", "mcpserver", "web", "-n", NS, f"{APPROVE}={digest}", "--overwrite",
                          user="bob", check=False)
    assert out.code == 0, out.stderr

    def egress():
        rules = (cluster.get("networkpolicy", "web", NS) or {}).get("spec", {}).get("egress") or []
        return rules or None

    rules = wait_for("the approved egress", egress, timeout=60)
    assert rules == [{"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}],
                      "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.0.0.0/24", "169.254.0.0/16"]}}]}], rules
