"""The operator against a real API server, with exactly the chart's RBAC (it
runs on a token of the chart's ServiceAccount): it reconciles every example,
the controller manager turns each Deployment into a ReplicaSet and Pods that
Pod Security "restricted" admits, and once it is done it writes nothing more.
"""
from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from k8s_cluster import wait_for
from k8s_fixtures import EXAMPLE_NAMESPACE, EXAMPLES, operator_binary

NS = EXAMPLE_NAMESPACE


def example_servers() -> list[dict]:
    return [d for p in EXAMPLES for d in yaml.safe_load_all(p.read_text()) if d and d["kind"] == "MCPServer"]


SERVERS = example_servers()


def reconciled(cluster, name: str) -> dict | None:
    s = cluster.get("mcpserver", name, NS)
    status = (s or {}).get("status", {})
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    if status.get("observedGeneration") == s["metadata"]["generation"] and "PolicyCompiled" in conditions:
        return s
    return None


def pods_of(cluster, deployment: dict) -> tuple[list[dict], list[dict]]:
    """(ReplicaSets owned by the Deployment, Pods owned by those)."""
    uid, ns = deployment["metadata"]["uid"], deployment["metadata"]["namespace"]
    sets = [rs for rs in cluster.list("replicasets", ns)
            if any(o["uid"] == uid for o in rs["metadata"].get("ownerReferences", []))]
    uids = {rs["metadata"]["uid"] for rs in sets}
    pods = [p for p in cluster.list("pods", ns)
            if any(o["uid"] in uids for o in p["metadata"].get("ownerReferences", []))]
    return sets, pods


def failed_creates(cluster, replica_sets: list[dict], ns: str = NS) -> list[str]:
    """FailedCreate conditions and Events of these ReplicaSets (Pod Security refusals land here)."""
    found = []
    for rs in replica_sets:
        for c in rs.get("status", {}).get("conditions", []):
            if c.get("reason") == "FailedCreate" or c.get("type") == "ReplicaFailure":
                found.append(f"{rs['metadata']['name']}: {c.get('message')}")
    names = {rs["metadata"]["name"] for rs in replica_sets}
    for e in cluster.list("events", ns):
        if e.get("reason") == "FailedCreate" and e.get("involvedObject", {}).get("name") in names:
            found.append(f"{e['involvedObject']['name']}: {e.get('message')}")
    return found


@pytest.fixture(scope="module")
def reconciled_examples(cluster, examples_applied, controller):
    for s in SERVERS:
        wait_for(f"MCPServer {s['metadata']['name']} reconciled", lambda: reconciled(cluster, s["metadata"]["name"]),
                 timeout=60)
    return controller


@pytest.mark.parametrize("server", SERVERS, ids=lambda s: s["metadata"]["name"])
def test_example_pods_are_admitted_under_restricted(cluster, reconciled_examples, server):
    name = server["metadata"]["name"]
    want = server["spec"].get("replicas", 1)
    deployment = wait_for(f"Deployment {name}", lambda: cluster.get("deployment", name, NS), timeout=30)

    def created():
        sets, pods = pods_of(cluster, deployment)
        if failed_creates(cluster, sets):
            return True  # reported below
        return len(pods) >= want and (sets, pods)

    wait_for(f"the pods of {name}", created, timeout=60)
    sets, pods = pods_of(cluster, deployment)
    assert failed_creates(cluster, sets) == []
    assert len(sets) == 1 and len(pods) == want, [p["metadata"]["name"] for p in pods]
    # Admitted under "restricted": the namespace enforces it, so an admitted pod meets it.
    labels = cluster.get("namespace", NS)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    for pod in pods:
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
        assert pod["spec"]["serviceAccountName"] == name


