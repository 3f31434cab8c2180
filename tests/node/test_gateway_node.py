"""The gateway on the node: examples/gateway/gateway.yaml applied after the
examples it fronts (the node suite's `examples` fixture runs `everything`,
`files` and `git` — http-server, with-workspace and stdio-server — as real
pods), the operator runs the MCPGateway as a pod with a Service, and the
official Python SDK calls through that Service (tests/node/node_client.py,
inside the node's network namespace, as test_node.py's clients do):

- it sees the prefixed union of what each backend gives its role, exactly;
- one call to each backend works;
- a backend's own refusal (an argument rule of `files`; the gateway's
  profile has none) comes back with the backend's code;
- the gateway reads each backend's list as itself at start, before any
  caller, and every backend accepts it (without an identity of its own the
  backends refused it: they accept only their own callers and the gateway's
  assertions);
- the token a caller holds for the gateway opens no backend (no passthrough):
  presented to a backend's Service directly it is refused (401).

Run alone: `make build node-binaries && .venv/bin/python -m pytest -q tests/node -k gateway`
(the session fixtures still apply every example first).
"""
from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from k8s_cluster import wait_for  # noqa: E402
from k8s_node import Node  # noqa: E402
from node_fixtures import NS, POLICY_BLOCKED, REPO_ROOT, pods_of, tour  # noqa: E402

GATEWAY = "team-a-tools"
SA = "coding-agent"
# What coding-agent is given at each backend (test_node.PROMISES), under the
# example's prefixes: `everything__`, `files__`, and `vcs_` for git.
UNION = {"everything__echo", "everything__add_numbers", "files__read_text", "files__list_directory",
         "vcs_log", "vcs_git_status"}
CALLS = [("everything__echo", {"message": "hi through the gateway"}, "hi through the gateway"),
         ("files__list_directory", {"path": "/workspace"}, "README.md"),
         ("vcs_git_status", {"repo_path": "/workspace/demo"}, "On branch")]


@pytest.fixture(scope="module")
def gateway(node, examples):
    tour(node, "kubectl apply -f examples/gateway/gateway.yaml")

    def deployed():
        return node.get("deployment", GATEWAY, NS)
    wait_for("the gateway's Deployment", deployed, timeout=120)
    # The node has no cluster DNS (pods resolve nothing): the gateway's pod is
    # given its backends' Service names as /etc/hosts entries (hostAliases,
    # a field the operator does not set), as node_client's callers are.
    aliases = [{"ip": node.get("service", b, NS)["spec"]["clusterIP"],
                "hostnames": [f"{b}.{NS}.svc.cluster.local"]} for b in ("everything", "files", "git")]
    node.kubectl("-n", NS, "patch", "deployment", GATEWAY, "--type=strategic",
                 "-p", json.dumps({"spec": {"template": {"spec": {"hostAliases": aliases}}}}))
    tour(node, f"kubectl -n {NS} rollout status deployment/{GATEWAY} --timeout=300s")

    def all_backends_ready():
        status = (node.get("mcpgateway", GATEWAY, NS) or {}).get("status", {})
        backends = status.get("backends", [])
        return len(backends) == 3 and all(b["ready"] for b in backends) and status
    try:
        status = wait_for("the gateway's three backends ready", all_backends_ready, timeout=180)
        # Each backend trusts the gateway once its policy, which the operator
        # gives the gateway's public key, reaches its pod (a ConfigMap
        # volume: up to a kubelet sync later).
        url, command = gateway_client_config(node)
        token = tour(node, command.replace("<service-account>", SA)).strip()

        def backends_trust_it():
            out = through(node, GATEWAY, url, token)
            return out.returncode == 0 and set(json.loads(out.stdout.strip().splitlines()[-1])["tools"]) == UNION
        wait_for("every backend to trust the gateway", backends_trust_it, timeout=240, interval=5)
        yield status
    except AssertionError as e:
        logs = node.kubectl("-n", NS, "logs", f"deployment/{GATEWAY}", "--all-containers", "--tail=60",
                            check=False).stdout
        raise AssertionError(f"{e}\n{node.get('mcpgateway', GATEWAY, NS)}\n{logs}") from None
    finally:
        # The rest of the suite finds the examples as it left them: the
        # backends' policies lose the gateway's key again.
        node.kubectl("delete", "-f", str(REPO_ROOT / "examples/gateway/gateway.yaml"), "--wait=true", check=False)
        for name in ("everything", "files", "git"):
            node.kubectl("-n", NS, "rollout", "status", f"deployment/{name}", "--timeout=300s", check=False,
                         timeout=320)


