"""Budgets and deadlines with the policy fixture (tests/fixtures/policy_fixture.py):
calls per session, rate limits (the whole server's and one tool's), concurrency,
and a timeout that cancels the call upstream too.
"""
from __future__ import annotations

import json
import time

import anyio
import pytest

from helpers import run_async
from warden_helpers import fixture_facade, policy_doc, sdk_client, sdk_error, text_of_result

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


def test_code_32005_calls_per_session(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}], limits={"maxCallsPerSession": 3}))

    async def body():
        async with sdk_client(fa.url) as c:
            for i in range(3):
                assert text_of_result(await c.call_tool("echo", {"text": f"call {i}"})) == f"call {i}"
            e = await sdk_error(c.call_tool("echo", {"text": "one too many"}))
            assert e.code == -32005 and e.data["reason"] == "calls_per_session_exceeded", e.error
            assert (e.data["limit"], e.data["observed"]) in ((3, 4), (3, 3)), e.data

    run_async(body)


def test_timeout_cancels_upstream(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}},
        tools=[{"name": "sleep", "limits": {"callTimeoutSeconds": 1}}, {"name": "cancelled"}]))

    async def body():
        async with sdk_client(fa.url) as c:
            t0 = time.monotonic()
            e = await sdk_error(c.call_tool("sleep", {"seconds": 15}))
            assert e.code == -32007 and time.monotonic() - t0 < 5, e.error
            ids: list = []
            with anyio.move_on_after(5):
                while not ids:
                    ids = json.loads(text_of_result(await c.call_tool("cancelled", {})))
                    await anyio.sleep(0.1)
            assert len(ids) == 1, f"upstream got no notifications/cancelled: {ids}"

    run_async(body)
    # the raw upstream traffic: one cancellation naming the sleep request's upstream id
    msgs = [json.loads(line) for line in fa.log.read_text().splitlines() if line.strip()]
    sleep_ids = [m["id"] for m in msgs if m.get("method") == "tools/call" and m["params"]["name"] == "sleep"]
    cancels = [m for m in msgs if m.get("method") == "notifications/cancelled"]
    assert len(sleep_ids) == 1 and [m["params"]["requestId"] for m in cancels] == sleep_ids, msgs


def test_rate_limit_budget(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}], limits={"callsPerMinute": 2}))

    async def body():
        async with sdk_client(fa.url) as c:
            answers = []
            for i in range(4):
                try:
                    answers.append(text_of_result(await c.call_tool("echo", {"text": f"n{i}"})))
                except Exception as e:  # noqa: BLE001 - MCPError expected
                    answers.append(e)
            assert answers[:2] == ["n0", "n1"], answers  # the bucket starts full (2)
            for refused in answers[2:]:
                assert not isinstance(refused, str), f"4 calls at once under callsPerMinute: 2: {answers}"
                assert refused.code == -32005 and refused.data["reason"] == "rate_limited", refused.error
                assert refused.data["limit"] == 2

    run_async(body)


def test_per_tool_rate_limit_does_not_throttle_other_tools(facade, tmp_path):
    """Regression: one session bucket sized by the calling tool's limit let a
    low per-tool callsPerMinute throttle every other tool."""
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}},
        tools=[{"name": "echo", "limits": {"callsPerMinute": 2}}, {"name": "mutable"}]))

    async def body():
        async with sdk_client(fa.url) as c:
            for i in range(3):
                try:
                    await c.call_tool("echo", {"text": f"n{i}"})
                except Exception:  # noqa: BLE001 - the third is rate limited, as it should be
                    pass
            # mutable has the profile-wide default (600/min) and has not been called yet
            assert text_of_result(await c.call_tool("mutable", {})) == "mutable ok"

    run_async(body)


def test_concurrency_budget(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}}, tools=[{"name": "sleep", "limits": {"maxConcurrentCalls": 1}}]))

    async def body():
        results: list = []
        async with sdk_client(fa.url) as c:
            async def sleeper(delay):
                await anyio.sleep(delay)
                try:
                    results.append(text_of_result(await c.call_tool("sleep", {"seconds": 2.5})))
                except Exception as e:  # noqa: BLE001
                    results.append(e)
            async with anyio.create_task_group() as tg:
                tg.start_soon(sleeper, 0)
                tg.start_soon(sleeper, 0.5)
        ok = [r for r in results if isinstance(r, str)]
        refused = [r for r in results if not isinstance(r, str)]
        assert len(ok) == 1 and len(refused) == 1, results
        assert refused[0].code == -32005 and refused[0].data["reason"] == "concurrency_exceeded", refused[0]
        assert (refused[0].data["limit"], refused[0].data["observed"]) == (1, 2), refused[0].data

    run_async(body)
