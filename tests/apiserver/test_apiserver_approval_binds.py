"""An approval binds the workload it approves, on a real API server with the
chart's RBAC, webhook and operator:

    bob    bound (in one namespace) to the chart's approver ClusterRole only
    carol  bound to the built-in `edit` role

bob approves a server with egress; carol then changes, in turn, its image,
its command, its env, its volume (the workspace) and its ToolProfile's
content. Each time the Deployment's pod template stays the approved one (no
rollout), `CapabilitiesApproved` is `ApprovalPending` naming the part that
changed and the command that approves the new digest, and approving that
digest rolls it out. A ToolProfile change that only takes away (a tool
removed) is written at once, unless it also swaps an issuer's keys. carol, who also holds the approver role, may
not approve her own change (the webhook names who changed it) unless the
webhook runs with `approval.allowSelfApproval`.
"""
from __future__ import annotations

import json
import time

import pytest

from k8s_cluster import wait_for
from k8s_fixtures import people_roles

NS = "team-binds"
APPROVE = "mcpwarden.dev/approve"

TOOLS = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
         "metadata": {"name": "tools", "namespace": NS},
         "spec": {"tools": [{"name": "echo"}, {"name": "add"}]}}
SANDBOX = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
           "metadata": {"name": "npm", "namespace": NS},
           "spec": {"network": {"egress": {"rules": [{"cidr": "203.0.113.0/24", "ports": [443]}]}}}}
SERVER = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
          "metadata": {"name": "everything", "namespace": NS},
          "spec": {"image": "ghcr.io/example/everything:1", "command": ["node", "/srv/index.js"],
                   "toolProfileRef": {"name": "tools"}, "sandboxProfileRef": {"name": "npm"}}}


@pytest.fixture(scope="module")
def team(cluster, installed, webhook, controller):
    cluster.namespace(NS)
    # carol also holds the approver role here: separation of duties, not RBAC, stops her
    # approving her own change.
    people_roles(cluster, NS, carol_approves=True)
    cluster.apply([TOOLS, SANDBOX, SERVER], user="carol")
    return cluster


def status(cluster) -> dict:
    return (cluster.get("mcpserver", "everything", NS) or {}).get("status", {})


def capability_condition(cluster) -> dict:
    return next((c for c in status(cluster).get("conditions", []) if c["type"] == "CapabilitiesApproved"), {})


def template(cluster) -> dict:
    return cluster.get("deployment", "everything", NS)["spec"]["template"]


def policy(cluster) -> str:
    return cluster.get("configmap", "everything-policy", NS)["data"]["policy.yaml"]


def approve(cluster, digest: str) -> None:
    out = cluster.kubectl("annotate", "mcpserver", "everything", "-n", NS, f"{APPROVE}={digest}", "--overwrite",
                          user="bob", check=False)
    assert out.code == 0, out.stderr
    wait_for(f"{digest} approved and in force",
             lambda: status(cluster).get("approvedDigest") == digest
             and capability_condition(cluster).get("reason") == "Approved", timeout=30)


def pending_digest(cluster, old: str) -> str:
    return wait_for("a new pending digest", lambda: (lambda d: d if d and d != old else None)(
        status(cluster).get("capabilityDigest")), timeout=30)


def server_container(tpl: dict) -> dict:
    return next(c for c in tpl["spec"]["containers"] if c["name"] == "server")


def carol_patches(cluster, kind: str, name: str, patch: dict) -> None:
    out = cluster.kubectl("patch", kind, name, "-n", NS, "--type=merge", "-p", json.dumps(patch), user="carol",
                          check=False)
    assert out.code == 0, out.stderr


CHANGES = [
    ("image", {"spec": {"image": "docker.io/attacker/anything:latest"}},
     lambda tpl: server_container(tpl)["image"] == "docker.io/attacker/anything:latest"),
    ("command", {"spec": {"command": ["node", "/evil.js"]}},
     lambda tpl: "/evil.js" in json.dumps(server_container(tpl))),
    ("env", {"spec": {"env": [{"name": "NODE_OPTIONS", "value": "--require /tmp/x.js"}]}},
     lambda tpl: {"name": "NODE_OPTIONS", "value": "--require /tmp/x.js"} in server_container(tpl).get("env", [])),
    ("workspace", {"spec": {"workspace": {"mountPath": "/work", "emptyDir": {}}}},
     lambda tpl: any(m.get("mountPath") == "/work" for m in server_container(tpl).get("volumeMounts", []))),
]


def test_each_change_is_held_until_its_digest_is_approved(team):
    cluster = team
    digest = wait_for("the first digest", lambda: status(cluster).get("capabilityDigest"), timeout=30)
    approve(cluster, digest)
    for part, patch, rolled_out in CHANGES:
        before = template(cluster)
        carol_patches(cluster, "mcpserver", "everything", patch)
        new = pending_digest(cluster, digest)
        cond = wait_for(f"ApprovalPending naming {part}", lambda: (lambda c: c if c.get("reason") == "ApprovalPending"
                                                                   else None)(capability_condition(cluster)),
                        timeout=30)
        assert f"({part})" in cond["message"], cond["message"]
        assert f"kubectl annotate mcpserver everything -n {NS} {APPROVE}={new} --overwrite" in cond["message"]
        time.sleep(2)  # a rollout, were there one, is written before the status
        assert template(cluster) == before, f"the pod template changed after an unapproved {part} change"
        assert not rolled_out(template(cluster))
        approve(cluster, new)
        wait_for(f"the {part} change rolled out", lambda: rolled_out(template(cluster)), timeout=30)
        digest = new


