"""The egress proxy's scope, on a real API server, with the operator running as
the chart's ServiceAccount (`--egress-engine proxy`, so the Cilium CRD another
test installs does not matter):

- `--egress-proxy-scope server`: two servers with approved host egress get two
  proxies (`<name>-egress-proxy` Deployment, Service, NetworkPolicy and
  clients ConfigMap, each controlled by its server), each clients file holds
  only its own server's hash (its own credential Secret's token), each proxy's
  NetworkPolicy admits only its server's pods and each server's NetworkPolicy
  reaches only its own proxy's pods; no namespace proxy runs. Deleting one
  server removes only its proxy (the garbage collector).
- Switching back to `namespace` (the operator restarted with it) converges:
  the namespace's shared proxy serves the remaining server with its
  namespace credential, whose Secret the server's pods now read, and the
  per-server Deployment, NetworkPolicy and clients ConfigMap are deleted (the
  Service stays: its cluster IP is in the credential's URL).

The session's controller is stopped for the test (one leader at a time) and
started again after it.
"""
from __future__ import annotations

import base64
import hashlib
import json

from k8s_cluster import wait_for
from k8s_fixtures import RESTRICTED, _operator, approver_binding, npm_sandbox

NS = "team-egscope"
APPROVE = "mcpwarden.dev/approve"


def condition(obj: dict | None, type_: str) -> dict | None:
    return next((c for c in (obj or {}).get("status", {}).get("conditions", []) if c["type"] == type_), None)


def server(name: str) -> dict:
    return {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": name, "namespace": NS},
            "spec": {"image": "node:22-slim", "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
                     "toolProfileRef": {"name": "t"}, "sandboxProfileRef": {"name": "npm"}}}


