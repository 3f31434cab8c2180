"""Remote MCP servers behind the facade: an HTTPS upstream with a
CA of its own, for both eras of the protocol, with upstream credentials
chosen per caller, and the SSRF guard.

The "remote" server is the dual-era fixture (tests/conformance/
modern-fixture-server.mjs) behind tests/fixtures/tls_front.py, which
records every request it is sent (headers and body): that is how these
tests see which credential reached the server for which caller, and that
no client token ever did. The OAuth token endpoint is
tests/fixtures/token_endpoint.py (client credentials and RFC 8693 token
exchange), the name server tests/fixtures/dns_server.py.
"""
from __future__ import annotations

import json
import re
import secrets
import time
from pathlib import Path

import anyio
import httpx
import pytest
import yaml

from conftest import wait_http_ok
from helpers import run_async
from remote_helpers import loopback_alias_usable, make_ca, start_dns, start_remote, start_token_endpoint
from warden_helpers import Audit, Keys, oidc_claims, sdk_client, text_of_result, token_entry, wait_for

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

IDP = "https://idp.test"
AUDIENCE = "mcp-warden"
# Tokens callers present to the facade: none of them may ever reach the server.
ALICE = "alice-" + secrets.token_hex(16)   # static, user: a token file of her own
EVE = "eve-" + secrets.token_hex(16)       # static, viewer: the viewers' token file
BOB = "bob-" + secrets.token_hex(16)       # static, admin: client credentials
# What the facade presents upstream.
ALICE_UPSTREAM = "alice-upstream-" + secrets.token_hex(8)
VIEWERS_UPSTREAM = "viewers-upstream-" + secrets.token_hex(8)
CC_SECRET = "cc-secret-" + secrets.token_hex(8)


class Stack:
    """CA, remote server, token endpoint, keys and the facade's policy."""

    def __init__(self, start, tmp: Path, listen_host: str = "127.0.0.1", host_name: str = "localhost",
                 names: tuple[str, ...] = ("localhost", "127.0.0.1")):
        self.tmp = tmp
        self.pki = make_ca(tmp / "pki", list(names))
        self.remote = start_remote(start, self.pki, tmp, listen_host=listen_host, host_name=host_name)
        self.idp = start_token_endpoint(start, self.pki, tmp, client_secret=CC_SECRET)
        self.keys = Keys()
        self.keys.write_jwks(tmp / "jwks.json")
        self.carol = self.keys.mint(oidc_claims(IDP, AUDIENCE, "carol"))
        self.dave = self.keys.mint(oidc_claims(IDP, AUDIENCE, "dave"))
        (tmp / "tokens.yaml").write_text(yaml.safe_dump([
            token_entry(ALICE, "alice"), token_entry(EVE, "eve"), token_entry(BOB, "bob")]))
        (tmp / "alice.token").write_text(ALICE_UPSTREAM + "\n")
        (tmp / "viewers.token").write_text(VIEWERS_UPSTREAM)
        (tmp / "cc-secret").write_text(CC_SECRET)
        self.audit = Audit(tmp / "audit.jsonl")

    def policy(self) -> dict:
        cc = {"tokenUrl": self.idp.url, "clientId": "warden", "clientSecretFile": "cc-secret", "scopes": ["mcp"]}
        return {
            "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "FacadePolicy",
            "defaultAction": "allow",
            "tools": [{"name": "test_custom_header_param", "requiredRole": "viewer"}],
            "resources": {"defaultAction": "allow"},
            "sandbox": {"writeAllowed": True},
            "auth": {"staticTokens": {"file": "tokens.yaml"},
                     "jwt": [{"issuer": IDP, "audiences": [AUDIENCE], "jwksFile": "jwks.json"}]},
            "roles": [{"role": "user", "issuer": "static", "subjects": ["alice"]},
                      {"role": "viewer", "issuer": "static", "subjects": ["eve"]},
                      {"role": "admin", "issuer": "static", "subjects": ["bob"]},
                      {"role": "user", "issuer": IDP, "subjects": ["carol", "dave"]}],
            "upstreamAuth": {
                "facade": {"clientCredentials": cc},
                "rules": [
                    {"issuer": "static", "subjects": ["alice"], "tokenFile": "alice.token"},
                    {"issuer": "static", "roles": ["viewer"], "tokenFile": "viewers.token"},
                    {"issuer": "static", "roles": ["admin"], "clientCredentials": cc},
                    {"issuer": IDP, "tokenExchange": {"tokenUrl": self.idp.url, "clientId": "warden",
                                                      "clientSecretFile": "cc-secret", "audience": "remote-mcp"}},
                ],
            },
        }

    def write_policy(self) -> Path:
        path = self.tmp / "policy.yaml"
        path.write_text(yaml.safe_dump(self.policy(), sort_keys=False))
        return path

    def facade(self, facade, era: str, url: str | None = None, extra: tuple = (), **kw):
        return facade(upstream_url=url or self.remote.url, policy=str(self.write_policy()),
                      extra_args=["--upstream-era", era, "--upstream-ca-file", str(self.pki.ca),
                                  "--upstream-allow-cidr", "127.0.0.1,::1", "--audit", self.audit.arg,
                                  "--request-timeout-secs", "20", *extra], **kw)

    def client_tokens(self) -> list[str]:
        return [ALICE, EVE, BOB, self.carol, self.dave]


