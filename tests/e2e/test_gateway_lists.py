"""A backend's own prompt and resource list changes reach the gateway's
callers, as its tool list changes do: the gateway offers `listChanged` for
all three lists, and a backend's `notifications/prompts/list_changed` or
`notifications/resources/list_changed` reaches a modern caller holding
`subscriptions/listen` (the official Python SDK in 2026-07-28 mode) and a
legacy session (the SDK in 2025-11-25 mode), each as it asked: a modern
caller who asked only for tool changes hears neither.

    modern fixture server ─ facade (its policy) ─ gateway ─ clients

A resource's update (`notifications/resources/updated`) reaches only the
caller subscribed to it, under the gateway's URI (`fx+test://…`), in both
eras, while another caller listening on the same gateway hears nothing of it.

The fixture's `test_trigger_prompt_change`, `test_trigger_resource_change` and
`test_trigger_resource_update` tools announce the change on every open
subscription that asked for it.
"""
from __future__ import annotations

import anyio
import pytest

from era_helpers import modern_fixture_http
from gateway_helpers import gateway_args
from helpers import run_async
from warden_helpers import policy_doc, sdk_client

HEAR_WITHIN = 10
TRIGGERS = ["test_trigger_tool_change", "test_trigger_prompt_change", "test_trigger_resource_change",
            "test_trigger_resource_update"]


def open_policy(**fields) -> dict:
    return policy_doc(auth={"anonymous": {"role": "user"}}, defaultAction="deny", **fields)


@pytest.fixture
def gateway(start_process, facade):
    server = modern_fixture_http(start_process)
    tools = [{"name": t} for t in TRIGGERS]
    allow_all = {"prompts": {"defaultAction": "allow"}, "resources": {"defaultAction": "allow"}}
    # The fixture's tools carry no read-only hints: they may write.
    backend = facade(upstream_url=server,
                     policy=open_policy(tools=tools, sandbox={"writeAllowed": True}, **allow_all))
    return facade(policy=open_policy(tools=[{"name": f"fx__{t}"} for t in TRIGGERS],
                                     sandbox={"writeAllowed": True}, **allow_all),
                  extra_args=gateway_args({"fx": backend.url}))


@pytest.mark.parametrize("kind", ["Prompt", "Resource"])
def test_a_backends_list_change_reaches_a_modern_subscriber_who_asked(gateway, kind):
    async def go():
        got: list[str] = []
        async with sdk_client(gateway.url, mode="auto") as client:
            caps = client.server_capabilities
            await client.list_tools()
            async with client.listen(prompts_list_changed=True, resources_list_changed=True) as sub:
                honored = sub.honored
                await client.call_tool(f"fx__test_trigger_{kind.lower()}_change", {})
                with anyio.move_on_after(HEAR_WITHIN):
                    async for event in sub:
                        got.append(type(event).__name__)
                        if kind in got[-1]:
                            break
        return caps, honored, got

    caps, honored, got = run_async(go)
    # A client that asks only for what the server offers asks for these.
    assert caps.prompts and caps.prompts.list_changed, caps
    assert caps.resources and caps.resources.list_changed, caps
    assert honored.prompts_list_changed and honored.resources_list_changed, honored
    assert any(kind in g for g in got), got


def test_a_modern_subscriber_hears_only_the_changes_it_asked_for(gateway):
    async def go():
        got: list[str] = []
        async with sdk_client(gateway.url, mode="auto") as client:
            await client.list_tools()
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("fx__test_trigger_prompt_change", {})
                await client.call_tool("fx__test_trigger_resource_change", {})
                # The tool change comes after the others: once it is heard,
                # anything else would have been heard first.
                await client.call_tool("fx__test_trigger_tool_change", {})
                with anyio.move_on_after(HEAR_WITHIN):
                    async for event in sub:
                        got.append(type(event).__name__)
                        if "Tool" in got[-1]:
                            break
        return got

    got = run_async(go)
    assert got and "Tool" in got[-1], got
    assert not any("Prompt" in g or "Resource" in g for g in got), got


