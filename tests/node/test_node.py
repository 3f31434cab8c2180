"""mcp-warden on a one-node cluster whose pods really run.

The node (tests/node/k8s_node.py: node.sh from $MCP_WARDEN_K8S_BIN_DIR) starts
once per test session. On it:

1. the chart, rendered with its defaults by Helm's own engine (PyPI
   helm-python-sdk, as tests/chart does), installed as `helm install` would
   (CRDs, then its objects in Helm's order) into `mcp-warden-system`, which
   enforces Pod Security "restricted"; the operator runs as a pod under the
   chart's ServiceAccount from the image built from this repository, and the
   API server calls its webhook through the chart's Service;
2. every example applied and approved as the tour in docs/operating.md says
   (`kubectl apply -f examples/…`, the approver `bob` bound to
   `mcp-warden-approver` annotating the capabilityDigest) into `team-a`,
   which enforces "restricted"; the claims bound to static PersistentVolumes
   (the node has no provisioner). Every pod Running and Ready, and each
   container's first process checked in /proc: uid and gid 65532, no
   capabilities, seccomp filtering (RuntimeDefault), no_new_privs, root
   mounted read-only;
3. the official MCP Python SDK (tests/node/node_client.py), inside the node's
   network namespace, calls each server at the URL `client-config` prints,
   with the token its `kubectl create token` line makes, through the
   Service (kube-proxy); it sees exactly the tools the example promises, one
   call works, and one call of a tool the caller was not given is refused;
4. the approval flow: a change asking for more waits with the running pod
   untouched (the digest binds the workload), the approval rolls it out;
5. operations: a killed server container fails the call in flight clearly and
   restarts; a profile change reaches open sessions without a rollout; three
   replicas serve sessions across pods; a restarted operator pod writes
   nothing; uninstall leaves nothing behind (runs last);
6. metrics scraped from the pod, audit records read from its sink.

Images (images/build-node-images.py, cached by a hash of their inputs): the
operator and sidecar images hold the real binaries, linked statically (make node-binaries); `node:22-slim`,
the uv image, `mcp/time` and `mcp/fetch` are stand-ins on Debian with the
packages the examples start, installed offline. Two examples name untagged
images (`mcp/time`, `mcp/fetch`: `:latest`) with `imagePullPolicy: IfNotPresent`,
so the kubelet runs the loaded stand-ins (tagged `latest`) instead of pulling. The remote example is not run here: its remote is on the
internet, which tests/pods stands in for (tests/pods/internet.py).
"""
from __future__ import annotations

import difflib
import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from node_fixtures import (  # noqa: E402
    APPROVE, EXAMPLES, NONROOT, NS, PERMISSION_DENIED, POLICY_BLOCKED, PROMISES, REPO_ROOT, TOUR_LOG,
    load, pods_of, server_name, tour)
from chartkit import NAMESPACE, RELEASE  # noqa: E402
from k8s_cluster import wait_for  # noqa: E402
from k8s_fixtures import RESTRICTED  # noqa: E402
from k8s_node import Node, process_security  # noqa: E402

