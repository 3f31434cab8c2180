"""The approval webhook, called by a real API server through the chart's
webhook configurations (their caBundle written by the operator), and the
chart's roles for people, with real users:

    bob    bound (in one namespace) to the chart's approver ClusterRole only
    carol  bound to the built-in `edit` role, which aggregates mcp-warden-edit

An approver can approve and change nothing else; an editor can create and
change servers and profiles and cannot approve; a malformed approval is
refused; and while the webhook is down, edits that touch neither the approval
nor what it covers (labels, replicas) still work (failurePolicy Fail only
bites where the webhook must decide or record who changed the workload).
"""
from __future__ import annotations

import json
import socket

import pytest

from chartkit import NAMESPACE, RELEASE
from k8s_cluster import wait_for
from k8s_fixtures import approver_binding, role_binding

NS = "team-hooks"
APPROVE = "mcpwarden.dev/approve"
APPROVED_BY = "mcpwarden.dev/approved-by"


def server(name: str, extra: dict | None = None) -> dict:
    return {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": name, "namespace": NS, **(extra or {})},
            "spec": {"image": "ghcr.io/example/mcp:1", "command": ["srv"], "toolProfileRef": {"name": "tools"},
                     "sandboxProfileRef": {"name": "dns"}}}


PROFILES = [
    {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "tools", "namespace": NS},
     "spec": {"tools": [{"name": "echo"}]}},
    # One capability above the baseline, so there is something to approve.
    {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile", "metadata": {"name": "dns", "namespace": NS},
     "spec": {"network": {"egress": {"dns": True}}}},
]


def can_i(cluster, user: str, verb: str, resource: str) -> bool:
    """`kubectl auth can-i` as `user` (a SelfSubjectAccessReview); `resource` may name a subresource."""
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource, "-n", NS] + ([f"--subresource={sub}"] if sub else [])
    out = cluster.kubectl(*args, user=user, check=False)
    return out.stdout.strip() == "yes"


@pytest.fixture(scope="module")
def hooks(cluster, installed, webhook, controller):
    cluster.namespace(NS)
    cluster.apply(PROFILES)
    cluster.apply([
        approver_binding(NS),
        role_binding(NS, "carol-edits", "edit", "carol"),
    ])
    # The controller manager aggregates mcp-warden-edit into `edit`.
    wait_for("carol (edit) to be able to create MCPServers", lambda: can_i(cluster, "carol", "create",
                                                                           "mcpservers.mcpwarden.dev"), timeout=30)
    return webhook


def digest_of(cluster, name: str) -> str:
    s = wait_for(f"{name}'s capabilityDigest", lambda: (cluster.get("mcpserver", name, NS) or {})
                 .get("status", {}).get("capabilityDigest"), timeout=30)
    return s


def annotations(cluster, name: str) -> dict:
    return cluster.get("mcpserver", name, NS)["metadata"].get("annotations", {})


def test_rights_as_rbac_sees_them(cluster, hooks):
    """The chart's roles, read back from the API server's own authorizer."""
    assert can_i(cluster, "bob", "patch", "mcpservers.mcpwarden.dev")
    assert can_i(cluster, "bob", "get", "mcpservers.mcpwarden.dev")
    assert not can_i(cluster, "bob", "update", "mcpservers.mcpwarden.dev")
    assert not can_i(cluster, "bob", "create", "mcpservers.mcpwarden.dev")
    assert can_i(cluster, "bob", "approve", "mcpservers.mcpwarden.dev/approval")
    for verb, resource in [("create", "mcpservers.mcpwarden.dev"), ("update", "mcpservers.mcpwarden.dev"),
                           ("create", "toolprofiles.mcpwarden.dev"), ("delete", "sandboxprofiles.mcpwarden.dev"),
                           ("list", "mcpservers.mcpwarden.dev")]:
        assert can_i(cluster, "carol", verb, resource), (verb, resource)
    assert not can_i(cluster, "carol", "approve", "mcpservers.mcpwarden.dev/approval")
    assert not can_i(cluster, "carol", "patch", "mcpservers.mcpwarden.dev/status")


