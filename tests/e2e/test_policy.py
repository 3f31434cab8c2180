"""The policy pipeline with real servers and the official Python SDK client.

Upstreams: `@modelcontextprotocol/server-filesystem` over a temporary tree,
`server-everything` (stdio), Python `mcp-server-git` over a temporary repo,
and tests/fixtures/policy_fixture.py for what real servers do not do on demand
(drifting and poisoned definitions, a log of cancellations).

One facade per real server is shared by the module's tests (module_facade);
tests that need their own start one. Definitions that drift or carry
instructions, and reloads, are in test_policy_definitions.py; budgets and
deadlines in test_policy_budgets.py.
"""
from __future__ import annotations

import json
import secrets
import subprocess
import time

import pytest
from mcp import types

from helpers import everything_stdio, metric, run_async
from warden_helpers import (AuthedMcp, filesystem_stdio, fixture_facade, git_stdio, listed, policy_doc,
                            rpc_error, sdk_client, sdk_error, text_of_result, token_entry)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

ALICE = "alice-" + secrets.token_hex(16)   # viewer
BOB = "bob-" + secrets.token_hex(16)       # user
FAKE_GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"   # 36 chars after ghp_
FAKE_AWS = "AKIA" + "Q7XK2M4PZ9RT5WVY"                          # AKIA + 16


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """root/ws/{notes.txt, big.txt, secret/key.txt, sub/}, root/outside.txt: the
    filesystem server may read all of root; the policy allows only ws/ minus secret/."""
    root = tmp_path_factory.mktemp("fsroot").resolve()
    ws = root / "ws"
    (ws / "secret").mkdir(parents=True)
    (ws / "sub").mkdir()
    (ws / "notes.txt").write_text("hello from the workspace\n")
    (ws / "big.txt").write_text("".join(f"line {i:05d} of a long file\n" for i in range(2000)))
    (ws / "secret" / "key.txt").write_text("the secret key file\n")
    (root / "outside.txt").write_text("outside the workspace\n")
    (root / "ws-evil").mkdir()  # a sibling whose name starts like the workspace's
    (root / "ws-evil" / "loot.txt").write_text("outside the workspace\n")
    return root


@pytest.fixture(scope="module")
def fs(module_facade, tree):
    ws = tree / "ws"
    policy = policy_doc(
        server={"namespace": "team-a", "name": "files"},
        auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(BOB, "bob", ["devs"])]}},
        roles=[{"role": "viewer", "subjects": ["alice"]}, {"role": "user", "groups": ["devs"]}],
        defaultAction="deny",
        tools=[
            {"name": "read_text_file", "alias": "read_text", "requiredRole": "viewer",
             "arguments": [{"name": "path", "kind": "path", "allow": [f"{ws}/**"], "deny": [f"{ws}/secret/**"]}],
             "limits": {"maxOutputBytes": 2000}},
            {"name": "list_directory", "requiredRole": "viewer",
             "arguments": [{"name": "path", "kind": "path", "allow": [str(ws), f"{ws}/**"]}]},
            {"name": "get_file_info", "requiredRole": "user"},
            {"name": "write_file", "requiredRole": "user", "writes": True},
            {"name": "read_multiple_files", "requiredRole": "user",   # an array: every element is checked
             "arguments": [{"name": "paths", "kind": "path", "allow": [f"{ws}/**"], "deny": [f"{ws}/secret/**"]}]},
        ],
    )
    return module_facade(upstream=filesystem_stdio(tree), policy=policy)


EVERYTHING_POLICY = policy_doc(
    server={"namespace": "team-a", "name": "everything"},
    auth={"anonymous": {"role": "user"}},
    defaultAction="deny",
    tools=[
        {"name": "echo",
         "arguments": [{"name": "message", "kind": "command", "allow": ["git status", "ls *"],
                        "check": ["git commit"], "deny": ["rm"]}],
         "limits": {"maxArgBytes": 512}},
        {"name": "get-sum", "alias": "add_numbers", "description": "Adds two numbers (through the facade)."},
        {"name": "get-env"},
        {"name": "trigger-long-running-operation", "alias": "long_operation", "limits": {"callTimeoutSeconds": 1}},
        {"name": "get-resource-links", "limits": {"maxOutputBytes": 700}},
    ],
)