def test_a_refused_pod_is_seen(cluster, examples_applied):
    """The check above can fail: a Deployment whose pod breaks "restricted"
    gets a FailedCreate in this namespace, and no pod."""
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "not-restricted", "namespace": NS},
        "spec": {"selector": {"matchLabels": {"app": "not-restricted"}},
                 "template": {"metadata": {"labels": {"app": "not-restricted"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }
    cluster.apply(deployment)
    try:
        live = cluster.get("deployment", "not-restricted", NS)
        wait_for("a FailedCreate", lambda: failed_creates(cluster, pods_of(cluster, live)[0]), timeout=60)
        sets, pods = pods_of(cluster, live)
        assert pods == []
        assert any("violates PodSecurity" in f for f in failed_creates(cluster, sets))
    finally:
        cluster.kubectl("delete", "deployment", "not-restricted", "-n", NS, "--wait=false")


def test_the_charts_operator_pod_is_admitted_under_restricted(cluster, installed):
    """The chart's own Deployment, in its namespace enforcing "restricted"."""
    from chartkit import NAMESPACE

    assert cluster.get("namespace", NAMESPACE)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    live = cluster.get("deployment", "mcp-warden-operator", NAMESPACE)
    sets, pods = wait_for("the operator's pod", lambda: (lambda sp: sp if sp[1] or failed_creates(
        cluster, sp[0], NAMESPACE) else None)(pods_of(cluster, live)), timeout=60)
    assert failed_creates(cluster, sets, NAMESPACE) == []
    assert len(pods) == 1


def test_status_says_what_the_operator_did(cluster, reconciled_examples):
    for s in SERVERS:
        live = reconciled(cluster, s["metadata"]["name"])
        conditions = {c["type"]: c for c in live["status"]["conditions"]}
        assert conditions["PolicyCompiled"]["status"] == "True", conditions["PolicyCompiled"]
        hosts = s["spec"].get("expose", {}).get("hosts")
        if hosts:  # exposed: the first host, behind TLS in front of the Service
            assert live["status"]["endpoint"] == f"https://{hosts[0]}/mcp"
        else:
            assert live["status"]["endpoint"].startswith(f"http://{s['metadata']['name']}.{NS}.svc")
        if s["spec"].get("expose", {}).get("ingress"):
            ingress = cluster.get("ingress", s["metadata"]["name"], NS)
            assert ingress and ingress["spec"]["rules"][0]["host"] == hosts[0], ingress


def test_the_charts_rbac_is_enough(reconciled_examples):
    """Every call the operator made as the chart's ServiceAccount was allowed."""
    log = reconciled_examples.log()
    assert '"written"' in log, "no object was written"
    refused = [line for line in log.splitlines()
               if re.search(r"forbidden", line, re.I) or re.search(r'"level":"(WARN|ERROR)"', line)]
    assert refused == [], "\n".join(refused[:20])


OWNED_KINDS = ["serviceaccounts", "configmaps", "services", "networkpolicies", "poddisruptionbudgets", "secrets",
               "ingresses"]


def snapshot(cluster) -> dict:
    """What the operator writes, as versions: owned objects, its field set in
    each Deployment (the controller manager writes the status), every
    MCPServer's status, and its Events."""
    snap: dict[str, object] = {}
    for kind in OWNED_KINDS:
        for o in cluster.list(kind, NS, selector="app.kubernetes.io/managed-by=mcp-warden-operator"):
            snap[f"{kind}/{o['metadata']['name']}"] = o["metadata"]["resourceVersion"]
    for d in cluster.list("deployments", NS):
        mine = [m for m in d["metadata"]["managedFields"] if m["manager"] == "mcp-warden-operator"]
        assert mine, f"deployments/{d['metadata']['name']} has no fields of the operator"
        snap[f"deployments/{d['metadata']['name']}"] = (d["metadata"]["generation"], json.dumps(mine, sort_keys=True))
    for s in cluster.list("mcpservers", NS):
        snap[f"mcpservers/{s['metadata']['name']}/status"] = json.dumps(s.get("status"), sort_keys=True)
    for e in cluster.list("events.events.k8s.io", NS):
        if e.get("reportingController") == "mcp-warden-operator":
            snap[f"events/{e['metadata']['name']}"] = e["metadata"]["resourceVersion"]
    return snap


def reconcile_count(controller) -> int:
    return int(sum(float(v) for v in re.findall(r"^mcpwarden_reconcile_total\{[^}]*\} (\S+)$",
                                                  controller.metrics(), re.M)))


def test_steady_state_makes_no_writes(cluster, reconciled_examples):
    controller = reconciled_examples
    # Let the first round settle: Deployments get their status, pods appear.
    time.sleep(5)
    before = snapshot(cluster)
    assert len(before) > 4 * len(SERVERS), before
    reconciles = reconcile_count(controller)
    # Wake every server up (a metadata change is a watch event for the controller)
    # and give the reconciles time to run.
    for s in SERVERS:
        cluster.kubectl("label", "mcpserver", s["metadata"]["name"], "-n", NS, "steady-state-poke=1", "--overwrite")
    wait_for("a reconcile of every server", lambda: reconcile_count(controller) >= reconciles + len(SERVERS),
             timeout=30)
    time.sleep(5)
    after = snapshot(cluster)
    changed = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    assert changed == {}, f"the operator wrote in a steady state: {sorted(changed)}"


def test_objects_it_does_not_own_are_not_taken_over(cluster, controller, examples_applied):
    """A ConfigMap named like the server's policy, made by someone else, stops
    the operator (condition + Warning Event) instead of being force-applied."""
    ns = "team-owners"
    cluster.namespace(ns)
    foreign = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "taken-policy", "namespace": ns},
               "data": {"policy.yaml": "someone else's"}}
    cluster.apply(foreign, field_manager="another-team")
    cluster.apply([
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "t", "namespace": ns},
         "spec": {"tools": [{"name": "echo"}]}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "taken", "namespace": ns},
         "spec": {"image": "ghcr.io/example/mcp:1", "command": ["srv"], "toolProfileRef": {"name": "t"}}},
    ])

    def degraded():
        s = cluster.get("mcpserver", "taken", ns) or {}
        return next((c for c in s.get("status", {}).get("conditions", [])
                     if c["type"] == "Degraded" and c["reason"] == "ObjectNotOwned"), None)

    condition = wait_for("Degraded=ObjectNotOwned", degraded, timeout=30)
    assert condition["status"] == "True" and "ConfigMap/taken-policy" in condition["message"]
    assert cluster.get("configmap", "taken-policy", ns)["data"] == {"policy.yaml": "someone else's"}
    assert cluster.get("deployment", "taken", ns) is None, "nothing is applied while an object is in the way"
    events = [e for e in cluster.list("events.events.k8s.io", ns)
              if e.get("reason") == "ObjectNotOwned" and e.get("type") == "Warning"]
    assert events, "no Warning Event"
    # Once it is gone, the server is built (a label change wakes the controller up).
    cluster.kubectl("delete", "configmap", "taken-policy", "-n", ns)
    cluster.kubectl("label", "mcpserver", "taken", "-n", ns, "retry=1")
    wait_for("the Deployment", lambda: cluster.get("deployment", "taken", ns), timeout=30)
    owners = cluster.get("configmap", "taken-policy", ns)["metadata"]["ownerReferences"]
    assert owners[0]["kind"] == "MCPServer" and owners[0]["name"] == "taken"


