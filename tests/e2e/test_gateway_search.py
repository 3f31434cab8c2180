"""Tool search at the gateway: `search_tools(query, limit)` and `call_tool(id,
arguments)` in front of server-everything, server-filesystem and
mcp-server-git (each behind its own facade), with `toolSearch: only`.

What is shown: the list is the two meta-tools; the labelled queries of
tests/corpora/tool_search_queries.jsonl find their tool in the top five
through the live gateway (recall@5 printed, and held to a bar); a result is
never a tool the caller could not call (a role-gated tool and, in planning
mode, a tool with side effects are left out); `call_tool` by canonical id
`mcp:{backend}:{tool}` runs the tool through every gate a direct call passes.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from era_helpers import ModernMcp
from gateway_helpers import gateway_args, git_repo
from helpers import everything_stdio, run_async
from warden_helpers import (filesystem_stdio, git_stdio, policy_doc, rpc_error, sdk_client,
                            text_of_result, token_entry)

ALICE = "search-alice-token-0123456789"
QUERIES = Path(__file__).resolve().parents[1] / "corpora" / "tool_search_queries.jsonl"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gwsearch").resolve()
    (root / "ws").mkdir()
    (root / "ws" / "found.txt").write_text("found by searching\n")
    git_repo(root / "repo")
    return root


def open_backend() -> dict:
    # Every tool, to anyone the gateway sends: what is kept from a caller
    # below is the gateway's own policy.
    return policy_doc(auth={"anonymous": {"role": "user"}}, defaultAction="allow",
                      sandbox={"writeAllowed": True})


@pytest.fixture(scope="module")
def gateway(module_facade, tree):
    urls = {
        "everything": module_facade(upstream=everything_stdio(), policy=open_backend()).url,
        "filesystem": module_facade(upstream=filesystem_stdio(tree / "ws"), policy=open_backend()).url,
        "git": module_facade(upstream=git_stdio(tree / "repo"), policy=open_backend()).url,
    }
    policy = policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice")]}},
        roles=[{"role": "user", "subjects": ["alice"]}],
        defaultAction="allow", sandbox={"writeAllowed": True}, toolSearch="only",
        tools=[{"name": "filesystem__write_file", "requiredRole": "admin"}],
    )
    return module_facade(policy=policy, extra_args=gateway_args(urls))


def search(mcp: ModernMcp, query: str, limit: int = 5, headers: dict | None = None) -> list[dict]:
    _, answer = mcp.request("tools/call", {"name": "search_tools",
                                           "arguments": {"query": query, "limit": limit}}, headers=headers)
    assert "result" in answer, answer
    return answer["result"]["structuredContent"]["tools"]


def test_the_list_is_the_two_meta_tools(gateway):
    async def go():
        async with sdk_client(gateway.url, ALICE) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert run_async(go) == {"search_tools", "call_tool"}


def test_labelled_queries_find_their_tool_in_the_top_five(gateway):
    cases = [json.loads(line) for line in QUERIES.read_text().splitlines() if line.strip()]
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        misses = []
        for case in cases:
            ids = [t["id"] for t in search(mcp, case["query"])]
            if case["expect"] not in ids:
                misses.append((case["query"], case["expect"], ids))
    finally:
        mcp.close()
    # write_file is the admin's at the gateway: alice's search cannot find it.
    expected_reachable = [c for c in cases if c["expect"] != "mcp:filesystem:write_file"]
    hits = len(expected_reachable) - len([m for m in misses if m[1] != "mcp:filesystem:write_file"])
    print(f"gateway search_tools recall@5: {hits}/{len(expected_reachable)} "
          f"= {100 * hits / len(expected_reachable):.1f}%; misses: {misses}")
    assert len(expected_reachable) >= 30
    assert hits >= 0.9 * len(expected_reachable), misses


def test_results_are_only_tools_the_caller_can_call(gateway):
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        found = search(mcp, "overwrite a file with new content write file", limit=50)
        names = {t["name"] for t in found}
        assert "filesystem__write_file" not in names, names
        assert "filesystem__edit_file" in names, names
        # Planning mode: nothing with a side effect is found.
        planned = search(mcp, "commit the staged changes with a message", limit=50,
                         headers={"Mcp-Warden-Mode": "planning"})
        ids = {t["id"] for t in planned}
        assert "mcp:git:git_commit" not in ids and "mcp:git:git_add" not in ids, ids
        assert "mcp:git:git_diff_staged" in ids, ids
        assert "mcp:git:git_commit" in {t["id"] for t in search(mcp, "commit the staged changes with a message")}
        # Each result is what tools/list would show: a name to call, a schema.
        assert all(t["inputSchema"].get("type") == "object" and t["name"] for t in found)
    finally:
        mcp.close()


def test_call_tool_by_id_passes_every_gate_of_the_target(gateway, tree):
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        _, answer = mcp.request("tools/call", {"name": "call_tool", "arguments": {
            "id": "mcp:filesystem:read_text_file", "arguments": {"path": str(tree / "ws" / "found.txt")}}})
        assert "found by searching" in json.dumps(answer["result"]), answer
        # By the name the caller sees, too.
        _, answer = mcp.request("tools/call", {"name": "call_tool", "arguments": {
            "id": "everything__get-sum", "arguments": {"a": 40, "b": 2}}})
        assert "42" in json.dumps(answer["result"]), answer
        # The target's own gates: write_file is the admin's (-32003), and
        # schema validation is the target's (-32602).
        _, answer = mcp.request("tools/call", {"name": "call_tool", "arguments": {
            "id": "mcp:filesystem:write_file", "arguments": {"path": str(tree / "ws" / "x"), "content": "x"}}})
        assert rpc_error(answer)["code"] == -32003, answer
        _, answer = mcp.request("tools/call", {"name": "call_tool", "arguments": {
            "id": "mcp:everything:get-sum", "arguments": {"a": "forty"}}})
        assert rpc_error(answer)["code"] == -32602, answer
        for unknown in ("mcp:nowhere:echo", "mcp:everything:no-such-tool", "search_tools"):
            _, answer = mcp.request("tools/call", {"name": "call_tool", "arguments": {"id": unknown}})
            assert rpc_error(answer)["code"] == -32004, (unknown, answer)
    finally:
        mcp.close()
    assert not (tree / "ws" / "x").exists()


def test_a_legacy_sdk_client_searches_and_calls(gateway, tree):
    async def go():
        async with sdk_client(gateway.url, ALICE) as client:
            found = await client.call_tool("search_tools", {"query": "read the contents of a text file"})
            target = found.structured_content["tools"][0]
            called = await client.call_tool("call_tool", {"id": target["id"], "arguments": {
                "path": str(tree / "ws" / "found.txt")}})
            return target, called

    target, called = run_async(go)
    assert target["id"] == "mcp:filesystem:read_text_file", target
    assert "found by searching" in text_of_result(called)
