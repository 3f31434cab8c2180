"""Small helpers shared by the end-to-end tests (import: ``from helpers import ...``).

    EVERYTHING_JS, STDIO_FIXTURE, everything_stdio(), fixture_stdio(), time_server()
        upstream commands
    start_everything_http(start) -> URL        server-everything over Streamable HTTP
    start_bridge(start, socket, cmd)           `mcp-warden-sidecar bridge`, waits for the socket
    metric(admin_url, name, **labels) -> float  sum of the matching Prometheus samples
    RawMcp(url)                                 raw Streamable HTTP client (httpx) that counts
                                                requests sent and responses received
    run_async(fn, timeout)                      anyio.run with an overall deadline
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from conftest import NODE_MODULES, TESTS_DIR, free_port, sidecar_path, system_node, wait_port

EVERYTHING_JS = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
STDIO_FIXTURE = TESTS_DIR / "fixtures" / "stdio_fixture.py"
ACCEPT_BOTH = "application/json, text/event-stream"


def everything_stdio() -> list[str]:
    return [system_node(), str(EVERYTHING_JS), "stdio"]


def fixture_stdio() -> list[str]:
    return [sys.executable, str(STDIO_FIXTURE)]


def fixture_module():
    """tests/fixtures/stdio_fixture.py as a module (for its cursor format)."""
    spec = importlib.util.spec_from_file_location("stdio_fixture", STDIO_FIXTURE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def time_server() -> list[str]:
    """Python `mcp-server-time` from the venv running the tests."""
    exe = Path(sys.executable).parent / "mcp-server-time"
    return [str(exe)] if exe.exists() else [shutil.which("mcp-server-time") or "mcp-server-time"]


def start_everything_http(start) -> str:
    """server-everything in Streamable HTTP mode on a free loopback port: its /mcp URL."""
    port = free_port()
    mp = start([system_node(), str(EVERYTHING_JS), "streamableHttp"], env={"PORT": str(port)})
    wait_port(port, proc=mp)
    return f"http://127.0.0.1:{port}/mcp"


def start_bridge(start, sock: Path, cmd: list[str], timeout: float = 20):
    """`mcp-warden-sidecar bridge --socket sock -- cmd`, once the socket accepts connections."""
    mp = start([str(sidecar_path()), "bridge", "--socket", str(sock), "--", *cmd])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert mp.alive(), f"bridge exited with {mp.proc.returncode}:\n{mp.stderr_text()[-4000:]}"
        if sock.exists():
            with socket.socket(socket.AF_UNIX) as s:
                if s.connect_ex(str(sock)) == 0:
                    return mp
        time.sleep(0.05)
    raise AssertionError(f"bridge socket {sock} not ready after {timeout}s:\n{mp.stderr_text()[-4000:]}")


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metrics_text(admin_url: str) -> str:
    r = httpx.get(f"{admin_url}/metrics", timeout=5)
    assert r.status_code == 200, r.text
    return r.text


def metric(admin_url: str, name: str, **labels: str) -> float:
    """Sum of the samples of `name` whose labels include `labels` (0 when none)."""
    total = 0.0
    for line in metrics_text(admin_url).splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or m.group(1) != name:
            continue
        have = dict(_LABEL.findall(m.group(2) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(3))
    return total


def run_async(fn, *args, timeout: float = 60):
    """Run an async test body with anyio, failing it after `timeout` seconds."""
    async def bounded():
        with anyio.fail_after(timeout):
            return await fn(*args)
    return anyio.run(bounded)


# ---------------------------------------------------------------------------
# Raw Streamable HTTP
# ---------------------------------------------------------------------------
def parse_body(resp: httpx.Response) -> list[dict]:
    """The JSON-RPC messages of a response: a JSON body or the data of SSE events."""
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        out = []
        for event in re.split(r"\r?\n\r?\n", resp.text):
            data = "\n".join(line[5:].lstrip(" ") for line in re.split(r"\r?\n", event)
                             if line.startswith("data:"))
            if data.strip():
                out.append(json.loads(data))
        return out
    if not resp.content:
        return []
    body = resp.json()
    return body if isinstance(body, list) else [body]


class RawMcp:
    """A hand-driven MCP client over Streamable HTTP (thread-safe: requests may
    be sent from several threads at once). Every request it sends and every
    response it gets back is counted (`sent`, `answered`) so tests can check
    that no request is left without exactly one response."""

    def __init__(self, url: str, version: str = "2025-06-18", timeout: float = 20):
        self.url = url
        self.version = version
        self.http = httpx.Client(timeout=timeout)
        self.session_id: str | None = None
        self.negotiated: str | None = None
        self._next = 0
        self._lock = threading.Lock()
        self.sent = 0
        self.answered = 0

    def close(self) -> None:
        self.http.close()

    def next_id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def headers(self, extra: dict | None = None, session: bool = True) -> dict:
        h = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}
        if session and self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if session and self.negotiated:
            h["MCP-Protocol-Version"] = self.negotiated
        h.update(extra or {})
        return h

    def post(self, body: Any, headers: dict | None = None, session: bool = True) -> httpx.Response:
        """POST raw bytes/str, or JSON for anything else."""
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.http.post(self.url, content=content, headers=self.headers(headers, session))

    def initialize(self, client_name: str = "raw-httpx") -> dict:
        rid = self.next_id()
        r = self.post({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
            "protocolVersion": self.version, "capabilities": {},
            "clientInfo": {"name": client_name, "version": "0"}}}, session=False)
        assert r.status_code == 200, (r.status_code, r.text)
        self.session_id = r.headers.get("mcp-session-id")
        assert self.session_id, f"no Mcp-Session-Id in {dict(r.headers)}"
        (msg,) = [m for m in parse_body(r) if m.get("id") == rid]
        assert "result" in msg, msg
        self.negotiated = msg["result"]["protocolVersion"]
        n = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert n.status_code == 202, (n.status_code, n.text)
        return msg["result"]

    def request(self, method: str, params: dict | None = None, rid: Any = None) -> dict:
        """Send one request; return its single response (asserting there is exactly one)."""
        rid = self.next_id() if rid is None else rid
        body = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        with self._lock:
            self.sent += 1
        r = self.post(body)
        msgs = [m for m in parse_body(r) if "id" in m and "method" not in m]
        with self._lock:
            self.answered += len(msgs)
        assert len(msgs) == 1, f"expected exactly one response to {method} id={rid}, got {msgs} (HTTP {r.status_code})"
        assert msgs[0]["id"] == rid, msgs
        return msgs[0]

    def call_tool(self, name: str, arguments: dict | None = None) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments or {}})

    def delete(self) -> httpx.Response:
        return self.http.delete(self.url, headers=self.headers())


def text_of(response: dict) -> str:
    """The text content of a tools/call result message."""
    assert "result" in response, response
    return "".join(c.get("text", "") for c in response["result"].get("content", []))
