"""The sidecar linked as images/Dockerfile links it (glibc statically,
`-C target-feature=+crt-static`) resolves host names without the C library:
a static glibc binary cannot load NSS modules, and the distroless image has
none, so `getaddrinfo` could not. The facade's own resolver reads
resolv.conf (here one naming tests/fixtures/dns_server.py) and reaches an
HTTPS remote by name.

`$MCP_WARDEN_STATIC_SIDECAR` names the binary: in `make test` the debug
build relinked static (`make node-binaries`, the one-node suite's images
hold it too); by default the release build `make static-sidecar` makes, as
the image does. Without it the test skips, saying so.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO_ROOT, free_port, wait_http_ok
from helpers import run_async
from remote_helpers import make_ca, start_dns, start_remote
from warden_helpers import sdk_client, text_of_result

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

STATIC = Path(os.environ.get("MCP_WARDEN_STATIC_SIDECAR",
                             REPO_ROOT / "target" / "x86_64-unknown-linux-gnu" / "release" / "mcp-warden-sidecar"))


def test_the_static_binary_resolves_names_itself(start_process, tmp_path):
    if not STATIC.exists():
        pytest.skip(f"{STATIC} does not exist: `make static-sidecar` builds it as the image does")
    ldd = subprocess.run(["ldd", str(STATIC)], capture_output=True, text=True)
    assert "=>" not in ldd.stdout, f"{STATIC} is dynamically linked:\n{ldd.stdout}"
    name = "mcp.static.test"
    dns = start_dns(start_process, tmp_path, {name: ["127.0.0.1"]})
    pki = make_ca(tmp_path / "pki", [name])
    remote = start_remote(start_process, pki, tmp_path, host_name=name)
    port, admin = free_port(), free_port()
    # PATH and LD_LIBRARY_PATH lead nowhere: nothing of the host can be loaded.
    mp = start_process([str(STATIC), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen",
                        f"127.0.0.1:{admin}", "--upstream-url", remote.url,
                        "--upstream-ca-file", str(pki.ca), "--upstream-allow-cidr", "127.0.0.1",
                        "--resolv-conf", str(dns.resolv_conf)],
                       env={"PATH": "/nonexistent", "LD_LIBRARY_PATH": "/nonexistent"})
    wait_http_ok(f"http://127.0.0.1:{admin}/readyz", proc=mp)
    assert dns.queries(name), "the name was asked of the resolv.conf's server"

    async def call():
        async with sdk_client(f"http://127.0.0.1:{port}/mcp") as c:
            return text_of_result(await c.call_tool("test_custom_header_param", {"region": "static"}))

    assert run_async(call) == "region=static"
    assert remote.calls("test_custom_header_param")
