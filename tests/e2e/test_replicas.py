"""Scale-out: three facade replicas behind a per-request round-robin balancer
(tests/e2e/balancer.py), as behind a Kubernetes Service. Session ids name
their owner and are HMAC-signed with a shared key; a replica relays requests
for another's session to it. Real clients: the official Python SDK against
server-everything over stdio."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import free_port, sidecar_path, wait_http_ok, wait_port
from helpers import everything_stdio, metric, run_async

BALANCER = Path(__file__).with_name("balancer.py")
ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture
def cluster(start_process, tmp_path):
    """Three replicas with one shared key, and the balancer in front."""
    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    replicas = []
    for _ in range(3):
        port, admin = free_port(), free_port()
        proc = start_process([
            str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
            "--peer-key-file", str(key), "--advertise-addr", f"127.0.0.1:{port}",
            "--spares", "2", "--drain-timeout-secs", "15", "--", *everything_stdio(),
        ])
        replicas.append({"port": port, "admin": f"http://127.0.0.1:{admin}", "proc": proc})
    for r in replicas:
        wait_http_ok(r["admin"] + "/readyz", proc=r["proc"])
    lb = free_port()
    balancer = start_process([sys.executable, str(BALANCER), str(lb), *(str(r["port"]) for r in replicas)])
    wait_port(lb, proc=balancer)
    return {"url": f"http://127.0.0.1:{lb}/mcp", "replicas": replicas}


async def one_session(url: str, calls: int) -> list[str]:
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert "echo" in [t.name for t in tools.tools]
            out = []
            for i in range(calls):
                result = await session.call_tool("echo", {"message": f"m{i}"})
                out.append(result.content[0].text)
            return out


def test_sessions_survive_round_robin_across_replicas(cluster):
    results: dict[int, list[str]] = {}

    async def main():
        async with anyio.create_task_group() as tg:
            for n in range(9):
                async def run(n=n):
                    results[n] = await one_session(cluster["url"], 5)
                tg.start_soon(run)

    run_async(main, timeout=120)
    assert len(results) == 9
    for out in results.values():
        assert out == [f"Echo: m{i}" for i in range(5)]
    forwarded = sum(metric(r["admin"], "mcpwarden_forwarded_requests_total") for r in cluster["replicas"])
    # Every session made 8+ requests over 3 replicas in turn: most were relayed.
    assert forwarded >= 9 * 4, forwarded


def test_forged_and_tampered_session_ids_are_rejected(cluster):
    replica = cluster["replicas"][0]
    url = f"http://127.0.0.1:{replica['port']}/mcp"
    with httpx.Client(timeout=10) as http:
        r = http.post(url, json=INIT, headers={"Accept": ACCEPT})
        assert r.status_code == 200
        sid = r.headers["mcp-session-id"]
        random, owner, mac = sid.split(".")
        assert len(mac) == 32
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        ok = http.post(url, json=ping, headers={"Accept": ACCEPT, "Mcp-Session-Id": sid})
        assert ok.status_code == 200
        other = cluster["replicas"][1]
        import base64
        redirected_owner = base64.urlsafe_b64encode(f"127.0.0.1:{other['port']}".encode()).decode().rstrip("=")
        for forged in (
            f"{random}.{redirected_owner}.{mac}",                # points another replica at it
            f"{'0' * 32}.{owner}.{mac}",                         # new random part, old MAC
            f"{random}.{owner}.{'f' * 32}",                      # made-up MAC
        ):
            for target in (url, f"http://127.0.0.1:{other['port']}/mcp"):
                r = http.post(target, json=ping, headers={"Accept": ACCEPT, "Mcp-Session-Id": forged})
                assert r.status_code == 404, (forged, target, r.status_code, r.text)


def test_stopping_a_replica_mid_call_loses_nothing(cluster):
    outcomes: list[str] = []

    async def long_call(n: int):
        # A clear error may surface from the SDK's own tasks (a request racing
        # the replica's exit); what must never happen is a hang.
        try:
            async with streamable_http_client(cluster["url"]) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    r = await session.call_tool("trigger-long-running-operation", {"duration": 2, "steps": 2})
                    outcomes.append("ok" if r.content else "empty")
        except BaseException as e:  # noqa: BLE001 - ExceptionGroup from the SDK's task group
            if isinstance(e, anyio.get_cancelled_exc_class()):
                raise
            outcomes.append(f"error: {e!r}")

    async def main():
        async with anyio.create_task_group() as tg:
            for n in range(6):
                tg.start_soon(long_call, n)
            await anyio.sleep(1.0)
            victim = cluster["replicas"][1]["proc"]
            victim.proc.send_signal(signal.SIGTERM)

    run_async(main, timeout=60)
    assert len(outcomes) == 6, outcomes  # nothing hung
    # Calls already accepted complete (the stopping replica drains them); a
    # request racing its exit may fail, but only with an explicit error.
    assert outcomes.count("ok") >= 4, outcomes
    assert all(o == "ok" or o.startswith("error: ") for o in outcomes), outcomes
    # The stopped replica is gone; new sessions still work through the rest.
    deadline = time.monotonic() + 20
    while cluster["replicas"][1]["proc"].alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not cluster["replicas"][1]["proc"].alive()
    out = run_async(one_session, cluster["url"], 3, timeout=60)
    assert out == ["Echo: m0", "Echo: m1", "Echo: m2"]


def test_a_modern_retry_landing_on_another_replica_completes(cluster):
    """A modern client's call that a legacy server paused with a question is
    parked on the replica that sent it; the client's retry, carrying the
    signed requestState, lands on another replica, which relays it to the
    owner (the state names it under the shared key), and the call completes."""
    from era_helpers import ModernMcp

    first, second = cluster["replicas"][0], cluster["replicas"][1]
    asker = ModernMcp(f"http://127.0.0.1:{first['port']}/mcp")
    caps = {"elicitation": {}}
    status, answer = asker.request("tools/call", {"name": "trigger-elicitation-request", "arguments": {}},
                                   capabilities=caps)
    assert status == 200 and answer["result"]["resultType"] == "input_required", answer
    (key, _), = answer["result"]["inputRequests"].items()
    before = metric(second["admin"], "mcpwarden_forwarded_requests_total")
    other = ModernMcp(f"http://127.0.0.1:{second['port']}/mcp")
    status, done = other.request("tools/call", {
        "name": "trigger-elicitation-request", "arguments": {},
        "requestState": answer["result"]["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "octocat", "check": True}}},
    }, capabilities=caps)
    text = " ".join(c.get("text", "") for c in done["result"]["content"])
    assert status == 200 and "octocat" in text, done
    assert metric(second["admin"], "mcpwarden_forwarded_requests_total") == before + 1
