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

import pytest

from era_helpers import MODERN, ModernMcp
from gateway_helpers import gateway_args, gateway_view, git_repo
from helpers import everything_stdio, run_async
from warden_helpers import (Audit, filesystem_stdio, git_stdio, policy_doc, rpc_error, sdk_client,
                            sdk_error, text_of_result)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gw").resolve()
    (root / "ws").mkdir()
    (root / "ws" / "hello.txt").write_text("hello from the filesystem backend\n")
    (root / "ws" / "secret").mkdir()
    (root / "ws" / "secret" / "key.txt").write_text("not for you\n")
    git_repo(root / "repo")
    return root


def everything_policy() -> dict:
    return policy_doc(
        auth={"anonymous": {"role": "user"}},
        defaultAction="deny",
        tools=[{"name": "echo", "limits": {"maxArgBytes": 64}}, {"name": "get-sum"}],
        resources={"defaultAction": "allow"},
        prompts={"defaultAction": "allow"},
    )


def filesystem_policy(ws) -> dict:
    return policy_doc(
        auth={"anonymous": {"role": "user"}},
        defaultAction="deny",
        tools=[
            {"name": "read_text_file",
             "arguments": [{"name": "path", "kind": "path", "allow": [f"{ws}/**"], "deny": [f"{ws}/secret/**"]}]},
            {"name": "list_directory"},
        ],
    )


def git_policy(repo) -> dict:
    return policy_doc(
        auth={"anonymous": {"role": "user"}},
        defaultAction="deny",
        tools=[
            {"name": "git_status",
             "arguments": [{"name": "repo_path", "kind": "path", "allow": [str(repo), f"{repo}/**"]}]},
            {"name": "git_log",
             "arguments": [{"name": "repo_path", "kind": "path", "allow": [str(repo), f"{repo}/**"]}]},
        ],
    )


# The gateway's own policy lets everything through that the backends let
# through (and grants writes), so a refusal seen below is a backend's.
GATEWAY_POLICY = policy_doc(
    auth={"anonymous": {"role": "user"}},
    defaultAction="allow",
    sandbox={"writeAllowed": True},
    resources={"defaultAction": "allow"},
    prompts={"defaultAction": "allow"},
)


@pytest.fixture(scope="module")
def backends(module_facade, tree):
    ws, repo = tree / "ws", tree / "repo"
    return {
        "everything": module_facade(upstream=everything_stdio(), policy=everything_policy(),
                                    extra_args=["--audit", f"file:{tree / 'everything-audit.jsonl'}"]),
        "filesystem": module_facade(upstream=filesystem_stdio(ws), policy=filesystem_policy(ws)),
        "git": module_facade(upstream=git_stdio(repo), policy=git_policy(repo),
                             extra_args=["--audit", f"file:{tree / 'git-audit.jsonl'}"]),
    }


@pytest.fixture(scope="module")
def gateway(module_facade, backends, tree):
    urls = {name: fa.url for name, fa in backends.items()}
    return module_facade(policy=GATEWAY_POLICY,
                         extra_args=gateway_args(urls) + ["--audit", f"file:{tree / 'gateway-audit.jsonl'}"])


EXPECTED = {"everything__echo", "everything__get-sum", "filesystem__read_text_file",
            "filesystem__list_directory", "git__git_status", "git__git_log"}


def test_legacy_sdk_session_sees_the_prefixed_union_and_calls_through(gateway, tree):
    async def go():
        async with sdk_client(gateway.url) as client:
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
        async with sdk_client(gateway.url, mode="auto") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("everything__get-sum", {"a": 2, "b": 40})
            return client.protocol_version, names, result

    version, names, result = run_async(go)
    assert version == MODERN
    assert names == EXPECTED, names
    assert "42" in text_of_result(result)


def test_a_backends_refusal_keeps_the_backends_code(gateway, tree):
    mcp = ModernMcp(gateway.url)
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
        async with sdk_client(gateway.url) as client:
            await client.list_tools()
            return await sdk_error(client.call_tool("everything__echo", {"message": "y" * 200}))

    err = run_async(go)
    assert err.error.code == -32005, err


def test_prompts_and_resources_are_routed(gateway):
    async def go():
        async with sdk_client(gateway.url) as client:
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
