"""The gateway's own requests: its tool list at start and its re-reads on a
list change, in front of backends that accept only the gateway's assertions.

    modern fixture ─ facade (gateway assertions only) ─┐
    server-everything ─ facade (gateway assertions only) ─┼─ gateway ─ callers (static tokens)
    server-everything ─ facade (binds the gateway itself) ─┘

The gateway speaks for itself with an assertion whose `caller_iss` is its own
issuer and whose subject is `mcpwarden.dev/gateway:<issuer>`. The rule a
backend applies: that identity may list (as the highest role sees the list)
and do nothing else — a `tools/call` under it is refused with -32003
`no_role` — unless a role binding names the gateway's issuer and that
subject, which then gives it that role as any caller.
"""
from __future__ import annotations

import secrets
import time

import anyio
import httpx
import jwt
import pytest

from era_helpers import ModernMcp, modern_fixture_http
from gateway_helpers import gateway_args, gateway_keys, gateway_view
from helpers import everything_stdio, metric, run_async
from warden_helpers import policy_doc, rpc_error, sdk_client, token_entry


ALICE = "gwi-alice-token-0123456789"
GW_ISSUER = "gw-itself-e2e"
ITSELF = f"mcpwarden.dev/gateway:{GW_ISSUER}"


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    root = tmp_path_factory.mktemp("gwi").resolve()
    gateway_keys(root)
    return root


def only_gateway(keys, name: str, roles: list[dict], **fields) -> dict:
    """A backend that believes nothing but this gateway's assertions."""
    return policy_doc(
        auth={"gateways": [{"issuer": GW_ISSUER, "publicKeyFile": str(keys / "gateway.pub.pem"),
                            "audience": name, "callerIssuers": ["static"]}]},
        roles=roles, defaultAction="deny", **fields)


ALICE_USER = [{"role": "user", "issuer": "static", "subjects": ["alice"]}]
# The fixture's tools carry no read-only hints: they may write.
FX_TOOLS = [{"name": "test_trigger_tool_change"}, {"name": "test_simple_text"}]
EV_TOOLS = [{"name": "echo", "requiredRole": "viewer"}, {"name": "get-sum", "requiredRole": "admin"}]


@pytest.fixture(scope="module")
def backends(module_facade, start_module_process, keys):
    server = modern_fixture_http(start_module_process)
    bound = ALICE_USER + [{"role": "viewer", "issuer": GW_ISSUER, "subjects": [ITSELF]}]
    return {
        "fx": module_facade(upstream_url=server, policy=only_gateway(
            keys, "fx", ALICE_USER, tools=FX_TOOLS, sandbox={"writeAllowed": True})),
        "ev": module_facade(upstream=everything_stdio(), policy=only_gateway(keys, "ev", ALICE_USER,
                                                                             tools=EV_TOOLS)),
        "bound": module_facade(upstream=everything_stdio(), policy=only_gateway(keys, "bound", bound,
                                                                                tools=EV_TOOLS)),
    }


def rejections(fa) -> float:
    return metric(fa.admin_url, "mcpwarden_http_rejections_total")


@pytest.fixture(scope="module")
def gateway(module_facade, backends, keys):
    gw_policy = policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice")]}},
        roles=[{"role": "admin", "subjects": ["alice"]}],
        defaultAction="allow", sandbox={"writeAllowed": True})
    return module_facade(policy=gw_policy, extra_args=gateway_args({n: fa.url for n, fa in backends.items()})
                         + ["--gateway-key-file", str(keys / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER])


def inventory(fa) -> dict:
    r = httpx.get(f"{fa.admin_url}/tools", headers=fa.admin_headers(), timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def test_the_start_up_listing_works_before_any_caller(gateway, backends):
    """No caller has listed yet: the gateway's inventory and its backends'
    counts come from its own list, which every backend accepted."""
    deadline = time.monotonic() + 20
    while True:
        inv = inventory(gateway)
        names = {t["name"] for t in inv["tools"]}
        if inv["listed"] and len(names) >= 5 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert inv["listed"], inv
    # Unbound, it lists as the highest role: the admin-only get-sum is in
    # it; where a binding makes it a viewer, it lists as one.
    assert {"fx__test_trigger_tool_change", "fx__test_simple_text", "ev__echo", "ev__get-sum",
            "bound__echo"} <= names, names
    assert "bound__get-sum" not in names, names
    view = {b["name"]: b for b in gateway_view(gateway)["backends"]}
    assert all(b["answering"] for b in view.values()), view
    assert view["ev"]["tools"] == 2 and view["fx"]["tools"] == 2, view
    for name, fa in backends.items():
        assert rejections(fa) == 0, (name, fa.stderr_text()[-2000:])


def assertion(keys, audience: str, sub: str, caller_iss: str, groups=()) -> str:
    now = int(time.time())
    claims = {"iss": GW_ISSUER, "aud": audience, "sub": sub, "caller_iss": caller_iss,
              "groups": list(groups), "iat": now, "nbf": now, "exp": now + 120,
              "jti": secrets.token_hex(8)}
    return jwt.encode(claims, (keys / "gateway.key.pem").read_bytes(), algorithm="EdDSA")


def test_the_gateway_itself_may_list_but_not_call(backends, keys):
    itself = assertion(keys, "ev", ITSELF, GW_ISSUER)
    mcp = ModernMcp(backends["ev"].url, itself)
    try:
        status, answer = mcp.request("tools/list")
        assert status == 200 and {t["name"] for t in answer["result"]["tools"]} == {"echo", "get-sum"}, answer
        _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "as the gateway"}})
        assert rpc_error(answer)["code"] == -32003, answer
        _, answer = mcp.request("resources/read", {"uri": "demo://resource/static/document/architecture.md"})
        assert "error" in answer, answer
        # Alice, vouched for by the same gateway, may call.
        _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "as alice"}},
                                token=assertion(keys, "ev", "alice", "static"))
        assert "as alice" in str(answer["result"]), answer
    finally:
        mcp.close()


