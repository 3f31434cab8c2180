"""Planning mode and side-effect tags, through a gateway and in a plain facade.

    server-filesystem ─ facade (read_text_file, write_file) ─┐
    mcp-server-git    ─ facade (git_status, git_commit)     ─┴─ gateway (its own policy) ─ clients

Both backends expose their write tools (and their sandboxes allow writes), so
whatever hides or refuses `write_file` and `git_commit` below is planning
mode at the gateway: asked for by the caller (the `Mcp-Warden-Mode` header on
a request, the `mcpwarden.dev/mode` `_meta` key on a request or on a legacy
session's `initialize`), or imposed on a role by the gateway's profile, which
no caller can leave. The refusal is -32004 with reason `planning_mode`, the
effect that decided, and a hint.
"""
from __future__ import annotations

import pytest

from era_helpers import ModernMcp
from gateway_helpers import gateway_args, gateway_keys, git_repo
from helpers import RawMcp, parse_body, run_async, text_of
from warden_helpers import (filesystem_stdio, git_stdio, policy_doc, rpc_error, sdk_client,
                            sdk_error, text_of_result, token_entry)

ALICE, PLANNER = "plan-alice-token-0123456789", "plan-planner-token-0123456789"
GW_ISSUER = "gw-planning-e2e"
PLANNING = {"Mcp-Warden-Mode": "planning"}
META_KEY = "mcpwarden.dev/mode"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gwplan").resolve()
    (root / "ws").mkdir()
    (root / "ws" / "notes.txt").write_text("a plan needs facts\n")
    git_repo(root / "repo")
    gateway_keys(root)
    return root


def backend_policy(tree, name: str, tools: list[dict]) -> dict:
    return policy_doc(
        auth={"gateways": [{"issuer": GW_ISSUER, "publicKeyFile": str(tree / "gateway.pub.pem"),
                            "audience": name, "callerIssuers": ["static"]}]},
        roles=[{"role": "admin", "issuer": "static", "subjects": ["alice", "planner"]}],
        defaultAction="deny", tools=tools, sandbox={"writeAllowed": True},
    )


