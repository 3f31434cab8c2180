"""An approval runs the image its pods pulled, by digest, on a real API
server with the chart's webhook and operator: once a pod of the approved
Deployment reports the repository digest its runtime resolved the tag to
(`imageID`), the operator pins the Deployment to `<tag>@<digest>`, so a tag
moved in the registry later never runs with the approved capabilities; a
later report of other content under the tag never moves the pin, and says
so. No kubelet runs here: the test writes the pod status a kubelet would.
"""
from __future__ import annotations

import json

import pytest

from k8s_cluster import wait_for
from k8s_fixtures import people_roles

NS = "team-pin"
IMAGE = "ghcr.io/example/everything:1"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
TOOLS = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
         "metadata": {"name": "tools", "namespace": NS}, "spec": {"tools": [{"name": "echo"}]}}
SANDBOX = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
           "metadata": {"name": "egress", "namespace": NS},
           "spec": {"network": {"egress": {"rules": [{"cidr": "203.0.113.0/24", "ports": [443]}]}}}}
SERVER = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
          "metadata": {"name": "everything", "namespace": NS},
          "spec": {"image": IMAGE, "command": ["node", "/srv/index.js"],
                   "toolProfileRef": {"name": "tools"}, "sandboxProfileRef": {"name": "egress"}}}


@pytest.fixture(scope="module")
def approved(cluster, installed, webhook, controller):
    cluster.namespace(NS)
    people_roles(cluster, NS)
    cluster.apply([TOOLS, SANDBOX, SERVER], user="carol")
    digest = wait_for("a pending digest", lambda: status(cluster).get("capabilityDigest"), timeout=60)
    out = cluster.kubectl("annotate", "mcpserver", "everything", "-n", NS, f"mcpwarden.dev/approve={digest}",
                          "--overwrite", user="bob", check=False)
    assert out.code == 0, out.stderr
    wait_for("the approval in force", lambda: status(cluster).get("approvedDigest") == digest, timeout=30)
    return cluster


def status(cluster) -> dict:
    return (cluster.get("mcpserver", "everything", NS) or {}).get("status", {})


def server_image(cluster) -> str:
    pod = cluster.get("deployment", "everything", NS)["spec"]["template"]["spec"]
    return next(c["image"] for c in pod["containers"] if c["name"] == "server")


def pods_asking_for(cluster, image: str) -> list[dict]:
    return [p for p in cluster.list("pods", NS, selector="mcpwarden.dev/server=everything")
            if any(c["name"] == "server" and c["image"] == image for c in p["spec"]["containers"])]


def report(cluster, pod: dict, image_id: str) -> None:
    """What a kubelet writes once the pod's containers run."""
    def state(name: str, image: str, image_id: str) -> dict:
        return {"name": name, "image": image, "imageID": image_id, "ready": True, "restartCount": 0,
                "started": True, "state": {"running": {"startedAt": "2026-11-26T00:00:00Z"}}}
    containers = [state(c["name"], c["image"], image_id if c["name"] == "server" else f"facade@{D2}")
                  for c in pod["spec"]["containers"]]
    body = {"status": {"phase": "Running", "podIP": "10.88.0.7", "podIPs": [{"ip": "10.88.0.7"}],
                       "containerStatuses": containers}}
    cluster.kubectl("patch", "pod", pod["metadata"]["name"], "-n", NS, "--subresource=status", "--type=merge",
                    "-p", json.dumps(body))


def test_the_approved_image_is_pinned_to_the_digest_its_pod_pulled(approved):
    cluster = approved
    assert server_image(cluster) == IMAGE
    assert "pinnedImage" not in status(cluster)
    pod = wait_for("a pod of the approved Deployment", lambda: (pods_asking_for(cluster, IMAGE) or [None])[0],
                   timeout=60)
    report(cluster, pod, f"ghcr.io/example/everything@{D1}")
    wait_for("the Deployment pinned", lambda: server_image(cluster) == f"{IMAGE}@{D1}", timeout=30)
    # The status is written after the Deployment (apply, then status): wait for it too.
    wait_for("the pin in the status", lambda: status(cluster).get("pinnedImage") == {"image": IMAGE, "digest": D1},
             timeout=30)
    conditions = {c["type"]: c for c in status(cluster)["conditions"]}
    assert conditions["CapabilitiesApproved"]["status"] == "True", conditions


def test_a_moved_tag_never_moves_the_pin(approved):
    """The pod of the unpinned template comes back with other content under
    the tag (a restart that pulled again): the pin stays, and status says
    which contents run."""
    cluster = approved
    wait_for("the pin", lambda: server_image(cluster) == f"{IMAGE}@{D1}", timeout=30)
    old = pods_asking_for(cluster, IMAGE)
    assert old, "the pod of the unpinned template is still there (no kubelet makes the new one ready)"
    report(cluster, old[0], f"ghcr.io/example/everything@{D2}")

    def degraded():
        c = {c["type"]: c for c in status(cluster).get("conditions", [])}.get("Degraded", {})
        return c if c.get("reason") == "ImageTagMoved" else None
    condition = wait_for("the moved tag reported", degraded, timeout=30)
    assert D1 in condition["message"] and D2 in condition["message"], condition
    assert server_image(cluster) == f"{IMAGE}@{D1}"
    assert status(cluster)["pinnedImage"]["digest"] == D1


def test_a_new_image_waits_for_approval_with_the_pin_in_place(approved):
    cluster = approved
    wait_for("the pin", lambda: server_image(cluster) == f"{IMAGE}@{D1}", timeout=30)
    cluster.kubectl("patch", "mcpserver", "everything", "-n", NS, "--type=merge", "-p",
                    json.dumps({"spec": {"image": "ghcr.io/example/everything:2"}}), user="carol")

    def pending():
        c = {c["type"]: c for c in status(cluster).get("conditions", [])}.get("CapabilitiesApproved", {})
        return c.get("reason") == "ApprovalPending" and "image" in c.get("message", "")
    wait_for("the new image pending", pending, timeout=30)
    assert server_image(cluster) == f"{IMAGE}@{D1}", "a held change keeps the approved, pinned image"
    assert status(cluster)["pinnedImage"] == {"image": IMAGE, "digest": D1}
