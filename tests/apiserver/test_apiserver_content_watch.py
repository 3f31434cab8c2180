"""An edit of a Secret or ConfigMap whose content an approval covers re-pends
the server at once, on a real API server with the chart's RBAC, webhook
and operator:

carol (`edit`) runs a server whose approval covers a `secretEnv` key and
its ToolProfile's JWKS ConfigMap; bob (the approver role) approves it. carol
then edits the Secret, and later the ConfigMap: within a few seconds —
well under the 60 s the operator used to wait before looking at referenced
content again — status says `ApprovalPending` naming what changed, and the
Deployment's pod template is the approved one. The operator learns of the
edits through metadata-only watches (no Secret value is ever in its
caches), which the chart's ClusterRole allows (`list`/`watch` on Secrets).
"""
from __future__ import annotations

import base64
import json
import time

import pytest

from k8s_cluster import wait_for
from k8s_fixtures import people_roles

NS = "team-content"
APPROVE = "mcpwarden.dev/approve"
PROMPT = 8  # seconds: a watch, not a periodic requeue

SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS},
          "stringData": {"url": "postgres://db.internal/app"}}
KEYS = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "idp-keys", "namespace": NS},
        "data": {"jwks.json": '{"keys": []}'}}
TOOLS = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
         "metadata": {"name": "tools", "namespace": NS},
         "spec": {"tools": [{"name": "query"}],
                  "auth": {"jwt": [{"issuer": "https://login.example.com", "audiences": ["db"],
                                    "jwks": {"configMap": {"name": "idp-keys"}}}]}}}
SANDBOX = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
           "metadata": {"name": "db", "namespace": NS},
           "spec": {"network": {"egress": {"rules": [{"cidr": "203.0.113.0/24", "ports": [5432]}]}}}}
SERVER = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
          "metadata": {"name": "db", "namespace": NS},
          "spec": {"image": "ghcr.io/example/db-mcp:1", "command": ["db-mcp"],
                   "secretEnv": [{"name": "DATABASE_URL", "secretName": "db", "key": "url"}],
                   "toolProfileRef": {"name": "tools"}, "sandboxProfileRef": {"name": "db"}}}


@pytest.fixture(scope="module")
def team(cluster, installed, webhook, controller):
    cluster.namespace(NS)
    people_roles(cluster, NS)
    cluster.apply([SECRET, KEYS, TOOLS, SANDBOX, SERVER], user="carol")
    return cluster


def status(cluster) -> dict:
    return (cluster.get("mcpserver", "db", NS) or {}).get("status", {})


def capability_condition(cluster) -> dict:
    return next((c for c in status(cluster).get("conditions", []) if c["type"] == "CapabilitiesApproved"), {})


def template(cluster) -> dict:
    return cluster.get("deployment", "db", NS)["spec"]["template"]


def approve(cluster, digest: str) -> None:
    out = cluster.kubectl("annotate", "mcpserver", "db", "-n", NS, f"{APPROVE}={digest}", "--overwrite",
                          user="bob", check=False)
    assert out.code == 0, out.stderr
    wait_for(f"{digest} approved", lambda: status(cluster).get("approvedDigest") == digest
             and capability_condition(cluster).get("reason") == "Approved", timeout=30)


def held_within(cluster, old_digest: str, part: str, seconds: float) -> dict:
    started = time.monotonic()
    cond = wait_for(f"ApprovalPending naming {part}", lambda: (lambda c: c if c.get("reason") == "ApprovalPending"
                                                               and status(cluster).get("capabilityDigest")
                                                               != old_digest else None)(capability_condition(cluster)),
                    timeout=30)
    took = time.monotonic() - started
    assert took < seconds, f"noticed after {took:.1f}s (a periodic look, not a watch)"
    assert f"({part})" in cond["message"], cond["message"]
    return cond


def test_an_edit_of_referenced_content_re_pends_at_once(team):
    cluster = team
    digest = wait_for("the first digest", lambda: status(cluster).get("capabilityDigest"), timeout=30)
    approve(cluster, digest)
    # Let the steady state settle, so the next reconcile is the edit's, not a leftover requeue.
    time.sleep(3)
    before = template(cluster)

    patch = {"data": {"url": base64.b64encode(b"postgres://evil.example/app").decode()}}
    out = cluster.kubectl("patch", "secret", "db", "-n", NS, "--type=merge", "-p", json.dumps(patch),
                          user="carol", check=False)
    assert out.code == 0, out.stderr
    held_within(cluster, digest, "secretEnv", PROMPT)
    assert template(cluster) == before, "the pod template changed after an unapproved Secret edit"
    digest = status(cluster)["capabilityDigest"]
    approve(cluster, digest)
    time.sleep(3)
    before = template(cluster)
    # The facade reads the issuer's keys from the operator's copy, never from
    # the profile's ConfigMap (the kubelet would hand it an edit at once).
    assert issuer_keys(cluster) == KEYS["data"]["jwks.json"]
    assert all(v.get("configMap", {}).get("name") != "idp-keys" for v in before["spec"]["volumes"])

    attacker = '{"keys": [{"kty": "oct", "k": "YXR0YWNrZXI"}]}'
    patch = {"data": {"jwks.json": attacker}}
    out = cluster.kubectl("patch", "configmap", "idp-keys", "-n", NS, "--type=merge", "-p", json.dumps(patch),
                          user="carol", check=False)
    assert out.code == 0, out.stderr
    held_within(cluster, digest, "toolProfile", PROMPT)
    assert template(cluster) == before, "the pod template changed after an unapproved ConfigMap edit"
    assert issuer_keys(cluster) == KEYS["data"]["jwks.json"], "an unapproved key reached the facade"
    approve(cluster, status(cluster)["capabilityDigest"])
    wait_for("the approved keys copied", lambda: issuer_keys(cluster) == attacker, timeout=30)


def issuer_keys(cluster) -> str | None:
    """What the facade reads as the first issuer's keys (`<name>-issuers`, key `0.json`)."""
    return ((cluster.get("configmap", "db-issuers", NS) or {}).get("data") or {}).get("0.json")
