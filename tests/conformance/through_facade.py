#!/usr/bin/env python3
"""A conformance *client* command with the facade in between.

The conformance CLI runs `<command> <mock server URL>`; this starts the
facade (MCP_WARDEN_SIDECAR, else target/debug/mcp-warden-sidecar) with that
URL as its upstream, waits until it is ready, then runs the real SDK client
(sdk-client.mjs, TypeScript SDK 2.4) against the facade, and exits with the
client's status. What the mock server observes is therefore what the facade
sends it on the client's behalf.

    node .../conformance-next/dist/index.js client \
        --command "/abs/.venv/bin/python /abs/tests/conformance/through_facade.py" --scenario X
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    server_url = sys.argv[-1]
    sidecar = os.environ.get("MCP_WARDEN_SIDECAR") or str(ROOT / "target" / "debug" / "mcp-warden-sidecar")
    port, admin = free_port(), free_port()
    log = open(os.environ.get("MCP_WARDEN_FACADE_LOG", os.devnull), "ab")
    facade = subprocess.Popen([sidecar, "run", "--listen", f"127.0.0.1:{port}", "--admin-listen",
                               f"127.0.0.1:{admin}", "--upstream-url", server_url, "--audit", "off"],
                              stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{admin}/readyz", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or facade.poll() is not None:
                print("the facade did not become ready", file=sys.stderr)
                return 3
            time.sleep(0.05)
        node = os.environ.get("MCP_CONFORMANCE_CLIENT_NODE", "node")
        return subprocess.call([node, str(HERE / "sdk-client.mjs"), "--url", f"http://127.0.0.1:{port}/mcp",
                                server_url])
    finally:
        facade.terminate()
        try:
            facade.wait(5)
        except subprocess.TimeoutExpired:
            facade.kill()


if __name__ == "__main__":
    sys.exit(main())
