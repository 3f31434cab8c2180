"""What a stopping facade (SIGTERM) still owes its clients, and that it owes
them no more than that: a call in flight is answered before the process
exits; a held `subscriptions/listen` owes no answer, so it gets the spec's
graceful closure (a `complete` result under its subscription id), audited,
and does not hold the exit to the drain deadline.

    hand-driven modern HTTP client ─ facade ─ stdio server (fixture / server-everything)
"""
from __future__ import annotations

import json
import signal
import socket
import time

import httpx

from conftest import free_port, sidecar_path, wait_http_ok
from era_helpers import MODERN, modern_fixture_stdio, modern_meta
from hardening_helpers import sse_events
from helpers import everything_stdio
from warden_helpers import Audit

# Far longer than any step here takes: an exit near it means the facade
# waited it out instead of ending what it owed nothing.
DRAIN = 30


def start_facade(start_process, tmp_path, upstream: list[str], extra: tuple[str, ...] = ()):
    port, admin = free_port(), free_port()
    audit = Audit(tmp_path / "audit.jsonl")
    proc = start_process([
        str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
        "--drain-timeout-secs", str(DRAIN), "--audit", audit.arg, *extra, "--", *upstream,
    ])
    wait_http_ok(f"http://127.0.0.1:{admin}/readyz", proc=proc)
    return f"http://127.0.0.1:{port}/mcp", proc, audit


def modern_post(method: str, rid, params: dict) -> dict:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": {
        **params.get("_meta", {}), **modern_meta()}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    return {"content": json.dumps(body), "headers": headers}


def read_until_stopped(url: str, proc, request: dict, stop_when: bytes) -> tuple[bytes, float]:
    """Stream one request's answer; SIGTERM the facade once `stop_when` has
    arrived; return everything read and how long the exit took."""
    received, started = b"", None
    with httpx.stream("POST", url, timeout=60, **request) as stream:
        assert stream.status_code == 200, stream.read()
        for chunk in stream.iter_bytes():
            received += chunk
            if started is None and stop_when in received:
                proc.proc.send_signal(signal.SIGTERM)
                started = time.monotonic()
    assert started is not None, received
    deadline = time.monotonic() + DRAIN + 10
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return received, time.monotonic() - started


def test_a_stop_ends_a_held_listen_gracefully(start_process, tmp_path):
    url, proc, audit = start_facade(start_process, tmp_path, modern_fixture_stdio())
    listen = modern_post("subscriptions/listen", "sub-1", {"notifications": {"toolsListChanged": True}})
    received, exit_took = read_until_stopped(url, proc, listen, b"notifications/subscriptions/acknowledged")
    messages = [json.loads(e["data"]) for e in sse_events(received) if e["data"]]
    assert messages[-1] == {"jsonrpc": "2.0", "id": "sub-1", "result": {
        "resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"}}}, messages
    assert exit_took < DRAIN / 2, exit_took
    ended = [r for r in audit.lines() if r["event"] == "stream_ended"]
    assert [(r["method"], r["reason"], r["decision"]) for r in ended] == [
        ("subscriptions/listen", "shutdown", "allow")], ended


def test_a_modern_call_in_flight_when_stopped_is_answered(start_process, tmp_path):
    url, proc, audit = start_facade(start_process, tmp_path, everything_stdio())
    call = modern_post("tools/call", 7, {"name": "trigger-long-running-operation",
                                         "arguments": {"duration": 3, "steps": 3},
                                         "_meta": {"progressToken": "p"}})
    received, exit_took = read_until_stopped(url, proc, call, b"notifications/progress")
    answers = [json.loads(e["data"]) for e in sse_events(received) if e["data"]]
    final = [a for a in answers if a.get("id") == 7]
    assert final and final[0]["result"]["content"], answers
    assert exit_took < DRAIN / 2, exit_took
    calls = [r for r in audit.lines() if r["event"] == "tool_call"]
    assert [r["decision"] for r in calls] == ["allow"], calls


def test_a_connection_that_sent_nothing_does_not_hold_the_stop(start_process, tmp_path):
    """A connection that has not sent its first byte owes nothing and is
    owed nothing: the stop drops it instead of waiting out its header
    timeout (set to the drain deadline here, so waiting would show)."""
    url, proc, _ = start_facade(start_process, tmp_path, everything_stdio(),
                                extra=("--header-timeout-secs", str(DRAIN)))
    port = int(url.split(":")[2].split("/")[0])
    with socket.create_connection(("127.0.0.1", port)) as idle:
        time.sleep(0.3)  # accepted, waiting for its first byte
        proc.proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        while proc.alive() and time.monotonic() - started < DRAIN + 10:
            time.sleep(0.05)
        took = time.monotonic() - started
        idle.settimeout(5)
        assert idle.recv(1) == b""  # closed by the facade, nothing sent
    assert took < DRAIN / 2, took