def test_an_editor_creates_servers_and_profiles(cluster, hooks):
    objs = [
        {**PROFILES[0], "metadata": {"name": "carols-tools", "namespace": NS}},
        {**PROFILES[1], "metadata": {"name": "carols-box", "namespace": NS}},
        server("carols"),
    ]
    out = cluster.apply(objs, user="carol", check=False)
    assert out.code == 0, out.stderr
    assert cluster.get("mcpserver", "carols", NS) is not None
    # …and edits them: a spec change by a user with `update` needs no webhook decision.
    out = cluster.kubectl("patch", "mcpserver", "carols", "-n", NS, "--type=merge", "-p",
                          '{"spec": {"replicas": 2}}', user="carol", check=False)
    assert out.code == 0, out.stderr


def test_an_approver_approves_and_is_recorded(cluster, hooks):
    cluster.apply(server("approve-me"))
    digest = digest_of(cluster, "approve-me")
    out = cluster.kubectl("annotate", "mcpserver", "approve-me", "-n", NS, f"{APPROVE}={digest}", "--overwrite",
                          user="bob", check=False)
    assert out.code == 0, out.stderr
    got = annotations(cluster, "approve-me")
    assert got[APPROVE] == digest
    assert got[APPROVED_BY] == "bob"  # written by the mutating webhook, not by bob
    status = wait_for("the approval in force", lambda: (lambda s: s if s.get("approvedDigest") == digest else None)(
        cluster.get("mcpserver", "approve-me", NS).get("status", {})), timeout=30)
    assert status["approvedCapabilities"] == ["network.dns"]


def test_an_approver_changes_nothing_else(cluster, hooks):
    cluster.apply(server("approver-cannot-edit"))
    for patch in ['{"spec": {"replicas": 3}}', '{"metadata": {"labels": {"team": "x"}}}',
                  '{"metadata": {"annotations": {"note": "x"}}}']:
        out = cluster.kubectl("patch", "mcpserver", "approver-cannot-edit", "-n", NS, "--type=merge", "-p", patch,
                              user="bob", check=False)
        assert out.code != 0, f"bob changed {patch}"
        assert 'denied the request' in out.stderr and '"bob" may change only the approval annotations of' in out.stderr, out.stderr
    live = cluster.get("mcpserver", "approver-cannot-edit", NS)
    assert live["spec"].get("replicas", 1) == 1 and "team" not in live["metadata"].get("labels", {})
    # Approving and changing the spec in one write is refused too.
    digest = digest_of(cluster, "approver-cannot-edit")
    body = json.dumps({"metadata": {"annotations": {APPROVE: digest}}, "spec": {"replicas": 3}})
    out = cluster.kubectl("patch", "mcpserver", "approver-cannot-edit", "-n", NS, "--type=merge", "-p", body,
                          user="bob", check=False)
    assert out.code != 0 and "may change only the approval annotations of" in out.stderr, out.stderr


def test_an_editor_cannot_approve(cluster, hooks):
    cluster.apply(server("editor-cannot-approve"))
    digest = digest_of(cluster, "editor-cannot-approve")
    out = cluster.kubectl("annotate", "mcpserver", "editor-cannot-approve", "-n", NS, f"{APPROVE}={digest}",
                          user="carol", check=False)
    assert out.code != 0
    assert 'admission webhook "validate.mcpservers.mcpwarden.dev" denied the request' in out.stderr, out.stderr
    assert '"carol" may not approve capabilities' in out.stderr, out.stderr
    assert APPROVE not in annotations(cluster, "editor-cannot-approve")
    # …nor forge the record of who approved: the mutating webhook puts the old value back.
    cluster.kubectl("annotate", "mcpserver", "editor-cannot-approve", "-n", NS, f"{APPROVED_BY}=bob", user="carol")
    assert APPROVED_BY not in annotations(cluster, "editor-cannot-approve")


