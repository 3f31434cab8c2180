"""Clients log in by themselves: a real authorization server, a real client's
OAuth flow, and the facade as the protected resource in between.

    oidc-provider (loopback) ── authorization code + PKCE, resource indicators
          ▲                                   │ JWT, aud = the facade's URL
          │ discovery: 401 → metadata → AS    ▼
    the Python SDK's OAuthClientProvider ── facade ── server-everything

The provider (`tests/fixtures/oidc_provider.mjs`, the certified `oidc-provider`
library) registers clients dynamically and issues JWT access tokens for the
resource a client names; its interaction step logs in the account the
request names and grants only the scopes that account may have. What is
shown: the 401 points to the metadata, the metadata to the provider; the
SDK's login ends with tools listed; a token for another resource is refused;
a token without the `mcp` scope gets 403 `insufficient_scope`; a role missing
for one tool stays the JSON-RPC -32003 of that call.
"""
from __future__ import annotations

import httpx
import pytest

from conftest import free_port

from helpers import everything_stdio, run_async
from login_helpers import (Idp, SdkLogin, challenge, check_rfc9728, claims_of, initialize, login,
                           login_auth)
from warden_helpers import Audit, AuthedMcp, policy_doc, rpc_error

# alice: a user who may use this server; carol: a viewer who may; bob: a
# viewer whose provider grants him only another scope of this resource.
ACCOUNTS = {"alice": ["mcp", "files:read"], "bob": ["files:read"], "carol": ["mcp"]}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return tmp_path_factory.mktemp("login").resolve()


@pytest.fixture(scope="module")
def idp(start_module_process, tree):
    return Idp.start(start_module_process, tree, ACCOUNTS)


@pytest.fixture(scope="module")
def server(module_facade, idp, tree):
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    policy = policy_doc(
        auth=login_auth(idp),
        roles=[{"role": "user", "issuer": idp.issuer, "subjects": ["alice"]},
               {"role": "viewer", "issuer": idp.issuer, "subjects": ["bob", "carol"]}],
        defaultAction="deny",
        tools=[{"name": "echo", "requiredRole": "viewer"}, {"name": "get-sum", "requiredRole": "user"}],
    )
    fa = module_facade(upstream=everything_stdio(), policy=policy, port=port,
                       extra_args=["--resource-url", url, "--audit", f"file:{tree / 'audit.jsonl'}"])
    assert fa.url == url
    return fa


def test_a_401_points_to_metadata_that_follows_rfc9728(server, idp):
    r = initialize(server.url, None)
    assert r.status_code == 401
    params = challenge(r)
    assert params["realm"] == "mcp-warden"
    assert params["scope"] == "mcp"
    assert "error" not in params, "no token is not an invalid token (RFC 6750 §3.1)"
    base = server.url.removesuffix("/mcp")
    assert params["resource_metadata"] == f"{base}/.well-known/oauth-protected-resource/mcp"
    # Both forms a client may try (the path-suffixed one first), one document.
    for url in (params["resource_metadata"], f"{base}/.well-known/oauth-protected-resource"):
        doc = httpx.get(url, timeout=10)
        assert doc.status_code == 200, doc.text
        assert doc.headers["content-type"] == "application/json"
        check_rfc9728(doc.json(), server.url)
        assert doc.json()["authorization_servers"] == [idp.issuer]
        assert doc.json()["scopes_supported"] == ["mcp"]
        assert doc.json()["bearer_methods_supported"] == ["header"]
    # A host the facade has no URL for gets no document (not one made up
    # from its Host), and neither does another resource's path.
    port = server.url.split(":")[2].split("/")[0]
    assert httpx.get(f"http://localhost:{port}/.well-known/oauth-protected-resource",
                     timeout=10).status_code == 404
    assert httpx.get(f"{base}/.well-known/oauth-protected-resource/other", timeout=10).status_code == 404
    # A refused token is named as such.
    bad = initialize(server.url, "not.a.token")
    assert bad.status_code == 401 and challenge(bad)["error"] == "invalid_token"


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_sdk_logs_in_from_the_401_and_lists_tools(server, idp, mode):
    sdk = SdkLogin(server.url, "alice")

    async def go():
        async with sdk.client(server.url, mode=mode) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            summed = await client.call_tool("get-sum", {"a": 2, "b": 3})
            return names, summed

    names, summed = run_async(go)
    assert names == {"echo", "get-sum"}
    assert "5" in summed.content[0].text
    # One login: authorization code with PKCE, for this resource, the scope
    # the 401 named, at the provider the metadata named.
    assert len(sdk.authorization_urls) == 1
    asked = httpx.URL(sdk.authorization_urls[0])
    assert str(asked).startswith(f"{idp.issuer}/auth?")
    assert asked.params["resource"] == server.url
    assert asked.params["code_challenge_method"] == "S256"
    assert asked.params["scope"] == "mcp"
    issued = claims_of(sdk.tokens.access_token)
    assert issued["aud"] == server.url and issued["sub"] == "alice" and issued["scope"] == "mcp"


def test_a_token_for_another_resource_is_refused(server, idp, tree):
    audit = Audit(tree / "audit.jsonl")
    other = login(idp, "http://127.0.0.1:9/mcp", "alice")
    assert claims_of(other)["aud"] == "http://127.0.0.1:9/mcp"
    r = initialize(server.url, other)
    assert r.status_code == 401, r.text
    assert challenge(r)["error"] == "invalid_token"
    audit.wait(lambda l: l.get("event") == "auth_failure" and l.get("reason") == "wrong_audience")
    # The same person's token for this facade is taken.
    mine = login(idp, server.url, "alice")
    assert initialize(server.url, mine).status_code == 200


def test_a_token_without_the_scope_gets_403_insufficient_scope(server, idp):
    token = login(idp, server.url, "bob", scope="mcp files:read")
    assert claims_of(token)["scope"] == "files:read", "the provider withheld mcp"
    assert claims_of(token)["aud"] == server.url, "a token for this very resource"
    r = initialize(server.url, token)
    assert r.status_code == 403, r.text
    params = challenge(r)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "mcp"
    assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    error = r.json()["error"]
    assert error["code"] == -32003 and error["data"]["reason"] == "insufficient_scope"


def test_a_role_missing_for_one_tool_stays_the_calls_32003(server, idp):
    token = login(idp, server.url, "carol")
    mcp = AuthedMcp(server.url, token)
    try:
        mcp.initialize()
        listed = {t["name"] for t in mcp.request("tools/list")["result"]["tools"]}
        assert listed == {"echo"}
        assert "hi" in str(mcp.call_tool("echo", {"message": "hi"})["result"])
        refused = mcp.call_tool("get-sum", {"a": 1, "b": 2})
        assert rpc_error(refused)["code"] == -32003, refused
    finally:
        mcp.close()