# ---------------------------------------------------------------------------
# 1. the chart and the operator as a pod
# ---------------------------------------------------------------------------
def test_the_operator_runs_as_a_pod_and_serves_its_webhook(node, chart):
    sa = next(o for o in chart if o["kind"] == "ServiceAccount")["metadata"]["name"]
    pods = pods_of(node, f"{RELEASE}-operator", NAMESPACE)
    assert pods, node.kubectl("get", "pods", "-A").stdout
    for pod in pods:
        assert pod["spec"]["serviceAccountName"] == sa
        assert pod["status"]["phase"] == "Running"
        assert all(c["ready"] for c in pod["status"]["containerStatuses"]), pod["status"]
        image = pod["spec"]["containers"][0]["image"]
        assert image.startswith("ghcr.io/mcp-warden/operator:"), image
        pid = node.container_pid(NAMESPACE, pod["metadata"]["name"], pod["spec"]["containers"][0]["name"])
        sec = process_security(pid)
        assert sec["uids"] == {str(NONROOT)} and sec["cap_eff"] == 0 and sec["seccomp"] == 2, sec
        assert sec["root_read_only"] and sec["no_new_privs"] == 1, sec
    # The webhook Service's endpoints are the operator pods: the API server reaches the
    # webhook in the pod through it. An editor's approval is refused by that webhook.
    slices = node.list("endpointslices", NAMESPACE, f"kubernetes.io/service-name={RELEASE}-webhook")
    addresses = {a for s in slices for e in s.get("endpoints") or [] for a in e["addresses"]}
    assert addresses == {p["status"]["podIP"] for p in pods}, slices
    node.namespace("webhook-check", RESTRICTED)
    node.kubectl("create", "rolebinding", "carol-edits", "--clusterrole=edit", "--user=carol", "-n", "webhook-check")
    node.apply([{"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile",
                 "metadata": {"name": "tools", "namespace": "webhook-check"}, "spec": {"tools": [{"name": "echo"}]}},
                {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                 "metadata": {"name": "hook", "namespace": "webhook-check"},
                 "spec": {"image": "ghcr.io/example/mcp:1", "command": ["srv"], "toolProfileRef": {"name": "tools"}}}])
    out = node.kubectl("annotate", "mcpserver", "hook", "-n", "webhook-check",
                       "mcpwarden.dev/approve=sha256:" + "0" * 64, user="carol", check=False)
    assert out.code != 0, out.stdout
    assert 'admission webhook "validate.mcpservers.mcpwarden.dev" denied the request' in out.stderr, out.stderr
    assert '"carol" may not approve capabilities' in out.stderr, out.stderr
    node.kubectl("delete", "namespace", "webhook-check", "--wait=false")


# ---------------------------------------------------------------------------
# 2. every example's pod, and what the kernel enforces on it
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("example", [p.stem for p in EXAMPLES])
def test_example_pods_run_restricted(node, examples, example):
    name = server_name(examples[example])
    pods = pods_of(node, name)
    replicas = next(d for d in examples[example] if d["kind"] == "MCPServer")["spec"].get("replicas", 1)
    assert len(pods) == replicas, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        # The uid the pod asks for (the operator's 65532 unless the example's pod template says otherwise).
        uids = {c["name"]: str(c.get("securityContext", {}).get("runAsUser")
                               or pod["spec"]["securityContext"]["runAsUser"]) for c in pod["spec"]["containers"]}
        assert "0" not in uids.values(), uids
        assert pod["status"]["phase"] == "Running", pod["status"]
        statuses = {c["name"]: c for c in pod["status"]["containerStatuses"]}
        assert statuses and all(c["ready"] for c in statuses.values()), statuses
        assert "facade" in statuses, statuses
        for container in statuses:
            sec = process_security(node.container_pid(NS, pod["metadata"]["name"], container))
            where = f"{example} {pod['metadata']['name']} {container}: {sec}"
            assert sec["uids"] == {uids[container]}, where
            assert sec["cap_eff"] == sec["cap_prm"] == sec["cap_bnd"] == sec["cap_amb"] == 0, where
            assert sec["seccomp"] == 2 and sec["no_new_privs"] == 1, where  # 2: a seccomp filter
            assert sec["root_read_only"], where


# ---------------------------------------------------------------------------
# 3. a real client through each Service
# ---------------------------------------------------------------------------
def client_config(node: Node, name: str) -> tuple[str, str]:
    """(the URL, the token command) as `mcp-warden-operator client-config` prints them."""
    text = tour(node, f"mcp-warden-operator client-config {name} -n {NS}")
    url = re.search(r"^# URL: (\S+)$", text, re.M).group(1)
    # An exposed server's URL is its Ingress's; the client here is in the cluster.
    in_cluster = re.search(r"^#\s+in the cluster: (\S+)$", text, re.M)
    command = re.search(r"^#\s+(kubectl -n \S+ create token <service-account> --audience \S+)$", text, re.M).group(1)
    config = json.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    assert config["mcpServers"][name]["url"] == url
    assert config["mcpServers"][name]["headers"]["Authorization"] == "Bearer ${MCP_WARDEN_TOKEN}"
    return (in_cluster.group(1) if in_cluster else url), command


