"""The official Python MCP SDK client (`mcp` 2.x) through the facade to real servers,
in legacy mode (the initialize handshake; tests/e2e/test_eras.py has the SDK in
its default, modern mode).

Upstreams of server-everything: a stdio child (`stdio`), Streamable HTTP
(`http`), and the bridge's unix socket (`bridge`); Python `mcp-server-time`
over stdio; the paginating stdio fixture (tests/fixtures/stdio_fixture.py) for
cursors, since none of the real servers paginates.
"""
from __future__ import annotations

import json

import anyio
import pytest
from mcp import Client, types
from mcp.shared.exceptions import MCPError

from helpers import (everything_stdio, fixture_module, fixture_stdio, metric, run_async,
                     start_bridge, start_everything_http, time_server)

fixture = fixture_module()

READ_TIMEOUT = 20
# logging/setLevel and resources/subscribe are deprecated in 2026-07-28, not in the
# 2025-11-25 these servers speak.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
UPSTREAMS = ["stdio", "http", "bridge"]
# What the client would answer to roots/list: the facade never asks it.
ROOT_URI = "file:///tmp/mcp-warden-e2e-root"


@pytest.fixture(scope="module", params=UPSTREAMS)
def everything(request, module_facade, start_module_process, tmp_path_factory):
    """A facade in front of server-everything over each upstream transport."""
    kind = request.param
    # The server's scope comes from the facade (`--root`), never the client.
    root = tmp_path_factory.mktemp("root").resolve()
    roots = ["--root", str(root)]
    if kind == "stdio":
        fa = module_facade(upstream=everything_stdio(), extra_args=roots)
    elif kind == "http":
        fa = module_facade(upstream_url=start_everything_http(start_module_process), extra_args=roots)
    else:
        sock = tmp_path_factory.mktemp("bridge") / "everything.sock"
        start_bridge(start_module_process, sock, everything_stdio())
        fa = module_facade(upstream_socket=str(sock), extra_args=roots)
    fa.kind = kind
    fa.root_uri = f"file://{root}"
    return fa


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class Recorder:
    """Client callbacks that record what the server sent."""

    def __init__(self):
        self.notifications: list = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.sampling: list[types.CreateMessageRequestParams] = []
        self.elicitations: list[types.ElicitRequestParams] = []
        self.roots_requests = 0
        self.roots_asked = anyio.Event()

    async def message_handler(self, message):
        self.notifications.append(message)

    async def logging(self, params):
        self.logs.append(params)

    async def sample(self, context, params):
        self.sampling.append(params)
        return types.CreateMessageResult(role="assistant", model="e2e-test-model",
                                         content=types.TextContent(type="text", text="sampled-by-the-e2e-client"))

    async def elicit(self, context, params):
        self.elicitations.append(params)
        return types.ElicitResult(action="accept", content={"name": "Ada Lovelace", "check": True})

    async def roots(self, context):
        self.roots_requests += 1
        self.roots_asked.set()
        return types.ListRootsResult(roots=[types.Root(uri=ROOT_URI, name="e2e root")])

    def of_method(self, method: str) -> list:
        return [n for n in self.notifications if getattr(n, "method", None) == method]

    def client(self, url: str, **kw) -> Client:
        return Client(url, mode="legacy", read_timeout_seconds=READ_TIMEOUT, message_handler=self.message_handler,
                      logging_callback=self.logging, **kw)


async def wait_until(pred, timeout: float = 8, what: str = "condition"):
    with anyio.move_on_after(timeout):
        while not pred():
            await anyio.sleep(0.02)
    assert pred(), f"timed out after {timeout}s waiting for {what}"