def test_a_service_account_annotation_is_held_with_the_pod(team):
    """A workload-identity annotation names the cloud role a webhook hands
    the pod (a replacement pod of the held template would get it): the
    ServiceAccount keeps the approved annotations until the change is
    approved."""
    cluster = team
    digest = wait_for("a digest", lambda: status(cluster).get("capabilityDigest"), timeout=30)
    if status(cluster).get("approvedDigest") != digest:
        approve(cluster, digest)
    role = "eks.amazonaws.com/role-arn"
    annotations = lambda: (cluster.get("serviceaccount", "everything", NS)["metadata"]  # noqa: E731
                           .get("annotations") or {})
    carol_patches(cluster, "mcpserver", "everything",
                  {"spec": {"serviceAccount": {"annotations": {role: "arn:aws:iam::1:role/b"}}}})
    new = pending_digest(cluster, digest)
    cond = wait_for("ApprovalPending", lambda: (lambda c: c if c.get("reason") == "ApprovalPending" else None)(
        capability_condition(cluster)), timeout=30)
    assert "(serviceAccount)" in cond["message"], cond["message"]
    time.sleep(2)  # a write, were there one, comes before the status
    assert role not in annotations(), annotations()
    approve(cluster, new)
    wait_for("the approved annotation", lambda: annotations().get(role) == "arn:aws:iam::1:role/b", timeout=30)


def test_a_profile_change_waits_unless_it_only_takes_away(team):
    cluster = team
    # Depends on the approved state the previous test leaves; make sure it is approved now.
    digest = wait_for("a digest", lambda: status(cluster).get("capabilityDigest"), timeout=30)
    if status(cluster).get("approvedDigest") != digest:
        approve(cluster, digest)
    before_policy, before_template = policy(cluster), template(cluster)
    # A tool added: held, the policy ConfigMap keeps the approved policy.
    carol_patches(cluster, "toolprofile", "tools", {"spec": {"tools": [{"name": "echo"}, {"name": "add"},
                                                                         {"name": "printEnv"}]}})
    new = pending_digest(cluster, digest)
    cond = wait_for("ApprovalPending naming toolProfile", lambda: (lambda c: c if c.get("reason") == "ApprovalPending"
                                                                   else None)(capability_condition(cluster)),
                    timeout=30)
    assert "(toolProfile)" in cond["message"], cond["message"]
    time.sleep(2)
    assert policy(cluster) == before_policy and "printEnv" not in policy(cluster)
    assert template(cluster) == before_template
    approve(cluster, new)
    wait_for("the added tool in the policy", lambda: "printEnv" in policy(cluster), timeout=30)
    # A tool removed: a tightening, written at once without an approval.
    carol_patches(cluster, "toolprofile", "tools", {"spec": {"tools": [{"name": "echo"}, {"name": "printEnv"}]}})
    wait_for("the removed tool gone from the policy", lambda: "name: add" not in policy(cluster), timeout=30)
    cond = wait_for("Tightened", lambda: (lambda c: c if c.get("reason") == "Tightened" else None)(
        capability_condition(cluster)), timeout=30)
    assert cond["status"] == "True" and "(toolProfile)" in cond["message"], cond
    # Later reconciles find the tightening they wrote, with nothing changed since: it stays
    # in force (a label is not covered by the approval, but its write makes a reconcile).
    tightened_policy = policy(cluster)
    cluster.kubectl("label", "mcpserver", "everything", "-n", NS, "touched=1", "--overwrite")
    time.sleep(3)
    assert capability_condition(cluster).get("reason") == "Tightened", capability_condition(cluster)
    assert policy(cluster) == tightened_policy