@pytest.fixture(scope="module")
def gateway(module_facade, tree):
    fs = module_facade(upstream=filesystem_stdio(tree / "ws"), policy=backend_policy(
        tree, "filesystem", [{"name": "read_text_file"}, {"name": "write_file"}]))
    git = module_facade(upstream=git_stdio(tree / "repo"), policy=backend_policy(
        tree, "git", [{"name": "git_status"}, {"name": "git_commit"}]))
    # alice is an admin; every `user` (the planner) is held in planning mode.
    policy = policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(PLANNER, "planner")]}},
        roles=[{"role": "admin", "subjects": ["alice"]}, {"role": "user", "subjects": ["planner"]}],
        roleRestrictions=[{"role": "user", "mode": "planning"}],
        defaultAction="allow", sandbox={"writeAllowed": True},
    )
    return module_facade(policy=policy, extra_args=gateway_args({"filesystem": fs.url, "git": git.url})
                         + ["--gateway-key-file", str(tree / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER])


ALL = {"filesystem__read_text_file", "filesystem__write_file", "git__git_status", "git__git_commit"}
READ_ONLY = {"filesystem__read_text_file", "git__git_status"}


def names(answer: dict) -> set[str]:
    return {t["name"] for t in answer["result"]["tools"]}


def assert_planning_refusal(answer: dict, tool: str, effect: str) -> None:
    error = rpc_error(answer)
    assert error["code"] == -32004, error
    assert error["data"]["reason"] == "planning_mode", error
    assert error["data"]["observed"] == effect, error
    assert error["data"]["hint"], error
    assert tool in error["message"] and "planning mode" in error["message"], error


def test_the_header_puts_one_request_in_planning_mode(gateway, tree):
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        _, plain = mcp.request("tools/list")
        _, planned = mcp.request("tools/list", headers=PLANNING)
        assert names(plain) == ALL, plain
        assert names(planned) == READ_ONLY, planned
        _, answer = mcp.request("tools/call", {"name": "filesystem__write_file", "arguments": {
            "path": str(tree / "ws" / "plan.txt"), "content": "x"}}, headers=PLANNING)
        assert_planning_refusal(answer, "filesystem__write_file", "delete")
        _, answer = mcp.request("tools/call", {"name": "git__git_commit", "arguments": {
            "repo_path": str(tree / "repo"), "message": "no"}}, headers=PLANNING)
        assert_planning_refusal(answer, "git__git_commit", "write")
        _, answer = mcp.request("tools/call", {"name": "filesystem__read_text_file", "arguments": {
            "path": str(tree / "ws" / "notes.txt")}}, headers=PLANNING)
        assert "a plan needs facts" in str(answer["result"]), answer
    finally:
        mcp.close()
    assert not (tree / "ws" / "plan.txt").exists()


def test_the_meta_key_puts_one_request_in_planning_mode(gateway):
    mcp = ModernMcp(gateway.url, ALICE)
    try:
        _, answer = mcp.request("tools/list", {"_meta": {META_KEY: "planning"}})
        assert names(answer) == READ_ONLY, answer
        _, answer = mcp.request("tools/call", {"name": "git__git_commit", "arguments": {
            "repo_path": "/nowhere", "message": "no"}, "_meta": {META_KEY: "planning"}})
        assert_planning_refusal(answer, "git__git_commit", "write")
    finally:
        mcp.close()


class Session(RawMcp):
    """A legacy session of `token`'s caller."""

    def __init__(self, url: str, token: str):
        super().__init__(url, version="2025-11-25")
        self.token = token

    def headers(self, extra=None, session=True):
        return super().headers({"Authorization": f"Bearer {self.token}", **(extra or {})}, session)

    def initialize_in_planning(self) -> None:
        rid = self.next_id()
        r = self.post({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": {
            "protocolVersion": self.version, "capabilities": {}, "_meta": {META_KEY: "planning"},
            "clientInfo": {"name": "planner", "version": "0"}}}, session=False)
        assert r.status_code == 200, r.text
        self.session_id = r.headers["mcp-session-id"]
        (msg,) = [m for m in parse_body(r) if m.get("id") == rid]
        self.negotiated = msg["result"]["protocolVersion"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202


def test_a_legacy_session_asked_for_at_initialize_stays_in_planning_mode(gateway, tree):
    s = Session(gateway.url, ALICE)
    try:
        s.initialize_in_planning()
        # Later requests carry neither the header nor the key: the session holds it.
        assert names(s.request("tools/list")) == READ_ONLY
        assert_planning_refusal(s.call_tool("filesystem__write_file", {
            "path": str(tree / "ws" / "later.txt"), "content": "x"}), "filesystem__write_file", "delete")
        assert "a plan needs facts" in text_of(s.call_tool("filesystem__read_text_file", {
            "path": str(tree / "ws" / "notes.txt")}))
        # Asking for normal mode does not lift it.
        answer = s.request("tools/list", {"_meta": {META_KEY: "normal"}})
        assert names(answer) == READ_ONLY
    finally:
        s.close()
    assert not (tree / "ws" / "later.txt").exists()


def test_a_role_in_planning_mode_cannot_leave_it(gateway):
    async def go():
        async with sdk_client(gateway.url, PLANNER) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            refused = await sdk_error(client.call_tool("git__git_commit", {"repo_path": "/x", "message": "m"}))
            return listed, refused

    listed, refused = run_async(go)
    assert listed == READ_ONLY, listed
    assert refused.error.code == -32004 and refused.error.data["reason"] == "planning_mode", refused
    mcp = ModernMcp(gateway.url, PLANNER)
    try:
        _, answer = mcp.request("tools/list", {"_meta": {META_KEY: "normal"}},
                                headers={"Mcp-Warden-Mode": "normal"})
        assert names(answer) == READ_ONLY, answer
    finally:
        mcp.close()


def test_a_plain_facade_enforces_its_profiles_mode_and_denied_tags(facade, tree):
    """No gateway: server-filesystem behind one facade whose profile denies
    the `delete` effect outright; a caller still asks for planning mode."""
    token = "plain-token-0123456789abcdef"
    policy = policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(token, "alice")]}},
        roles=[{"role": "user", "subjects": ["alice"]}],
        defaultAction="deny", sandbox={"writeAllowed": True}, denySideEffects=["delete"],
        tools=[{"name": "read_text_file"}, {"name": "write_file"}, {"name": "create_directory"}],
    )
    fa = facade(upstream=filesystem_stdio(tree / "ws"), policy=policy)

    async def go():
        async with sdk_client(fa.url, token) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            refused = await sdk_error(client.call_tool("write_file", {
                "path": str(tree / "ws" / "denied.txt"), "content": "x"}))
            read = await client.call_tool("read_text_file", {"path": str(tree / "ws" / "notes.txt")})
            return listed, refused, read

    listed, refused, read = run_async(go)
    # write_file is destructive (it overwrites): a `delete` effect; create_directory is not.
    assert listed == {"read_text_file", "create_directory"}, listed
    assert refused.error.code == -32004 and refused.error.data["reason"] == "side_effect_denied", refused
    assert refused.error.data["observed"] == "delete", refused
    assert "a plan needs facts" in text_of_result(read)
    mcp = ModernMcp(fa.url, token)
    try:
        _, answer = mcp.request("tools/list", headers=PLANNING)
        assert names(answer) == {"read_text_file"}, answer
    finally:
        mcp.close()