# ---------------------------------------------------------------------------
# server-everything, over each upstream transport
# ---------------------------------------------------------------------------
def test_initialize_tools_and_server_notifications(everything):
    rec = Recorder()

    async def body():
        async with rec.client(everything.url) as c:
            assert c.protocol_version == "2025-11-25"
            assert c.server_info.name == "mcp-servers/everything"
            assert c.server_capabilities.tools is not None and c.server_capabilities.tools.list_changed
            assert c.instructions and "Everything" in c.instructions

            listed = await c.list_tools()
            names = {t.name for t in listed.tools}
            assert {"echo", "get-sum", "trigger-long-running-operation", "toggle-simulated-logging"} <= names
            assert listed.next_cursor is None  # server-everything does not paginate
            echo = next(t for t in listed.tools if t.name == "echo")
            assert echo.input_schema["properties"]["message"]["type"] == "string"

            r = await c.call_tool("echo", {"message": "héllo through the facade ✓"})
            assert not r.is_error and text_of(r) == "Echo: héllo through the facade ✓"
            r = await c.call_tool("get-sum", {"a": 20, "b": 22})
            assert "42" in text_of(r)
            r = await c.call_tool("get-structured-content", {"location": "New York"})
            assert r.structured_content and "temperature" in r.structured_content

            # Server-initiated notifications: the conditional tools registered after
            # `initialized` announce themselves with tools/list_changed, and simulated
            # logging sends a log message at once (both outside any request).
            # In Streamable HTTP mode server-everything sends list_changed before any
            # GET stream exists and drops it (a direct client gets none either).
            if everything.kind != "http":
                await wait_until(lambda: rec.of_method("notifications/tools/list_changed"),
                                 what="notifications/tools/list_changed")
            await c.set_logging_level("debug")
            r = await c.call_tool("toggle-simulated-logging", {})
            assert "Started simulated" in text_of(r)
            # (The server also logs that it got the facade's roots: skip that one.)
            simulated = lambda: [l for l in rec.logs if "Roots updated" not in str(l.data)]  # noqa: E731
            await wait_until(simulated, what="a notifications/message log")
            assert simulated()[0].level in ("debug", "info", "notice", "warning", "error",
                                            "critical", "alert", "emergency")
            assert "message" in str(simulated()[0].data)
            r = await c.call_tool("toggle-simulated-logging", {})
            assert "Stopped simulated" in text_of(r)

    run_async(body)


def test_resources_prompts_and_subscription(everything):
    rec = Recorder()

    async def body():
        async with rec.client(everything.url) as c:
            res = await c.list_resources()
            uris = [r.uri for r in res.resources]
            assert any(str(u).startswith("demo://resource/static/document/") for u in uris), uris
            doc = next(str(u) for u in uris if str(u).endswith("features.md"))
            read = await c.read_resource(doc)
            assert "Everything Server" in read.contents[0].text

            templates = await c.list_resource_templates()
            assert any("demo://resource/dynamic/text/" in t.uri_template for t in templates.resource_templates)
            dyn = await c.read_resource("demo://resource/dynamic/text/7")
            assert dyn.contents[0].text and "7" in dyn.contents[0].text

            prompts = await c.list_prompts()
            assert {"simple-prompt", "args-prompt"} <= {p.name for p in prompts.prompts}
            got = await c.get_prompt("args-prompt", {"city": "Lyon", "state": "Rhône"})
            assert "Lyon" in got.messages[0].content.text and "Rhône" in got.messages[0].content.text

            # notifications/resources/updated for a subscribed URI
            await c.subscribe_resource(doc)
            r = await c.call_tool("toggle-subscriber-updates", {})
            assert not r.is_error
            await wait_until(lambda: rec.of_method("notifications/resources/updated"),
                             what="notifications/resources/updated")
            assert str(rec.of_method("notifications/resources/updated")[0].params.uri) == doc
            await c.call_tool("toggle-subscriber-updates", {})

    run_async(body)