def test_swapping_an_issuers_keys_is_held_even_beside_a_tightening(team):
    """The keys that decide who a token's caller is are not in the compiled
    policy (it names their file): a profile edit that points an issuer at
    keys carol made, bundled with a tool removed, is held — the copy the
    facade verifies with (`<name>-issuers`) and the policy stay the approved
    ones — where the tightening alone would have been written at once."""
    cluster = team
    keys = lambda name, kid: {"apiVersion": "v1", "kind": "ConfigMap",  # noqa: E731
                              "metadata": {"name": name, "namespace": NS},
                              "data": {"jwks": json.dumps({"keys": [{"kty": "oct", "kid": kid}]})}}
    cluster.apply([keys("idp-keys", "idp"), keys("carols-keys", "carol")], user="carol")
    digest = wait_for("a digest", lambda: status(cluster).get("capabilityDigest"), timeout=30)
    if status(cluster).get("approvedDigest") != digest:
        approve(cluster, digest)
    tools = [t["name"] for t in cluster.get("toolprofile", "tools", NS)["spec"]["tools"]]
    assert len(tools) >= 2, tools
    issuer = {"issuer": "https://idp.example.com", "audiences": ["mcp"],
              "jwks": {"configMap": {"name": "idp-keys", "key": "jwks"}}}
    carol_patches(cluster, "toolprofile", "tools", {"spec": {"auth": {"jwt": [issuer]}}})
    approve(cluster, pending_digest(cluster, digest))
    issuers = lambda: (cluster.get("configmap", "everything-issuers", NS) or {}).get("data", {})  # noqa: E731
    wait_for("the issuer's keys copied", lambda: '"idp"' in issuers().get("0.json", ""), timeout=30)
    digest = status(cluster)["approvedDigest"]
    before_keys, before_policy = issuers(), policy(cluster)
    swapped = {**issuer, "jwks": {"configMap": {"name": "carols-keys", "key": "jwks"}}}
    carol_patches(cluster, "toolprofile", "tools",
                  {"spec": {"auth": {"jwt": [swapped]}, "tools": [{"name": n} for n in tools[:-1]]}})
    new = pending_digest(cluster, digest)
    cond = wait_for("ApprovalPending", lambda: (lambda c: c if c.get("reason") == "ApprovalPending" else None)(
        capability_condition(cluster)), timeout=30)
    assert "(toolProfile)" in cond["message"], cond["message"]
    time.sleep(2)  # a write, were there one, comes before the status
    assert issuers() == before_keys and '"carol"' not in json.dumps(issuers())
    assert policy(cluster) == before_policy
    approve(cluster, new)
    wait_for("the approved keys copied", lambda: '"carol"' in issuers().get("0.json", ""), timeout=30)


def test_whoever_changed_it_may_not_approve_it(team, webhook):
    cluster = team
    digest = wait_for("a digest", lambda: status(cluster).get("capabilityDigest"), timeout=30)
    if status(cluster).get("approvedDigest") != digest:
        approve(cluster, digest)
    carol_patches(cluster, "mcpserver", "everything", {"spec": {"image": "ghcr.io/example/everything:2"}})
    live = cluster.get("mcpserver", "everything", NS)
    assert live["metadata"]["annotations"]["mcpwarden.dev/changed-by"] == '["carol"]'
    new = pending_digest(cluster, digest)
    out = cluster.kubectl("annotate", "mcpserver", "everything", "-n", NS, f"{APPROVE}={new}", "--overwrite",
                          user="carol", check=False)
    assert out.code != 0, "carol approved her own change"
    assert 'changed since the last approval by "carol"' in out.stderr, out.stderr
    assert status(cluster).get("approvedDigest") == digest
    # Someone else approves; the record is cleared.
    approve(cluster, new)
    assert "mcpwarden.dev/changed-by" not in cluster.get("mcpserver", "everything", NS)["metadata"]["annotations"]
    # With approval.allowSelfApproval (the chart sets MCP_WARDEN_ALLOW_SELF_APPROVAL), she may.
    webhook.stop()
    webhook.process.args.append("--allow-self-approval")
    try:
        webhook.start()
        carol_patches(cluster, "mcpserver", "everything", {"spec": {"image": "ghcr.io/example/everything:3"}})
        newer = pending_digest(cluster, new)
        out = cluster.kubectl("annotate", "mcpserver", "everything", "-n", NS, f"{APPROVE}={newer}", "--overwrite",
                              user="carol", check=False)
        assert out.code == 0, out.stderr
        wait_for("carol's approval in force", lambda: status(cluster).get("approvedDigest") == newer, timeout=30)
    finally:
        webhook.stop()
        webhook.process.args.remove("--allow-self-approval")
        webhook.start()


def test_a_profile_the_facade_would_refuse_changes_nothing(team):
    """The regex of a platform team's report: it passes the CRD's schema and CEL, the facade's loader
    refuses it (`unclosed group`), so the API server refuses the write through the operator's profile
    webhook, with the loader's message, and nothing changes. (A profile stored before the webhook
    existed is caught by the operator instead: PolicyCompiled=False InvalidPolicy, nothing written;
    operator/tests/invalid_policy.rs.)"""
    cluster = team
    before_policy, before_template = policy(cluster), template(cluster)
    tools = cluster.get("toolprofile", "tools", NS)["spec"]["tools"]
    bad = [*tools, {"name": "fetch", "arguments": [{"name": "url", "kind": "string",
                                                   "allow": ["^https://(example\\.com/"]}]}]
    out = cluster.kubectl("patch", "toolprofile", "tools", "-n", NS, "--type=merge", "-p",
                          json.dumps({"spec": {"tools": bad}}), user="carol", check=False)
    assert out.code != 0, "an invalid profile was stored"
    assert "validate.profiles.mcpwarden.dev" in out.stderr and "InvalidPolicy" in out.stderr, out.stderr
    assert "unclosed group" in out.stderr, out.stderr
    assert cluster.get("toolprofile", "tools", NS)["spec"]["tools"] == tools
    time.sleep(2)
    assert policy(cluster) == before_policy and template(cluster) == before_template