def test_expose_routes_follow_the_spec(cluster, controller, examples_applied):
    """`expose.ingress` makes an Ingress the server owns and removing it from
    the spec removes it; `expose.httpRoute` on a cluster without the Gateway
    API (this one) applies everything else and says so in `Degraded`."""
    ns = "team-expose"
    cluster.namespace(ns)
    profile = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "t", "namespace": ns},
               "spec": {"tools": [{"name": "echo"}]}}
    server = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "web", "namespace": ns},
              "spec": {"image": "ghcr.io/example/mcp:1", "command": ["srv"], "toolProfileRef": {"name": "t"},
                       "expose": {"hosts": ["web.mcp.example.com"], "ingress": {"className": "nginx"},
                                  "httpRoute": {"parentRefs": [{"name": "public", "namespace": "infra"}]}}}}
    cluster.apply([profile, server])

    def degraded():
        s = cluster.get("mcpserver", "web", ns) or {}
        return next((c for c in s.get("status", {}).get("conditions", [])
                     if c["type"] == "Degraded" and c["reason"] == "GatewayAPINotInstalled"), None)

    condition = wait_for("Degraded=GatewayAPINotInstalled", degraded, timeout=30)
    assert "install the Gateway API" in condition["message"]
    ingress = cluster.get("ingress", "web", ns)
    assert ingress["metadata"]["ownerReferences"][0]["name"] == "web"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert cluster.get("deployment", "web", ns), "the rest is applied"
    live = cluster.get("mcpserver", "web", ns)
    assert live["status"]["endpoint"] == "https://web.mcp.example.com/mcp"

    server["spec"]["expose"] = {"hosts": ["web.mcp.example.com"]}
    cluster.apply(server)
    wait_for("the Ingress removed", lambda: cluster.get("ingress", "web", ns) is None, timeout=30)
    wait_for("Degraded cleared", lambda: degraded() is None, timeout=30)


