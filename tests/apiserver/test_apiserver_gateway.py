"""The MCPGateway on a real API server, with the operator running on the
chart's RBAC and the webhook in the path: the gateway example in front of
three of the examples' servers gets its objects and its signing key, its
public key reaches exactly the servers it selects (and follows a label that
comes and goes), status lists each backend, what a Ready gateway pod's own `/gateway`
view withholds reaches the status (a real gateway in front of colliding
backends, answering at the pod's address, read with the gateway's admin
token, through the real API server's pods and schema), and the webhook refuses a
gateway whose names would collide. A gateway waiting for the Gateway API
gets its HTTPRoute soon after the kind is installed.
"""
from __future__ import annotations

import base64
import json
import sys
import time
from collections import Counter

import httpx
import pytest
import yaml

from conftest import REPO_ROOT, TESTS_DIR

# The gateway end-to-end tests' helpers (tests/e2e): the same colliding
# backends and gateway.
sys.path.insert(0, str(TESTS_DIR / "e2e"))
from era_helpers import ModernMcp  # noqa: E402
from gateway_helpers import colliding_backends, colliding_gateway, gateway_view  # noqa: E402
from k8s_cluster import wait_for  # noqa: E402
from k8s_fixtures import EXAMPLE_NAMESPACE  # noqa: E402

NS = EXAMPLE_NAMESPACE
GATEWAY = REPO_ROOT / "examples" / "gateway" / "gateway.yaml"
NAME = "team-a-tools"
KEY = f"gateway-{NAME}.pem"


def policy_data(cluster, server: str) -> dict:
    return (cluster.get("configmap", f"{server}-policy", NS) or {}).get("data", {})


def trusted(cluster, server: str) -> bool:
    data = policy_data(cluster, server)
    if KEY not in data:
        return False
    policy = yaml.safe_load(data["policy.yaml"])
    (entry,) = policy["auth"]["gateways"]
    assert entry == {
        "issuer": f"mcpwarden.dev/{NS}/mcpgateway/{NAME}",
        "publicKeyFile": f"/etc/mcp-warden/policy/{KEY}",
        "audience": server,
        "callerIssuers": ["https://kubernetes.default.svc.cluster.local"],
    }, entry
    return True


def backends(cluster) -> list[str]:
    gw = cluster.get("mcpgateway", NAME, NS) or {}
    return [b["name"] for b in gw.get("status", {}).get("backends", [])]


@pytest.fixture
def gateway(cluster, examples_applied, controller, webhook):
    """The example gateway, deleted afterwards (its backends then drop its key),
    so the suites after this one see the examples as they were."""
    out = cluster.kubectl("apply", "--server-side", "--field-manager=mcp-warden-tests", "-f", GATEWAY)
    assert out.code == 0, out.stderr
    yield
    # Foreground: gone once its objects are (its Ingress, owned by this
    # gateway's uid, would otherwise be in the next gateway's way for a moment).
    cluster.kubectl("delete", "-f", GATEWAY, "--wait=true", "--cascade=foreground", check=False)
    for server in ("everything", "files", "git"):
        wait_for(f"{server} drops the key", lambda s=server: KEY not in policy_data(cluster, s), timeout=60)


