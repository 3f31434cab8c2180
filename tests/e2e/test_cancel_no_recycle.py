"""A client's cancellation never restarts the server: the official
`server-everything` over stdio (the TypeScript SDK, which never answers a
request it was told to cancel) behind the facade, a legacy client that
cancels a long-running call.

    server-everything (stdio) ─ facade ─ hand-driven legacy HTTP client

The server owes no answer to a cancelled call, so its silence past the
cancel grace is no reason to replace it: the same process keeps serving the
session. The call keeps its concurrency slot for as long as it could have
run uncancelled (the tool's `callTimeoutSeconds`), so cancelling starts no
more work than waiting would, and then it is let go.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import RawMcp, everything_stdio, metric, text_of
from warden_helpers import policy_doc, rpc_error

# The tool's limit: what an uncancelled call may take, so what a cancelled
# one holds its slot for. Longer than the grace plus a check's worth.
LIMIT = 6
# How long the facade waits for a call past its limit before replacing the
# process; short here, so the tests outwait it well inside LIMIT.
GRACE = 1
LONG = "trigger-long-running-operation"


@pytest.fixture
def fa(facade):
    policy = policy_doc(auth={"anonymous": {"role": "user"}}, limits={"maxConcurrentCalls": 1},
                        tools=[{"name": LONG, "limits": {"callTimeoutSeconds": LIMIT}}, {"name": "echo"}])
    return facade(upstream=everything_stdio(), policy=policy, extra_args=["--cancel-grace-secs", str(GRACE)])


def start_and_cancel(s: RawMcp, pool: ThreadPoolExecutor, rid: int) -> float:
    """Start a long call (it would run past the limit) and cancel it: when it started."""
    started = time.monotonic()
    pool.submit(s.post, {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                         "params": {"name": LONG, "arguments": {"duration": LIMIT + 4, "steps": 5}}})
    time.sleep(1)
    cancel = s.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": rid, "reason": "changed my mind"}})
    assert cancel.status_code == 202, (cancel.status_code, cancel.text)
    return started


def echo_when_free(s: RawMcp, until: float) -> tuple[dict, float]:
    """Call echo until the session's slot is free (or `until`): its answer, and when."""
    while True:
        answer = s.call_tool("echo", {"message": "after"})
        if "result" in answer or time.monotonic() > until:
            return answer, time.monotonic()
        time.sleep(0.3)


def test_a_cancelled_call_past_the_grace_does_not_recycle_the_server(fa):
    s = RawMcp(fa.url, timeout=30)
    s.initialize()
    with ThreadPoolExecutor(1) as pool:
        started = start_and_cancel(s, pool, 40)
        # Past the grace: a conforming server has said nothing, as it should.
        time.sleep(GRACE + 2)
        assert metric(fa.admin_url, "mcpwarden_upstream_recycled_total") == 0
        # The session is served meanwhile (tools/list takes no call slot).
        listed = s.request("tools/list", {})
        assert any(t["name"] == "echo" for t in listed["result"]["tools"]), listed
        answer, _ = echo_when_free(s, started + LIMIT + 10)
    assert text_of(answer) == "Echo: after", answer
    # Never replaced, nor restarted: the same process served it all.
    assert metric(fa.admin_url, "mcpwarden_upstream_recycled_total") == 0
    assert metric(fa.admin_url, "mcpwarden_upstream_restarts_total") == 0


def test_a_cancelled_call_keeps_its_slot_until_its_limit_then_frees_it(fa):
    s = RawMcp(fa.url, timeout=30)
    s.initialize()
    with ThreadPoolExecutor(1) as pool:
        started = start_and_cancel(s, pool, 41)
        # Past the grace, inside the limit: cancelling bought the caller no
        # second call (and the slot was not freed by replacing the server).
        time.sleep(GRACE + 1)
        assert time.monotonic() < started + LIMIT - 1, "the machine is too slow for this test's timing"
        err = rpc_error(s.call_tool("echo", {"message": "too soon"}))
        assert err["code"] == -32005 and err["data"]["reason"] == "concurrency_exceeded", err
        # At the limit the call is let go, unanswered, and the slot is free.
        answer, served_at = echo_when_free(s, started + LIMIT + 10)
    assert text_of(answer) == "Echo: after", answer
    assert served_at >= started + LIMIT - 0.5, f"served {served_at - started:.1f}s after the call, before its limit"
    assert metric(fa.admin_url, "mcpwarden_upstream_recycled_total") == 0
