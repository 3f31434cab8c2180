"""One login for several servers: the gateway is the protected resource.

    oidc-provider ── authorization code + PKCE, resource = the gateway's URL
          ▲
          │ 401 → the gateway's metadata → the provider
    the Python SDK's OAuthClientProvider ── gateway ─┬─ facade ── server-everything
                                                     └─ facade ── server-filesystem

The client logs in once, for the gateway's endpoint; the gateway reaches each
backend with an assertion it signs for that backend (never the caller's
token), and each backend judges the caller the assertion names — an account
of the provider — by its own role bindings. What is shown: the gateway serves
the metadata of its own endpoint, one login lists the tools of both
backends, and the gateway's token is for the gateway alone.
"""
from __future__ import annotations

import httpx
import pytest

from conftest import free_port

from gateway_helpers import gateway_args, gateway_keys
from helpers import everything_stdio, run_async
from login_helpers import Idp, SdkLogin, challenge, check_rfc9728, claims_of, initialize, login_auth
from warden_helpers import filesystem_stdio, policy_doc

GW_ISSUER = "gw-login-e2e"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("login-gw").resolve()
    (root / "ws").mkdir()
    (root / "ws" / "hello.txt").write_text("hello through one login\n")
    gateway_keys(root)
    return root


@pytest.fixture(scope="module")
def idp(start_module_process, tree):
    return Idp.start(start_module_process, tree, {"alice": ["mcp"]})


def backend_policy(tree, idp: Idp, name: str, tools: list[dict]) -> dict:
    """A backend: only the gateway's assertions for it, vouching for the
    provider's accounts; alice is a user here."""
    return policy_doc(
        auth={"gateways": [{"issuer": GW_ISSUER, "publicKeyFile": str(tree / "gateway.pub.pem"),
                            "audience": name, "callerIssuers": [idp.issuer]}]},
        roles=[{"role": "user", "issuer": idp.issuer, "subjects": ["alice"]}],
        defaultAction="deny",
        tools=tools,
    )


@pytest.fixture(scope="module")
def gateway(module_facade, idp, tree):
    everything = module_facade(upstream=everything_stdio(), policy=backend_policy(
        tree, idp, "everything", [{"name": "echo"}, {"name": "get-sum"}]))
    filesystem = module_facade(upstream=filesystem_stdio(tree / "ws"), policy=backend_policy(
        tree, idp, "filesystem", [{"name": "read_text_file"}, {"name": "list_directory"}]))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    policy = policy_doc(auth=login_auth(idp),
                        roles=[{"role": "user", "issuer": idp.issuer, "subjects": ["alice"]}],
                        defaultAction="allow")
    flags = gateway_args({"everything": everything.url, "filesystem": filesystem.url})
    flags += ["--gateway-key-file", str(tree / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER,
              "--resource-url", url]
    fa = module_facade(policy=policy, port=port, extra_args=flags)
    fa.backends = {"everything": everything, "filesystem": filesystem}
    return fa


def test_the_gateway_serves_the_metadata_of_its_own_endpoint(gateway, idp):
    r = initialize(gateway.url, None)
    assert r.status_code == 401
    metadata_url = challenge(r)["resource_metadata"]
    assert metadata_url == gateway.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    doc = httpx.get(metadata_url, timeout=10).json()
    check_rfc9728(doc, gateway.url)
    assert doc["authorization_servers"] == [idp.issuer]


def test_one_login_lists_and_calls_the_tools_of_both_backends(gateway, idp, tree):
    sdk = SdkLogin(gateway.url, "alice")

    async def go():
        async with sdk.client(gateway.url) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            summed = await client.call_tool("everything__get-sum", {"a": 20, "b": 22})
            read = await client.call_tool("filesystem__read_text_file",
                                          {"path": str(tree / "ws" / "hello.txt")})
            return names, summed, read

    names, summed, read = run_async(go)
    assert names == {"everything__echo", "everything__get-sum",
                     "filesystem__read_text_file", "filesystem__list_directory"}, names
    assert "42" in summed.content[0].text
    assert "hello through one login" in read.content[0].text
    assert len(sdk.authorization_urls) == 1, "one login for both backends"
    assert httpx.URL(sdk.authorization_urls[0]).params["resource"] == gateway.url
    token = sdk.tokens.access_token
    assert claims_of(token)["aud"] == gateway.url
    # The login is the gateway's: its token opens no backend directly.
    for backend in gateway.backends.values():
        assert initialize(backend.url, token).status_code == 401
