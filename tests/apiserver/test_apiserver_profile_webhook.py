"""The API server refuses, through the operator's webhook, a profile the
facade's policy loader would refuse: each ToolProfile of
`examples/invalid-policy/` (which passes the CRD's schema and CEL rules) is
refused on create with the loader's message (its `# expect:` line), and an
update of a good profile into a bad one is refused too. Writes that leave
the spec alone (the operator's status, labels) do not pass the webhook (its
matchConditions send only spec writes), so they keep working while it is down.
"""
from __future__ import annotations

import json

from k8s_cluster import wait_for
from k8s_fixtures import REPO_ROOT, RESTRICTED

NS = "team-profile-hook"


def expect(path) -> str:
    return next(l[len("# expect: "):] for l in path.read_text().splitlines() if l.startswith("# expect: "))


def test_the_loader_refuses_invalid_profiles_at_the_api_server(cluster, installed, webhook):
    cluster.namespace(NS, RESTRICTED)
    cluster.namespace("team-a", RESTRICTED)
    files = sorted((REPO_ROOT / "examples" / "invalid-policy").glob("*.yaml"))
    assert len(files) >= 4
    for path in files:
        out = cluster.kubectl("apply", "--server-side", "--field-manager=tests", "-f", path, check=False)
        assert out.code != 0, f"{path.name}: stored"
        assert "validate.profiles.mcpwarden.dev" in out.stderr, out.stderr
        assert "InvalidPolicy" in out.stderr and expect(path) in out.stderr, out.stderr

    good = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
            "metadata": {"name": "fetch", "namespace": NS},
            "spec": {"tools": [{"name": "fetch", "arguments": [
                {"name": "url", "kind": "string", "allow": ["^https://example\\.com/"]}]}]}}
    cluster.apply(good)
    patch = {"spec": {"tools": [{"name": "fetch", "arguments": [
        {"name": "url", "kind": "string", "allow": ["^https://(example\\.com/"]}]}]}}
    out = cluster.kubectl("patch", "toolprofile", "fetch", "-n", NS, "--type=merge", "-p", json.dumps(patch),
                          check=False)
    assert out.code != 0 and "unclosed group" in out.stderr, out.stderr
    stored = cluster.get("toolprofile", "fetch", NS)
    assert stored["spec"]["tools"][0]["arguments"][0]["allow"] == ["^https://example\\.com/"]

    # A write that leaves the spec alone does not go through the webhook: it works while it is down.
    webhook.stop()
    try:
        out = cluster.kubectl("label", "toolprofile", "fetch", "-n", NS, "seen=yes", check=False)
        assert out.code == 0, out.stderr
        out = cluster.kubectl("patch", "toolprofile", "fetch", "-n", NS, "--type=merge", "-p",
                              json.dumps({"spec": {"tools": [{"name": "other"}]}}), check=False)
        assert out.code != 0, "a spec write fails closed while the webhook is down"
    finally:
        webhook.start()
    wait_for("the webhook back", lambda: cluster.kubectl(
        "apply", "--server-side", "--field-manager=tests", "-f", files[0], check=False).code != 0, timeout=30)
