"""The five-minute tour of docs/operating.md is a test.

Every command of the tour's shell blocks is either run here, as written
(placeholders filled in: the digest), against the real API server with the
operator and its webhook running as the chart's ServiceAccount, with its
output checked; or named in NOT_RUN with the test that checks the same thing
where this machine can run it (a port-forward needs a kubelet and a running
pod, which the one-node cluster of tests/node provides). A command added to the tour that is neither
fails the test.

The tour's approver is `bob`, bound to the chart's `mcp-warden-approver` role
as the tour says. The API server serves the CiliumNetworkPolicy kind (a CRD
that keeps any field, as in test_apiserver_profiles_egress.py), so the
approved hosts become a policy the tour can show.
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT
from k8s_cluster import wait_for
from k8s_fixtures import operator_binary
from test_apiserver_profiles_egress import CILIUM_CRD

DOC = (REPO_ROOT / "docs" / "operating.md").read_text()
TOUR = DOC.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]

# Commands the tour shows that need a kubelet and a running pod: where each is checked.
NOT_RUN = {
    r"^kubectl -n team-a port-forward ": "tests/node runs the pod on a node and connects through its Service",
    r"^curl -si http://127.0.0.1:8080/mcp": "tests/node/test_node.py[stdio-server]: the same pod, a token from "
                                            "`kubectl create token`, and tools/list shows exactly log and git_status",
    r"^curl -s 127.0.0.1:9090/metrics": "tests/e2e/test_audit_metrics.py: mcpwarden_tool_calls_total",
    r"^curl -s -H \"Authorization: Bearer \$ADMIN\" 127.0.0.1:9090/tools": "tests/e2e (the admin /tools with "
                                                                            "the token)",
    r"^kubectl -n team-a logs deploy/git -c facade": "tests/e2e/test_audit_metrics.py: one tool_call line per call",
}


def tour_commands() -> list[tuple[int, str]]:
    """(step number, command) for every command line of the tour's sh blocks."""
    out = []
    for m in re.finditer(r"\n(\d)\. \*\*.*?(?=\n\d\. \*\*|\Z)", TOUR, re.S):
        step, body = m.group(1), m.group(0)
        for block in re.findall(r"```sh\n(.*?)```", body, re.S):
            lines = [line.strip() for line in block.replace("\\\n", " ").splitlines()]
            for line in lines:
                if not line or line.startswith("#"):
                    continue
                command = re.split(r"\s{2,}#\s", line)[0].strip()
                out.append((int(step), command))
    return out


def test_the_tour_has_its_commands():
    commands = [c for _, c in tour_commands()]
    assert len(commands) >= 15, commands
    assert any(c.startswith("kubectl apply -f examples/stdio-server.yaml") for c in commands)


@pytest.fixture(scope="module")
def approver(cluster, installed):
    cluster.kubectl("create", "clusterrolebinding", "tour-approvers", "--clusterrole=mcp-warden-approver",
                    "--user=bob", check=False)
    return "bob"


def run(cluster, command: str, user: str, env: dict) -> subprocess.CompletedProcess:
    kubeconfig = cluster.kubeconfig(user)
    full = {**os.environ, **env, "KUBECONFIG": str(kubeconfig),
            "PATH": f"{operator_binary().parent}:{os.environ['PATH']}"}
    return subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=REPO_ROOT, env=full,
                          capture_output=True, text=True, timeout=60)


def test_every_tour_command_runs(cluster, examples_applied, controller, webhook, approver):
    cluster.apply(CILIUM_CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/ciliumnetworkpolicies.cilium.io", "--timeout=30s")
    env: dict[str, str] = {}
    outputs: dict[str, str] = {}
    for step, command in tour_commands():
        skipped = [why for pattern, why in NOT_RUN.items() if re.search(pattern, command)]
        if skipped:
            continue
        user = approver if "annotate mcpserver" in command else "admin"
        if "mcpwarden.dev/approve=sha256:…" in command:
            digest = wait_for("the digest", lambda: cluster.get("mcpserver", "git", "team-a")
                              .get("status", {}).get("capabilityDigest"), timeout=60)
            command = command.replace("sha256:…", digest)
        if "ciliumnetworkpolicy git-egress" in command:
            # The engine is looked up again every 10 s; a label change wakes the server up.
            def written():
                cluster.kubectl("label", "mcpserver", "git", "-n", "team-a", "tour=1", "--overwrite")
                return cluster.get("ciliumnetworkpolicy", "git-egress", "team-a")
            wait_for("the egress policy", written, timeout=60, interval=3)
        if "toolprofiles,sandboxprofiles" in command:
            wait_for("profile status", lambda: (cluster.get("sandboxprofile", "pypi", "team-a") or {})
                     .get("status", {}).get("usedBy"), timeout=60)
        assignment = re.match(r"^([A-Z]+)=\$\((.*)\)$", command)
        if assignment:
            out = run(cluster, assignment.group(2), user, env)
            assert out.returncode == 0 and out.stdout.strip(), f"step {step}: {command}\n{out.stderr}"
            env[assignment.group(1)] = out.stdout.strip()
            continue
        out = run(cluster, command, user, env)
        ok_already = "AlreadyExists" in out.stderr and re.match(r"kubectl (-n team-a )?create ", command)
        assert out.returncode == 0 or ok_already, f"step {step}: {command}\n{out.stderr}{out.stdout}"
        outputs[command] = out.stdout

    def output(prefix: str) -> str:
        return next(v for k, v in outputs.items() if k.startswith(prefix))

    # What the tour says the commands show.
    message = output("kubectl -n team-a get mcpserver git -o jsonpath='{.status.conditions")
    assert "network.egress.host:pypi.org:443" in message and "kubectl annotate mcpserver git" in message, message
    listing = output("kubectl -n team-a get mcpservers git")
    assert re.search(r"^git\s", listing, re.M), listing
    assert "kind: Deployment" in output("mcp-warden-operator render")
    capabilities = output("kubectl -n team-a get mcpserver git -o jsonpath='{.status.requestedCapabilities}")
    assert "files.pythonhosted.org" in capabilities and "sha256:" in capabilities, capabilities
    assert output("kubectl -n team-a get mcpserver git -o jsonpath='{.metadata.annotations") == "bob"
    assert "git-egress" in output("kubectl -n team-a get ciliumnetworkpolicy git-egress")
    profiles = output("kubectl -n team-a get toolprofiles,sandboxprofiles")
    for name in ("git-readonly", "pypi"):
        row = next(line for line in profiles.splitlines() if f"/{name} " in line)
        assert re.search(r"\sTrue\s+\S*git\b", row), profiles
    claims = __import__("jwt").decode(env["TOKEN"], options={"verify_signature": False})
    assert claims["aud"] == ["mcpwarden.dev/team-a/git"], claims
    assert len(env["ADMIN"]) >= 32


def test_not_run_commands_are_in_the_tour():
    """Each exception names a command the tour still has (no stale excuses)."""
    commands = [c for _, c in tour_commands()]
    for pattern in NOT_RUN:
        assert any(re.search(pattern, c) for c in commands), pattern


def test_the_pod_test_the_tour_relies_on_exists():
    text = (REPO_ROOT / "tests" / "node" / "node_fixtures.py").read_text()
    assert '"stdio-server": ("coding-agent", {"log", "git_status"}' in text
    assert Path(REPO_ROOT / "tests" / "e2e" / "test_audit_metrics.py").exists()
