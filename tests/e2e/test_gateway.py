"""Gateway mode: one endpoint in front of several facades, each with its own
policy in front of a real server.

    server-everything ─ facade (its policy) ─┐
    server-filesystem ─ facade (its policy) ─┼─ gateway (its own policy) ─ clients
    mcp-server-git    ─ facade (its policy) ─┘

Clients: the official Python SDK in a legacy (2025-11-25) session and in its
modern (2026-07-28) mode, and raw modern requests where an exact error code is
asserted. What is shown: the prefixed union of what each backend allows;
calls routed to the right backend under its own name; resources by
`backend+uri`; a backend's refusal keeping the backend's code.
"""
from __future__ import annotations

import json

import anyio
import pytest
import yaml

from conftest import free_port, sidecar_path, wait_http_ok

from era_helpers import MODERN, ModernMcp, modern_fixture_http
from gateway_helpers import (colliding_backends, colliding_gateway, gateway_args, gateway_keys, gateway_view,
                             git_repo, open_policy)
from helpers import everything_stdio, metric, run_async
from warden_helpers import (Audit, AuthedMcp, filesystem_stdio, git_stdio, policy_doc, rpc_error,
                            sdk_client, sdk_error, text_of_result, token_entry)


ALICE, BOB = "gw-alice-token-0123456789", "gw-bob-token-0123456789"
GW_ISSUER = "gw-e2e"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gw").resolve()
    (root / "ws").mkdir()
    (root / "ws" / "hello.txt").write_text("hello from the filesystem backend\n")
    (root / "ws" / "secret").mkdir()
    (root / "ws" / "secret" / "key.txt").write_text("not for you\n")
    git_repo(root / "repo")
    gateway_keys(root)
    return root


def trusts_gateway(tree, name: str, roles: list[dict]) -> dict:
    """A backend's auth: only the gateway's assertions (for this backend),
    naming callers of the gateway's static tokens; its own role bindings."""
    return {
        "auth": {"gateways": [{"issuer": GW_ISSUER, "publicKeyFile": str(tree / "gateway.pub.pem"),
                               "audience": name, "callerIssuers": ["static"]}]},
        "roles": roles,
    }


def everything_policy(tree) -> dict:
    return policy_doc(
        **trusts_gateway(tree, "everything", [{"role": "user", "issuer": "static", "subjects": ["alice"]},
                                              {"role": "viewer", "issuer": "static", "subjects": ["bob"]}]),
        defaultAction="deny",
        tools=[{"name": "echo", "requiredRole": "viewer", "limits": {"maxArgBytes": 64}},
               {"name": "get-sum", "requiredRole": "user"}],
        resources={"defaultAction": "allow"},
        prompts={"defaultAction": "allow"},
    )


def filesystem_policy(tree) -> dict:
    ws = tree / "ws"
    return policy_doc(
        **trusts_gateway(tree, "filesystem", [{"role": "user", "issuer": "static", "groups": ["devs"]}]),
        defaultAction="deny",
        tools=[
            {"name": "read_text_file",
             "arguments": [{"name": "path", "kind": "path", "allow": [f"{ws}/**"], "deny": [f"{ws}/secret/**"]}]},
            {"name": "list_directory"},
        ],
    )


def git_policy(tree) -> dict:
    repo = tree / "repo"
    paths = [{"name": "repo_path", "kind": "path", "allow": [str(repo), f"{repo}/**"]}]
    return policy_doc(
        **trusts_gateway(tree, "git", [{"role": "user", "issuer": "static", "subjects": ["alice"]}]),
        defaultAction="deny",
        tools=[{"name": "git_status", "arguments": paths}, {"name": "git_log", "arguments": paths}],
    )


# The gateway's own policy lets everything through that the backends let
# through (and grants writes), so a refusal seen below is a backend's.
GATEWAY_POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice", ["devs"]), token_entry(BOB, "bob", ["devs"])]}},
    roles=[{"role": "user", "subjects": ["alice", "bob"]}],
    defaultAction="allow",
    sandbox={"writeAllowed": True},
    resources={"defaultAction": "allow"},
    prompts={"defaultAction": "allow"},
)


@pytest.fixture(scope="module")
def backends(module_facade, tree):
    return {
        "everything": module_facade(upstream=everything_stdio(), policy=everything_policy(tree),
                                    extra_args=["--audit", f"file:{tree / 'everything-audit.jsonl'}"]),
        "filesystem": module_facade(upstream=filesystem_stdio(tree / "ws"), policy=filesystem_policy(tree)),
        "git": module_facade(upstream=git_stdio(tree / "repo"), policy=git_policy(tree)),
    }


