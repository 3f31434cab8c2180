"""The official TypeScript MCP SDK client (tests/e2e/ts/client.mjs) through the
facade: StreamableHTTPClientTransport to a facade in front of server-everything
(stdio upstream, and Streamable HTTP upstream), and StdioClientTransport spawning
`mcp-warden-sidecar run --stdio -- <server>` (downstream stdio). The script
prints a JSON report of what it saw; the assertions are here.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import free_port, sidecar_path, system_node
from helpers import everything_stdio, fixture_module, fixture_stdio, start_everything_http

fixture = fixture_module()

CLIENT = Path(__file__).resolve().parent / "ts" / "client.mjs"
RUN_TIMEOUT = 90
# The facade's root (`--root`): the server learns its scope from the facade;
# the TS client names the same directory, so the check holds either way.
ROOT_DIR = Path("/tmp/mcp-warden-ts-root")
ROOT_URI = f"file://{ROOT_DIR}"


def run_client(start_process, *args: str) -> dict:
    mp = start_process([system_node(), str(CLIENT), *args], stdout=subprocess.PIPE)
    try:
        out, _ = mp.proc.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the TS client did not finish in {RUN_TIMEOUT}s:\n{mp.stderr_text()[-4000:]}")
    lines = [l for l in out.decode(errors="replace").splitlines() if l.startswith("{")]
    assert lines, f"no JSON report (exit {mp.proc.returncode}):\n{mp.stderr_text()[-4000:]}"
    report = json.loads(lines[-1])
    assert report["ok"], f"TS client failed: {report['error']}\nreport so far: {report.get('report')}"
    assert mp.proc.returncode == 0
    return report


def check_everything(r: dict, downstream: str) -> None:
    assert r["server"]["name"] == "mcp-servers/everything"
    assert r["instructions"] > 100
    if downstream == "http":
        assert r["protocolVersion"] == "2025-11-25" and r["sessionId"]
    # tools/list (one page: server-everything does not paginate), incl. the conditional tools
    assert r["toolPages"] == 1
    assert {"echo", "get-sum", "trigger-long-running-operation", "trigger-sampling-request",
            "trigger-elicitation-request", "get-roots-list"} <= set(r["tools"])
    assert r["echo"] == "Echo: héllo from TS ✓"
    assert "42" in r["sum"]
    # progress and cancellation
    assert r["progress"] == [[1, 4], [2, 4], [3, 4], [4, 4]]
    assert "Steps: 4" in r["longRunning"]
    c = r["cancel"]
    assert c["aborted"] and c["sawProgress"] and "user pressed stop" in c["error"], c
    assert c["ms"] < 10_000, c
    assert c["after"] == "Echo: after cancel"
    # resources and prompts
    assert any(u.startswith("demo://resource/static/document/") for u in r["resources"])
    assert r["readDoc"].startswith("# Everything Server - Features")
    assert "demo://resource/dynamic/text/{resourceId}" in r["templates"]
    assert r["readDynamic"].startswith("Resource 3:")
    assert {"simple-prompt", "args-prompt"} <= set(r["prompts"])
    assert "Nantes" in r["prompt"]
    # sampling, elicitation, roots (server-to-client requests)
    assert "sampled-by-ts" in r["sampling"] and "ts-e2e-model" in r["sampling"]
    assert r["samplingSeen"] and "ts-ping" in r["samplingSeen"][0]
    assert "Grace Hopper" in r["elicitation"]
    assert ROOT_URI in r["roots"] and r["rootsAsked"] == 0, r["roots"]  # the facade's root, not asked of the client
    # server notifications
    assert r["logs"] >= 1
    assert r["updated"] and r["updated"][0] == r["subscribedUri"]


@pytest.mark.parametrize("upstream", ["stdio", "http"])
def test_ts_client_over_streamable_http(facade, start_process, upstream):
    ROOT_DIR.mkdir(exist_ok=True)
    roots = ["--root", str(ROOT_DIR)]
    if upstream == "stdio":
        fa = facade(upstream=everything_stdio(), extra_args=roots)
    else:
        fa = facade(upstream_url=start_everything_http(start_process), extra_args=roots)
    r = run_client(start_process, "--url", fa.url)
    check_everything(r, "http")
    if upstream == "stdio":
        # the conditional tools announced themselves (server-everything's HTTP mode
        # drops this notification itself, before any GET stream exists)
        assert r["listChanged"] >= 1


def test_ts_client_over_facade_stdio(start_process):
    """StdioClientTransport spawns the facade in --stdio mode in place of the server."""
    if not sidecar_path().exists():
        pytest.skip(f"facade binary {sidecar_path()} does not exist")
    ROOT_DIR.mkdir(exist_ok=True)
    facade_cmd = [str(sidecar_path()), "run", "--stdio", "--admin-listen", f"127.0.0.1:{free_port()}",
                  "--root", str(ROOT_DIR), "--", *everything_stdio()]
    r = run_client(start_process, "--stdio", "--", *facade_cmd)
    check_everything(r, "stdio")
    assert r["listChanged"] >= 1


def test_ts_client_pagination(facade, start_process):
    """tools/list: one complete page assembled by the facade from every upstream
    page; resources/list and prompts/list: the client follows the cursors."""
    fa = facade(upstream=fixture_stdio())
    r = run_client(start_process, "--flow", "paging", "--url", fa.url)
    pages = r["toolPages"]
    assert len(pages) == 1 and pages[0]["cursor"] is None
    assert pages[0]["names"] == ["echo", "whoami", "sleep", "cancelled", "progress", "crash", "crash_forever"]
    # the upstream received each cursor exactly as it issued it
    expected = [None, None] + [fixture.make_cursor(o) for o in (2, 2, 4, 4, 6)]
    assert [d.rsplit("(page cursor: ", 1)[1][:-1] for d in pages[0]["descriptions"]] == [str(e) for e in expected]
    assert r["resourcePages"] == 3 and r["promptPages"] == 2
    assert r["resources"] == [f"fixture://item/{i}" for i in range(5)]
    assert r["prompts"] == ["prompt-0", "prompt-1", "prompt-2"]
    assert r["echo"] == "paged"



def test_facade_stdio_exits_when_client_closes_stdin():
    """Raw stdio (no SDK): initialize, one call, close stdin -> the facade exits promptly."""
    if not sidecar_path().exists():
        pytest.skip(f"facade binary {sidecar_path()} does not exist")
    cmd = [str(sidecar_path()), "run", "--stdio", "--admin-listen", f"127.0.0.1:{free_port()}",
           "--", *fixture_stdio()]
    # (start_process gives children /dev/null as stdin; this one needs a pipe)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        def send(msg):
            proc.stdin.write((json.dumps(msg) + "\n").encode())
            proc.stdin.flush()
        # As a client must: the call only after initialize has been answered
        # (requests in flight together may be answered in any order).
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        answers = [json.loads(proc.stdout.readline())]
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}})
        answers.append(json.loads(proc.stdout.readline()))
        assert [a["id"] for a in answers] == [1, 2] and answers[1]["result"]["content"][0]["text"] == "hi"
        proc.stdin.close()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            pytest.fail("the facade was still running 5 s after its client closed stdin")
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
