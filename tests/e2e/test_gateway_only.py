"""A backend reachable only through its gateway (`spec.onlyThroughGateway`),
end to end: the operator's own output (`mcp-warden-operator render`) runs in
a real facade in front of server-everything.

The ToolProfile has a caller of its own (a static token, alice). Rendered
without the field, the backend's policy lets alice call directly; with it,
the policy's `auth` lets in the gateway's assertions alone (`gatewaysOnly`)
— none until the gateway's key is there (nobody gets in), then that
gateway's entry as the reconcile adds it — so alice's own token is refused at the backend (HTTP 401)
while alice through the gateway is served. The NetworkPolicy that would
stop the direct path on a cluster is in the same render; the facade's refusal
is what holds where NetworkPolicy is not enforced (as here).
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import REPO_ROOT
from era_helpers import ModernMcp
from gateway_helpers import gateway_args, gateway_keys
from helpers import everything_stdio
from warden_helpers import policy_doc, token_entry

ALICE = "gwo-alice-token-0123456789"
NS, GATEWAY, SERVER = "team-a", "front", "everything"
ISSUER = f"mcpwarden.dev/{NS}/mcpgateway/{GATEWAY}"


def operator() -> Path:
    path = Path(os.environ.get("MCP_WARDEN_OPERATOR", REPO_ROOT / "target/debug/mcp-warden-operator"))
    if not path.is_absolute():
        path = REPO_ROOT / path
    if not path.exists():
        pytest.skip(f"operator binary not built: {path}")
    return path


def manifests(only: bool) -> list[dict]:
    spec = {"image": "node:22", "command": ["npx", "@modelcontextprotocol/server-everything"],
            "toolProfileRef": {"name": SERVER}}
    if only:
        spec["onlyThroughGateway"] = GATEWAY
    meta = lambda name: {"name": name, "namespace": NS}  # noqa: E731
    return [
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "ToolProfile", "metadata": meta(SERVER),
         "spec": {"tools": [{"name": "echo"}],
                  "roles": [{"role": "user", "issuer": "static", "subjects": ["alice"]}],
                  "auth": {"staticTokens": [{"secretName": "tokens", "key": "alice", "subject": "alice"}]}}},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer", "metadata": meta(SERVER), "spec": spec},
        {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPGateway", "metadata": meta(GATEWAY),
         "spec": {"backends": [{"name": SERVER}]}},
    ]


def render(tmp: Path, only: bool) -> list[dict]:
    src = tmp / f"render-{only}.yaml"
    src.write_text(yaml.safe_dump_all(manifests(only)))
    out = subprocess.run([str(operator()), "render", "-f", str(src)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def backend_policy(objects: list[dict], tmp: Path) -> dict:
    """The backend's compiled policy, its in-pod files given local paths:
    alice's token file (the Secret the Deployment mounts), an empty JWKS."""
    cm = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == f"{SERVER}-policy")
    policy = yaml.safe_load(cm["data"]["policy.yaml"])
    auth = policy.get("auth") or {}
    for entry in (auth.get("staticTokens") or {}).get("tokenFiles", []):
        (tmp / "alice.token").write_text(ALICE)
        entry["path"] = str(tmp / "alice.token")
    if "serviceAccountTokens" in auth:
        (tmp / "jwks.json").write_text('{"keys": []}')
        auth["serviceAccountTokens"]["jwksFile"] = str(tmp / "jwks.json")
    return policy


def direct_status(url: str, token: str | None) -> tuple[int, dict | None]:
    mcp = ModernMcp(url, token)
    try:
        return mcp.request("tools/call", {"name": "echo", "arguments": {"message": "direct"}})
    finally:
        mcp.close()


def test_without_the_option_the_profiles_own_caller_gets_in(module_facade, tmp_path):
    objects = render(tmp_path, only=False)
    np = next(o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == SERVER)
    assert np["spec"]["ingress"][0] == {"ports": [{"port": 8080, "protocol": "TCP"}], "from": []}
    backend = module_facade(upstream=everything_stdio(), policy=backend_policy(objects, tmp_path))
    status, answer = direct_status(backend.url, ALICE)
    assert status == 200 and "direct" in str(answer["result"]), answer


def test_only_through_the_gateway(module_facade, tmp_path):
    objects = render(tmp_path, only=True)
    np = next(o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == SERVER)
    assert np["spec"]["ingress"][0] == {"ports": [{"port": 8080, "protocol": "TCP"}],
                                        "from": [{"podSelector": {"matchLabels": {"mcpwarden.dev/gateway": GATEWAY}}}]}
    policy = backend_policy(objects, tmp_path)
    # Rendered without a cluster there is no gateway key yet: nobody gets in,
    # though alice's token is in the policy (its file where the pod has it).
    assert policy["auth"]["gatewaysOnly"] is True and not policy["auth"].get("gateways"), policy["auth"]
    assert (tmp_path / "alice.token").read_text() == ALICE
    closed = module_facade(upstream=everything_stdio(), policy=policy)
    assert direct_status(closed.url, ALICE)[0] == 401
    assert direct_status(closed.url, None)[0] == 401

    # Once the gateway's key exists, the reconcile adds exactly its entry.
    private, public = gateway_keys(tmp_path)
    policy["auth"]["gateways"] = [{"issuer": ISSUER, "publicKeyFile": str(public), "audience": SERVER,
                                   "callerIssuers": ["static"]}]
    backend = module_facade(upstream=everything_stdio(), policy=policy)
    gateway = module_facade(
        policy=policy_doc(auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice")]}},
                          roles=[{"role": "user", "subjects": ["alice"]}], defaultAction="allow"),
        extra_args=gateway_args({SERVER: backend.url})
        + ["--gateway-key-file", str(private), "--gateway-issuer", ISSUER])
    # Around the gateway: alice's own token is refused, as is nobody.
    assert direct_status(backend.url, ALICE)[0] == 401
    assert direct_status(backend.url, None)[0] == 401
    # Through it: served, as alice.
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        mcp.request("tools/list")
        _, answer = mcp.request("tools/call", {"name": f"{SERVER}__echo", "arguments": {"message": "via gw"}})
        assert "via gw" in str(answer["result"]), answer
    finally:
        mcp.close()