def call_through_service(node: Node, name: str, url: str, token: str, *args: str) -> dict:
    service = node.get("service", name, NS)
    host = url.split("//", 1)[1].split(":", 1)[0].split("/", 1)[0]
    out = node.in_node([sys.executable, str(HERE / "node_client.py"), url, *args], {host: service["spec"]["clusterIP"]},
                       env={"MCP_WARDEN_TOKEN": token})
    assert out.returncode == 0, out.stderr[-4000:] + node.kubectl(
        "-n", NS, "logs", f"deployment/{name}", "-c", "facade", "--tail=40", check=False).stdout
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("example", [p.stem for p in EXAMPLES])
def test_a_client_sees_exactly_the_promised_tools(node, examples, example):
    name = server_name(examples[example])
    sa, promised, call, refused = PROMISES[example]
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", sa)).strip()
    args = []
    if call:
        args += ["--call", call[0], json.dumps(call[1])]
    args += ["--refused", refused[0], json.dumps(refused[1])]
    seen = call_through_service(node, name, url, token, *args)
    assert set(seen["tools"]) == promised, seen
    if call:
        assert call[2] in (seen["call"] or ""), seen
    assert seen["refused"]["code"] == (refused[2] if len(refused) > 2 else POLICY_BLOCKED), seen


# ---------------------------------------------------------------------------
# 5. operations
# ---------------------------------------------------------------------------
def test_a_killed_server_container_fails_the_call_in_flight_and_restarts(node, examples):
    """A call is in flight (read_text on a FIFO in the workspace: the server
    blocks reading it) when the files server's container gets SIGKILL: the
    caller gets one clear error (-32603, reason upstream_failed) within
    seconds, not a hang; the kubelet restarts the container (the facade in
    front stays up), the pod is Ready again and a new session works."""
    name = "files"
    pod = pods_of(node, name)[0]
    pod_name = pod["metadata"]["name"]
    restarts = {c["name"]: c["restartCount"] for c in pod["status"]["containerStatuses"]}
    fifo = node.dir / "volumes" / "team-a-docs" / "blocking.fifo"
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo, 0o666)
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    with ThreadPoolExecutor(2) as pool:
        call = pool.submit(call_through_service, node, name, url, token,
                           "--failing", "read_text", json.dumps({"path": "/workspace/blocking.fifo"}))
        # Opening the FIFO to write returns once the server opened it to read; the
        # writer stays open and silent, so the server's read waits.
        writer = pool.submit(os.open, fifo, os.O_WRONLY)
        try:
            wait_for("the server to open the FIFO", lambda: writer.done() or call.done(), timeout=90)
            assert not call.done(), call.result()
            os.kill(node.container_pid(NS, pod_name, "server"), 9)
            killed = time.monotonic()
            seen = call.result(timeout=60)
        finally:
            if not writer.done():  # release the waiting writer with a reader of our own
                os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            os.close(writer.result(timeout=10))
            fifo.unlink(missing_ok=True)
    assert time.monotonic() - killed < 30, "the call in flight waited instead of failing"
    assert seen["failing"]["code"] == -32603 and seen["failing"]["reason"] == "upstream_failed", seen

    def restarted():
        status = node.get("pod", pod_name, NS)["status"]
        counts = {c["name"]: (c["restartCount"], c["ready"]) for c in status["containerStatuses"]}
        return counts["server"][0] > restarts["server"] and all(r for _, r in counts.values()) and counts
    counts = wait_for("the server container restarted and Ready", restarted, timeout=120)
    assert counts["facade"][0] == restarts["facade"], counts
    seen = call_through_service(node, name, url, token, "--call", "list_directory", json.dumps({"path": "/workspace"}))
    assert "README.md" in seen["call"], seen


