"""A held stream ends with the credential it was opened with: a modern
client's `subscriptions/listen` (the official Python SDK in 2026-07-28 mode)
and a legacy session's GET stream, opened with a JWT of a few seconds'
lifetime, end when it expires — the subscription with the spec's graceful
close, the GET stream by closing — each counted and audited; a fresh token
subscribes again, and a static token's subscription (no expiry) stays open.

    server-everything (stdio) ─ facade ─ clients with a 4-second JWT, a fresh JWT, a static token
"""
from __future__ import annotations

import time

import anyio
import httpx
import pytest

from helpers import ACCEPT_BOTH, everything_stdio, metric, run_async
from warden_helpers import Audit, HeldStreamAuth, policy_doc, sdk_client, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

STATIC = "static-token-for-expiry-tests"
# Long enough to open a stream, short enough to wait for.
LIFETIME = 4
# How late after the token's expiry the stream may end (scheduling, 1-second `exp`).
SLACK = 6


@pytest.fixture
def fa(facade, tmp_path):
    auth = HeldStreamAuth(tmp_path, STATIC)
    audit = Audit(tmp_path / "audit.jsonl")
    f = facade(upstream=everything_stdio(), policy=str(auth.policy(tools=[{"name": "echo"}])),
               extra_args=["--audit", audit.arg])
    f.audit, f.auth = audit, auth
    return f


def jwt(fa, lifetime: int) -> tuple[str, float]:
    return fa.auth.jwt(lifetime)


def ended_lines(audit: Audit, timeout: float = 5) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        lines = [r for r in audit.lines() if r["event"] == "stream_ended"]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


def test_a_subscription_ends_when_its_token_expires_and_a_fresh_token_listens_again(fa):
    short, exp = jwt(fa, LIFETIME)

    async def go():
        async with sdk_client(fa.url, token=short, mode="auto") as expiring, \
                sdk_client(fa.url, token=STATIC, mode="auto") as static:
            async with expiring.listen(tools_list_changed=True) as sub, \
                    static.listen(tools_list_changed=True) as kept:
                # The SDK ends the loop on the server's graceful close (an
                # abrupt drop would raise SubscriptionLost instead).
                with anyio.fail_after(LIFETIME + SLACK):
                    async for _ in sub:
                        pass
                ended_at = time.time()
                # The static token's subscription does not expire.
                with anyio.move_on_after(1.5) as still_open:
                    async for _ in kept:
                        pass
                assert still_open.cancelled_caught, "the static token's subscription ended too"
        fresh, _ = jwt(fa, 600)
        async with sdk_client(fa.url, token=fresh, mode="auto") as again:
            async with again.listen(tools_list_changed=True) as renewed:
                honored = renewed.honored
        return ended_at, honored

    ended_at, honored = run_async(go)
    assert exp - 1 <= ended_at <= exp + SLACK, (ended_at, exp)
    assert honored is not None
    assert metric(fa.admin_url, "mcpwarden_streams_ended_total",
                  stream="listen", reason="credential_expired") == 1
    [line] = ended_lines(fa.audit)
    assert (line["method"], line["reason"], line["subject"], line["auth"], line["decision"]) == \
        ("subscriptions/listen", "credential_expired", "rita", "jwt", "deny"), line
    assert line["call_id"] and line["args_sha256"] is None and line["output_bytes"] is None, line


def test_a_legacy_get_stream_closes_when_its_token_expires_and_opens_again_with_a_fresh_one(fa):
    short, exp = jwt(fa, LIFETIME)
    headers = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json", "Authorization": f"Bearer {short}"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "expiry-e2e", "version": "0"}}}
    r = httpx.post(fa.url, json=init, headers=headers, timeout=10)
    assert r.status_code == 200, r.text
    session = r.headers["mcp-session-id"]
    session_headers = {**headers, "Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-06-18"}
    r = httpx.post(fa.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                   headers=session_headers, timeout=10)
    assert r.status_code == 202, r.text

    get = {**session_headers, "Accept": "text/event-stream"}
    # Read past the expiry: a stream that outlives the token times out here.
    with httpx.stream("GET", fa.url, headers=get,
                      timeout=httpx.Timeout(10, read=LIFETIME + SLACK)) as stream:
        assert stream.status_code == 200
        for _ in stream.iter_bytes():
            pass
    ended_at = time.time()
    assert exp - 1 <= ended_at <= exp + SLACK, (ended_at, exp)

    # The same caller with a fresh token opens it again on the same session.
    fresh, _ = jwt(fa, 600)
    def reopened() -> bool:
        with httpx.stream("GET", fa.url, headers={**get, "Authorization": f"Bearer {fresh}"}, timeout=10) as again:
            # 409 only while the facade has not yet let go of the closed one.
            assert again.status_code in (200, 409), again.status_code
            return again.status_code == 200
    wait_for(reopened, timeout=10, what="the GET stream to open again with the fresh token")
    assert metric(fa.admin_url, "mcpwarden_streams_ended_total",
                  stream="get", reason="credential_expired") == 1
    [line] = ended_lines(fa.audit)
    assert (line["method"], line["reason"], line["subject"], line["call_id"]) == \
        (None, "credential_expired", "rita", ""), line


def test_through_a_gateway_a_backends_part_outlives_each_assertion_but_the_caller_hears_no_end(
        facade, tmp_path):
    """Each backend ends its part of a caller's subscription when the
    gateway's assertion expires (10 s here); the gateway holds it again with
    a fresh one and the caller, whose static token does not expire, keeps
    its subscription."""
    from gateway_helpers import gateway_args, gateway_keys, two_callers

    gateway_keys(tmp_path)
    issuer = "https://gateway.test"
    trust = {"gateways": [{"issuer": issuer, "publicKeyFile": str(tmp_path / "gateway.pub.pem"),
                           "audience": "everything", "callerIssuers": ["static"]}]}
    back = facade(upstream=everything_stdio(),
                  policy=policy_doc(auth=trust, roles=[{"role": "user", "subjects": ["alice"]}],
                                    tools=[{"name": "echo"}]))
    gw = facade(policy=policy_doc(**two_callers(STATIC, STATIC + "-bob")),
                extra_args=gateway_args({"everything": back.url})
                + ["--gateway-key-file", str(tmp_path / "gateway.key.pem"), "--gateway-issuer", issuer,
                   "--gateway-assertion-secs", "10"])

    async def go():
        async with sdk_client(gw.url, token=STATIC, mode="auto") as alice:
            async with alice.listen(tools_list_changed=True) as sub:
                with anyio.move_on_after(14) as still_open:
                    async for _ in sub:
                        pass
                return still_open.cancelled_caught

    assert run_async(go), "the caller's subscription ended with the gateway's assertion"
    assert metric(back.admin_url, "mcpwarden_streams_ended_total",
                  stream="listen", reason="credential_expired") >= 1
    assert metric(gw.admin_url, "mcpwarden_streams_ended_total", reason="credential_expired") == 0