def test_server_scope_gives_each_server_its_own_proxy_and_switching_back_converges(
        request, cluster, controller, webhook, operator_kubeconfig):
    cluster.namespace(NS, RESTRICTED)
    cluster.apply([
        approver_binding(NS),
        npm_sandbox(NS),
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": {"name": "t", "namespace": NS},
         "spec": {"tools": [{"name": "echo"}]}},
        server("alpha"), server("beta"),
    ])
    controller.stop()
    request.addfinalizer(controller.start)
    scoped = _operator(request, operator_kubeconfig, "--mode", "controller", "--identity", "operator-scope",
                       "--egress-engine", "proxy", "--egress-proxy-scope", "server")

    def get(kind: str, name: str) -> dict | None:
        return cluster.get(kind, name, NS)

    def clients(name: str) -> dict:
        cm = get("configmap", name)
        return {c["name"]: c for c in json.loads(cm["data"]["clients.json"])["clients"]} if cm else {}

    def token(secret: str) -> str:
        return base64.b64decode(get("secret", secret)["data"]["token"]).decode()

    def uid(name: str) -> str:
        return get("mcpserver", name)["metadata"]["uid"]

    def controlled_by(obj: dict, name: str) -> bool:
        return [(o["uid"], o.get("controller")) for o in obj["metadata"].get("ownerReferences", [])] == [
            (uid(name), True)]

    def secret_ref(name: str) -> str:
        containers = get("deployment", name)["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for c in containers for e in c.get("env", [])}
        return env["HTTPS_PROXY"]["valueFrom"]["secretKeyRef"]["name"]

    for name in ("alpha", "beta"):
        digest = wait_for(f"{name}'s digest", lambda n=name: (get("mcpserver", n) or {}).get("status", {})
                          .get("capabilityDigest"), timeout=60)
        cluster.kubectl("annotate", "mcpserver", name, "-n", NS, f"{APPROVE}={digest}", "--overwrite", user="bob")
    for name in ("alpha", "beta"):
        own = f"{name}-egress-proxy"
        listed = wait_for(f"{name}'s own clients file", lambda o=own: clients(f"{o}-clients") or None, timeout=60)
        # Only its own server, with the hash of its own credential's token.
        assert list(listed) == [f"{NS}/{name}"], listed
        mine = token(f"{name}-egress-proxy-credential")
        assert listed[f"{NS}/{name}"]["tokenSha256"] == hashlib.sha256(mine.encode()).hexdigest()
        assert listed[f"{NS}/{name}"]["hosts"] == [{"host": "registry.npmjs.org", "port": 443}]
        selector = {"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "mcp-warden-server-egress"}
        for kind in ("deployment", "service", "networkpolicy"):
            obj = wait_for(f"{kind} {own}", lambda k=kind, o=own: get(k, o), timeout=30)
            assert controlled_by(obj, name), obj["metadata"]
        assert controlled_by(get("configmap", f"{own}-clients"), name)
        assert get("deployment", own)["spec"]["selector"] == {"matchLabels": selector}
        assert get("service", own)["spec"]["selector"] == selector
        proxy_np = get("networkpolicy", own)["spec"]
        assert proxy_np["podSelector"] == {"matchLabels": selector}
        assert proxy_np["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0]["values"] == [name]
        wait_for(f"{name}'s NetworkPolicy reaches its own proxy", lambda n=name, s=selector: (
            (get("networkpolicy", n) or {}).get("spec", {}).get("egress") == [
                {"ports": [{"port": 3128, "protocol": "TCP"}], "to": [{"podSelector": {"matchLabels": s}}]}]),
            timeout=30)
        assert secret_ref(name) == f"{name}-egress-proxy-credential"
        # The credential's URL names its own proxy's Service.
        url = base64.b64decode(get("secret", f"{name}-egress-proxy-credential")["data"]["url"]).decode()
        assert url.endswith(f"@{get('service', own)['spec']['clusterIP']}:3128"), url
        host_egress = condition(get("mcpserver", name), "HostEgress")
        assert host_egress["reason"] == "EgressProxy" and "own egress proxy" in host_egress["message"], host_egress
    assert token("alpha-egress-proxy-credential") != token("beta-egress-proxy-credential")
    assert get("deployment", "mcp-warden-egress") is None and get("configmap", "mcp-warden-egress-clients") is None

    # Deleting one server removes only its proxy.
    cluster.kubectl("delete", "mcpserver", "beta", "-n", NS, "--wait=true")
    wait_for("beta's proxy gone", lambda: all(get(k, n) is None for k, n in [
        ("deployment", "beta-egress-proxy"), ("service", "beta-egress-proxy"),
        ("networkpolicy", "beta-egress-proxy"), ("configmap", "beta-egress-proxy-clients")]), timeout=90, interval=2)
    assert get("deployment", "alpha-egress-proxy") is not None
    assert list(clients("alpha-egress-proxy-clients")) == [f"{NS}/alpha"]

    # Back to one proxy per namespace: the shared proxy serves alpha, its own goes.
    scoped.stop()
    scoped.args = ["--mode", "controller", "--identity", "operator-scope",
                   "--egress-engine", "proxy", "--egress-proxy-scope", "namespace"]
    scoped.start()
    shared = wait_for("the namespace's clients file", lambda: clients("mcp-warden-egress-clients") or None,
                      timeout=60)
    assert list(shared) == [f"{NS}/alpha"]
    assert shared[f"{NS}/alpha"]["tokenSha256"] == hashlib.sha256(token("alpha-egress-proxy").encode()).hexdigest()
    assert get("deployment", "mcp-warden-egress") is not None
    wait_for("alpha's own proxy removed", lambda: all(get(k, n) is None for k, n in [
        ("deployment", "alpha-egress-proxy"), ("networkpolicy", "alpha-egress-proxy"),
        ("configmap", "alpha-egress-proxy-clients")]), timeout=60)
    assert secret_ref("alpha") == "alpha-egress-proxy"
    assert get("networkpolicy", "alpha")["spec"]["egress"] == [{"ports": [{"port": 3128, "protocol": "TCP"}], "to": [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-egress"}}}]}]
    wait_for("HostEgress names the namespace's proxy", lambda: "namespace's egress proxy" in (
        condition(get("mcpserver", "alpha"), "HostEgress") or {}).get("message", ""), timeout=30)
    scoped.stop()
