"""The agent, run by tests/node inside the node's network namespace: the
official MCP Python SDK connects to a server's URL (the Service's name, which
the caller's /etc/hosts maps to the Service IP: the node has no cluster DNS),
with the bearer token in $MCP_WARDEN_TOKEN as `client-config`'s mcp.json
says, lists the tools, makes the call asked for and the call that must be
refused, and prints one JSON line:

    {"tools": [...], "call": "<text>" | null, "refused": {"code": int, "message": str} | null}

    node_client.py URL [--call TOOL ARGS_JSON] [--refused TOOL ARGS_JSON]
                       [--hold DIR [--then-call TOOL ARGS_JSON]] [--failing TOOL ARGS_JSON]
                       [--also-call TOOL ARGS_JSON]...

--also-call (repeatable) makes further calls in the same session, after the
others ("also": [<text>, ...] in order).

--hold DIR keeps the session open across a change the test makes: after the
above it creates DIR/ready, waits for DIR/go, then lists again and makes the
--then-call call in the same session ("after": {"tools", "call"}).
--failing makes a call that the test makes fail while it is in flight, and
reports its error ("failing": {"code", "message", "reason"}; a result is an
error of the test).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

import anyio  # noqa: E402

from helpers import run_async  # noqa: E402
from warden_helpers import sdk_client, sdk_error, text_of_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--call", nargs=2)
    ap.add_argument("--refused", nargs=2)
    ap.add_argument("--hold")
    ap.add_argument("--then-call", nargs=2)
    ap.add_argument("--failing", nargs=2)
    ap.add_argument("--also-call", nargs=2, action="append", default=[])
    a = ap.parse_args()
    token = os.environ["MCP_WARDEN_TOKEN"]

    async def body():
        async with sdk_client(a.url, token) as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            text = refused = None
            if a.call:
                text = text_of_result(await c.call_tool(a.call[0], json.loads(a.call[1])))
            if a.refused:
                e = await sdk_error(c.call_tool(a.refused[0], json.loads(a.refused[1])))
                refused = {"code": e.error.code, "message": e.error.message}
            seen = {"tools": names, "call": text, "refused": refused}
            if a.failing:
                e = await sdk_error(c.call_tool(a.failing[0], json.loads(a.failing[1])))
                seen["failing"] = {"code": e.error.code, "message": e.error.message,
                                   "reason": (e.error.data or {}).get("reason")}
            if a.also_call:
                seen["also"] = [text_of_result(await c.call_tool(t, json.loads(args))) for t, args in a.also_call]
            if a.hold:
                hold = Path(a.hold)
                (hold / "ready").touch()
                while not (hold / "go").exists():
                    await anyio.sleep(0.2)
                after = {"tools": sorted(t.name for t in (await c.list_tools()).tools), "call": None}
                if a.then_call:
                    after["call"] = text_of_result(await c.call_tool(a.then_call[0], json.loads(a.then_call[1])))
                seen["after"] = after
            return seen

    print(json.dumps(run_async(body, timeout=400 if a.hold else 90)))


if __name__ == "__main__":
    main()