def test_nobody_else_speaks_under_the_gateways_issuer(backends, keys):
    """Another subject, or groups, under the gateway's own issuer: refused
    outright (a backend never takes them for a caller or for the gateway)."""
    before = rejections(backends["ev"])
    for token in (assertion(keys, "ev", "alice", GW_ISSUER),
                  assertion(keys, "ev", f"{ITSELF}x", GW_ISSUER)):
        mcp = ModernMcp(backends["ev"].url, token)
        try:
            status, _ = mcp.request("tools/list")
            assert status == 401
        finally:
            mcp.close()
    assert rejections(backends["ev"]) == before + 2


def test_a_binding_naming_the_gateway_itself_grants_that_role(backends, keys):
    mcp = ModernMcp(backends["bound"].url, assertion(keys, "bound", ITSELF, GW_ISSUER))
    try:
        _, answer = mcp.request("tools/list")
        # Bound as viewer: it lists as a viewer now, and may call what a viewer may.
        assert {t["name"] for t in answer["result"]["tools"]} == {"echo"}, answer
        _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "bound"}})
        assert "bound" in str(answer["result"]), answer
        _, answer = mcp.request("tools/call", {"name": "get-sum", "arguments": {"a": 1, "b": 2}})
        assert "error" in answer, answer
    finally:
        mcp.close()


def test_a_list_change_reaches_a_subscribed_caller(gateway, backends):
    before = rejections(backends["fx"])

    async def go():
        got: list[str] = []
        async with sdk_client(gateway.url, token=ALICE, mode="auto") as client:
            await client.list_tools()
            async with client.listen(tools_list_changed=True) as sub:
                await client.call_tool("fx__test_trigger_tool_change", {})
                with anyio.move_on_after(10):
                    async for event in sub:
                        got.append(type(event).__name__)
                        if "Tool" in got[-1]:
                            break
        return got

    got = run_async(go)
    assert any("Tool" in g for g in got), got
    # The gateway re-read the list as itself, and the backend accepted it.
    time.sleep(1)
    assert rejections(backends["fx"]) == before, backends["fx"].stderr_text()[-2000:]
    assert "fx__test_trigger_tool_change" in {t["name"] for t in inventory(gateway)["tools"]}


def test_an_anonymous_caller_is_never_the_gateway_itself(module_facade, backends, keys):
    """A gateway that lets anonymous callers in, in front of a backend that
    binds the gateway itself as a viewer: the gateway lists there as itself,
    but an anonymous caller's call carries no assertion (never the gateway's),
    so the backend refuses it."""
    open_gw = module_facade(
        policy=policy_doc(auth={"anonymous": {"role": "user"}}, defaultAction="allow"),
        extra_args=gateway_args({"bound": backends["bound"].url})
        + ["--gateway-key-file", str(keys / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER])
    deadline = time.monotonic() + 20
    while "bound__echo" not in {t["name"] for t in inventory(open_gw)["tools"]} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "bound__echo" in {t["name"] for t in inventory(open_gw)["tools"]}
    before = rejections(backends["bound"])
    mcp = ModernMcp(open_gw.url)
    try:
        _, answer = mcp.request("tools/call", {"name": "bound__echo", "arguments": {"message": "anon"}})
        assert "error" in answer and "anon" not in str(answer), answer
    finally:
        mcp.close()
    assert rejections(backends["bound"]) > before