@pytest.fixture(scope="module")
def ev(module_facade):
    return module_facade(upstream=everything_stdio(), policy=EVERYTHING_POLICY,
                         env={"WARDEN_E2E_AWS_KEY": FAKE_AWS})


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    repo = tmp_path_factory.mktemp("gitrepo").resolve()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e.test", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e.test", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    for cmd in (["git", "init", "-q", "-b", "main", "."], ["git", "commit", "-q", "--allow-empty", "-m", "initial"]):
        subprocess.run(cmd, cwd=repo, env=env, check=True, timeout=20)
    (repo / "change.txt").write_text("uncommitted\n")
    return repo


@pytest.fixture(scope="module")
def git(module_facade, repo):
    policy = policy_doc(
        auth={"anonymous": {"role": "user"}},
        tools=[
            {"name": "git_status",
             "arguments": [{"name": "repo_path", "kind": "path", "allow": [str(repo), f"{repo}/**"]}]},
            {"name": "git_log",
             "arguments": [{"name": "repo_path", "kind": "path", "allow": [str(repo), f"{repo}/**"]}]},
            {"name": "git_commit"},  # write-capable (readOnlyHint false), no sandbox grant
        ],
    )
    return module_facade(upstream=git_stdio(repo), policy=policy)


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------
def same_denial(a, b, name_a: str, name_b: str) -> None:
    """Two -32004 errors that differ only in the tool name the caller used."""
    assert a.code == b.code == -32004, (a.error, b.error)
    assert a.message.replace(name_a, "<tool>") == b.message.replace(name_b, "<tool>"), (a.message, b.message)
    assert a.data == b.data, (a.data, b.data)


class Elicitor:
    def __init__(self, approve: bool):
        self.approve = approve
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(self, context, params):
        self.asked.append(params)
        if self.approve:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")


# ---------------------------------------------------------------------------
# tools/list virtualization
# ---------------------------------------------------------------------------
def test_hidden_tool_is_absent_and_answers_like_a_nonexistent_tool(fs, ev):
    async def body():
        async with sdk_client(fs.url, BOB) as c:
            names = set(await listed(c))
            # exactly the allowed tools the role may call; write_file needs a sandbox grant
            assert names == {"read_text", "list_directory", "get_file_info", "read_multiple_files"}, names
            hidden = await sdk_error(c.call_tool("move_file", {"source": "/etc/hostname", "destination": "/tmp/x"}))
            missing = await sdk_error(c.call_tool("no_such_tool_xyz", {"source": "/etc/hostname", "destination": "/tmp/x"}))
            same_denial(hidden, missing, "move_file", "no_such_tool_xyz")
            assert hidden.data["reason"] == "tool_not_available" and hidden.data.get("hint")
        async with sdk_client(ev.url) as c:
            names = set(await listed(c))
            assert names == {"echo", "add_numbers", "get-env", "long_operation", "get-resource-links"}, names
            hidden = await sdk_error(c.call_tool("get-tiny-image", {}))
            missing = await sdk_error(c.call_tool("get-tiny-imagf", {}))
            same_denial(hidden, missing, "get-tiny-image", "get-tiny-imagf")

    run_async(body, timeout=60)