def test_a_profile_change_reaches_open_sessions_without_a_rollout(node, examples, tmp_path):
    """The files profile tightened (read_text taken away, which applies at once):
    the operator rewrites the policy ConfigMap, the kubelet updates the mounted
    file and the running facade reloads it. No rollout (the same pod, no
    restarts), and a session opened before the change stays open, lists the
    new set and keeps working. The profile restored afterwards is the approved
    one again, so nothing waits for approval."""
    name = "files"
    before = {p["metadata"]["name"]: {c["name"]: c["restartCount"] for c in p["status"]["containerStatuses"]}
              for p in pods_of(node, name)}
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    hold = tmp_path / "hold"
    hold.mkdir()
    tools = node.get("toolprofile", name, NS)["spec"]["tools"]
    tightened = [t for t in tools if t.get("alias") != "read_text"]
    assert len(tightened) == len(tools) - 1, tools

    def set_tools(value):
        node.kubectl("-n", NS, "patch", "toolprofile", name, "--type=json",
                     "-p", json.dumps([{"op": "replace", "path": "/spec/tools", "value": value}]))

    def fresh_session_lists(want_read_text: bool):
        seen = call_through_service(node, name, url, token)
        return ("read_text" in seen["tools"]) == want_read_text and seen

    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(call_through_service, node, name, url, token, "--hold", str(hold),
                           "--then-call", "list_directory", json.dumps({"path": "/workspace"}))
        try:
            wait_for("the held session's first listing", lambda: (hold / "ready").exists() or held.done(), timeout=90)
            assert not held.done(), held.result()
            set_tools(tightened)
            # The kubelet refreshes a mounted ConfigMap within its sync period (about a minute).
            wait_for("a new session to see the tightened profile", lambda: fresh_session_lists(False),
                     timeout=240, interval=5)
        finally:
            (hold / "go").touch()
        seen = held.result(timeout=120)
    set_tools(tools)
    assert "read_text" in seen["tools"] and "read_text" not in seen["after"]["tools"], seen
    assert "README.md" in (seen["after"]["call"] or ""), seen
    after = {p["metadata"]["name"]: {c["name"]: c["restartCount"] for c in p["status"]["containerStatuses"]}
             for p in pods_of(node, name)}
    assert after == before, f"the profile change rolled or restarted the pods: {before} -> {after}"
    server = node.get("mcpserver", name, NS)
    assert not [c for c in server["status"]["conditions"] if c.get("reason") == "ApprovalPending"], server["status"]
    wait_for("a new session to see the restored profile", lambda: fresh_session_lists(True), timeout=240, interval=5)


def test_three_replicas_serve_sessions_across_pods(node, examples):
    """The replicated example's three pods behind one Service: nine sessions
    through it (kube-proxy spreads connections) all work, and the facades' audit
    records show the calls landed on more than one pod."""
    name = "memory"
    pods = pods_of(node, name)
    assert len(pods) == 3
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    for _ in range(9):
        seen = call_through_service(node, name, url, token, "--call", "read_graph", "{}")
        assert "entities" in seen["call"], seen
    served = set()
    for pod in pods:
        logs = node.kubectl("-n", NS, "logs", pod["metadata"]["name"], "-c", "facade").stdout
        if '"tool":"read_graph"' in logs.replace(" ", ""):
            served.add(pod["metadata"]["name"])
    assert len(served) >= 2, served


