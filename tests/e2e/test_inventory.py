"""The tool inventory is complete when the facade says ready, before any client.

The operator publishes the facade's `/tools` (admin port) in the MCPServer's
status when the pod turns Ready; a facade that learned its server's tools only
from a client's first `tools/list` left that status empty until some later
reconcile. Each server era is covered with a real server: server-everything
(legacy, a process per session; the probe's own process lists), the modern
SDK fixture over HTTP (the shared hub lists) and mcp-server-git (dual-era, so
found modern, over stdio). No client connects in these tests.
"""
from __future__ import annotations

import subprocess

import httpx
import pytest

from era_helpers import modern_fixture_http
from helpers import everything_stdio
from warden_helpers import git_stdio, policy_doc

ADMIN_TOKEN = "inventory-admin-0123456789"


def inventory(facade, tmp_path, extra_args=(), **upstream) -> dict[str, dict]:
    token_file = tmp_path / "admin-token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    fa = facade(policy=policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}]),
                extra_args=["--admin-token-file", str(token_file), *extra_args], **upstream)
    # `facade` returned once /readyz said ready: nothing has listed since.
    r = httpx.get(f"{fa.admin_url}/tools", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=5)
    assert r.status_code == 200, r.text
    assert r.json()["listed"] is True, r.text
    return {t["name"]: t for t in r.json()["tools"]}


def test_a_legacy_servers_tools_are_known_at_ready(facade, tmp_path):
    tools = inventory(facade, tmp_path, upstream=everything_stdio())
    assert {"echo", "get-env", "get-sum"} <= set(tools), sorted(tools)
    assert tools["echo"]["state"] == "exposed" and tools["get-env"]["state"] == "hidden", tools


def test_a_modern_servers_tools_are_known_at_ready(facade, tmp_path, start_process):
    tools = inventory(facade, tmp_path, upstream_url=modern_fixture_http(start_process))
    assert {"test_simple_text", "test_sleep"} <= set(tools), sorted(tools)
    assert all(t["state"] == "hidden" for t in tools.values()), tools


@pytest.mark.parametrize("era", ["auto", "legacy"])
def test_a_dual_era_servers_tools_are_known_at_ready(facade, tmp_path, era):
    repo = tmp_path / "repo"
    repo.mkdir()
    for cmd in (["git", "init", "-q"], ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q",
                                         "--allow-empty", "-m", "init"]):
        subprocess.run(cmd, cwd=repo, check=True)
    tools = inventory(facade, tmp_path, upstream=git_stdio(repo), extra_args=["--upstream-era", era])
    assert {"git_status", "git_log"} <= set(tools), sorted(tools)