def assert_no_client_token(stack: Stack) -> None:
    """No request the server was sent carries a caller's own token, anywhere."""
    seen = json.dumps(stack.remote.requests())
    for token in stack.client_tokens():
        assert token not in seen, "a caller's own token reached the upstream"
    # The JWT's signature part alone is the most specific piece of it.
    assert stack.carol.split(".")[2] not in seen


async def call_as(url: str, token: str, region: str) -> str:
    async with sdk_client(url, token) as c:
        r = await c.call_tool("test_custom_header_param", {"region": region})
        return text_of_result(r)


def outcome_text(fn) -> str:
    """The text of a call's result, or the messages of what it raised (the
    SDK raises from inside its task group, so as an exception group)."""
    def messages(e: BaseException) -> list[str]:
        if isinstance(e, BaseExceptionGroup):
            return [m for sub in e.exceptions for m in messages(sub)]
        return [str(e)]
    try:
        result = run_async(fn)
        return text_of_result(result) if hasattr(result, "content") else str(result)
    except BaseException as e:  # noqa: BLE001 - the message is what is checked
        return " | ".join(messages(e))


def bearer_of(call: dict) -> str:
    return call["headers"].get("authorization", "")


# ---------------------------------------------------------------------------
# 1. Both eras over HTTPS: tools, progress, cancellation, each credential mode
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_https_upstream_serves_each_caller_with_its_own_credential(facade, start_process, tmp_path, era):
    stack = Stack(start_process, tmp_path)
    f = stack.facade(facade, era)

    async def body():
        # Tools, with the credential of each mode, callers interleaved.
        texts = {}
        async with anyio.create_task_group() as tg:
            for name, token in [("alice", ALICE), ("eve", EVE), ("bob", BOB),
                                ("carol", stack.carol), ("dave", stack.dave)]:
                async def one(name=name, token=token):
                    texts[name] = await call_as(f.url, token, f"from-{name}")
                tg.start_soon(one)
        assert texts == {n: f"region=from-{n}" for n in ["alice", "eve", "bob", "carol", "dave"]}
        # Carol again: the exchanged token is reused, not exchanged again.
        assert await call_as(f.url, stack.carol, "from-carol") == "region=from-carol"

        async with sdk_client(f.url, ALICE) as c:
            listed = {t.name for t in (await c.list_tools()).tools}
            assert {"test_simple_text", "test_sleep", "test_tool_with_progress"} <= listed
            # Progress streams through.
            progress = []

            async def on_progress(p, total, message):
                progress.append(p)

            r = await c.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            assert "Progress tool completed" in text_of_result(r)
            assert progress == [0, 50, 100]
            # Cancellation reaches the server (a notification on a legacy
            # upstream, the request's stream closed on a modern one).
            with anyio.move_on_after(1.0) as scope:
                await c.call_tool("test_sleep", {"ms": 20000})
            assert scope.cancelled_caught

            async def cancelled() -> int:
                r = await c.call_tool("test_counters", {})
                return json.loads(text_of_result(r))["cancelled"]

            deadline = anyio.current_time() + 10
            while await cancelled() < 1:
                assert anyio.current_time() < deadline, "the server never saw the cancellation"
                await anyio.sleep(0.2)

    run_async(body, timeout=90)

    # The remote's identity as the facade's probe found it (server/discover
    # or initialize): what the operator shows in MCPServer status.server.
    server = httpx.get(f"{f.admin_url}/tools", headers=f.admin_headers(), timeout=5).json()["server"]
    assert server == {"name": "mcp-warden-modern-conformance-fixture", "title": None,
                      "version": "1.0.0", "era": era}, server

    calls = {c["json"]["params"]["arguments"]["region"]: bearer_of(c)
             for c in stack.remote.calls("test_custom_header_param")}
    assert calls["from-alice"] == f"Bearer {ALICE_UPSTREAM}", "(a) a token file per subject"
    assert calls["from-eve"] == f"Bearer {VIEWERS_UPSTREAM}", "(a) a token file per role"
    assert calls["from-bob"].startswith("Bearer cc-"), "(b) client credentials"
    assert calls["from-carol"].startswith("Bearer tx-carol-"), "(c) token exchange"
    assert calls["from-dave"].startswith("Bearer tx-dave-"), "(c) token exchange"
    carol_calls = [bearer_of(c) for c in stack.remote.calls("test_custom_header_param")
                   if c["json"]["params"]["arguments"]["region"] == "from-carol"]
    assert len(carol_calls) == 2 and len(set(carol_calls)) == 1, "the exchanged token is cached"
    # Every other request of a caller carries that caller's credential too.
    for c in stack.remote.calls():
        if c["json"]["params"]["name"] in ("test_tool_with_progress", "test_sleep", "test_counters"):
            assert bearer_of(c) == f"Bearer {ALICE_UPSTREAM}", c["json"]["params"]["name"]
    exchanges = [r for r in stack.idp.requests() if r["grant_type"].endswith("token-exchange")]
    assert sorted(r["subject"] for r in exchanges) == ["carol", "dave"]
    assert all(r["audience"] == "remote-mcp" and r["client_ok"] for r in exchanges)
    # The facade's own requests (the probe, the tool list it reads for
    # itself) carry its client-credentials token.
    first = stack.remote.requests()[0]
    assert bearer_of(first).startswith("Bearer cc-"), first
    if era == "modern":
        # Standard headers from the body, the x-mcp-header value mirrored:
        # a header's value only, never where the facade connects.
        alice = next(c for c in stack.remote.calls("test_custom_header_param")
                     if c["json"]["params"]["arguments"]["region"] == "from-alice")
        assert alice["headers"]["mcp-method"] == "tools/call"
        assert alice["headers"]["mcp-param-region"] == "from-alice"
    assert_no_client_token(stack)
    assert "Bearer" not in f.stderr_text() and ALICE_UPSTREAM not in f.stderr_text()
    assert ALICE_UPSTREAM not in stack.audit.text() and "cc-" not in stack.audit.text()


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_reconnects_after_the_remote_drops(facade, start_process, tmp_path, era):
    stack = Stack(start_process, tmp_path)
    f = stack.facade(facade, era)

    async def body():
        async with sdk_client(f.url, ALICE) as c:
            r = await c.call_tool("test_custom_header_param", {"region": "before"})
            assert text_of_result(r) == "region=before"
            # Connections drop, then the server process itself restarts
            # (a legacy server's sessions are gone with it).
            assert stack.remote.drop() >= 1
            stack.remote.restart_backend()
            deadline = anyio.current_time() + 20
            while True:
                try:
                    r = await c.call_tool("test_custom_header_param", {"region": "after"})
                    if not r.is_error:
                        break
                except Exception:  # noqa: BLE001 - the first call may meet the drop
                    pass
                assert anyio.current_time() < deadline, "no call went through after the remote came back"
                await anyio.sleep(0.3)
            assert text_of_result(r) == "region=after"

    run_async(body, timeout=60)
    after = [c for c in stack.remote.calls("test_custom_header_param")
             if c["json"]["params"]["arguments"]["region"] == "after"]
    assert after and all(bearer_of(c) == f"Bearer {ALICE_UPSTREAM}" for c in after)
    assert_no_client_token(stack)


