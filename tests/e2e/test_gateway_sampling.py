"""Sampling through the gateway: a backend's server asks its caller's model
for a completion in the middle of a tool call, the request reaches that
caller through the gateway, and the caller's answer goes back to that backend.

    server-everything ─ facade (its policy) ─ gateway ─ alice, bob (at once)

server-everything's `trigger-sampling-request` sends `sampling/createMessage`
on its (legacy) session and quotes the answer in its result. It takes the
path elicitation takes: the backend's facade holds that session for the
caller the gateway vouched for and answers the gateway's stateless request
with `input_required`; the gateway passes it on, sealed to its own caller —
to a modern (2026-07-28) caller as `input_required`, to a legacy (2025-11-25)
session as a `sampling/createMessage` request on that session. Clients: the
official Python SDK in both modes, alice and bob at once, each answering with
their own text and seeing only their own request and result.
"""
from __future__ import annotations

import anyio
import pytest

from gateway_helpers import key_tree, keyed_gateway, two_callers
from helpers import run_async
from warden_helpers import Audit, sdk_client, text_of_result

ALICE, BOB = "gws-alice-token-0123456789", "gws-bob-token-0123456789"
GW_ISSUER = "gws-e2e"
TOOL = "everything__trigger-sampling-request"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return key_tree(tmp_path_factory, "gws")


@pytest.fixture(scope="module")
def gateway(module_facade, tree):
    _, front = keyed_gateway(
        module_facade, tree, GW_ISSUER,
        backend=dict(
            roles=[{"role": "user", "issuer": "static", "subjects": ["alice", "bob"]}],
            defaultAction="deny",
            tools=[{"name": "trigger-sampling-request"}, {"name": "echo"}],
            # The tool carries no read-only hint: it may write.
            sandbox={"writeAllowed": True},
        ),
        front=two_callers(ALICE, BOB, sandbox={"writeAllowed": True}))
    return front


def answering(who: str, asked: list):
    """A sampling callback that answers with the caller's own text."""
    from mcp import types

    async def callback(_context, params) -> types.CreateMessageResult:
        asked.append(" ".join(getattr(m.content, "text", "") for m in params.messages))
        # Both callers' requests are open at once before either is answered.
        await anyio.sleep(0.5)
        return types.CreateMessageResult(role="assistant", model=f"{who}-model",
                                         content=types.TextContent(type="text", text=f"{who}-answer"))

    return callback


async def call_as(gateway, token: str, who: str, mode: str) -> tuple[str, list, str]:
    asked: list[str] = []
    async with sdk_client(gateway.url, token, mode=mode, sampling_callback=answering(who, asked)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert TOOL in names, names
        result = await client.call_tool(TOOL, {"prompt": f"{who}-prompt", "maxTokens": 20})
        assert not result.is_error, result
        return client.protocol_version, asked, text_of_result(result)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_two_callers_at_once_each_answer_their_own_sampling_request(gateway, tree, mode):
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
        # Asked once, with this caller's own prompt; the answer reached the
        # server (its result quotes it), and never the other caller's.
        assert len(asked) == 1 and f"{who}-prompt" in asked[0], asked
        assert f"{other}-prompt" not in asked[0], asked
        assert f"{who}-answer" in text and f"{who}-model" in text, text
        assert f"{other}-answer" not in text and f"{other}-model" not in text, text
    # The backend ran each call as its own caller.
    audit = Audit(tree / "backend-audit.jsonl")
    for who in ("alice", "bob"):
        audit.wait(lambda r, who=who: r.get("event") == "tool_call" and r.get("subject") == who
                   and r.get("tool") == "trigger-sampling-request" and r.get("decision") == "allow")