def test_the_gateway_is_built_and_only_its_backends_trust_its_key(cluster, gateway):
    wait_for("the gateway's status", lambda: backends(cluster) == ["everything", "files", "git"], timeout=60)
    gw = cluster.get("mcpgateway", NAME, NS)
    status = gw["status"]
    # The example exposes the gateway under its own name (an Ingress).
    assert status["endpoint"] == "https://tools.team-a.example.com/mcp"
    ingress = wait_for("the example's Ingress", lambda: cluster.get("ingress", NAME, NS), timeout=60)
    assert [r["host"] for r in ingress["spec"]["rules"]] == ["tools.team-a.example.com"], ingress
    assert ingress["metadata"]["ownerReferences"][0]["uid"] == gw["metadata"]["uid"], ingress
    assert status["backendsReady"].endswith("/3"), status
    git = next(b for b in status["backends"] if b["name"] == "git")
    assert git["prefix"] == "vcs_"
    # No kubelet here: the gateway's pods never run, and status says so.
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "Progressing", ready
    # The examples' prefixes keep every name apart: nothing withheld.
    conflicts = next(c for c in status["conditions"] if c["type"] == "Conflicts")
    assert conflicts["status"] == "False" and conflicts["reason"] == "NoConflicts", conflicts
    assert "conflicts" not in status, status
    uid = gw["metadata"]["uid"]
    deployment = cluster.get("deployment", NAME, NS)
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == uid
    args = " ".join(deployment["spec"]["template"]["spec"]["containers"][0]["args"])
    assert f"--backend git=http://git.{NS}.svc.cluster.local:8080/mcp --backend-prefix git=vcs_" in args, args
    # The signing key: in its Secret only; its public half for the backends.
    secret = cluster.get("secret", f"{NAME}-gateway-key", NS)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == uid
    assert base64.b64decode(secret["data"]["key.pem"]).startswith(b"-----BEGIN PRIVATE KEY-----")
    public = cluster.get("configmap", f"{NAME}-gateway-pub", NS)["data"]["public.pem"]
    assert "PRIVATE" not in str(gw) and "PRIVATE" not in public
    # Exactly the three backends' policies trust it, with the key beside the policy.
    for server in ("everything", "files", "git"):
        wait_for(f"{server} trusts the gateway", lambda s=server: trusted(cluster, s), timeout=60)
        assert policy_data(cluster, server)[KEY] == public
    assert not trusted(cluster, "time"), "a server the gateway does not select"
    events = [e for e in cluster.list("events", NS)
              if e.get("regarding", e.get("involvedObject", {})).get("name") == NAME]
    assert {"Applied", "Progressing"} <= {e["reason"] for e in events}, events

    # A server labelled for the gateway becomes a backend, and trusts it;
    # without the label it is neither.
    label = f"mcpwarden.dev/gateway-{NAME}"
    cluster.kubectl("label", "mcpserver", "time", "-n", NS, f"{label}=true")
    wait_for("time joins", lambda: "time" in backends(cluster), timeout=60)
    wait_for("time trusts the gateway", lambda: trusted(cluster, "time"), timeout=60)
    cluster.kubectl("label", "mcpserver", "time", "-n", NS, f"{label}-")
    wait_for("time leaves", lambda: "time" not in backends(cluster), timeout=60)
    wait_for("time no longer trusts the gateway", lambda: KEY not in policy_data(cluster, "time"), timeout=60)


# A loopback address of its own: the operator reads `<podIP>:9090`, and
# the pod below is given this address (no kubelet runs here); the real
# gateway standing in for the pod's container listens there.
LIVE_IP = "127.0.0.93"


def in_order(entries) -> list[dict]:
    return sorted(entries, key=lambda c: json.dumps(c, sort_keys=True))


def as_status(view: dict) -> list[dict]:
    """A gateway's `/gateway` conflicts as the operator puts them in status:
    cut to the CRD's bounds, an empty detail dropped, a detail's parts
    sorted and without repeats, a mapping as the backend it names."""
    entries = []
    for c in view["conflicts"]:
        entry = {"kind": c["kind"], "catalog": c["catalog"], "names": c["names"][:16],
                 "backends": c["backends"][:32], "reportedByGateway": True}
        detail = ",".join(sorted({d for d in c.get("detail", "").split(",") if d}))
        if detail:
            entry["detail"] = detail[:512]
        if c.get("resolved"):
            entry["resolvedBy"] = c["resolved"]["backend"]
        entries.append(entry)
    return in_order(entries)