def test_alias_description_override_and_routing(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            tools = await listed(c)
            assert "get-sum" not in tools and "add_numbers" in tools
            assert tools["add_numbers"].description == "Adds two numbers (through the facade)."
            assert set(tools["add_numbers"].input_schema["properties"]) == {"a", "b"}
            r = await c.call_tool("add_numbers", {"a": 19, "b": 23})
            assert not r.is_error and "42" in text_of_result(r)
            # the upstream name is not callable under its own name
            e = await sdk_error(c.call_tool("get-sum", {"a": 1, "b": 2}))
            assert e.code == -32004 and e.data["reason"] == "tool_not_available"

    run_async(body)


def test_role_cannot_see_or_call_a_tool(fs, tree):
    async def body():
        async with sdk_client(fs.url, ALICE) as viewer, sdk_client(fs.url, BOB) as user:
            v, u = set(await listed(viewer)), set(await listed(user))
            assert "get_file_info" in u and "get_file_info" not in v, (u, v)
            assert {"read_text", "list_directory"} <= v
            e = await sdk_error(viewer.call_tool("get_file_info", {"path": str(tree / "ws" / "notes.txt")}))
            assert e.code == -32003, e.error
            assert e.data["reason"] == "role_too_low"
            assert (e.data["limit"], e.data["observed"]) == ("user", "viewer")
            # the viewer's own tool works
            r = await viewer.call_tool("read_text", {"path": str(tree / "ws" / "notes.txt")})
            assert "hello from the workspace" in text_of_result(r)
            r = await user.call_tool("get_file_info", {"path": str(tree / "ws" / "notes.txt")})
            assert not r.is_error and "size" in text_of_result(r).lower()

    run_async(body)


# ---------------------------------------------------------------------------
# Every error code from a real call
# ---------------------------------------------------------------------------
def test_code_32001_without_a_token(fs):
    raw = AuthedMcp(fs.url)  # no token
    try:
        r = raw.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
            session=False)
        assert r.status_code == 401, (r.status_code, r.text)
        assert r.json()["error"]["code"] == -32001
        assert r.headers.get("www-authenticate", "").lower().startswith("bearer")
    finally:
        raw.close()

    async def body():
        async with sdk_client(fs.url, "not-a-valid-token") as c:
            await c.list_tools()

    with pytest.raises(BaseException) as info:  # the SDK fails the handshake on 401
        run_async(body, timeout=30)
    assert "401" in repr(info.value) or "Unauthorized" in repr(info.value) or "-32001" in repr(info.value) \
        or "Authentication" in repr(info.value), repr(info.value)


def test_code_32004_argument_rule_and_32006_sandbox(fs, git, tree, repo):
    async def body():
        async with sdk_client(fs.url, BOB) as c:
            target = tree / "ws" / "created-by-test.txt"
            e = await sdk_error(c.call_tool("write_file", {"path": str(target), "content": "x"}))
            assert e.code == -32006 and e.data["reason"] == "write_without_sandbox", e.error
            assert not target.exists()
            e = await sdk_error(c.call_tool("read_text", {"path": str(tree / "ws" / "secret" / "key.txt")}))
            assert e.code == -32004 and e.data["reason"] == "path_denied", e.error
            assert "the secret key file" not in str(e.error)
        async with sdk_client(git.url) as c:
            e = await sdk_error(c.call_tool("git_commit", {"repo_path": str(repo), "message": "sneaky"}))
            assert e.code == -32006, e.error

    run_async(body)
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, timeout=10).stdout
    assert "sneaky" not in log