def test_credential_failures_are_clear_and_leak_nothing(facade, start_process, tmp_path):
    """A caller no rule matches, and a token endpoint that refuses: the call
    fails with a message that says why, and no secret is in it."""
    stack = Stack(start_process, tmp_path)
    doc = stack.policy()
    # Dave's exchange is refused by the IdP (wrong audience); nobody else
    # of the IdP has a rule once carol's is the only one.
    doc["upstreamAuth"]["rules"][3] = {"issuer": IDP, "subjects": ["carol"], "tokenExchange": {
        "tokenUrl": stack.idp.url, "clientId": "warden", "clientSecretFile": "cc-secret", "audience": "wrong"}}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    f = facade(upstream_url=stack.remote.url, policy=str(tmp_path / "policy.yaml"),
               extra_args=["--upstream-ca-file", str(stack.pki.ca), "--upstream-allow-cidr", "127.0.0.1,::1",
                           "--audit", stack.audit.arg])

    async def body():
        async with sdk_client(f.url, stack.dave) as c:
            r = await c.call_tool("test_custom_header_param", {"region": "x"})
        return r

    async def carol():
        async with sdk_client(f.url, stack.carol) as c:
            return await c.call_tool("test_custom_header_param", {"region": "x"})

    for fn, want in [(body, "no upstreamAuth rule matches"), (carol, "refused: HTTP 400 (invalid_target)")]:
        text = outcome_text(fn)
        assert want in text, text
        assert stack.carol not in text and stack.dave not in text and CC_SECRET not in text
    assert not stack.remote.calls("test_custom_header_param"), "nothing reached the server without a credential"
    assert stack.carol not in f.stderr_text() and CC_SECRET not in f.stderr_text()