def test_what_a_ready_gateway_pod_withholds_reaches_the_status(cluster, gateway, facade, tmp_path):
    """What a real gateway in front of colliding backends withholds — tool
    and prompt collisions, a shadowing quarantine, which only its facade can
    know — read from its Ready pod with the gateway's own admin token, kept
    by the CRD's schema, counted by the condition; the token is in no
    status or Event."""
    secret = wait_for("the gateway's admin token",
                      lambda: cluster.get("secret", f"{NAME}-admin-token", NS), timeout=60)
    gw = cluster.get("mcpgateway", NAME, NS)
    assert secret["metadata"]["ownerReferences"][0]["uid"] == gw["metadata"]["uid"]
    token = base64.b64decode(secret["data"]["token"]).decode()
    token_file = tmp_path / "admin.token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    live = colliding_gateway(facade, tmp_path, colliding_backends(facade, tmp_path), "gateway-audit.jsonl",
                             # The pod's address as its Host (in a pod, on 0.0.0.0, any is).
                             extra_args=["--admin-token-file", str(token_file), "--admin-allowed-host", LIVE_IP],
                             admin_listen=f"{LIVE_IP}:9090")
    # A gateway reads its backends' prompts when a caller lists them: one
    # does, so the view holds the prompt collisions too.
    mcp = ModernMcp(live.url)
    try:
        mcp.request("prompts/list")
    finally:
        mcp.close()
    # Its view is for the token's holder only.
    for headers in ({}, {"Authorization": "Bearer not-the-token"}):
        assert httpx.get(f"{live.admin_url}/gateway", headers=headers, timeout=10).status_code in (401, 403)
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{NAME}-live", "namespace": NS, "labels": {"mcpwarden.dev/gateway": NAME}},
           "spec": {"automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{"name": "gateway", "image": "stand-in",
                                    "securityContext": {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}}]}}
    seen: list = []

    def the_view_in_status():
        # The gateway's own view, read anew each time (its backends' lists
        # arrive on their own schedule): the status must say just that.
        status = (cluster.get("mcpgateway", NAME, NS) or {}).get("status", {})
        reported = in_order(c for c in status.get("conflicts", []) if c.get("reportedByGateway"))
        expected = as_status(gateway_view(live))
        seen[:] = [reported, expected]
        return reported and reported == expected and (status, expected)

    try:
        assert cluster.apply(pod).code == 0
        cluster.kubectl("patch", "pod", f"{NAME}-live", "-n", NS, "--subresource=status", "--type=merge", "-p",
                        json.dumps({"status": {"phase": "Running", "podIP": LIVE_IP, "podIPs": [{"ip": LIVE_IP}],
                                               "conditions": [{"type": "Ready", "status": "True"}]}}))
        try:
            status, expected = wait_for("the pod's view in the gateway's status", the_view_in_status, timeout=60)
        except AssertionError as e:
            raise AssertionError(f"{e}\nreported by the status, then the gateway's view: {seen}") from None
    finally:
        cluster.kubectl("delete", "pod", f"{NAME}-live", "-n", NS, "--wait=false", check=False)
    kinds = {(c["kind"], c["catalog"]) for c in expected}
    assert {("collision", "tool"), ("collision", "prompt"), ("shadowing", "tool")} <= kinds, expected
    # The examples' prefixes keep their own names apart: all that is
    # withheld is what the gateway reported, each counted once.
    assert len(status["conflicts"]) == len(expected), status
    conflicts = next(c for c in status["conditions"] if c["type"] == "Conflicts")
    assert conflicts["reason"] == "NamesWithheld", conflicts

    withheld = [c for c in expected if "resolvedBy" not in c]

    def tally(word: str, order: tuple) -> str:
        counts = Counter(c[word] for c in withheld)
        return ", ".join(f"{w} {counts[w]}" for w in order if counts[w])

    assert conflicts["message"].startswith(
        f"the gateway withholds {len(withheld)} name(s) "
        f"({tally('catalog', ('tool', 'prompt', 'resource_template'))}; "
        f"{tally('kind', ('collision', 'confusable', 'shadowing'))})"), (conflicts, expected)
    events = [e for e in cluster.list("events", NS)
              if e.get("regarding", e.get("involvedObject", {})).get("name") == NAME]
    assert any(e["reason"] == "NamesWithheld" for e in events), events
    assert token not in json.dumps(status) and token not in json.dumps(events)


def test_the_webhook_refuses_a_gateway_whose_names_would_collide(cluster, examples_applied, webhook):
    doc = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
           "metadata": {"name": "clash", "namespace": NS},
           "spec": {"backends": [{"name": "git", "prefix": "files__"}, {"name": "files"}]}}
    out = cluster.apply(doc, dry_run=True, check=False)
    assert out.code != 0, out.stdout
    assert f"MCPGateway {NS}/clash: PrefixCollision" in out.stderr, out.stderr
    doc["spec"]["backends"][0]["prefix"] = "vcs_"
    assert cluster.apply(doc, dry_run=True, check=False).code == 0
    # One name mapped to two backends: refused by the CRD's own rule.
    doc["spec"]["resolve"] = [{"name": "vcs_log", "backend": "git"}, {"name": "vcs_log", "backend": "files"}]
    out = cluster.apply(doc, dry_run=True, check=False)
    assert out.code != 0 and "each name is mapped once" in out.stderr, out.stderr
    doc["spec"]["resolve"].pop()
    assert cluster.apply(doc, dry_run=True, check=False).code == 0


