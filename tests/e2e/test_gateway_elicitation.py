"""Elicitation through the gateway: a backend's server asks its caller for
input in the middle of a tool call, and the question reaches that caller
through the gateway, and the answer goes back to that backend.

    server-everything ─ facade (its policy) ─ gateway ─ alice, bob (at once)

server-everything's `trigger-elicitation-request` sends `elicitation/create`
on its (legacy) session. Its facade holds that session for the caller the
gateway vouched for (a bridge per caller), parks the call, and answers the
gateway's stateless request with `input_required` (a state sealed to that
caller and that request). The gateway passes it on — sealed again, to its own
caller — to a modern caller as `input_required`, and to a legacy (2025-11-25)
session as an `elicitation/create` request on that session, then retries with
the answer. Clients: the official Python SDK in both modes, two callers at
once with different answers, each seeing only its own question and result;
and a raw modern retry carrying another caller's state, refused.
"""
from __future__ import annotations

import anyio
import pytest

from era_helpers import ModernMcp
from gateway_helpers import key_tree, keyed_gateway, two_callers
from helpers import run_async
from warden_helpers import Audit, rpc_error, sdk_client, text_of_result

ALICE, BOB = "gwe-alice-token-0123456789", "gwe-bob-token-0123456789"
GW_ISSUER = "gwe-e2e"
TOOL = "everything__trigger-elicitation-request"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return key_tree(tmp_path_factory, "gwe")


@pytest.fixture(scope="module")
def gateway(module_facade, tree):
    _, front = keyed_gateway(
        module_facade, tree, GW_ISSUER,
        backend=dict(
            roles=[{"role": "user", "issuer": "static", "subjects": ["alice", "bob"]}],
            defaultAction="deny",
            tools=[{"name": "trigger-elicitation-request"}, {"name": "echo"}],
            # The tool carries no read-only hint: it may write.
            sandbox={"writeAllowed": True},
        ),
        front=two_callers(ALICE, BOB, sandbox={"writeAllowed": True}))
    return front


def answering(who: str, asked: list):
    """An elicitation callback that answers with the caller's own name."""
    from mcp import types

    async def callback(_context, params) -> types.ElicitResult:
        asked.append(getattr(params, "message", ""))
        # Both callers' questions are open at once before either is answered.
        await anyio.sleep(0.5)
        return types.ElicitResult(action="accept", content={"name": f"{who}-answer", "check": True})

    return callback


async def call_as(gateway, token: str, who: str, mode: str) -> tuple[str, list, str]:
    asked: list[str] = []
    async with sdk_client(gateway.url, token, mode=mode, elicitation_callback=answering(who, asked)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert TOOL in names, names
        result = await client.call_tool(TOOL, {})
        assert not result.is_error, result
        return client.protocol_version, asked, text_of_result(result)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_two_callers_at_once_each_answer_their_own_elicitation(gateway, tree, mode):
    async def go():
        results: dict[str, tuple] = {}

        async def one(token, who):
            results[who] = await call_as(gateway, token, who, mode)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, ALICE, "alice")
            tg.start_soon(one, BOB, "bob")
        return results

    results = run_async(go)
    for who, other in (("alice", "bob"), ("bob", "alice")):
        version, asked, text = results[who]
        assert (version == "2026-07-28") == (mode == "auto"), version
        # Asked once, by the backend's server; the answer reached that server
        # (its result quotes it), and never the other caller's.
        assert len(asked) == 1 and "Please provide inputs" in asked[0], asked
        assert f"Name: {who}-answer" in text, text
        assert f"{other}-answer" not in text, text
    # The backend ran each call as its own caller.
    audit = Audit(tree / "backend-audit.jsonl")
    for who in ("alice", "bob"):
        audit.wait(lambda r, who=who: r.get("event") == "tool_call" and r.get("subject") == who
                   and r.get("tool") == "trigger-elicitation-request" and r.get("decision") == "allow")


ELICIT = {"elicitation": {"form": {}}}


def test_a_retry_with_another_callers_state_is_refused(gateway):
    """Raw modern requests: alice's `input_required` state, sent by bob, is
    refused by the gateway; alice's own retry completes her call."""
    mcp = ModernMcp(gateway.url)
    try:
        params = {"name": TOOL, "arguments": {}}
        _, first = mcp.request("tools/call", params, capabilities=ELICIT, token=ALICE)
        result = first["result"]
        assert result.get("resultType") == "input_required", first
        (key, question), = result["inputRequests"].items()
        assert question["method"] == "elicitation/create", question
        answer = {key: {"action": "accept", "content": {"name": "alice-raw", "check": True}}}
        retry = {**params, "inputResponses": answer, "requestState": result["requestState"]}
        _, stolen = mcp.request("tools/call", retry, capabilities=ELICIT, token=BOB)
        error = rpc_error(stolen)
        assert (error["code"], error["data"]["reason"]) == (-32602, "request_state_other_caller"), stolen
        assert "alice-raw" not in str(stolen)
        _, done = mcp.request("tools/call", retry, capabilities=ELICIT, token=ALICE)
        assert "Name: alice-raw" in str(done["result"]), done
    finally:
        mcp.close()
