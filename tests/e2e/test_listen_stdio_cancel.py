"""A held modern `subscriptions/listen` that the facade ends is ended on a
stdio server too: there the only way to end it is `notifications/cancelled`
naming the listen's request id (HTTP servers are told by closing the stream),
and the id must be the one the server was sent — the facade's own, never the
client's. The fixture counts exactly those cancellations (a cancellation
naming any other id ends nothing and is not counted), in one process that
serves every caller.

    modern fixture (stdio, 2026-07-28) ─ facade ─ hand-driven modern HTTP clients

Both ways the facade ends a listen for its client: the client goes away
(closes the listen's stream), and the credential it listened with expires.
And a listen so ended is not work the server must be seen to stop: it owes
no answer, so the process every caller shares is not replaced for it.
"""
from __future__ import annotations

import json
import time

import httpx
import pytest

from era_helpers import MODERN, ModernMcp, modern_fixture_stdio, modern_meta
from helpers import metric
from warden_helpers import HeldStreamAuth, wait_for

STATIC = "static-token-for-listen-cancel"
# Long enough to open the stream, short enough to wait for.
LIFETIME = 4
# How long the facade lets a cancelled call stay on the server before it
# replaces the process (short here, so the test can outwait it).
GRACE = 2


@pytest.fixture
def fa(facade, tmp_path):
    auth = HeldStreamAuth(tmp_path, STATIC)
    # The fixture's tools carry no read-only hints.
    policy = auth.policy(defaultAction="deny", tools=[{"name": "test_counters"}], sandbox={"writeAllowed": True})
    f = facade(upstream=modern_fixture_stdio(), policy=str(policy), extra_args=["--cancel-grace-secs", str(GRACE)])
    f.auth = auth
    return f


def listens_cancelled(fa) -> int:
    status, answer = ModernMcp(fa.url, token=STATIC).request("tools/call", {"name": "test_counters", "arguments": {}})
    assert status == 200 and "result" in answer, (status, answer)
    return json.loads(answer["result"]["content"][0]["text"])["listensCancelled"]


def open_listen(fa, token: str, rid: str, read_timeout: float):
    """A modern `subscriptions/listen` under the client's id `rid` (a string:
    the facade's own ids are numbers, so the two cannot coincide)."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": modern_meta()}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": "subscriptions/listen",
               "Authorization": f"Bearer {token}"}
    return httpx.stream("POST", fa.url, content=json.dumps(body), headers=headers,
                        timeout=httpx.Timeout(10, read=read_timeout))


def acknowledged(lines) -> None:
    """Read the listen's stream until the server's acknowledgment: the
    server holds the subscription from here on."""
    for line in lines:
        if line.startswith("data:") and "notifications/subscriptions/acknowledged" in line:
            return
    raise AssertionError("the listen's stream ended before it was acknowledged")


def test_a_listen_whose_client_goes_is_cancelled_on_the_stdio_server_by_its_own_id(fa):
    assert listens_cancelled(fa) == 0
    with open_listen(fa, STATIC, "client-listen-1", read_timeout=10) as stream:
        assert stream.status_code == 200, stream.read()
        acknowledged(stream.iter_lines())
    # The client went away: the server hears the listen's end.
    wait_for(lambda: listens_cancelled(fa) == 1, timeout=5,
             what="the stdio server to be sent notifications/cancelled for the listen's id")
    # It sends no answer (a cancelled request gets none), and that is no
    # reason to replace it: past the grace, the same process still serves.
    time.sleep(GRACE + 2)
    assert metric(fa.admin_url, "mcpwarden_upstream_recycled_total") == 0
    assert listens_cancelled(fa) == 1, "a new server process (its count starts at 0)"


def test_a_listen_whose_credential_expires_is_cancelled_on_the_stdio_server(fa):
    short, exp = fa.auth.jwt(LIFETIME)
    with open_listen(fa, short, "client-listen-2", read_timeout=LIFETIME + 6) as stream:
        assert stream.status_code == 200, stream.read()
        lines = stream.iter_lines()
        acknowledged(lines)
        # The facade ends it with the spec's graceful close at the expiry.
        rest = "\n".join(lines)
    assert '"resultType":"complete"' in rest.replace(" ", ""), rest
    assert time.time() >= exp - 1
    wait_for(lambda: listens_cancelled(fa) == 1, timeout=5,
             what="the stdio server to be sent notifications/cancelled for the expired listen's id")
    assert metric(fa.admin_url, "mcpwarden_streams_ended_total",
                  stream="listen", reason="credential_expired") == 1
    time.sleep(GRACE + 2)
    assert metric(fa.admin_url, "mcpwarden_upstream_recycled_total") == 0