@pytest.mark.parametrize("kind,method", [("prompt", "prompts/list_changed"),
                                         ("resource", "resources/list_changed")])
def test_a_backends_list_change_reaches_a_legacy_session(gateway, kind, method):
    async def go():
        got: list[str] = []
        class_name = {"prompt": "PromptListChanged", "resource": "ResourceListChanged"}[kind]

        def heard() -> bool:
            return any(method in g or class_name in g for g in got)

        async def handler(message):
            got.append(repr(message))

        async with sdk_client(gateway.url, message_handler=handler) as client:
            caps = client.server_capabilities
            await client.list_tools()
            await client.call_tool(f"fx__test_trigger_{kind}_change", {})
            with anyio.move_on_after(HEAR_WITHIN):
                while not heard():
                    await anyio.sleep(0.1)
        return caps, heard(), got

    caps, heard, got = run_async(go)
    assert caps.prompts and caps.prompts.list_changed, caps
    assert caps.resources and caps.resources.list_changed, caps
    assert heard, got


# --- a subscribed resource's update reaches only the caller who subscribed ---
WATCHED = "fx+test://watched-resource"


def test_a_resource_update_reaches_only_the_modern_subscriber_of_it(gateway):
    """Two modern callers listen; only one subscribed to the resource. The
    gateway's URI is the backend's URI under the backend's name both ways."""
    async def go():
        got: dict[str, list] = {"subscriber": [], "other": []}

        async def collect(sub, who: str, until: str):
            with anyio.move_on_after(HEAR_WITHIN):
                async for event in sub:
                    got[who].append(event)
                    if until in type(event).__name__:
                        return

        async with sdk_client(gateway.url, mode="auto") as a, sdk_client(gateway.url, mode="auto") as b:
            await a.list_tools()
            async with a.listen(resource_subscriptions=[WATCHED]) as sub_a, \
                    b.listen(tools_list_changed=True) as sub_b:
                honored = sub_a.honored
                await a.call_tool("fx__test_trigger_resource_update", {})
                await collect(sub_a, "subscriber", "Resource")
                # After the update, a tool change: once b hears it, b would
                # have heard the update first.
                await b.call_tool("fx__test_trigger_tool_change", {})
                await collect(sub_b, "other", "Tool")
        return honored, got

    honored, got = run_async(go)
    assert list(honored.resource_subscriptions or []) == [WATCHED], honored
    updates = [e for e in got["subscriber"] if "Resource" in type(e).__name__]
    assert [getattr(e, "uri", None) for e in updates] == [WATCHED], got
    assert got["other"] and all("Tool" in type(e).__name__ for e in got["other"]), got


def test_a_resource_update_reaches_only_the_legacy_session_subscribed_to_it(gateway):
    async def go():
        got: dict[str, list[str]] = {"subscriber": [], "other": []}

        def handler(who: str):
            async def handle(message):
                got[who].append(repr(message))
            return handle

        async def until(who: str, what: str) -> None:
            with anyio.move_on_after(HEAR_WITHIN):
                while not any(what in g for g in got[who]):
                    await anyio.sleep(0.1)

        async with sdk_client(gateway.url, message_handler=handler("subscriber")) as a, \
                sdk_client(gateway.url, message_handler=handler("other")) as b:
            await a.list_tools()
            await b.list_tools()
            await a.subscribe_resource(WATCHED)
            await a.call_tool("fx__test_trigger_resource_update", {})
            await until("subscriber", "ResourceUpdated")
            await b.call_tool("fx__test_trigger_tool_change", {})
            await until("other", "ToolListChanged")
        return got

    got = run_async(go)
    assert any("ResourceUpdated" in g and WATCHED in g for g in got["subscriber"]), got
    assert any("ToolListChanged" in g for g in got["other"]), got
    assert not any("ResourceUpdated" in g for g in got["other"]), got