def facade_ingress(cluster, server: str) -> list:
    return ((cluster.get("networkpolicy", server, NS) or {}).get("spec") or {}).get("ingress", [])


def test_a_backend_made_reachable_only_through_its_gateway(cluster, gateway):
    """`onlyThroughGateway` on the git example: its NetworkPolicy admits 8080
    only from the gateway's pods (9090 unchanged), and its compiled policy
    lets in the gateway's assertions alone (`gatewaysOnly`); an Ingress of its own beside it is refused by the CRD; removing
    the field opens it again."""
    wait_for("git trusts the gateway", lambda: trusted(cluster, "git"), timeout=60)
    before = facade_ingress(cluster, "git")
    # From anywhere (`from: []`, which the API server may drop).
    assert before[0]["ports"] == [{"port": 8080, "protocol": "TCP"}] and not before[0].get("from"), before
    patch = '{"spec": {"onlyThroughGateway": "%s"}}'
    cluster.kubectl("patch", "mcpserver", "git", "-n", NS, "--type=merge", "-p", patch % NAME)
    try:
        wait_for("8080 from the gateway's pods only", lambda: facade_ingress(cluster, "git")[0].get("from") == [
            {"podSelector": {"matchLabels": {"mcpwarden.dev/gateway": NAME}}}], timeout=60)
        assert facade_ingress(cluster, "git")[1:] == before[1:], "the metrics port is unchanged"
        wait_for("git lets in the gateway's assertions alone", lambda: yaml.safe_load(
            policy_data(cluster, "git")["policy.yaml"])["auth"].get("gatewaysOnly") is True, timeout=60)
        auth = yaml.safe_load(policy_data(cluster, "git")["policy.yaml"])["auth"]
        assert [g["issuer"] for g in auth["gateways"]] == [f"mcpwarden.dev/{NS}/mcpgateway/{NAME}"]
        git = cluster.get("mcpserver", "git", NS)
        git["spec"]["expose"] = {"hosts": ["git.example.com"], "ingress": {}}
        for key in ("managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"):
            git["metadata"].pop(key, None)
        git.pop("status", None)
        out = cluster.apply(git, dry_run=True, check=False)
        assert out.code != 0 and "expose the gateway instead" in out.stderr, out.stderr
    finally:
        cluster.kubectl("patch", "mcpserver", "git", "-n", NS, "--type=merge", "-p",
                        '{"spec": {"onlyThroughGateway": null}}')
    wait_for("8080 open again", lambda: not facade_ingress(cluster, "git")[0].get("from"), timeout=60)
    wait_for("git's own callers again", lambda: "gatewaysOnly" not in yaml.safe_load(
        policy_data(cluster, "git")["policy.yaml"])["auth"], timeout=60)


