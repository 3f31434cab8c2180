"""A stdio upstream that crashes (tests/fixtures/stdio_fixture.py):

- every request in flight when it dies gets exactly one JSON-RPC error
  (-32603, data.reason "upstream_failed") that says the server exited;
- the facade restarts it with the session's handshake replayed, so the next
  call works without the client re-initializing;
- `mcpwarden_upstream_restarts_total` counts the restart;
- a server that crashes on every start exhausts the restart budget, the
  session ends with a clear error, and later requests get 404;
- requests sent == responses received throughout.
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from helpers import RawMcp, fixture_stdio, metric, parse_body, start_bridge, text_of

IN_FLIGHT = 4


def whoami(s: RawMcp) -> dict:
    return json.loads(text_of(s.call_tool("whoami")))


def assert_upstream_failed(resp: dict, *words: str) -> str:
    assert "error" in resp and "result" not in resp, resp
    err = resp["error"]
    assert err["code"] == -32603, resp
    assert err.get("data", {}).get("reason") == "upstream_failed", resp
    for w in words:
        assert w in err["message"], (w, err["message"])
    return err["message"]


def wait_for(pred, timeout: float = 10, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.mark.parametrize("version,upstream", [
    ("2025-06-18", "stdio"),   # JSON answers
    ("2025-11-25", "stdio"),   # SSE answers (resumable tools/call streams)
    ("2025-06-18", "bridge"),  # the server behind the bridge's unix socket
])
def test_crash_fails_in_flight_calls_once_and_session_continues(facade, start_process, tmp_path,
                                                                  version, upstream):
    if upstream == "bridge":
        sock = tmp_path / "fixture.sock"
        start_bridge(start_process, sock, fixture_stdio())
        fa = facade(upstream_socket=str(sock), extra_args=["--max-restarts", "5"])
    else:
        fa = facade(upstream=fixture_stdio(), extra_args=["--max-restarts", "5"])
    s = RawMcp(fa.url, version=version, timeout=20)
    pool = ThreadPoolExecutor(IN_FLIGHT + 1)
    try:
        s.initialize(client_name="crash-test-client")
        before = whoami(s)
        assert before["initialize_count"] == 1 and before["initialized"] and before["client"] == "crash-test-client"
        restarts0 = metric(fa.admin_url, "mcpwarden_upstream_restarts_total")
        failed0 = metric(fa.admin_url, "mcpwarden_requests_total", method="tools/call", outcome="failed")

        sleepers = [pool.submit(s.call_tool, "sleep", {"seconds": 30}) for _ in range(IN_FLIGHT)]
        wait_for(lambda: whoami(s)["sleeping"] == IN_FLIGHT, what=f"{IN_FLIGHT} sleep calls to be running")
        started = time.monotonic()
        crasher = pool.submit(s.call_tool, "crash", {"delay": 0.1})

        answers = [f.result(timeout=15) for f in [*sleepers, crasher]]
        assert time.monotonic() - started < 10, "in-flight calls waited instead of failing fast"
        what = "exited" if upstream == "stdio" else "closed the connection"
        for a in answers:
            msg = assert_upstream_failed(a, what)
            assert "restart" in msg, msg
        assert len({a["id"] for a in answers}) == IN_FLIGHT + 1

        # The session carries on, on a new process that got the client's handshake.
        after = whoami(s)
        assert after["pid"] != before["pid"]
        assert after["initialize_count"] == 1 and after["initialized"], after
        assert after["client"] == "crash-test-client", after
        assert text_of(s.call_tool("echo", {"text": "alive"})) == "alive"
        assert s.request("ping")["result"] == {}

        assert metric(fa.admin_url, "mcpwarden_upstream_restarts_total") == restarts0 + 1
        assert metric(fa.admin_url, "mcpwarden_requests_total", method="tools/call",
                      outcome="failed") == failed0 + IN_FLIGHT + 1
        assert s.sent == s.answered, (s.sent, s.answered)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        s.close()


def test_repeated_crashes_within_budget_each_recover(facade):
    fa = facade(upstream=fixture_stdio(), extra_args=["--max-restarts", "5"])
    s = RawMcp(fa.url)
    try:
        s.initialize()
        pids = {whoami(s)["pid"]}
        for _ in range(3):
            assert_upstream_failed(s.call_tool("crash"), "exited")
            pids.add(whoami(s)["pid"])
        assert len(pids) == 4
        assert metric(fa.admin_url, "mcpwarden_upstream_restarts_total") == 3
        assert s.sent == s.answered
    finally:
        s.close()



@pytest.mark.parametrize("when", ["start", "initialize"])
def test_crash_loop_exhausts_restart_budget(facade, tmp_path, when):
    flag = tmp_path / "crash-flag"
    fa = facade(upstream=fixture_stdio(), env={"FIXTURE_CRASH_FLAG": str(flag), "FIXTURE_CRASH_WHEN": when},
                extra_args=["--max-restarts", "2", "--drain-timeout-secs", "1"])
    s = RawMcp(fa.url, timeout=5)
    try:
        s.initialize()
        assert whoami(s)["initialize_count"] == 1
        # From now on every new server process exits at start (or on `initialize`).
        first = s.call_tool("crash_forever")
        assert flag.exists()
        assert_upstream_failed(first, "exited")

        # Requests while the facade restarts get errors (never silence) until the
        # budget (2 restarts) is spent and the session ends; then 404. A healthy
        # facade gets there in about a second (backoff 0.1 s + 0.2 s + 3 spawns).
        messages: list[str] = []
        deadline = time.monotonic() + 15
        status = None
        while time.monotonic() < deadline:
            rid = s.next_id()
            t0 = time.monotonic()
            try:
                r = s.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                            "params": {"name": "echo", "arguments": {"text": "x"}}})
            except httpx.TimeoutException:
                pytest.fail(f"a request hung {time.monotonic() - t0:.1f}s with no answer during "
                            f"the crash loop; errors so far: {messages}")
            status = r.status_code
            if status == 404:
                err = r.json()["error"]
                assert err["code"] == -32000 and "session" in err["message"]
                break
            assert status == 200, (status, r.text)
            (msg,) = [m for m in parse_body(r) if m.get("id") == rid]
            assert "error" in msg, f"a call succeeded on a server that crashes on start: {msg}"
            messages.append(msg["error"]["message"])
            time.sleep(0.05)
        assert status == 404, f"the session did not end within 15 s; errors seen: {messages}"
        joined = "\n".join(messages)
        assert "restart budget exhausted" in joined, joined
        assert metric(fa.admin_url, "mcpwarden_upstream_restarts_total") == 3
        assert fa.proc.alive()
    finally:
        s.close()
