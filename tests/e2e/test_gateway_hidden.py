"""`prompts/get` and `resources/read` through the gateway of what the caller
may not see: a prompt or resource the backend hides from this caller gets the
very refusal a name no backend serves gets, so the answer never says what
exists for others.

    server-everything ─ facade (its policy, its roles) ─ gateway ─ alice, bob

At the backend alice is a user and bob a viewer; `simple-prompt` and the
dynamic text resources need a user there. The gateway's own policy lets
every prompt and resource through, so the hiding is the backend's. Both
eras: raw modern (2026-07-28) requests, where the JSON-RPC error objects are
compared whole with the name taken out, and the official Python SDK in a
legacy (2025-11-25) session.
"""
from __future__ import annotations

import pytest

from era_helpers import ModernMcp
from gateway_helpers import key_tree, keyed_gateway, two_callers
from helpers import run_async
from warden_helpers import rpc_error, sdk_client, sdk_error

ALICE, BOB = "gwh-alice-token-0123456789", "gwh-bob-token-0123456789"
GW_ISSUER = "gwh-e2e"
PROMPT = "everything__simple-prompt"
RESOURCE = "everything+demo://resource/dynamic/text/1"
# Names nobody serves: no such prompt at the backend, no such backend.
UNKNOWN_PROMPTS = ["everything__no-such-prompt", "nobody__simple-prompt"]
UNKNOWN_RESOURCES = ["nobody+demo://resource/dynamic/text/1", "missing+file:///etc/hostname"]


@pytest.fixture(scope="module")
def gateway(module_facade, tmp_path_factory):
    tree = key_tree(tmp_path_factory, "gwh")
    _, front = keyed_gateway(
        module_facade, tree, GW_ISSUER,
        backend=dict(
            roles=[{"role": "user", "issuer": "static", "subjects": ["alice"]},
                   {"role": "viewer", "issuer": "static", "subjects": ["bob"]}],
            defaultAction="deny",
            tools=[{"name": "echo", "requiredRole": "viewer"}],
            prompts={"rules": [{"name": "simple-prompt", "requiredRole": "user"}]},
            resources={"rules": [{"uri": "demo://resource/dynamic/text/*", "requiredRole": "user"}]},
        ),
        front=two_callers(ALICE, BOB, resources={"defaultAction": "allow"}, prompts={"defaultAction": "allow"}))
    return front


def without(error: dict, name: str) -> dict:
    """The error object with the name the caller sent taken out of its message."""
    return {**error, "message": error["message"].replace(name, "<name>")}


def modern_refusals(gateway, method: str, field: str, names: list[str]) -> list[dict]:
    mcp = ModernMcp(gateway.url)
    try:
        return [without(rpc_error(mcp.request(method, {field: n}, token=BOB)[1]), n) for n in names]
    finally:
        mcp.close()


def test_alice_may_read_what_bob_is_refused(gateway):
    mcp = ModernMcp(gateway.url)
    try:
        _, prompt = mcp.request("prompts/get", {"name": PROMPT}, token=ALICE)
        assert prompt["result"]["messages"], prompt
        _, read = mcp.request("resources/read", {"uri": RESOURCE}, token=ALICE)
        assert read["result"]["contents"][0]["uri"] == RESOURCE, read
    finally:
        mcp.close()


def test_a_hidden_prompt_is_refused_as_an_unknown_one(gateway):
    hidden, *unknown = modern_refusals(gateway, "prompts/get", "name", [PROMPT, *UNKNOWN_PROMPTS])
    assert hidden["code"] == -32004 and hidden["data"]["reason"] == "prompt_not_available", hidden
    for other in unknown:
        assert other == hidden
    # The backend's own name for the prompt never comes back.
    assert "simple-prompt" not in hidden["message"]


def test_a_hidden_resource_is_refused_as_an_unknown_one(gateway):
    hidden, *unknown = modern_refusals(gateway, "resources/read", "uri", [RESOURCE, *UNKNOWN_RESOURCES])
    assert hidden["code"] == -32004 and hidden["data"]["reason"] == "resource_not_available", hidden
    for other in unknown:
        assert other == hidden
    assert "demo://" not in str(hidden)


def test_a_legacy_session_gets_the_same_refusals(gateway):
    async def go():
        async with sdk_client(gateway.url, BOB) as client:
            prompts = [await sdk_error(client.get_prompt(n)) for n in [PROMPT, *UNKNOWN_PROMPTS]]
            resources = [await sdk_error(client.read_resource(n)) for n in [RESOURCE, *UNKNOWN_RESOURCES]]
            return prompts, resources

    prompts, resources = run_async(go)
    for errors, names, reason in ((prompts, [PROMPT, *UNKNOWN_PROMPTS], "prompt_not_available"),
                                  (resources, [RESOURCE, *UNKNOWN_RESOURCES], "resource_not_available")):
        seen = [(e.error.code, e.error.message.replace(n, "<name>"), e.error.data) for e, n in zip(errors, names)]
        assert seen[0][0] == -32004 and seen[0][2]["reason"] == reason, seen[0]
        assert all(s == seen[0] for s in seen), seen