# ---------------------------------------------------------------------------
# 2. SSRF: redirects, rebinding, private addresses
# ---------------------------------------------------------------------------
def test_a_redirect_to_another_host_is_refused_and_audited(facade, start_process, tmp_path):
    stack = Stack(start_process, tmp_path)
    f = stack.facade(facade, "modern")

    async def ok():
        return await call_as(f.url, ALICE, "before")

    assert run_async(ok) == "region=before"
    stack.remote.redirect("https://metadata.evil.test/steal")

    async def redirected():
        async with sdk_client(f.url, ALICE) as c:
            return await c.call_tool("test_custom_header_param", {"region": "after"})

    text = outcome_text(redirected)
    assert "redirected (HTTP 307) to another host" in text and "never follows redirects" in text, text
    line = stack.audit.wait(lambda l: l.get("event") == "egress_refused")
    assert line["reason"] == "redirect" and line["host"] == "metadata.evil.test", line
    assert line["decision"] == "deny" and line["v"] == 1
    metrics = httpx.get(f"{f.admin_url}/metrics").text
    assert re.search(r'mcpwarden_egress_refusals_total\{reason="redirect"\} [1-9]', metrics), metrics


def test_a_private_upstream_address_needs_permission(start_process, tmp_path):
    """10.x without --upstream-allow-cidr: refused before any packet is sent
    (nothing listens there; nothing is tried)."""
    from conftest import free_port, sidecar_path
    audit = Audit(tmp_path / "audit.jsonl")
    port, admin = free_port(), free_port()
    mp = start_process([str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}",
                        "--admin-listen", f"127.0.0.1:{admin}", "--audit", audit.arg,
                        "--upstream-url", "https://10.20.30.40:8443/mcp"])
    line = audit.wait(lambda l: l.get("event") == "egress_refused", timeout=10)
    assert line == {**line, "reason": "address_not_allowed", "host": "10.20.30.40", "address": "10.20.30.40"}
    assert "a private address, which no --upstream-allow-cidr names" in line["detail"]
    wait_for(lambda: "does not connect to 10.20.30.40" in mp.stderr_text(), what="the refusal in the log")
    assert httpx.get(f"http://127.0.0.1:{admin}/readyz").status_code == 503
    # Plain http:// is only for loopback.
    bad = start_process([str(sidecar_path()), "run", "--listen", f"127.0.0.1:{free_port()}",
                         "--admin-listen", f"127.0.0.1:{free_port()}", "--upstream-url", "http://example.com/mcp"])
    bad.proc.wait(10)
    assert bad.proc.returncode == 2 and "http:// is only for a server on loopback" in bad.stderr_text()