def test_the_gateways_expose_routes_follow_its_spec(cluster, gateway):
    """`expose.ingress` on the gateway makes an Ingress the gateway owns, to
    its Service; `expose.httpRoute` on a cluster without the Gateway API (this
    one) applies the rest and says so in `Degraded`; dropping them from the
    spec removes the Ingress. A route without hosts is refused at admission."""
    wait_for("the gateway's status", lambda: backends(cluster) == ["everything", "files", "git"], timeout=60)
    expose = {"hosts": ["tools.example.com"], "ingress": {"className": "nginx"},
              "httpRoute": {"parentRefs": [{"name": "public", "namespace": "infra"}]}}
    cluster.kubectl("patch", "mcpgateway", NAME, "-n", NS, "--type=merge", "-p",
                    json.dumps({"spec": {"expose": expose}}))
    try:
        def ingress_for_the_new_host():
            i = cluster.get("ingress", NAME, NS) or {}
            return i if [r.get("host") for r in i.get("spec", {}).get("rules", [])] == ["tools.example.com"] else None

        # The example's own Ingress (its host) is rewritten for the new one.
        ingress = wait_for("the gateway's Ingress", ingress_for_the_new_host, timeout=60)
        gw = cluster.get("mcpgateway", NAME, NS)
        owner = ingress["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"]) == ("MCPGateway", gw["metadata"]["uid"]), owner
        assert ingress["spec"]["ingressClassName"] == "nginx"
        (rule,) = ingress["spec"]["rules"]
        assert rule["host"] == "tools.example.com"
        assert {p["backend"]["service"]["name"] for p in rule["http"]["paths"]} == {NAME}

        def degraded():
            status = (cluster.get("mcpgateway", NAME, NS) or {}).get("status", {})
            c = next((c for c in status.get("conditions", []) if c["type"] == "Degraded"), {})
            return c if "install the Gateway API" in c.get("message", "") else None

        wait_for("Degraded says the HTTPRoute cannot be made", degraded, timeout=60)
        assert cluster.get("mcpgateway", NAME, NS)["status"]["endpoint"] == "https://tools.example.com/mcp"
        bad = {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway",
               "metadata": {"name": "routeless", "namespace": NS},
               "spec": {"backends": [{"name": "git"}], "expose": {"ingress": {}}}}
        out = cluster.apply(bad, dry_run=True, check=False)
        assert out.code != 0 and "needs expose.hosts" in out.stderr, out.stderr
    finally:
        cluster.kubectl("patch", "mcpgateway", NAME, "-n", NS, "--type=merge", "-p",
                        json.dumps({"spec": {"expose": {"hosts": ["tools.example.com"],
                                                        "ingress": None, "httpRoute": None}}}))
    wait_for("the Ingress removed", lambda: cluster.get("ingress", NAME, NS) is None, timeout=60)
    wait_for("Degraded no longer about the route", lambda: degraded() is None, timeout=60)


def test_the_gateways_ingress_is_put_back_at_once(cluster, gateway):
    """The gateway controller watches the Ingress it owns (the example's,
    for `expose.ingress`): one deleted, or edited by hand, is put back within
    seconds — not at the next look the gateway would take anyway (10 s after
    its last reconcile while its pods are not ready, as here; 10 minutes once
    they are). Without the watch, a fix after the first would wait a whole
    10 s: the test acts again the moment the last fix is seen, which is just
    after that look. So six fixes in a row, each within 7 s (room for a
    loaded machine, where one reconcile's dozen API calls take seconds),
    could not come from that look."""
    host = "tools.team-a.example.com"
    ingress = wait_for("the gateway's Ingress", lambda: cluster.get("ingress", NAME, NS), timeout=60)
    for _ in range(3):
        gone = ingress["metadata"]["uid"]
        out = cluster.kubectl("delete", "ingress", NAME, "-n", NS, "--wait=true")
        assert out.code == 0, out.stderr

        def back(gone=gone):
            i = cluster.get("ingress", NAME, NS)
            return i if i and i["metadata"]["uid"] != gone else None

        ingress = wait_for("the Ingress back", back, timeout=7)
    for _ in range(3):
        out = cluster.kubectl("patch", "ingress", NAME, "-n", NS, "--type=json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/rules/0/host", "value": "elsewhere.example.com"}]))
        assert out.code == 0, out.stderr
        wait_for("the hand edit undone", lambda: (cluster.get("ingress", NAME, NS) or {}).get(
            "spec", {}).get("rules", [{}])[0].get("host") == host, timeout=7)


# The Gateway API's HTTPRoute kind, as a CRD that keeps any field: what the
# operator discovers and writes (no Gateway controller runs here).
GATEWAY_API_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    # A *.k8s.io group needs this annotation, as the Gateway API's own CRDs carry it.
    "metadata": {"name": "httproutes.gateway.networking.k8s.io",
                 "annotations": {"api-approved.kubernetes.io": "https://github.com/kubernetes-sigs/gateway-api/pull/2466"}},
    "spec": {
        "group": "gateway.networking.k8s.io", "scope": "Namespaced",
        "names": {"kind": "HTTPRoute", "plural": "httproutes", "singular": "httproute"},
        "versions": [{"name": "v1", "served": True, "storage": True,
                      "schema": {"openAPIV3Schema": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields": True}}}],
    },
}


def make_pods_ready(cluster, ns: str, deployment: str) -> None:
    """Play the kubelet: every pod of the Deployment Running and Ready."""
    live = cluster.get("deployment", deployment, ns)
    selector = ",".join(f"{k}={v}" for k, v in live["spec"]["selector"]["matchLabels"].items())
    pods = wait_for(f"{deployment}'s pods", lambda: cluster.list("pods", ns, selector=selector), timeout=60)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for i, pod in enumerate(pods):
        ip = f"10.78.0.{i + 1}"
        status = {"status": {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now} for t in ("Ready", "ContainersReady")]}}
        cluster.kubectl("patch", "pod", pod["metadata"]["name"], "-n", ns, "--subresource=status",
                        "--type=merge", "-p", json.dumps(status))


