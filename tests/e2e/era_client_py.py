"""The official Python SDK (`mcp` 2.3) as a modern client, driving one server
through the facade: the Python column of tests/e2e/test_eras.py's matrix.

    python era_client_py.py --url URL [--token T] --profile JSON

Same profile and report as ts/era-client.mjs (one JSON line on stdout).
"""
from __future__ import annotations

import argparse
import json
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

steps: dict[str, dict] = {}
elicitations: list[str] = []


async def step(name: str, fn) -> None:
    try:
        steps[name] = {"ok": True, **(await fn())}
    except MCPError as e:
        steps[name] = {"ok": False, "error": str(e), "code": e.error.code}
    except Exception as e:  # noqa: BLE001 - the report says what failed
        steps[name] = {"ok": False, "error": f"{type(e).__name__}: {e}", "code": None}


def text_of(result) -> str:
    return " ".join(getattr(c, "text", "") or "" for c in result.content)


async def accept(_context, params) -> types.ElicitResult:
    elicitations.append(getattr(params, "message", ""))
    schema = getattr(params, "requested_schema", None) or getattr(params, "requestedSchema", None) or {}
    if hasattr(schema, "model_dump"):
        schema = schema.model_dump(by_alias=True)
    content = {}
    for key, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        content[key] = True if kind == "boolean" else 1 if kind in ("number", "integer") else "octocat"
    return types.ElicitResult(action="accept", content=content)


async def main(args) -> None:
    profile = json.loads(args.profile)
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=60))
    transport = streamable_http_client(args.url, http_client=http)
    async with Client(transport, mode="auto", elicitation_callback=accept, read_timeout_seconds=20,
                      cache=None) as client:
        version = client.protocol_version

        async def tools():
            listed = await client.list_tools()
            r = await client.call_tool(profile["tool"]["name"], profile["tool"].get("args", {}))
            return {"tools": [t.name for t in listed.tools], "text": text_of(r), "isError": bool(r.is_error)}

        await step("tools", tools)

        if "progress" in profile:
            async def progress():
                seen = []

                async def on_progress(p, total, message):
                    seen.append(p)

                r = await client.call_tool(profile["progress"]["name"], profile["progress"].get("args", {}),
                                           progress_callback=on_progress)
                return {"progress": seen, "text": text_of(r)}

            await step("progress", progress)

        if "resource" in profile:
            async def resources():
                listed = await client.list_resources()
                r = await client.read_resource(profile["resource"])
                return {"listed": [str(x.uri) for x in listed.resources], "contents": [str(c.uri) for c in r.contents]}

            await step("resources", resources)

        if "prompt" in profile:
            async def prompts():
                listed = await client.list_prompts()
                r = await client.get_prompt(profile["prompt"]["name"], profile["prompt"].get("args", {}))
                return {"listed": [p.name for p in listed.prompts], "messages": len(r.messages)}

            await step("prompts", prompts)

        if "elicit" in profile:
            async def elicitation():
                before = len(elicitations)
                r = await client.call_tool(profile["elicit"]["name"], profile["elicit"].get("args", {}))
                return {"asked": len(elicitations) - before, "text": text_of(r), "isError": bool(r.is_error)}

            await step("elicitation", elicitation)

        if "slow" in profile:
            async def cancellation():
                started = anyio.current_time()
                aborted = True
                with anyio.move_on_after(0.5):
                    await client.call_tool(profile["slow"]["name"], profile["slow"].get("args", {}))
                    aborted = False
                took = int((anyio.current_time() - started) * 1000)
                after = await client.call_tool(profile["tool"]["name"], profile["tool"].get("args", {}))
                return {"aborted": aborted, "took": took, "after": text_of(after)}

            await step("cancellation", cancellation)

        if "subscribe" in profile:
            async def subscriptions():
                sub_filter = profile["subscribe"]["filter"]
                want = profile["subscribe"]["expect"]
                got: list[str] = []
                async with client.listen(
                    tools_list_changed=bool(sub_filter.get("toolsListChanged")),
                    resource_subscriptions=sub_filter.get("resourceSubscriptions", ()),
                ) as sub:
                    trigger = profile["subscribe"]["trigger"]
                    await client.call_tool(trigger["name"], trigger.get("args", {}))
                    with anyio.move_on_after(profile["subscribe"].get("wait_ms", 8000) / 1000):
                        async for event in sub:
                            name = type(event).__name__
                            got.append(name)
                            if (want == "notifications/tools/list_changed" and "Tool" in name) or (
                                    want == "notifications/resources/updated" and "Resource" in name):
                                break
                notified = any(("Tool" in g) if "tools" in want else ("Resource" in g) for g in got)
                return {"notified": notified, "got": got}

            await step("subscriptions", subscriptions)

        if "denied" in profile:
            async def denied():
                try:
                    r = await client.call_tool(profile["denied"]["name"], profile["denied"].get("args", {}))
                    return {"refused": False, "isError": bool(r.is_error), "text": text_of(r)}
                except MCPError as e:
                    return {"refused": True, "code": e.error.code, "message": e.error.message}

            await step("denied", denied)

    print(json.dumps({"steps": steps, "version": version}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token")
    parser.add_argument("--profile", required=True)
    anyio.run(main, parser.parse_args())
    sys.exit(0)