def test_the_replicas_count_each_callers_budget_once(node, examples):
    """`maxCallsPerIdentity` is one budget for the three pods: the operator
    lists their addresses in `memory-peers` (the pods cannot look each other
    up: DNS is closed to them), each facade reads the mounted list (the
    kubelet refreshes it within its sync period), and a call landing on a pod
    that does not own the caller asks the owner over the relay."""
    name = "memory"
    pods = pods_of(node, name)
    addrs = sorted(f"{p['status']['podIP']}:8080" for p in pods)

    def listed():
        cm = node.get("configmap", f"{name}-peers", NS) or {}
        text = cm.get("data", {}).get("peers", "")
        return sorted(line for line in text.splitlines() if line and not line.startswith("#"))

    wait_for("every replica listed in memory-peers", lambda: listed() == addrs, timeout=60)

    def scrape(pod):
        out = node.in_node([sys.executable, "-c", SCRAPE, f"http://{pod['status']['podIP']}:9090/metrics"])
        assert out.returncode == 0, out.stderr
        return out.stdout

    wait_for("every facade counting with all three",
             lambda: all(metric(scrape(p), "mcpwarden_identity_budget_peers") == 3 for p in pods), timeout=180,
             interval=5)
    before = {p["metadata"]["name"]: metric(scrape(p), "mcpwarden_identity_budget_asks_total", outcome="granted")
              for p in pods}
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    for _ in range(9):
        seen = call_through_service(node, name, url, token, "--call", "read_graph", "{}")
        assert "entities" in seen["call"], seen
    texts = {p["metadata"]["name"]: scrape(p) for p in pods}
    asked = {n: metric(t, "mcpwarden_identity_budget_asks_total", outcome="granted") - before[n]
             for n, t in texts.items()}
    # The owner never asks itself; the calls the others took asked it.
    assert sum(asked.values()) >= 1 and sum(1 for v in asked.values() if v > 0) <= 2, asked
    for t in texts.values():
        assert metric(t, "mcpwarden_identity_budget_asks_total", outcome="unreachable") == 0