def test_planning_mode_reaches_the_backend_which_knows_its_own_effect_tags(module_facade, tree):
    """The gateway judges a tool by what its listing shows; a backend's
    profile may know more (here: `list_directory` tagged `delete`, which
    nothing in its definition says). A gateway's planning mode travels with
    the call, so the backend refuses by its own tags; alice, who is not in
    planning mode, calls it."""
    fs = module_facade(upstream=filesystem_stdio(tree / "ws"), policy=backend_policy(
        tree, "filesystem", [{"name": "list_directory", "sideEffects": ["delete"]}]))
    policy = policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(PLANNER, "planner")]}},
        roles=[{"role": "admin", "subjects": ["alice"]}, {"role": "user", "subjects": ["planner"]}],
        roleRestrictions=[{"role": "user", "mode": "planning"}],
        defaultAction="allow", sandbox={"writeAllowed": True},
    )
    gw = module_facade(policy=policy, extra_args=gateway_args({"filesystem": fs.url})
                       + ["--gateway-key-file", str(tree / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER])
    mcp = ModernMcp(gw.url, PLANNER)
    call = {"name": "filesystem__list_directory", "arguments": {"path": str(tree / "ws")}}
    try:
        _, answer = mcp.request("tools/call", call)
        assert_planning_refusal(answer, "list_directory", "delete")
        _, answer = mcp.request("tools/call", call, token=ALICE)
        assert "notes.txt" in str(answer["result"]), answer
    finally:
        mcp.close()


def test_the_gateways_refused_effect_tags_reach_the_backend_too(module_facade, tree):
    """The same for `denySideEffects`: the gateway refuses `delete` tools,
    and the backend, told so with the call, refuses `list_directory` by its
    own `delete` tag, which the gateway cannot see; `read_text_file` runs."""
    fs = module_facade(upstream=filesystem_stdio(tree / "ws"), policy=backend_policy(
        tree, "filesystem", [{"name": "list_directory", "sideEffects": ["delete"]}, {"name": "read_text_file"}]))
    policy = policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice")]}},
        roles=[{"role": "admin", "subjects": ["alice"]}],
        denySideEffects=["delete"], defaultAction="allow", sandbox={"writeAllowed": True},
    )
    gw = module_facade(policy=policy, extra_args=gateway_args({"filesystem": fs.url})
                       + ["--gateway-key-file", str(tree / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER])
    mcp = ModernMcp(gw.url, ALICE)
    try:
        _, answer = mcp.request("tools/call", {"name": "filesystem__list_directory",
                                               "arguments": {"path": str(tree / "ws")}})
        error = rpc_error(answer)
        assert error["code"] == -32004 and error["data"]["reason"] == "side_effect_denied", error
        assert error["data"]["observed"] == "delete", error
        _, answer = mcp.request("tools/call", {"name": "filesystem__read_text_file",
                                               "arguments": {"path": str(tree / "ws" / "notes.txt")}})
        assert "a plan needs facts" in str(answer["result"]), answer
    finally:
        mcp.close()
