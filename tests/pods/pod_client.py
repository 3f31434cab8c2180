"""The agent, run by test_pods.py inside a pod's network namespace (nsenter):
wait for the facade's /readyz, then the official MCP Python SDK lists the
tools (and makes one call when asked) with the bearer token given, and prints
one JSON line: {"tools": [...], "call": "<text>" | null}.

    pod_client.py HOST PORT TOKEN [TOOL ARGS_JSON]

HOST is the server's Service name, which the caller's /etc/hosts maps to the
pod's address (the facade refuses unknown Host headers, so the name matters).
"""
from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from helpers import run_async  # noqa: E402
from warden_helpers import sdk_client, text_of_result  # noqa: E402


def main() -> None:
    host, port, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    call = (sys.argv[4], json.loads(sys.argv[5])) if len(sys.argv) > 5 else None
    deadline = time.monotonic() + float(os.environ.get("READY_TIMEOUT", "60"))
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:9090/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("the facade never became ready")
        time.sleep(0.2)

    async def body():
        async with sdk_client(f"http://{host}:{port}/mcp", token) as c:
            names = sorted(t.name for t in (await c.list_tools()).tools)
            text = None
            if call:
                result = await c.call_tool(call[0], call[1])
                text = text_of_result(result)
            return {"tools": names, "call": text}

    print(json.dumps(run_async(body, timeout=90)))


if __name__ == "__main__":
    main()