def gateway_flags(tree) -> list[str]:
    return ["--gateway-key-file", str(tree / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER]


@pytest.fixture(scope="module")
def gateway(module_facade, backends, tree):
    urls = {name: fa.url for name, fa in backends.items()}
    return module_facade(policy=GATEWAY_POLICY,
                         extra_args=gateway_args(urls) + gateway_flags(tree)
                         + ["--audit", f"file:{tree / 'gateway-audit.jsonl'}"])


# What alice may use at each backend, each under its prefix.
EXPECTED = {"everything__echo", "everything__get-sum", "filesystem__read_text_file",
            "filesystem__list_directory", "git__git_status", "git__git_log"}


def test_legacy_sdk_session_sees_the_prefixed_union_and_calls_through(gateway, tree):
    async def go():
        async with sdk_client(gateway.url, ALICE) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            echoed = await client.call_tool("everything__echo", {"message": "through the gateway"})
            read = await client.call_tool("filesystem__read_text_file", {"path": str(tree / "ws" / "hello.txt")})
            status = await client.call_tool("git__git_status", {"repo_path": str(tree / "repo")})
            return names, echoed, read, status

    names, echoed, read, status = run_async(go)
    # Exactly what the backends' policies expose, each under its prefix.
    assert names == EXPECTED, names
    assert not echoed.is_error and "through the gateway" in text_of_result(echoed)
    assert "hello from the filesystem backend" in text_of_result(read)
    assert "change.txt" in text_of_result(status)


def test_modern_sdk_client_sees_the_same_union(gateway):
    async def go():
        async with sdk_client(gateway.url, ALICE, mode="auto") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("everything__get-sum", {"a": 2, "b": 40})
            return client.protocol_version, names, result

    version, names, result = run_async(go)
    assert version == MODERN
    assert names == EXPECTED, names
    assert "42" in text_of_result(result)


def test_a_backends_refusal_keeps_the_backends_code(gateway, tree):
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        mcp.request("tools/list")
        # The filesystem backend's argument rule (the gateway has none).
        _, answer = mcp.request("tools/call", {"name": "filesystem__read_text_file",
                                               "arguments": {"path": str(tree / "ws" / "secret" / "key.txt")}})
        error = rpc_error(answer)
        assert error["code"] == -32004, error
        assert "not for you" not in str(answer)
        # The everything backend's argument budget (the gateway's is far larger).
        _, answer = mcp.request("tools/call", {"name": "everything__echo", "arguments": {"message": "x" * 200}})
        error = rpc_error(answer)
        assert error["code"] == -32005, error
    finally:
        mcp.close()
    # The refusal is the backend's own: its audit says so, under its own name.
    audit = Audit(tree / "everything-audit.jsonl")
    record = audit.wait(lambda r: r.get("tool") == "echo" and r.get("code") == -32005)
    assert record["decision"] == "deny"


def test_legacy_sdk_gets_the_backend_code_too(gateway, tree):
    async def go():
        async with sdk_client(gateway.url, ALICE) as client:
            await client.list_tools()
            return await sdk_error(client.call_tool("everything__echo", {"message": "y" * 200}))

    err = run_async(go)
    assert err.error.code == -32005, err


def test_prompts_and_resources_are_routed(gateway):
    async def go():
        async with sdk_client(gateway.url, ALICE) as client:
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            prompt = await client.get_prompt("everything__simple-prompt")
            resources = (await client.list_resources()).resources
            uri = next(str(r.uri) for r in resources if str(r.uri).startswith("everything+"))
            read = await client.read_resource(uri)
            templates = (await client.list_resource_templates()).resource_templates
            return prompts, prompt, uri, read, templates

    prompts, prompt, uri, read, templates = run_async(go)
    assert "everything__simple-prompt" in prompts and all(p.startswith("everything__") for p in prompts)
    assert prompt.messages
    # The URI names its backend; the content comes back under the same URI.
    assert str(read.contents[0].uri) == uri
    assert all(t.name.startswith("everything__") and t.uri_template.startswith("everything+")
               for t in templates), templates


def test_admin_view_counts_each_backends_tools(gateway):
    view = gateway_view(gateway)
    assert {b["name"]: b["tools"] for b in view["backends"]} == {"everything": 2, "filesystem": 2, "git": 2}
    assert view["conflicts"] == []


def test_each_caller_sees_exactly_what_each_backend_allows_them(gateway):
    mcp = ModernMcp(gateway.url, BOB)
    try:
        # Alice lists first, so the gateway has seen every tool she may use.
        _, answer = mcp.request("tools/list", token=ALICE)
        assert {t["name"] for t in answer["result"]["tools"]} == EXPECTED
        _, answer = mcp.request("tools/list")
        # Bob: a viewer at everything (echo, not get-sum), a user at
        # filesystem by group, nobody at git.
        assert {t["name"] for t in answer["result"]["tools"]} == {
            "everything__echo", "filesystem__read_text_file", "filesystem__list_directory"}
        _, answer = mcp.request("tools/call", {"name": "everything__echo", "arguments": {"message": "bob"}})
        assert "bob" in str(answer["result"])
        # What a backend hides from him it refuses him too, with its own code.
        _, answer = mcp.request("tools/call", {"name": "everything__get-sum", "arguments": {"a": 1, "b": 2}})
        assert rpc_error(answer)["code"] == -32003, answer
        _, answer = mcp.request("tools/call", {"name": "git__git_status", "arguments": {"repo_path": "/"}})
        assert rpc_error(answer)["code"] in (-32003, -32001), answer
        _, answer = mcp.request("tools/call", {"name": "everything__get-sum", "arguments": {"a": 1, "b": 2}},
                                token=ALICE)
        assert "3" in str(answer["result"]), answer
    finally:
        mcp.close()


def test_search_finds_only_what_each_backend_shows_the_caller(module_facade, backends, tree):
    """The gateway ranks every tool anyone was shown, but a backend shows
    each caller its own: bob, nobody at git, must not find git's tools (nor
    their descriptions and schemas) after alice, who may use them, listed
    them."""
    urls = {name: fa.url for name, fa in backends.items()}
    searching = module_facade(policy={**GATEWAY_POLICY, "toolSearch": "alongside"},
                              extra_args=gateway_args(urls) + gateway_flags(tree))
    mcp = ModernMcp(searching.url, BOB)
    query = {"name": "search_tools", "arguments": {"query": "git status log of the repository", "limit": 50}}
    try:
        _, listed = mcp.request("tools/list", token=ALICE)
        assert "git__git_status" in {t["name"] for t in listed["result"]["tools"]}, listed
        _, found = mcp.request("tools/call", query, token=ALICE)
        assert "git__git_status" in {t["name"] for t in found["result"]["structuredContent"]["tools"]}, found
        _, found = mcp.request("tools/call", query)
        names = {t["name"] for t in found["result"]["structuredContent"]["tools"]}
        assert not {n for n in names if n.startswith("git__")}, names
        # What a backend does show him, he finds.
        echo = {"name": "search_tools", "arguments": {"query": "echo back the message", "limit": 50}}
        _, found = mcp.request("tools/call", echo)
        names = {t["name"] for t in found["result"]["structuredContent"]["tools"]}
        assert "everything__echo" in names and "everything__get-sum" not in names, names
    finally:
        mcp.close()


def test_the_backend_hears_the_caller_never_the_token(gateway, backends, tree):
    audit = Audit(tree / "everything-audit.jsonl")
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        mcp.request("tools/list")
        _, answer = mcp.request("tools/call", {"name": "everything__echo", "arguments": {"message": "who"}})
        assert "who" in str(answer["result"])
    finally:
        mcp.close()
    record = audit.wait(lambda r: r.get("tool") == "echo" and r.get("decision") == "allow")
    assert (record["issuer"], record["subject"], record["auth"]) == ("static", "alice", "gateway"), record
    # The caller's own token means nothing at a backend: only the gateway's
    # assertion for that backend is believed.
    direct = AuthedMcp(backends["everything"].url, ALICE)
    try:
        r = direct.http.post(direct.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
            headers={"Accept": "application/json, text/event-stream"})
        assert r.status_code == 401, r.text
    finally:
        direct.http.close()


def test_without_the_gateways_key_backends_hear_of_nobody(module_facade, backends, tree):
    """The same gateway without --gateway-key-file: backends that accept only
    the gateway's assertions refuse every request, so nothing is offered."""
    urls = {name: fa.url for name, fa in backends.items()}
    bare = module_facade(policy=GATEWAY_POLICY, extra_args=gateway_args(urls))
    mcp = ModernMcp(bare.url, ALICE)
    try:
        _, answer = mcp.request("tools/list")
        assert "error" in answer or answer["result"]["tools"] == [], answer
    finally:
        mcp.close()


# --- names that could be confused: withheld and reported, resolved only by a mapping ---
@pytest.fixture(scope="module")
def colliding(module_facade, tree):
    return colliding_backends(module_facade, tree)


@pytest.fixture(scope="module")
def confused(module_facade, tree, colliding):
    """A gateway in front of the colliding backends, without a mapping."""
    return colliding_gateway(module_facade, tree, colliding, "confused-audit.jsonl")


def test_a_name_two_backends_serve_is_withheld_and_reported(confused, tree):
    mcp = ModernMcp(confused.url)
    try:
        _, answer = mcp.request("tools/list")
        names = {t["name"] for t in answer["result"]["tools"]}
        # Neither copy of echo or get-sum, and not the shadowing echo either.
        assert names == {"fs__read_text_file"}, names
        _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "which one?"}})
        assert rpc_error(answer)["code"] == -32004, answer
        _, answer = mcp.request("tools/call", {"name": "evil__echo", "arguments": {"message": "x"}})
        assert rpc_error(answer)["code"] == -32004, answer
    finally:
        mcp.close()
    conflicts = gateway_view(confused)["conflicts"]
    collisions = {tuple(c["names"]): c["backends"] for c in conflicts if c["kind"] == "collision"}
    assert collisions[("echo",)] == ["ev-a", "ev-b"] and collisions[("get-sum",)] == ["ev-a", "ev-b"]
    shadowing = [c for c in conflicts if c["kind"] == "shadowing"]
    assert [c["names"] for c in shadowing] == [["evil__echo"]], conflicts
    assert "tool_reference" in shadowing[0]["detail"]
    assert metric(confused.admin_url, "mcpwarden_gateway_conflicts", kind="collision") >= 2
    assert metric(confused.admin_url, "mcpwarden_gateway_conflicts", kind="shadowing") == 1
    audit = Audit(tree / "confused-audit.jsonl")
    audit.wait(lambda r: r["event"] == "gateway_conflict" and r["reason"] == "collision" and r["tool"] == "echo")
    audit.wait(lambda r: r["event"] == "gateway_conflict" and r["reason"] == "shadowing")


