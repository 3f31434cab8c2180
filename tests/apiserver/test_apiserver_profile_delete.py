"""A profile an MCPServer uses cannot be deleted, on a real API server with
the chart's webhook and the operator:

With the webhook up, `kubectl delete toolprofile` and `kubectl delete
sandboxprofile` are refused with a message naming the server that uses the
profile; once nothing references it, the same delete passes. Where the
webhook is not in the path (here: down, with the profile webhook's
`failurePolicy` switched to `Ignore`), the delete goes through — and the
operator neither crash-loops nor tears the workload down: the Deployment
keeps its pod template, `Degraded` and a Warning Event name the missing
profile, and the server recovers when the profile comes back.
"""
from __future__ import annotations

import json

from chartkit import RELEASE
from k8s_cluster import wait_for
from k8s_fixtures import RESTRICTED

NS = "team-profile-delete"

TOOLS = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
         "metadata": {"name": "tools", "namespace": NS}, "spec": {"tools": [{"name": "echo"}]}}
SANDBOX = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
           "metadata": {"name": "small", "namespace": NS}, "spec": {"tmpSizeLimit": "32Mi"}}
SERVER = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
          "metadata": {"name": "echo", "namespace": NS},
          "spec": {"image": "ghcr.io/example/echo:1", "command": ["echo-server"],
                   "toolProfileRef": {"name": "tools"}, "sandboxProfileRef": {"name": "small"}}}
SPARE = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
         "metadata": {"name": "spare", "namespace": NS}, "spec": {"tools": [{"name": "echo"}]}}


def condition(obj: dict | None, type_: str) -> dict:
    return next((c for c in (obj or {}).get("status", {}).get("conditions", []) if c["type"] == type_), {})


def server(cluster) -> dict:
    return cluster.get("mcpserver", "echo", NS) or {}


def profile_webhook_failure_policy(cluster, policy: str) -> None:
    config = cluster.get("validatingwebhookconfiguration", RELEASE)
    index = next(i for i, w in enumerate(config["webhooks"]) if w["name"] == "validate.profiles.mcpwarden.dev")
    patch = [{"op": "replace", "path": f"/webhooks/{index}/failurePolicy", "value": policy}]
    cluster.kubectl("patch", "validatingwebhookconfiguration", RELEASE, "--type=json", "-p", json.dumps(patch))


def test_a_profile_in_use_is_not_deleted(cluster, installed, webhook, controller):
    cluster.namespace(NS, RESTRICTED)
    cluster.apply([TOOLS, SANDBOX, SPARE, SERVER])
    wait_for("the Deployment", lambda: cluster.get("deployment", "echo", NS), timeout=30)

    for kind, name in (("toolprofile", "tools"), ("sandboxprofile", "small")):
        out = cluster.kubectl("delete", kind, name, "-n", NS, "--wait=false", check=False)
        assert out.code != 0, f"{kind} {name} deleted while in use"
        assert "validate.profiles.mcpwarden.dev" in out.stderr, out.stderr
        assert f"{NS}/{name} is in use by MCPServer echo" in out.stderr, out.stderr
        assert cluster.get(kind, name, NS), f"{kind} {name} is gone"

    # Nothing uses `spare`: it deletes as before.
    out = cluster.kubectl("delete", "toolprofile", "spare", "-n", NS, check=False)
    assert out.code == 0, out.stderr


def test_without_the_webhook_the_last_workload_keeps_running(cluster, installed, webhook, controller):
    cluster.namespace(NS, RESTRICTED)
    cluster.apply([TOOLS, SANDBOX, SERVER])
    wait_for("the Deployment", lambda: cluster.get("deployment", "echo", NS), timeout=30)
    wait_for("PolicyCompiled", lambda: condition(server(cluster), "PolicyCompiled").get("status") == "True",
             timeout=30)
    template = cluster.get("deployment", "echo", NS)["spec"]["template"]
    alive_before = controller.proc.alive()

    webhook.stop()
    profile_webhook_failure_policy(cluster, "Ignore")
    try:
        out = wait_for("the delete to pass the absent webhook", lambda: (lambda o: o if o.code == 0 else None)(
            cluster.kubectl("delete", "toolprofile", "tools", "-n", NS, check=False)), timeout=30)
        assert out.code == 0

        def degraded():
            c = condition(server(cluster), "Degraded")
            return c if c.get("reason") == "ToolProfileNotFound" else None
        c = wait_for("Degraded naming the missing profile", degraded, timeout=30)
        assert c["status"] == "True"
        assert '"tools" not found' in c["message"] and "keeps running unchanged" in c["message"], c["message"]
        event = wait_for("a Warning Event naming the profile", lambda: next(
            (e for e in cluster.list("events.events.k8s.io", NS)
             if e.get("regarding", {}).get("name") == "echo" and e.get("type") == "Warning"
             and e.get("reason") == "ToolProfileNotFound" and '"tools"' in e.get("note", "")), None), timeout=30)
        assert event
        deployment = cluster.get("deployment", "echo", NS)
        assert deployment, "the workload was torn down"
        assert deployment["spec"]["template"] == template
        assert cluster.get("configmap", "echo-policy", NS), "the policy was removed"
        assert alive_before and controller.proc.alive(), "the operator stopped:\n" + controller.log()[-4000:]
    finally:
        profile_webhook_failure_policy(cluster, "Fail")
        webhook.start()

    cluster.apply(TOOLS)
    wait_for("recovered once the profile is back",
             lambda: condition(server(cluster), "Degraded").get("reason") == "AsExpected"
             and condition(server(cluster), "PolicyCompiled").get("status") == "True", timeout=30)
    assert cluster.get("deployment", "echo", NS)["spec"]["template"] == template