@pytest.mark.parametrize("rebound", ["127.0.0.1", "169.254.169.254"])
def test_a_name_that_rebinds_to_an_internal_address_is_refused(facade, start_process, tmp_path, rebound):
    """The first lookup gives the remote's address (127.0.0.2, allowed by
    name); every later connection looks the name up again and gets
    `rebound`, which no configuration allows: refused, audited, and the
    facade never connects there."""
    if not loopback_alias_usable("127.0.0.2"):
        pytest.skip("127.0.0.2 cannot be bound on this machine")
    name = "mcp.rebind.test"
    dns = start_dns(start_process, tmp_path, {name: ["127.0.0.2", rebound]})
    stack = Stack(start_process, tmp_path, listen_host="127.0.0.2", host_name=name, names=(name,))
    # No policy (everyone may call everything) and no upstream credentials:
    # the only address allowed is the remote's.
    f = facade(upstream_url=stack.remote.url,
               extra_args=["--upstream-era", "modern", "--upstream-ca-file", str(stack.pki.ca),
                           "--upstream-allow-cidr", "127.0.0.2", "--resolv-conf", str(dns.resolv_conf),
                           "--audit", stack.audit.arg])
    # The probe's lookup found the remote (the facade's own first tool list,
    # before it says ready, may already have looked again and been refused).
    assert dns.queries(name)[0]["answer"] == "127.0.0.2", dns.queries(name)

    async def call():
        async with sdk_client(f.url) as c:
            return await c.list_tools()

    text = outcome_text(call)
    assert f"does not connect to {rebound} ({name} resolves to it)" in text, text
    line = stack.audit.wait(lambda l: l.get("event") == "egress_refused")
    assert line["reason"] == "address_not_allowed" and line["address"] == rebound and line["host"] == name
    assert len(dns.queries(name)) >= 2, "each connection looks the name up again"
    assert not stack.remote.calls("test_custom_header_param")


def test_message_content_never_changes_where_the_facade_connects(facade, start_process, tmp_path):
    """A resource URI, an x-mcp-header value and a Host header naming other
    places: every request still goes to the configured remote only."""
    stack = Stack(start_process, tmp_path)
    f = stack.facade(facade, "modern")

    async def body():
        async with sdk_client(f.url, ALICE) as c:
            r = await c.call_tool("test_custom_header_param", {"region": "169.254.169.254:80"})
            assert text_of_result(r) == "region=169.254.169.254:80"
            try:
                await c.read_resource("http://169.254.169.254/latest/meta-data/")
            except Exception:  # noqa: BLE001 - the remote has no such resource
                pass

    run_async(body)
    r = httpx.post(f.url, headers={"Host": "127.0.0.1", "Authorization": f"Bearer {ALICE}",
                                   "Accept": "application/json, text/event-stream",
                                   "X-Forwarded-Host": "metadata.internal"},
                   json={"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}})
    assert r.status_code in (200, 400), r.text
    reads = [r for r in stack.remote.requests() if '"resources/read"' in r["body"]]
    assert reads and all(r["headers"]["host"] == f"localhost:{stack.remote.port}" for r in reads)
    assert not [l for l in stack.audit.lines() if l.get("event") == "egress_refused"]
    assert all("x-forwarded-host" not in r["headers"] for r in stack.remote.requests())
