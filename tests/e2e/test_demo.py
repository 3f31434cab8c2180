"""`make demo`, the README's first command: its script runs end to end
against the real server-everything and shows both sides of the policy —
calls that pass untouched and the ones it refuses or rewrites.

Runs `tests/demo/demo.py` exactly as `make demo` does (same interpreter,
same MCP_WARDEN_SIDECAR), so a change that breaks the demo breaks the suite.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, NODE_MODULES, sidecar_path

DEMO = REPO_ROOT / "tests/demo/demo.py"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_make_demo_runs_end_to_end_and_shows_the_policy_at_work():
    if not sidecar_path().exists():
        pytest.skip(f"no facade binary at {sidecar_path()} (cargo build -p mcp-warden-sidecar)")
    if not (NODE_MODULES / "@modelcontextprotocol/server-everything").exists():
        pytest.skip("server-everything is not installed (make setup)")
    env = dict(os.environ, MCP_WARDEN_SIDECAR=str(sidecar_path()))
    done = subprocess.run([sys.executable, str(DEMO)], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    out = ANSI.sub("", done.stdout)
    assert done.returncode == 0, f"demo failed (rc={done.returncode}):\n{out}\n{done.stderr}"
    # Allowed calls pass untouched.
    assert "echo -> Echo: hello through mcp-warden" in out
    assert re.search(r"get-sum\(40, 2\) -> .*\b42\b", out), out
    assert re.search(r"trigger-long-running-operation -> [1-9]\d* progress notifications", out), out
    # The token the server echoes reaches the client redacted, never in clear.
    assert "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6" not in out
    assert re.search(r"echo\(<a GitHub token>\) -> Echo: token \S*REDACTED", out), out
    # A tool above the caller's role is hidden and refused with its stable code.
    tools_line = next(l for l in out.splitlines() if l.startswith("tools/list"))
    assert "get-env" not in tools_line and "echo" in tools_line
    assert "get-env -> refused: -32003" in out, out
    # The admin plane is closed without configuration: /tools answers the generated token only.
    assert re.search(r"/tools without a token: 401; with the generated admin token \(.*\): [1-9]\d* tools", out), out
    # Resources and prompts pass through: server-everything lists both.
    assert re.search(r"resources\s+[1-9]\d* listed, first: \S+", out), out
    prompts_line = next(l for l in out.splitlines() if l.startswith("prompts"))
    assert "none listed" not in prompts_line
    # The facade counted what it did.
    assert "mcpwarden_requests_total" in out
    # Every call was audited, the refusal included, without its content.
    assert re.search(r"audit\s+[1-9]\d* records in .* e\.g\. get-env: decision=deny code=-32003", out), out