def test_a_mapping_serves_the_collided_name_from_the_named_backend_only(module_facade, tree, colliding,
                                                                         confused):
    """The same backends, the gateway restarted with `echo` mapped to ev-b:
    echo is served by ev-b alone; get-sum (unmapped) and the shadowing
    evil__echo (mapped too: a mapping never lifts shadowing) stay withheld."""
    # Without the mapping (the gateway above) echo is withheld.
    mcp = ModernMcp(confused.url)
    try:
        _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "which one?"}})
        assert rpc_error(answer)["code"] == -32004, answer
    finally:
        mcp.close()
    gw = colliding_gateway(module_facade, tree, colliding, "resolved-audit.jsonl",
                           resolve=["echo=ev-b", "evil__echo=evil"])
    audits = {name: Audit(tree / f"{name}-audit.jsonl") for name in ("ev-a", "ev-b")}
    calls = {name: len([r for r in a.lines() if r["event"] == "tool_call"]) for name, a in audits.items()}
    mcp = ModernMcp(gw.url)
    try:
        _, answer = mcp.request("tools/list")
        names = {t["name"] for t in answer["result"]["tools"]}
        assert names == {"echo", "fs__read_text_file"}, names
        _, answer = mcp.request("tools/call", {"name": "echo", "arguments": {"message": "mapped"}})
        assert "mapped" in json.dumps(answer["result"]), answer
        for name, code in (("get-sum", -32004), ("evil__echo", -32004)):
            _, answer = mcp.request("tools/call", {"name": name, "arguments": {"message": "x", "a": 1, "b": 2}})
            assert rpc_error(answer)["code"] == code, (name, answer)
    finally:
        mcp.close()
    audits["ev-b"].wait(lambda r: r["event"] == "tool_call" and r["tool"] == "echo"
                        and r["decision"] == "allow")
    audits["ev-a"].settle()
    after = {name: len([r for r in a.lines() if r["event"] == "tool_call"]) for name, a in audits.items()}
    assert after["ev-a"] == calls["ev-a"], "the unmapped backend's copy was called"
    assert after["ev-b"] == calls["ev-b"] + 1
    conflicts = {(c["kind"], tuple(c["names"])): c for c in gateway_view(gw)["conflicts"]}
    assert conflicts[("collision", ("echo",))]["resolved"] == {"name": "echo", "backend": "ev-b"}
    assert conflicts[("collision", ("get-sum",))]["resolved"] is None
    assert conflicts[("shadowing", ("evil__echo",))]["resolved"] is None
    assert metric(gw.admin_url, "mcpwarden_gateway_conflicts_resolved", kind="collision") == 1
    assert metric(gw.admin_url, "mcpwarden_gateway_conflicts", kind="collision") >= 1
    assert metric(gw.admin_url, "mcpwarden_gateway_conflicts", kind="shadowing") == 1
    audit = Audit(tree / "resolved-audit.jsonl")
    audit.wait(lambda r: r["event"] == "gateway_conflict" and r["reason"] == "collision"
               and r["tool"] == "echo" and r["decision"] == "allow" and "ev-b" in r["detail"])


