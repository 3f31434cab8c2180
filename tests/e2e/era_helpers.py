"""Helpers for the dual-era tests (import: ``from era_helpers import ...``).

    ModernMcp(url, token=None)        a hand-driven modern (2026-07-28) client over HTTP:
                                      .request(method, params, ...) -> (HTTP status, message)
    modern_meta(capabilities=None)    the `_meta` every modern request carries
    modern_fixture_http(start, legacy="reject") / modern_fixture_stdio()
                                      the TypeScript SDK 2.4 fixture server
    run_era_client(client, url, profile, token=None) -> dict
                                      ts-v2-modern | ts-v2-legacy | ts-v1-legacy | py-modern
"""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from conftest import TESTS_DIR, free_port, system_node, wait_port
from helpers import parse_body

MODERN = "2026-07-28"
MODERN_FIXTURE = TESTS_DIR / "conformance" / "modern-fixture-server.mjs"
TS_ERA_CLIENT = TESTS_DIR / "e2e" / "ts" / "era-client.mjs"
PY_ERA_CLIENT = TESTS_DIR / "e2e" / "era_client_py.py"
CLIENTS = ["ts-v2-modern", "py-modern", "ts-v1-legacy", "ts-v2-legacy"]


def modern_meta(capabilities: dict | None = None) -> dict:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities if capabilities is not None else {},
        "io.modelcontextprotocol/clientInfo": {"name": "era-test", "version": "0"},
    }


class ModernMcp:
    """Each request a POST of its own, with the standard headers taken from the
    body unless the test overrides them (`headers=`, a value of None drops one)."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30):
        self.url = url
        self.token = token
        self.http = httpx.Client(timeout=timeout)
        self._ids = itertools.count(1)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, params: dict | None = None, *, capabilities: dict | None = None,
                headers: dict | None = None, meta: bool = True, rid: Any = None,
                token: str | None = None) -> tuple[int, dict | None]:
        rid = next(self._ids) if rid is None else rid
        params = dict(params or {})
        if meta:
            params["_meta"] = {**modern_meta(capabilities), **params.get("_meta", {})}
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
             "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
        name = params.get("name", params.get("uri"))
        if name is not None and method in ("tools/call", "prompts/get", "resources/read"):
            h["Mcp-Name"] = name
        tok = token or self.token
        if tok:
            h["Authorization"] = f"Bearer {tok}"
        for k, v in (headers or {}).items():
            if v is None:
                h.pop(k, None)
            else:
                h[k] = v
        r = self.http.post(self.url, content=json.dumps(body), headers=h)
        answers = [m for m in parse_body(r) if "id" in m and "method" not in m]
        assert len(answers) <= 1, answers
        return r.status_code, (answers[0] if answers else None)


def modern_fixture_http(start, legacy: str = "reject") -> str:
    port = free_port()
    proc = start([system_node(), str(MODERN_FIXTURE), "--http", str(port), "--legacy", legacy])
    wait_port(port, proc=proc)
    return f"http://127.0.0.1:{port}/mcp"


def modern_fixture_stdio(legacy: str = "reject") -> list[str]:
    return [system_node(), str(MODERN_FIXTURE), "--stdio", "--legacy", legacy]


def run_era_client(client: str, url: str, profile: dict, token: str | None = None, timeout: float = 120) -> dict:
    """Run one real SDK client through `profile` (see ts/era-client.mjs); its report."""
    if client == "py-modern":
        cmd = [sys.executable, str(PY_ERA_CLIENT), "--url", url, "--profile", json.dumps(profile)]
    else:
        sdk, mode = client.split("-")[1:]
        cmd = [system_node(), str(TS_ERA_CLIENT), "--sdk", sdk, "--mode", mode, "--url", url,
               "--profile", json.dumps(profile)]
    if token:
        cmd += ["--token", token]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=TESTS_DIR)
    lines = [l for l in done.stdout.splitlines() if l.startswith("{")]
    assert done.returncode == 0 and lines, f"{client} failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-4000:]}"
    return json.loads(lines[-1])