def test_a_gateway_api_installed_later_is_picked_up_at_once(cluster, controller, examples_applied):
    """A gateway with `expose.httpRoute` on a cluster without the Gateway API
    says `GatewayAPINotInstalled`; once the HTTPRoute kind is installed its
    route appears and the condition clears within 20 s, without anything
    touching the gateway. Its pods are made Ready first, so the gateway's only
    look of its own is its resync, ten minutes away (while its pods are not
    Ready it looks every 10 s, which would pick the kind up by itself); its
    backend is unchanged and the HTTPRoute watch sees no route of ours, so
    nothing but the operator noticing the new kind (discovery every 10 s)
    reconciles it in that time."""
    ns = "team-gwapi"
    cluster.namespace(ns)
    cluster.apply([
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "t", "namespace": ns},
         "spec": {"tools": [{"name": "echo"}]}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "srv", "namespace": ns},
         "spec": {"image": "ghcr.io/example/mcp:1", "command": ["srv"], "toolProfileRef": {"name": "t"}}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway", "metadata": {"name": "edge", "namespace": ns},
         "spec": {"backends": [{"name": "srv"}],
                  "expose": {"hosts": ["edge.example.com"],
                             "httpRoute": {"parentRefs": [{"name": "public", "namespace": "infra"}]}}}},
    ])

    def condition(type_: str) -> dict:
        status = (cluster.get("mcpgateway", "edge", ns) or {}).get("status", {})
        return next((c for c in status.get("conditions", []) if c["type"] == type_), {})

    def waits_for_the_kind() -> bool:
        return "install the Gateway API" in condition("Degraded").get("message", "")

    wait_for("Degraded says the HTTPRoute cannot be made", waits_for_the_kind, timeout=60)
    wait_for("the gateway's Deployment", lambda: cluster.get("deployment", "edge", ns), timeout=60)
    make_pods_ready(cluster, ns, "edge")

    def settled() -> bool:
        # Every pod available and said so: no Deployment change is left to
        # wake the gateway (each one would be a reconcile of its own).
        d = cluster.get("deployment", "edge", ns)
        n = d["spec"]["replicas"]
        status = d.get("status", {})
        progressing = next((c for c in status.get("conditions", []) if c["type"] == "Progressing"), {})
        done = status.get("availableReplicas") == n and status.get("observedGeneration") == \
            d["metadata"]["generation"] and progressing.get("reason") == "NewReplicaSetAvailable"
        return done and condition("Ready").get("message") == f"{n}/{n} gateway pods available"

    wait_for("the gateway Ready, every pod available", settled, timeout=60)
    # Its own last status write wakes it once more; let that pass.
    time.sleep(3)
    assert waits_for_the_kind()
    try:
        cluster.apply(GATEWAY_API_CRD)
        cluster.kubectl("wait", "--for=condition=Established", "crd/httproutes.gateway.networking.k8s.io",
                        "--timeout=30s")
        route = wait_for("the gateway's HTTPRoute",
                         lambda: cluster.get("httproutes.gateway.networking.k8s.io", "edge", ns), timeout=20)
        owner = route["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("MCPGateway", "edge"), owner
        assert route["spec"]["hostnames"] == ["edge.example.com"], route["spec"]
        wait_for("Degraded no longer about the route", lambda: not waits_for_the_kind(), timeout=5)
    finally:
        # The suites after this one see a cluster without the Gateway API.
        cluster.kubectl("delete", "-f", "-", "--wait=true", input=json.dumps(GATEWAY_API_CRD), check=False)