def test_long_running_call_with_progress(everything):
    progress: list[tuple] = []

    async def on_progress(p, total, message):
        progress.append((p, total))

    async def body():
        async with Client(everything.url, mode="legacy", read_timeout_seconds=READ_TIMEOUT) as c:
            r = await c.call_tool("trigger-long-running-operation", {"duration": 1, "steps": 4},
                                  progress_callback=on_progress)
            assert "Steps: 4" in text_of(r)
    run_async(body)
    assert progress == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_cancelled_call_then_session_continues(everything):
    progress: list = []
    first_progress = None

    async def body():
        nonlocal first_progress
        first_progress = anyio.Event()
        before = metric(everything.admin_url, "mcpwarden_requests_total", method="tools/call", outcome="cancelled")

        async def on_progress(p, total, message):
            progress.append(p)
            first_progress.set()

        async with Client(everything.url, mode="legacy", read_timeout_seconds=READ_TIMEOUT) as c:
            started = anyio.current_time()
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    async def long_call():
                        await c.call_tool("trigger-long-running-operation", {"duration": 30, "steps": 60},
                                          progress_callback=on_progress)
                        raise AssertionError("the cancelled call completed")
                    tg.start_soon(long_call)
                    await first_progress.wait()  # the call is running upstream
                    scope.cancel()
            assert scope.cancelled_caught
            assert anyio.current_time() - started < 15
            # The session keeps working after the cancellation.
            r = await c.call_tool("echo", {"message": "still here"})
            assert text_of(r) == "Echo: still here"
            r = await c.call_tool("trigger-long-running-operation", {"duration": 0.2, "steps": 2})
            assert "Steps: 2" in text_of(r)
        await wait_until(lambda: metric(everything.admin_url, "mcpwarden_requests_total",
                                        method="tools/call", outcome="cancelled") == before + 1,
                         what="the facade to count the cancelled call")
    run_async(body)
    assert progress and progress[0] == 1


def test_sampling_elicitation_and_roots(everything):
    rec = Recorder()

    async def body():
        async with rec.client(everything.url, sampling_callback=rec.sample,
                              elicitation_callback=rec.elicit, list_roots_callback=rec.roots) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= names

            r = await c.call_tool("trigger-sampling-request", {"prompt": "ping-42", "maxTokens": 17})
            assert len(rec.sampling) == 1
            sent = rec.sampling[0]
            assert sent.max_tokens == 17 and "ping-42" in sent.messages[0].content.text
            assert "sampled-by-the-e2e-client" in text_of(r) and "e2e-test-model" in text_of(r)

            r = await c.call_tool("trigger-elicitation-request", {})
            assert len(rec.elicitations) == 1
            assert "name" in rec.elicitations[0].requested_schema["properties"]
            assert "Ada Lovelace" in text_of(r)

            # server-everything asks for roots (a server-to-client request)
            # after init: the facade answers with its own, never asking the client.
            with anyio.fail_after(8):
                while everything.root_uri not in text_of(r := await c.call_tool("get-roots-list", {})):
                    await anyio.sleep(0.2)
            assert ROOT_URI not in text_of(r) and rec.roots_requests == 0, text_of(r)

    run_async(body)


def test_cancellation_reaches_the_server(facade):
    """The client's notifications/cancelled reaches the server for the right request
    (the fixture stops the matching `sleep` and lists the ids it saw cancelled)."""
    fa = facade(upstream=fixture_stdio())

    async def body():
        async with Client(fa.url, mode="legacy", read_timeout_seconds=READ_TIMEOUT) as c:
            async def state():
                return json.loads(text_of(await c.call_tool("whoami", {})))

            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(c.call_tool, "sleep", {"seconds": 30})
                    while (await state())["sleeping"] != 1:
                        await anyio.sleep(0.05)
                    scope.cancel()
            for _ in range(100):  # the server stops the cancelled sleep
                if (await state())["sleeping"] == 0:
                    break
                await anyio.sleep(0.05)
            assert (await state())["sleeping"] == 0, "the cancelled call kept running upstream"
            cancelled = json.loads(text_of(await c.call_tool("cancelled", {})))
            assert len(cancelled) == 1, cancelled
            assert (await c.call_tool("echo", {"text": "next"})).content[0].text == "next"
    run_async(body)
    assert metric(fa.admin_url, "mcpwarden_requests_total", method="tools/call", outcome="cancelled") == 1