# --- a backend that goes away and comes back ---
def start_backend(start_process, tmp_path, port: int, admin_port: int):
    """An open everything facade on a port of the test's choosing (so the
    same backend can come back where the gateway expects it)."""
    policy = tmp_path / f"ev-{port}.yaml"
    policy.write_text(yaml.safe_dump(open_policy(tools=[{"name": "echo"}])))
    proc = start_process([str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}",
                          "--admin-listen", f"127.0.0.1:{admin_port}", "--policy", str(policy),
                          "--generated-admin-token-file", str(tmp_path / f"admin-{admin_port}.token"),
                          "--", *everything_stdio()])
    wait_http_ok(f"http://127.0.0.1:{admin_port}/readyz", proc=proc)
    return proc


def test_a_killed_backend_is_withdrawn_and_returns(start_process, facade, tmp_path):
    port, admin_port = free_port(), free_port()
    backend = start_backend(start_process, tmp_path, port, admin_port)
    other = facade(upstream=everything_stdio(), policy=open_policy(tools=[{"name": "echo"}]))
    gw = facade(policy=open_policy(tools=[{"name": "ev__echo"}, {"name": "other__echo"}]),
                extra_args=gateway_args({"ev": f"http://127.0.0.1:{port}/mcp", "other": other.url}))

    def listed() -> set[str]:
        mcp = ModernMcp(gw.url)
        try:
            return {t["name"] for t in mcp.request("tools/list")[1]["result"]["tools"]}
        finally:
            mcp.close()

    def answering() -> dict[str, bool]:
        return {b["name"]: b["answering"] for b in gateway_view(gw)["backends"]}

    assert listed() == {"ev__echo", "other__echo"}
    assert answering() == {"ev": True, "other": True}
    backend.stop()
    # Its tools are withdrawn from every new list; the other backend serves on.
    assert listed() == {"other__echo"}
    assert answering() == {"ev": False, "other": True}
    start_backend(start_process, tmp_path, port, admin_port)
    assert listed() == {"ev__echo", "other__echo"}
    assert answering() == {"ev": True, "other": True}
    mcp = ModernMcp(gw.url)
    try:
        mcp.request("tools/list")
        _, answer = mcp.request("tools/call", {"name": "ev__echo", "arguments": {"message": "back"}})
        assert "back" in str(answer["result"]), answer
    finally:
        mcp.close()


