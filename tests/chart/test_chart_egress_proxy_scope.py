"""The chart's `config.egressProxyScope` reaches the operator: the operator
Deployment's environment, handed to the operator binary's own `render`,
gives the namespace's shared proxy by default and each server's own proxy
with `server`.

The binary comes from $MCP_WARDEN_OPERATOR (set by `make test`), else
target/debug/mcp-warden-operator.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from chartkit import REPO, objects, operator_pod


def operator() -> Path:
    path = Path(os.environ.get("MCP_WARDEN_OPERATOR", REPO / "target/debug/mcp-warden-operator"))
    if not path.exists():
        pytest.skip(f"operator binary not built: {path}")
    return path


def operator_env(values: dict | None) -> dict[str, str]:
    (container,) = operator_pod(objects(values))["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def proxies(env: dict[str, str], tmp_path: Path) -> set[tuple[str, str]]:
    """The egress proxies `render` gives an approved host-egress server with the chart's settings."""
    source = (REPO / "examples" / "with-egress.yaml").read_text()
    pending = subprocess.run([str(operator()), "render", "-f", str(REPO / "examples" / "with-egress.yaml")],
                             capture_output=True, text=True, timeout=60)
    digest = next(line.split(": ", 1)[1] for line in pending.stdout.splitlines()
                  if line.startswith("#   capabilityDigest: "))
    head = "kind: MCPServer\nmetadata:\n  name: fetch\n  namespace: team-a\n"
    (tmp_path / "approved.yaml").write_text(
        source.replace(head, head + f"  annotations: {{mcpwarden.dev/approve: \"{digest}\"}}\n", 1))
    chart_env = {k: v for k, v in env.items() if k.startswith("MCP_WARDEN_EGRESS_")}
    out = subprocess.run([str(operator()), "render", "-f", str(tmp_path / "approved.yaml")],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": os.environ.get("PATH", ""), **chart_env,
                              "MCP_WARDEN_EGRESS_ENGINE": "proxy"})
    assert out.returncode == 0, out.stderr
    return {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(out.stdout)
            if d and d["kind"] == "Deployment" and "egress" in d["metadata"]["name"]}


def test_namespace_scope_by_default(tmp_path: Path):
    env = operator_env(None)
    assert env["MCP_WARDEN_EGRESS_PROXY_SCOPE"] == "namespace"
    assert proxies(env, tmp_path) == {("Deployment", "mcp-warden-egress")}


def test_server_scope_gives_each_server_its_own_proxy(tmp_path: Path):
    env = operator_env({"config": {"egressProxyScope": "server"}})
    assert env["MCP_WARDEN_EGRESS_PROXY_SCOPE"] == "server"
    assert proxies(env, tmp_path) == {("Deployment", "fetch-egress-proxy")}