# ---------------------------------------------------------------------------
# Python mcp-server-time over stdio
# ---------------------------------------------------------------------------
def test_mcp_server_time_stdio(facade):
    fa = facade(upstream=time_server())

    async def body():
        async with Client(fa.url, mode="legacy", read_timeout_seconds=READ_TIMEOUT) as c:
            assert c.server_info.name == "mcp-time"
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"get_current_time", "convert_time"}
            r = await c.call_tool("get_current_time", {"timezone": "UTC"})
            assert not r.is_error
            data = json.loads(text_of(r))
            assert data["timezone"] == "UTC" and data["datetime"]
            r = await c.call_tool("convert_time", {"source_timezone": "UTC", "time": "12:00",
                                                   "target_timezone": "Asia/Tokyo"})
            assert json.loads(text_of(r))["target"]["datetime"].endswith("21:00:00+09:00")
            r = await c.call_tool("get_current_time", {"timezone": "Not/AZone"})
            assert r.is_error and "Not/AZone" in text_of(r)
    run_async(body)


# ---------------------------------------------------------------------------
# Pagination (the stdio fixture paginates tools, resources and prompts)
# ---------------------------------------------------------------------------
def test_pagination_follows_cursors(facade):
    """tools/list: the facade follows the upstream cursors itself and answers with
    one complete page (the facade follows pagination), each upstream page fetched with the exact
    opaque cursor the server issued. resources/list and prompts/list: the pages
    and cursors pass through to the client, which follows them."""
    fa = facade(upstream=fixture_stdio())

    async def body():
        async with Client(fa.url, mode="legacy", read_timeout_seconds=READ_TIMEOUT) as c:
            async def all_pages(fetch):
                pages, cursor, seen = [], None, []
                while True:
                    res = await fetch(cursor=cursor)
                    pages.append(res)
                    seen.append(cursor)
                    cursor = res.next_cursor
                    if cursor is None:
                        return pages, seen
                    assert len(pages) < 10, "pagination does not end"

            tool_pages, _ = await all_pages(c.list_tools)
            tools = [t for p in tool_pages for t in p.tools]
            assert [t.name for t in tools] == [
                "echo", "whoami", "sleep", "cancelled", "progress", "crash", "crash_forever"]
            assert len(tool_pages) == 1, "tools/list: the facade serves one complete page"
            # Each tool names the cursor its upstream page was fetched with:
            # exactly the opaque ones the server issued ('/', '+', '=' intact).
            expected = [None, None] + [fixture.make_cursor(o) for o in (2, 2, 4, 4, 6)]
            assert [t.description.rsplit("(page cursor: ", 1)[1][:-1] for t in tools] == \
                [str(e) for e in expected]
            assert any(ch in "".join(expected[2:]) for ch in "/+=")

            res_pages, cursors = await all_pages(c.list_resources)
            assert [len(p.resources) for p in res_pages] == [2, 2, 1]
            assert cursors == [None, fixture.make_cursor(2), fixture.make_cursor(4)]
            assert [str(r.uri) for p in res_pages for r in p.resources] == [f"fixture://item/{i}" for i in range(5)]
            prompt_pages, _ = await all_pages(c.list_prompts)
            assert [len(p.prompts) for p in prompt_pages] == [2, 1]
            assert [p.name for pg in prompt_pages for p in pg.prompts] == ["prompt-0", "prompt-1", "prompt-2"]

            read = await c.read_resource("fixture://item/3")
            assert read.contents[0].text == "content of fixture://item/3"
            got = await c.get_prompt("prompt-2")
            assert got.messages[0].content.text == "this is prompt-2"

            # A cursor the server never issued reaches it and gets its error back.
            with pytest.raises(MCPError) as e:
                await c.list_resources(cursor="bm90LWEtY3Vyc29y")
            assert e.value.code == -32602 and "unknown cursor" in str(e.value)
    run_async(body)