# --- a backend's list change reaches the gateway's subscribed callers ---
@pytest.fixture
def changing(start_process, facade):
    """A gateway in front of a facade in front of the modern fixture server,
    whose test_trigger_tool_change announces a tools/list change."""
    server = modern_fixture_http(start_process)
    tools = [{"name": "test_trigger_tool_change"}, {"name": "test_simple_text"}]
    # The fixture's tools carry no read-only hints: they may write.
    backend = facade(upstream_url=server, policy=open_policy(tools=tools, sandbox={"writeAllowed": True}))
    return facade(policy=open_policy(tools=[{"name": f"fx__{t['name']}"} for t in tools],
                                     sandbox={"writeAllowed": True}),
                  extra_args=gateway_args({"fx": backend.url}))


def test_a_list_change_reaches_a_modern_subscriber(changing):
    async def go():
        got: list[str] = []
        async with sdk_client(changing.url, mode="auto") as client:
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


def test_a_list_change_reaches_a_legacy_session(changing):
    async def go():
        got: list[str] = []

        async def handler(message):
            got.append(repr(message))

        async with sdk_client(changing.url, message_handler=handler) as client:
            await client.list_tools()
            await client.call_tool("fx__test_trigger_tool_change", {})
            with anyio.move_on_after(10):
                while not any("tools/list_changed" in g or "ToolListChanged" in g for g in got):
                    await anyio.sleep(0.1)
        return got

    got = run_async(go)
    assert any("tools/list_changed" in g or "ToolListChanged" in g for g in got), got