def test_code_32005_argument_bytes(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            e = await sdk_error(c.call_tool("echo", {"message": "ls " + "a" * 1000}))
            assert e.code == -32005, e.error
            assert e.data["reason"] == "arg_bytes_exceeded"
            assert e.data["limit"] == 512 and e.data["observed"] > 1000
            r = await c.call_tool("echo", {"message": "ls small"})  # under the limit: fine
            assert text_of_result(r) == "Echo: ls small"

    run_async(body)


def test_code_32007_timeout(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            t0 = time.monotonic()
            e = await sdk_error(c.call_tool("long_operation", {"duration": 8, "steps": 4}))
            took = time.monotonic() - t0
            assert e.code == -32007 and e.data["reason"] == "timeout" and e.data["limit"] == 1, e.error
            assert took < 5, f"timeout took {took:.1f}s"
            # the session is still usable afterwards
            assert text_of_result(await c.call_tool("echo", {"message": "ls after"})) == "Echo: ls after"

    run_async(body)


def test_code_32008_check_rule_without_elicitation(ev):
    async def body():
        async with sdk_client(ev.url) as c:  # no elicitation callback: no capability
            e = await sdk_error(c.call_tool("echo", {"message": "git commit -m wip"}))
            assert e.code == -32008, e.error
            assert e.data["reason"].endswith("needs_approval") and e.data.get("hint")

    run_async(body)


def test_code_32602_input_schema_lists_every_violation(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            e = await sdk_error(c.call_tool("add_numbers", {"a": "1", "b": "two"}))
            assert e.code == -32602, e.error
            paths = sorted(v["path"] for v in e.data["violations"])
            assert paths == ["/a", "/b"], e.data  # no coercion of "1", both listed
            e = await sdk_error(c.call_tool("add_numbers", {"a": 1}))
            assert e.code == -32602 and any(v["keyword"] == "required" for v in e.data["violations"]), e.data

    run_async(body)


# ---------------------------------------------------------------------------
# Argument rules
# ---------------------------------------------------------------------------
TRAVERSALS = [
    "{ws}/../outside.txt",
    "{ws}/sub/../../outside.txt",
    "{ws}/%2e%2e/outside.txt",
    "{ws}/%2E%2E%2Foutside.txt",
    "{ws}//secret/key.txt",
    "{ws}/./secret/../secret//key.txt",
    "{ws}/sub/%2e%2e/secret/key.txt",
    "{ws}/notes.txt\u0000/../../outside.txt",
    "{root}/outside.txt",
    "{ws}-evil/loot.txt",
    "{ws}/../ws-evil/loot.txt",
    "{ws}/secret%2fkey.txt",
]


def test_path_traversal_denied(fs, tree):
    ws = tree / "ws"

    async def body():
        async with sdk_client(fs.url, BOB) as c:
            r = await c.call_tool("read_text", {"path": f"{ws}/sub/../notes.txt"})  # stays inside: allowed
            assert "hello from the workspace" in text_of_result(r)
            for pattern in TRAVERSALS:
                path = pattern.format(ws=ws, root=tree)
                e = await sdk_error(c.call_tool("read_text", {"path": path}))
                assert e.code == -32004, (path, e.error)
                assert e.data["reason"] in ("path_denied", "path_not_allowed", "nul_byte"), (path, e.data)
                assert "outside the workspace" not in str(e.error) and "secret key" not in str(e.error)
            r = await c.call_tool("read_multiple_files", {"paths": [f"{ws}/notes.txt", f"{ws}/sub/../notes.txt"]})
            assert "hello from the workspace" in text_of_result(r)
            for paths in ([f"{ws}/notes.txt", f"{ws}/../outside.txt"], [f"{ws}/secret/key.txt", f"{ws}/notes.txt"],
                          [f"{ws}/notes.txt", f"{ws}//secret//key.txt"]):
                e = await sdk_error(c.call_tool("read_multiple_files", {"paths": paths}))
                assert e.code == -32004, (paths, e.error)

    run_async(body)


CHAINED = [
    "git status; rm -rf /",
    "git status && rm -rf /",
    "git status || rm -rf /",
    "git status | sh",
    "ls `rm -rf /`",
    "ls $(rm -rf /)",
    "git status\nrm -rf /",
    "ls > /etc/passwd",
    "FOO=1 rm -rf /",
    "rm -rf /",
    "lsblk",              # an allowed prefix of a word is not an allowed command
    "git statusx",
    "git-status",
    "git status & rm -rf /",
    "git status &rm -rf /",
    "sh -c 'git status'",
]


def test_chained_command_denied(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            assert text_of_result(await c.call_tool("echo", {"message": "git status"})) == "Echo: git status"
            for cmd in CHAINED:
                e = await sdk_error(c.call_tool("echo", {"message": cmd}))
                assert e.code == -32004, (cmd, e.error)
                assert e.data["reason"] and e.data.get("hint"), (cmd, e.data)

    run_async(body)


def test_check_rule_is_answered_by_elicitation(ev):
    approve, decline = Elicitor(True), Elicitor(False)

    async def body():
        async with sdk_client(ev.url, elicitation_callback=approve) as c:
            r = await c.call_tool("echo", {"message": "git commit -m approved"})
            assert text_of_result(r) == "Echo: git commit -m approved"
        async with sdk_client(ev.url, elicitation_callback=decline) as c:
            e = await sdk_error(c.call_tool("echo", {"message": "git commit -m declined"}))
            assert e.code == -32004 and e.data["reason"] == "approval_declined", e.error
            # a passing command asks nobody
            assert text_of_result(await c.call_tool("echo", {"message": "ls"})) == "Echo: ls"

    run_async(body)
    assert len(approve.asked) == 1 and len(decline.asked) == 1
    assert "echo" in approve.asked[0].message
    assert "git commit" in approve.asked[0].message  # the person sees what is being approved


# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------
def test_output_truncated_with_a_marker(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            r = await c.call_tool("get-resource-links", {"count": 10})  # ~1850 bytes upstream
            text = text_of_result(r)
            assert "output truncated" in text, text[-300:]
            assert len(json.dumps(r.model_dump(by_alias=True, exclude_none=True))) < 700 + 200
            r = await c.call_tool("get-resource-links", {"count": 1})
            assert "truncated" not in text_of_result(r)

    run_async(body)


def test_oversized_output_of_a_tool_with_an_output_schema(fs, tree):
    """Every filesystem tool declares an outputSchema, so its structuredContent
    cannot be cut: over maxOutputBytes the call fails with -32005 rather than
    returning a result that breaks the schema (which SDK clients reject)."""
    async def body():
        async with sdk_client(fs.url, BOB) as c:
            e = await sdk_error(c.call_tool("read_text", {"path": str(tree / "ws" / "big.txt")}))
            assert e.code == -32005 and e.data["reason"] == "output_bytes_exceeded", e.error
            assert e.data["limit"] == 2000 and e.data["observed"] > 2000, e.data
            assert "line 00001" not in str(e.error)
            r = await c.call_tool("read_text", {"path": str(tree / "ws" / "notes.txt")})
            assert r.structured_content == {"content": "hello from the workspace\n"}

    run_async(body)


def test_secrets_redacted(ev):
    async def body():
        async with sdk_client(ev.url) as c:
            r = await c.call_tool("echo", {"message": f"ls {FAKE_GITHUB}"})
            text = text_of_result(r)
            assert FAKE_GITHUB not in text and "[REDACTED:github_token]" in text, text
            r = await c.call_tool("get-env", {})
            text = text_of_result(r)
            assert "WARDEN_E2E_AWS_KEY" in text, "the upstream did not get the facade's environment"
            assert FAKE_AWS not in text and "[REDACTED:aws_access_key_id]" in text

    run_async(body)
    assert metric(ev.admin_url, "mcpwarden_redactions_total", kind="github_token") >= 1
    assert metric(ev.admin_url, "mcpwarden_redactions_total", kind="aws_access_key_id") >= 1


def test_structured_content_redacted(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(auth={"anonymous": {"role": "user"}},
                                                     tools=[{"name": "secret"}]))

    async def body():
        async with sdk_client(fa.url) as c:
            r = await c.call_tool("secret", {})
            dumped = json.dumps(r.model_dump(by_alias=True))
            assert "ghp_Z9y8" not in dumped and "[REDACTED:github_token]" in text_of_result(r)
            assert r.structured_content and "[REDACTED:github_token]" in json.dumps(r.structured_content)
            r = await c.call_tool("secret", {"mode": "tool_error"})
            assert r.is_error and "ghp_Z9y8" not in text_of_result(r), text_of_result(r)
            assert "[REDACTED:github_token]" in text_of_result(r)

    run_async(body)


def test_upstream_error_message_redacted(facade, tmp_path):
    """Regression: a JSON-RPC error answer from the upstream reached the client unredacted."""
    fa = fixture_facade(facade, tmp_path, policy_doc(auth={"anonymous": {"role": "user"}},
                                                     tools=[{"name": "secret"}]))
    raw = AuthedMcp(fa.url)
    try:
        raw.initialize()
        err = rpc_error(raw.call_tool("secret", {"mode": "rpc_error"}))
        assert "ghp_Z9y8" not in json.dumps(err), err
    finally:
        raw.close()


# ---------------------------------------------------------------------------
# Timeout that cancels upstream
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# mcp-server-git
# ---------------------------------------------------------------------------
def test_git_server_path_rule(git, repo):
    async def body():
        async with sdk_client(git.url) as c:
            assert set(await listed(c)) == {"git_status", "git_log"}
            r = await c.call_tool("git_status", {"repo_path": str(repo)})
            assert "change.txt" in text_of_result(r)
            for bad in (f"{repo}/..", f"{repo}/../../etc", f"{repo}/%2e%2e", "/etc", f"{repo}//..//"):
                e = await sdk_error(c.call_tool("git_status", {"repo_path": bad}))
                assert e.code == -32004, (bad, e.error)
            e = await sdk_error(c.call_tool("git_reset", {"repo_path": str(repo)}))
            assert e.code == -32004 and e.data["reason"] == "tool_not_available"

    run_async(body)


# ---------------------------------------------------------------------------
# More budgets, output schema, risk, pagination, schema cleaning
# ---------------------------------------------------------------------------


def test_structured_content_checked_against_output_schema(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(auth={"anonymous": {"role": "user"}},
                                                     tools=[{"name": "weather"}]))
    raw = AuthedMcp(fa.url)
    try:
        raw.initialize()
        good = raw.call_tool("weather", {"good": True})
        assert good["result"]["structuredContent"] == {"temperature": 21.5}, good
        bad = rpc_error(raw.call_tool("weather", {}))
        assert bad["data"]["reason"] == "output_schema_violation", bad
        assert "hot" not in json.dumps(bad)
    finally:
        raw.close()


def test_risk_ceiling_risk_prefix_and_annotations_floor(facade, tree):
    """riskCeiling medium: a destructive tool is refused unless approved; a
    rule's lower `risk` cannot undercut its annotations; riskPrefix marks it."""
    ws = tree / "ws"
    fa = facade(upstream=filesystem_stdio(tree), policy=policy_doc(
        auth={"anonymous": {"role": "user"}}, riskPrefix=True, riskCeiling="medium",
        approvedTools=["write_file"], sandbox={"writeAllowed": True},
        tools=[
            {"name": "read_text_file"},
            {"name": "write_file", "arguments": [{"name": "path", "kind": "path", "allow": [f"{ws}/**"]}]},
            {"name": "edit_file", "risk": "low"},   # destructiveHint: true says otherwise
        ]))

    async def body():
        async with sdk_client(fa.url) as c:
            tools = await listed(c)
            assert set(tools) == {"read_text_file", "write_file"}, set(tools)
            assert tools["write_file"].description.startswith("["), tools["write_file"].description
            assert not tools["read_text_file"].description.startswith("[")
            e = await sdk_error(c.call_tool("edit_file", {"path": str(ws / "notes.txt"), "edits": []}))
            assert e.code == -32004 and e.data["reason"] == "risk_above_ceiling", e.error
            assert e.data["limit"] == "medium" and e.data["observed"] in ("high", "critical"), e.data
            target = ws / "written-by-approved-tool.txt"
            r = await c.call_tool("write_file", {"path": str(target), "content": "approved write"})
            assert not r.is_error, text_of_result(r)
            assert target.read_text() == "approved write"
            target.unlink()

    run_async(body)


def test_pages_merged_and_schemas_kept_as_written(facade, ev):
    from helpers import fixture_stdio  # the paginating fixture: 2 tools per page
    fa = facade(upstream=fixture_stdio(), policy=policy_doc(
        auth={"anonymous": {"role": "user"}},  # no annotations there: writes inferred, so say it
        tools=[{"name": n, "writes": False} for n in ("echo", "progress", "cancelled")]))

    async def body():
        async with sdk_client(fa.url) as c:
            page = await c.list_tools()
            assert {t.name for t in page.tools} == {"echo", "progress", "cancelled"}  # pages 1, 2 and 3
            assert page.next_cursor is None
            assert text_of_result(await c.call_tool("progress", {"steps": 1})) == "done"
        # Schemas reach the client as the server wrote them (the spec asks
        # intermediaries to preserve JSON Schema keywords, `$schema` included).
        async with sdk_client(ev.url) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            echo = tools["echo"].input_schema
            assert echo.get("$schema", "").startswith("http://json-schema.org/"), echo
            assert echo["properties"]["message"]["type"] == "string"
            assert all(t.input_schema.get("type") == "object" for t in tools.values())

    run_async(body)