# ---------------------------------------------------------------------------
# 6. metrics scraped from the pod, audit records read from its sink
# ---------------------------------------------------------------------------
SCRAPE = """
import sys, urllib.request
auth = {"Authorization": "Bearer " + sys.argv[2]} if len(sys.argv) > 2 else {}
req = urllib.request.Request(sys.argv[1], headers=auth)
print(urllib.request.urlopen(req, timeout=10).read().decode())
"""


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{name}(?:\{{(.*)\}})? (\S+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


def test_metrics_and_audit_come_from_the_pod(node, examples):
    """After test 3's calls: the git facade's /metrics, scraped at the pod's address
    (as Prometheus does, on :9090), counts the allowed call and the refused one;
    its audit sink (stdout, read with the tour's `kubectl logs`) holds one
    schema-valid record for each, with who called; the admin /tools, with the
    admin token from the Secret the tour names, lists the hidden tool as hidden."""
    from warden_helpers import check_audit_record  # noqa: PLC0415 - tests/e2e, on sys.path here
    name = "git"
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    call_through_service(node, name, url, token, "--call", "git_status", json.dumps({"repo_path": "/workspace/demo"}),
                         "--refused", "git_commit", json.dumps({"repo_path": "/workspace/demo", "message": "x"}))
    pod = pods_of(node, name)[0]
    ip = pod["status"]["podIP"]
    out = node.in_node([sys.executable, "-c", SCRAPE, f"http://{ip}:9090/metrics"])
    assert out.returncode == 0, out.stderr
    assert metric(out.stdout, "mcpwarden_tool_calls_total", tool="git_status", outcome="ok") >= 1, out.stdout[-3000:]
    assert metric(out.stdout, "mcpwarden_tool_calls_total", outcome="denied", code="-32004") >= 1, out.stdout[-3000:]

    # The container runtime copies the facade's stdout into the pod's log file
    # on its own schedule: on a loaded node the records can land a few seconds
    # after the call has been answered, so the tour's command is read until
    # they are there (and what the node had is shown when they never come).
    read_audit = f"kubectl -n {NS} logs deploy/{name} -c facade | grep '\"event\":\"tool_call\"'"

    def audit_lines():
        try:
            out = tour(node, read_audit)
        except AssertionError:
            return ""
        return '"decision":"allow"' in out and '"decision":"deny"' in out and out
    try:
        logs = wait_for("the calls' audit records in the facade's log", audit_lines, timeout=60, interval=2)
    except AssertionError as e:
        pods = node.kubectl("-n", NS, "get", "pods", "-o", "wide", check=False).stdout
        tails = "".join(f"\n--- {p['metadata']['name']}:\n" + node.kubectl(
            "-n", NS, "logs", p["metadata"]["name"], "-c", "facade", "--tail=20", check=False).stdout
            for p in pods_of(node, name))
        raise AssertionError(f"{e}\n{pods}{tails}") from None
    records = [check_audit_record(json.loads(line[line.index("{"):])) for line in logs.splitlines() if "{" in line]
    calls = {(r["tool"], r["decision"]) for r in records}
    assert ("git_status", "allow") in calls and any(d == "deny" for t, d in calls if t != "git_status"), records
    assert any(r["subject"] == f"system:serviceaccount:{NS}:coding-agent" for r in records), records
    admin = tour(node, f"kubectl -n {NS} get secret {name}-admin-token -o jsonpath='{{.data.token}}' | base64 -d")
    out = node.in_node([sys.executable, "-c", SCRAPE, f"http://{ip}:9090/tools", admin])
    assert out.returncode == 0, out.stderr
    assert "git_commit" in out.stdout and "git_status" in out.stdout, out.stdout[-2000:]


def test_an_approved_image_runs_by_the_digest_its_pod_pulled(node, examples):
    """Every approved example that names its image by tag runs it by digest:
    the operator pinned the Deployment to the repository digest the runtime
    reported (status.pinnedImage), and every pod now runs that digest, so a
    tag moved in the registry never reaches a pod with the capabilities."""
    from node_fixtures import server_image  # noqa: PLC0415
    pinned = {}
    for stem, docs in examples.items():
        name = server_name(docs)
        server = node.get("mcpserver", name, NS)
        if not server["status"].get("approvedCapabilities") or "@" in server["spec"].get("image", "@"):
            continue
        pin = server["status"].get("pinnedImage")
        assert pin and pin["image"] == server["spec"]["image"], (name, server["status"])
        assert server_image(node, name) == f"{pin['image']}@{pin['digest']}"
        for pod in pods_of(node, name):
            status = next(c for c in pod["status"]["containerStatuses"] if c["name"] == "server")
            assert status["imageID"].endswith("@" + pin["digest"]), (name, status)
        pinned[name] = pin["digest"]
    assert len(pinned) >= 3, pinned


# ---------------------------------------------------------------------------
# 4. the approval flow on running pods
# ---------------------------------------------------------------------------
def live_pods(node: Node, name: str) -> dict[str, str]:
    """{pod name: uid} of the server's live pods."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods_of(node, name)}


CHANGE = {}  # what the waiting test recorded, for the approval test after it


def test_a_change_asking_for_more_waits_with_the_pod_untouched(node, examples):
    """The git server, approved and serving: an editor's change that asks for more
    (a new egress host in its SandboxProfile, a new variable in its workload) gets
    a new digest and waits; the running pod is the same pod, its Deployment's
    template untouched, and it serves the same tools."""
    name = "git"
    before = node.get("mcpserver", name, NS)["status"]
    template = node.get("deployment", name, NS)["spec"]["template"]
    pods = live_pods(node, name)
    more = {"spec": {"network": {"egress": {"hosts": [{"name": "github.com", "ports": [443]}]}}}}
    node.kubectl("-n", NS, "patch", "sandboxprofile", "pypi", "--type=merge", "-p", json.dumps(more))
    node.kubectl("-n", NS, "patch", "mcpserver", name, "--type=merge",
                 "-p", json.dumps({"spec": {"env": [{"name": "GREETING", "value": "hello"}]}}))

    def pending():
        status = node.get("mcpserver", name, NS)["status"]
        cond = {c["type"]: c for c in status.get("conditions", [])}.get("CapabilitiesApproved", {})
        new = status.get("capabilityDigest") != before["capabilityDigest"] and cond.get("status") == "False"
        # Both changes in the digest (each patch is reconciled on its own).
        env_seen = status.get("workload", {}).get("env") != before.get("workload", {}).get("env")
        return (new and env_seen and "network.egress.host:github.com:443" in status.get("requestedCapabilities", [])
                and status)
    status = wait_for("the change to wait for approval", pending, timeout=60)
    CHANGE["digest"] = status["capabilityDigest"]
    assert status["approvedDigest"] == before["approvedDigest"], status
    time.sleep(5)  # a reconcile or two later: still nothing rolled out
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    assert set(call_through_service(node, name, url, token)["tools"]) == {"log", "git_status"}
    now = node.get("deployment", name, NS)["spec"]["template"]
    diff = "\n".join(difflib.unified_diff(yaml.safe_dump(template).splitlines(), yaml.safe_dump(now).splitlines(),
                                          "approved", "while pending", lineterm=""))
    assert now == template, f"the Deployment changed while the change waited for approval:\n{diff}"
    assert live_pods(node, name) == pods


def test_approval_rolls_the_change_out(node, examples, images):
    """The approver annotates the new digest: it is in force, the Deployment
    carries the change, its pods roll out Ready and serve the same tools."""
    name = "git"
    assert CHANGE.get("digest"), "runs after test_a_change_asking_for_more_waits_with_the_pod_untouched"
    load(node, images, "ghcr.io/astral-sh/", "ghcr.io/mcp-warden/sidecar")
    tour(node, APPROVE.format(name=name), user="bob")
    wait_for("the new digest in force", lambda: node.get("mcpserver", name, NS)["status"].get("approvedDigest")
             == CHANGE["digest"], timeout=60)
    assert node.get("mcpserver", name, NS)["metadata"]["annotations"]["mcpwarden.dev/approved-by"] == "bob"
    wait_for("the approved change in the Deployment", lambda: any(
        e.get("name") == "GREETING" for c in node.get("deployment", name, NS)["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])), timeout=60)
    out = node.kubectl("-n", NS, "rollout", "status", f"deployment/{name}", "--timeout=180s", check=False, timeout=200)
    assert out.code == 0, out.stderr
    url, command = client_config(node, name)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    assert set(call_through_service(node, name, url, token)["tools"]) == {"log", "git_status"}


# ---------------------------------------------------------------------------
# docs/operating.md, "Try it on a one-node cluster": the commands are these tests'
# ---------------------------------------------------------------------------
DOC = (REPO_ROOT / "docs" / "operating.md").read_text()
NODE_SECTION = DOC.split("## Try it on a one-node cluster", 1)[1].split("\n## ", 1)[0]
# Commands of the section the tests run another way, and how.
RUN_OTHERWISE = {
    r"^sudo apt-get install ": ".ci/run installs the packages; node_problem() names them when missing",
    r"node\.sh\" (start|stop) ": "Node.start / Node.stop (tests/node/k8s_node.py) run node.sh start / stop",
    r"^make build static-binaries node-images": "make test builds both; the images fixture runs build-node-images.py",
    r"node\.sh\" load ": "load(): node.sh load of each archive build-node-images.py printed",
    r"^helm install ": "the chart fixture: Helm's own engine renders the defaults, applied in Helm's install order",
    r"^kubectl -n mcp-warden-system rollout status deployment/mcp-warden-operator$": "the chart fixture's rollout",
}


def section_commands() -> list[str]:
    out = []
    for block in re.findall(r"```sh\n(.*?)```", NODE_SECTION, re.S):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(re.split(r"\s{2,}#\s", line)[0].strip())
    return out


def test_the_docs_node_section_is_what_the_tests_run(node, examples):
    name = "git"
    url, command = client_config(node, name)
    tour(node, command.replace("<service-account>", "coding-agent"))
    commands = section_commands()
    assert len(commands) >= 12, commands
    for command in commands:
        if any(re.search(pattern, command) for pattern in RUN_OTHERWISE):
            continue
        assignment = re.match(r"^[A-Z]+=\$\((.*)\)$", command)
        assert (assignment.group(1) if assignment else command) in TOUR_LOG, \
            f"docs/operating.md names a command tests/node does not run: {command}"
    for pattern in RUN_OTHERWISE:
        assert any(re.search(pattern, c) for c in commands), f"stale exception: {pattern}"


def versions(node: Node) -> dict[str, tuple]:
    """kind/name -> (what says it was written, the object) for every MCPServer in
    team-a and every object the operator made there: the resourceVersion, but a
    Deployment's generation (the Deployment controller writes its status)."""
    items = node.kubectl("-n", NS, "get", f"mcpservers,{OWNED_KINDS}", "-o", "json").json()["items"]
    out = {}
    for o in items:
        managed = o["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "mcp-warden-operator"
        if o["kind"] == "MCPServer" or (managed and o["kind"] not in ("Pod", "ReplicaSet")):
            mark = o["metadata"]["generation"] if o["kind"] == "Deployment" else o["metadata"]["resourceVersion"]
            o["metadata"].pop("managedFields", None)
            out[f"{o['kind']}/{o['metadata']['name']}"] = (mark, o)
    return out


def test_a_restarted_operator_pod_makes_no_writes(node, chart, examples, images):
    """The operator's pod deleted: its Deployment starts another, which takes the
    lease and reconciles every server again; with nothing changed it writes
    nothing (no MCPServer, Deployment, Service, ConfigMap, Secret or policy gets
    a new resourceVersion)."""
    def marks():
        return {k: v[0] for k, v in versions(node).items()}
    # Settled: nothing written for longer than the operator's quickest requeue (a
    # facade that has not loaded a new policy yet is looked at again after 10 s).
    wait_for("the servers settled", lambda: (lambda a: time.sleep(15) or a == marks())(marks()), timeout=180)
    before = versions(node)
    old = {p["metadata"]["name"] for p in pods_of(node, f"{RELEASE}-operator", NAMESPACE)}
    load(node, images, "ghcr.io/mcp-warden/operator")
    node.kubectl("-n", NAMESPACE, "delete", "pod", *old)
    out = node.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{RELEASE}-operator", "--timeout=120s",
                       timeout=140)
    new = wait_for("a new operator pod Ready", lambda: [
        p for p in pods_of(node, f"{RELEASE}-operator", NAMESPACE) if p["metadata"]["name"] not in old
        and all(c["ready"] for c in p["status"].get("containerStatuses", []))], timeout=120)
    assert new, out.stdout
    time.sleep(20)  # the new leader's first full pass (the lease, then every server)
    after = versions(node)
    changed = sorted(k for k, v in after.items() if k not in before or before[k][0] != v[0])
    diffs = "\n".join("\n".join(difflib.unified_diff(
        yaml.safe_dump(before[k][1]).splitlines(), yaml.safe_dump(after[k][1]).splitlines(), k, k, lineterm=""))
        for k in changed[:2] if k in before)
    assert changed == [], f"written after the restart: {changed}\n{diffs}"


# ---------------------------------------------------------------------------
# 5. (last) uninstall leaves nothing behind
# ---------------------------------------------------------------------------
OWNED_KINDS = "deployments,replicasets,pods,services,configmaps,secrets,serviceaccounts,networkpolicies"


def test_uninstall_leaves_nothing_behind(node, chart, examples):
    """Every MCPServer deleted: what the operator made for it (Deployment, its pods,
    Service, policy ConfigMap, Secrets, ServiceAccount, NetworkPolicy) is garbage-
    collected by owner reference. Then the chart's objects deleted as `helm
    uninstall` does: the operator's pod and the release's cluster-wide objects
    (roles, webhook configurations) are gone; the CRDs stay, on purpose."""
    for docs in examples.values():
        tour(node, f"kubectl -n {NS} delete mcpserver {server_name(docs)} --wait=true")
    managed = "app.kubernetes.io/managed-by=mcp-warden-operator"
    def left_behind():
        names = node.kubectl("-n", NS, "get", OWNED_KINDS, "-l", managed, "-o", "name").stdout.split()
        return names or None
    try:
        wait_for("the servers' objects collected", lambda: not left_behind(), timeout=240)
    except AssertionError as e:
        raise AssertionError(f"{e}: left behind {left_behind()}") from None
    node.kubectl("delete", "--wait=true", "-f", "-", input=yaml.safe_dump_all(chart), timeout=180)
    wait_for("the operator's pod gone", lambda: not node.list("pods", NAMESPACE), timeout=120)
    left = node.kubectl("get", "clusterroles,clusterrolebindings,validatingwebhookconfigurations,"
                        "mutatingwebhookconfigurations", "-o", "name").stdout.split()
    assert not [o for o in left if RELEASE in o.split("/", 1)[1]], left
    assert node.get("crd", "mcpservers.mcpwarden.dev") is not None
