"""`make demo`: the facade in front of @modelcontextprotocol/server-everything,
a few real calls made through it with the official Python SDK, and what the
facade counted. Runs in a few seconds on a fresh machine after `make setup`."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

ROOT = Path(__file__).resolve().parents[2]
SIDECAR = os.environ.get("MCP_WARDEN_SIDECAR", str(ROOT / "target/debug/mcp-warden-sidecar"))
EVERYTHING = ROOT / "tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"the facade did not become ready at {url}")


def show(title: str, text: str) -> None:
    print(f"\033[1m{title}\033[0m {text}")


async def calls(url: str) -> None:
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            init = await session.initialize()
            show("initialize  ", f"{init.server_info.name} {init.server_info.version}, protocol {init.protocol_version}")
            tools = await session.list_tools()
            show("tools/list  ", ", ".join(t.name for t in tools.tools))
            echo = await session.call_tool("echo", {"message": "hello through mcp-warden"})
            show("tools/call  ", f"echo -> {echo.content[0].text}")
            total = await session.call_tool("get-sum", {"a": 40, "b": 2})
            show("tools/call  ", f"get-sum(40, 2) -> {total.content[0].text}")
            progress: list[float] = []

            async def on_progress(done: float, total: float | None, message: str | None) -> None:
                progress.append(done)

            await session.call_tool(
                "trigger-long-running-operation", {"duration": 1, "steps": 4}, progress_callback=on_progress
            )
            show("tools/call  ", f"trigger-long-running-operation -> {len(progress)} progress notifications")
            # A fake GitHub token: the server echoes it, the facade redacts it.
            leaked = await session.call_tool("echo", {"message": "token ghp_" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"})
            show("tools/call  ", f"echo(<a GitHub token>) -> {leaked.content[0].text}")
            try:
                await session.call_tool("get-env", {})
                show("tools/call  ", "get-env -> allowed (it should not be)")
                raise SystemExit("the policy let an anonymous caller run get-env")
            except MCPError as refused:
                show("tools/call  ", f"get-env -> refused: {refused.error.code} {refused.error.message}")
            resources = await session.list_resources()
            first = f", first: {resources.resources[0].uri}" if resources.resources else ""
            show("resources   ", f"{len(resources.resources)} listed{first}")
            prompts = await session.list_prompts()
            show("prompts     ", ", ".join(p.name for p in prompts.prompts) or "none listed")

def admin_plane(base: str, token_file: Path) -> str:
    """/tools without a token (refused) and with the generated admin token."""
    try:
        urllib.request.urlopen(f"{base}/tools", timeout=5)
        anonymous = "200 (open!)"
    except urllib.error.HTTPError as e:
        anonymous = str(e.code)
    req = urllib.request.Request(f"{base}/tools",
                                 headers={"Authorization": f"Bearer {token_file.read_text().strip()}"})
    with urllib.request.urlopen(req, timeout=5) as r:
        tools = json.loads(r.read())["tools"]
    return (f"/tools without a token: {anonymous}; with the generated admin token ({token_file}): "
            f"{len(tools)} tools, hidden ones too")


def main() -> None:
    if not EVERYTHING.exists() or not Path(SIDECAR).exists():
        raise SystemExit("run `make setup` and `cargo build -p mcp-warden-sidecar` first (make demo does both)")
    port, admin = free_port(), free_port()
    scratch = Path(tempfile.mkdtemp(prefix="mcp-warden-demo-"))
    audit, admin_token = scratch / "audit.jsonl", scratch / "admin.token"
    cmd = [SIDECAR, "run", "--policy", str(ROOT / "tests/demo/policy.yaml"), "--audit", f"file:{audit}",
           # No admin token configured: the facade generates one (0600) and says where.
           "--generated-admin-token-file", str(admin_token),
           "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
           "--", shutil.which("node") or "node", str(EVERYTHING), "stdio"]
    show("$", " ".join(cmd[:1] + ["run", "--policy", "tests/demo/policy.yaml", "--", "node", "server-everything", "stdio"]))
    facade = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_ready(f"http://127.0.0.1:{admin}/readyz")
        url = f"http://127.0.0.1:{port}/mcp"
        show("facade      ", f"{url} (admin http://127.0.0.1:{admin})")
        asyncio.run(calls(url))
        with urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics", timeout=5) as r:
            lines = [l for l in r.read().decode().splitlines() if l.startswith("mcpwarden_requests_total")]
        show("metrics     ", "\n             ".join(lines))
        show("admin       ", admin_plane(f"http://127.0.0.1:{admin}", admin_token))
        records = [json.loads(line) for line in audit.read_text().splitlines() if line.strip()]
        refused = next((r for r in records if r.get("decision") == "deny"), None)
        example = (f", e.g. {refused['tool']}: decision={refused['decision']} code={refused['code']} "
                   f"reason={refused['reason']}" if refused else "")
        show("audit       ", f"{len(records)} records in {audit} (who, what, hashes; never content){example}")
    finally:
        facade.terminate()
        try:
            facade.wait(timeout=10)
        except subprocess.TimeoutExpired:
            facade.kill()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