def test_client_config_prints_what_an_agent_needs(cluster, reconciled_examples):
    """`mcp-warden-operator client-config` against the cluster (an admin's
    kubeconfig): the URL from the server's status, every kind of token the
    profile accepts with the command that gets it, and an mcp.json snippet
    that holds no token."""
    import subprocess
    out = subprocess.run([str(operator_binary()), "client-config", "time", "-n", NS], capture_output=True, text=True,
                         timeout=60, env={"KUBECONFIG": str(cluster.kubeconfig()), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    live = cluster.get("mcpserver", "time", NS)
    snippet = json.loads("\n".join(line for line in text.splitlines() if not line.startswith("#")))
    entry = snippet["mcpServers"]["time"]
    assert entry["url"] == live["status"]["endpoint"] == "https://time.mcp.example.com/mcp"
    assert entry["headers"] == {"Authorization": "Bearer ${MCP_WARDEN_TOKEN}"}
    assert f"kubectl -n {NS} create token <service-account> --audience mcpwarden.dev/{NS}/time" in text
    assert f"kubectl -n {NS} get secret time-agent-tokens -o jsonpath='{{.data.ci-bot}}' | base64 -d" in text
    assert "https://login.example.com/realms/team-a with audience mcp-time" in text
    secret = cluster.get("secret", "time-agent-tokens", NS)
    assert secret is not None
    import base64
    assert base64.b64decode(secret["data"]["ci-bot"]).decode() not in text


def test_client_config_errors_read_as_sentences(cluster, reconciled_examples):
    """A missing server, or one the user may not read, is a sentence that says what to do — never
    the client's debug dump of the API error."""
    import subprocess
    env = {"KUBECONFIG": str(cluster.kubeconfig()), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([str(operator_binary()), "client-config", "no-such-server", "-n", NS],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode != 0
    assert out.stderr.strip() == (f'error: no MCPServer "no-such-server" in namespace "{NS}" '
                                  f"(kubectl get mcpservers -n {NS})"), out.stderr
    # carol holds no role in this namespace: the API server's own message and its code.
    env["KUBECONFIG"] = str(cluster.kubeconfig("carol"))
    out = subprocess.run([str(operator_binary()), "client-config", "time", "-n", NS],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode != 0
    assert "(HTTP 403)" in out.stderr and "is forbidden" in out.stderr, out.stderr
    assert "ApiError" not in out.stderr and "ErrorResponse" not in out.stderr and "Status {" not in out.stderr


def peers_listed(cluster, name: str) -> list[str]:
    cm = cluster.get("configmap", f"{name}-peers", NS) or {}
    text = cm.get("data", {}).get("peers", "")
    return sorted(line for line in text.splitlines() if line and not line.startswith("#"))


def test_the_peers_configmap_follows_the_running_replicas(cluster, reconciled_examples):
    """The replicas learn each other's addresses from `<name>-peers`, which the
    operator rewrites when a replica starts running or goes (a pod watch): no
    kubelet runs here, so the test plays it, writing two pods' status."""
    deployment = cluster.get("deployment", "memory", NS)
    wait_for("three memory pods", lambda: len(pods_of(cluster, deployment)[1]) == 3, timeout=60)
    assert peers_listed(cluster, "memory") == []
    pods = sorted(p["metadata"]["name"] for p in pods_of(cluster, deployment)[1])
    for pod, ip in zip(pods, ["10.77.0.1", "10.77.0.2"]):
        status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}}
        cluster.kubectl("patch", "pod", pod, "-n", NS, "--subresource=status", "--type=merge", "-p",
                        json.dumps(status))
    wait_for("both running replicas listed",
             lambda: peers_listed(cluster, "memory") == ["10.77.0.1:8080", "10.77.0.2:8080"], timeout=30)
    # An unscheduled pod is deleted at once; its address leaves the list.
    cluster.kubectl("delete", "pod", pods[0], "-n", NS, "--wait=false")
    wait_for("the deleted replica dropped",
             lambda: peers_listed(cluster, "memory") == ["10.77.0.2:8080"], timeout=30)