def test_a_malformed_approval_is_refused(cluster, hooks):
    cluster.apply(server("malformed"))
    out = cluster.kubectl("annotate", "mcpserver", "malformed", "-n", NS, f"{APPROVE}=yes", check=False)
    assert out.code != 0
    assert 'must be "sha256:" followed by 64 lowercase hex digits' in out.stderr, out.stderr
    assert '"yes"' in out.stderr
    assert APPROVE not in annotations(cluster, "malformed")


def test_the_ca_bundle_has_a_named_field_manager(cluster, hooks):
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        config = cluster.get(kind, RELEASE)
        owners = [m["manager"] for m in config["metadata"]["managedFields"]
                  if "caBundle" in json.dumps(m.get("fieldsV1", {}))]
        assert owners == ["mcp-warden-operator"], config["metadata"]["managedFields"]


def test_with_the_webhook_down_only_approval_changes_wait(cluster, hooks):
    name = "while-down"
    cluster.apply(server(name))
    digest = digest_of(cluster, name)
    cluster.kubectl("annotate", "mcpserver", name, "-n", NS, f"{APPROVE}={digest}", user="bob")
    hooks.stop()
    try:
        with socket.socket() as sock:
            assert sock.connect_ex((hooks.address, hooks.port)) != 0, "the webhook still listens"
        # An editor's label and spec edits of the approved server still work…
        for patch in ['{"metadata": {"labels": {"team": "x"}}}', '{"spec": {"replicas": 2}}']:
            out = cluster.kubectl("patch", "mcpserver", name, "-n", NS, "--type=merge", "-p", patch,
                                  user="carol", check=False)
            assert out.code == 0, f"{patch}: {out.stderr}"
        live = cluster.get("mcpserver", name, NS)
        assert live["spec"]["replicas"] == 2 and live["metadata"]["labels"]["team"] == "x"
        assert live["metadata"]["annotations"][APPROVE] == digest
        # A change of what an approval covers, or a new server, waits: the webhook records who made
        # it (separation of duties), so such writes fail closed.
        out = cluster.kubectl("patch", "mcpserver", name, "-n", NS, "--type=merge", "-p",
                              '{"spec": {"image": "ghcr.io/example/mcp:2"}}', user="carol", check=False)
        assert out.code != 0 and "failed calling webhook" in out.stderr, out.stderr
        out = cluster.apply(server("created-while-down"), user="carol", check=False)
        assert out.code != 0 and "failed calling webhook" in out.stderr, out.stderr
        # The webhook's decisions wait for it (failurePolicy Fail): approving, revoking, an approver's edit.
        for user, args in [("admin", [f"{APPROVE}-"]), ("bob", [f"{APPROVE}={digest[:-1]}0", "--overwrite"]),
                           ("bob", ["note=x"])]:
            out = cluster.kubectl("annotate", "mcpserver", name, "-n", NS, *args, user=user, check=False)
            assert out.code != 0, f"{user} {args} went through without the webhook: {out.stdout} {annotations(cluster, name)}"
            assert "failed calling webhook" in out.stderr, out.stderr
    finally:
        hooks.start()
    wait_for("the webhook to answer again", lambda: cluster.kubectl(
        "annotate", "mcpserver", name, "-n", NS, f"{APPROVE}-", check=False).code == 0, timeout=30)
    assert APPROVED_BY not in annotations(cluster, name), "revoking clears the record"


def test_the_operator_namespace_holds_the_generated_certificate(cluster, hooks):
    secret = cluster.get("secret", "mcp-warden-webhook-tls", NAMESPACE)
    assert secret is not None and {"tls.crt", "tls.key"} <= set(secret["data"])


def test_the_webhook_needs_nothing_beyond_the_charts_rbac(hooks):
    """The webhook process (certificate Secret, caBundle, SubjectAccessReviews)
    ran on the chart's ServiceAccount: nothing it did was forbidden."""
    log = hooks.process.log()
    assert "admission webhook listening" in log, log[-2000:]
    refused = [line for line in log.splitlines()
               if "forbidden" in line.lower() or '"level":"ERROR"' in line or "cannot write the webhook caBundle" in line]
    assert refused == [], "\n".join(refused[:10])