def gateway_client_config(node: Node) -> tuple[str, str]:
    """(the in-cluster URL, the token command) as `client-config --gateway` prints them."""
    text = tour(node, f"mcp-warden-operator client-config {GATEWAY} --gateway -n {NS}")
    url = re.search(r"^# URL: (\S+)$", text, re.M).group(1)
    in_cluster = re.search(r"^#\s+in the cluster: (\S+)$", text, re.M)
    command = re.search(r"^#\s+(kubectl -n \S+ create token <service-account> --audience \S+)$", text, re.M).group(1)
    return (in_cluster.group(1) if in_cluster else url), command


def through(node: Node, service: str, url: str, token: str, *args: str):
    svc = node.get("service", service, NS)
    host = url.split("//", 1)[1].split(":", 1)[0].split("/", 1)[0]
    return node.in_node([sys.executable, str(HERE / "node_client.py"), url, *args], {host: svc["spec"]["clusterIP"]},
                        env={"MCP_WARDEN_TOKEN": token})


def test_a_client_calls_every_backend_through_the_gateways_service(node, gateway):
    started = time.monotonic()
    url, command = gateway_client_config(node)
    assert f"mcpwarden.dev/{NS}/mcpgateway/{GATEWAY}" in command, command
    token = tour(node, command.replace("<service-account>", SA)).strip()
    args = ["--call", CALLS[0][0], json.dumps(CALLS[0][1]),
            # An argument rule of `files` (the path must be under /workspace):
            # the gateway's own profile has no argument rules.
            "--refused", "files__read_text", json.dumps({"path": "/etc/passwd"})]
    for name, arguments, _ in CALLS[1:]:
        args += ["--also-call", name, json.dumps(arguments)]
    out = through(node, GATEWAY, url, token, *args)
    assert out.returncode == 0, out.stderr[-4000:] + node.kubectl(
        "-n", NS, "logs", f"deployment/{GATEWAY}", "-c", "gateway", "--tail=60", check=False).stdout
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(seen["tools"]) == UNION, seen
    texts = [seen["call"], *seen["also"]]
    for (name, _, want), text in zip(CALLS, texts):
        assert want in (text or ""), (name, seen)
    assert seen["refused"]["code"] == POLICY_BLOCKED, seen
    print(f"gateway calls through the Service: {time.monotonic() - started:.1f}s")


def test_the_gateway_listed_every_backend_as_itself(node, gateway):
    """A gateway pod started once its backends trust it (the first one may
    have raced the backends' policy reload): its start-up list of every
    backend, made before any caller, is accepted, so its log has no refused
    list (the gateway logs one per backend that refuses: "a backend's
    tools/list failed")."""
    status = node.get("mcpgateway", GATEWAY, NS)["status"]
    assert {b["name"]: b["ready"] for b in status["backends"]} == {"everything": True, "files": True,
                                                                   "git": True}, status
    old = {p["metadata"]["name"] for p in pods_of(node, GATEWAY)}
    for name in old:
        node.kubectl("-n", NS, "delete", "pod", name, "--wait=false")

    def fresh_ready():
        pods = [p for p in pods_of(node, GATEWAY) if p["metadata"]["name"] not in old]
        ready = [p for p in pods if all(c.get("ready") for c in p.get("status", {}).get("containerStatuses", [{}]))]
        return ready if ready and len(ready) == len(pods) else None
    # Read the fresh pods' logs once they say ready: a pod Ready a moment ago
    # may be replaced before its log is read (its log file is then gone), so
    # the pods are looked up again until one reading of all of them works.
    last = {"logs": ""}

    def fresh_logs():
        pods = fresh_ready()
        if not pods:
            return None
        read = [node.kubectl("-n", NS, "logs", f"pod/{p['metadata']['name']}", "-c", "gateway", check=False)
                for p in pods]
        last["logs"] = "".join(r.stdout + r.stderr for r in read)
        if any(r.code != 0 for r in read):
            return None
        logs = "".join(r.stdout for r in read)
        return logs if "ready" in logs else None
    try:
        logs = wait_for("a fresh gateway pod Ready, its log saying ready", fresh_logs, timeout=180, interval=2)
    except AssertionError as e:
        pods = node.kubectl("-n", NS, "get", "pods", "-o", "wide", check=False).stdout
        events = node.kubectl("-n", NS, "get", "events", "--sort-by=.lastTimestamp", check=False).stdout
        raise AssertionError(f"{e}\n{last['logs'][-4000:]}\n{pods}\n{events[-3000:]}") from None
    assert "tools/list failed" not in logs, logs[-4000:]


def test_the_callers_gateway_token_opens_no_backend(node, gateway):
    _, command = gateway_client_config(node)
    token = tour(node, command.replace("<service-account>", SA)).strip()
    url = f"http://everything.{NS}.svc.cluster.local:8080/mcp"
    out = through(node, "everything", url, token)
    assert out.returncode != 0, out.stdout
    assert "401" in out.stderr or "Unauthorized" in out.stderr or "auth" in out.stderr.lower(), out.stderr[-3000:]
