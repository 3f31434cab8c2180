"""The seams: where two of the facade's features meet, a caller with a valid
token must not get more than either allows. One test per hole a review
found, each against a real server where the review used one, each showing
the attack fails and the legitimate path still works:

  1. two argument rules ask for approval on different channels: the
     strongest channel wins (out of band), and the request names both rules;
  2. secrets in a tool's result are redacted as the client will read them
     (decoded JSON), whatever the raw bytes look like;
  3. a JSON-RPC batch is bounded, and each element is a request for every
     budget;
  4. the admin plane is never open: `/tools` and `/approvals` need a token
     (one is generated when none is configured), deciding needs a role the
     policy names for approving, the approver is who authenticated, and the
     caller whose call waits cannot approve it;
  5. the client cannot widen the server's scope through `roots/list`: the
     facade answers it from the policy, and offers `roots` only when the
     policy has some;
  6. one identity cannot fill the out-of-band approval queue;
  7. a `requestState` that carried an approval runs its call once;
  9. a budget can span a caller's sessions: `maxCallsPerIdentity` is not
     reset by a new session.

Servers: @modelcontextprotocol/server-filesystem and server-everything
(Node), mcp-server-git (Python), over stdio.
"""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import threading
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import types

from conftest import free_port, managed_process, system_node, wait_port
from era_helpers import ModernMcp
from helpers import RawMcp, everything_stdio, parse_body, run_async
from warden_helpers import (Audit, Keys, decide_approval, filesystem_stdio, git_stdio, oidc_claims, policy_doc,
                            sdk_client, sdk_error, text_of_result, token_entry, wait_for, with_approvers)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

ANON = {"anonymous": {"role": "user"}}
ADMIN_TOKEN = "admin-" + secrets.token_hex(16)
# A person who decides out-of-band approvals (the admin role: the default approver role).
CAROL = "carol-" + secrets.token_hex(16)


def admin(fa, method: str, path: str, **kw) -> httpx.Response:
    return httpx.request(method, f"{fa.admin_url}{path}", timeout=5, headers=fa.admin_headers(), **kw)


def pending(fa) -> list[dict]:
    r = admin(fa, "GET", "/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]


class SelfApprover:
    """A client that declares elicitation and accepts whatever it is asked:
    the agent answering its own confirmation."""

    def __init__(self):
        self.asked: list[str] = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})


# ---------------------------------------------------------------------------
# 1. Two rules, two channels: the strongest wins
# ---------------------------------------------------------------------------
@pytest.fixture
def workspace(tmp_path) -> Path:
    root = tmp_path / "work"
    for d in ("prod", "dev"):
        (root / d).mkdir(parents=True)
        (root / d / "app.txt").write_text(f"{d} app\n")
    return root.resolve()


def two_channel_policy(root: Path) -> dict:
    # Moving anything out of prod asks the caller's user; writing into dev
    # needs a person on the admin port. A move from prod to dev trips both.
    return with_approvers(policy_doc(auth=ANON, defaultAction="deny", sandbox={"writeAllowed": True}, tools=[
        {"name": "move_file", "requiredRole": "user", "arguments": [
            {"name": "source", "kind": "path", "allow": [f"{root}/**"], "check": [f"{root}/prod/**"]},
            {"name": "destination", "kind": "path", "allow": [f"{root}/**"], "check": [f"{root}/dev/**"],
             "approval": "outOfBand"}]}]), {"carol": CAROL})


def test_1_a_call_two_rules_check_waits_for_the_stronger_channel(facade, workspace, tmp_path):
    token_file = tmp_path / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    fa = facade(upstream=filesystem_stdio(workspace), policy=two_channel_policy(workspace),
                extra_args=["--admin-token-file", str(token_file), "--approval-timeout-secs", "4"])
    me = SelfApprover()
    seen: dict = {}

    def approve_when_listed():
        calls = wait_for(lambda: pending(fa), timeout=10, what="a pending approval")
        seen["pending"] = calls
        seen["post"] = decide_approval(fa.admin_url, calls[0]["id"], "approve", CAROL)

    async def body():
        async with sdk_client(fa.url, elicitation_callback=me) as c:
            # The attack: prod -> dev trips both rules; the agent accepts its
            # own elicitation, nobody approves out of band: nothing moves.
            e = await sdk_error(c.call_tool("move_file", {
                "source": str(workspace / "prod/app.txt"), "destination": str(workspace / "dev/stolen.txt")}))
            assert (e.code, e.data["reason"]) == (-32008, "approval_timeout"), e.error
            assert (workspace / "prod/app.txt").exists() and not (workspace / "dev/stolen.txt").exists()
            # The legitimate path: a person approves on the admin port, and
            # sees both rules that asked.
            t = threading.Thread(target=approve_when_listed)
            t.start()
            r = await c.call_tool("move_file", {
                "source": str(workspace / "prod/app.txt"), "destination": str(workspace / "dev/moved.txt")})
            await anyio.to_thread.run_sync(t.join)
            assert not r.is_error, r
            assert (workspace / "dev/moved.txt").read_text() == "prod app\n"

    run_async(body)
    (call,) = seen["pending"]
    named = json.dumps(call)
    assert "source" in named and "destination" in named, call
    assert seen["post"].status_code == 200


# ---------------------------------------------------------------------------
# 2. Secrets are redacted as the client reads them
# ---------------------------------------------------------------------------
DB_PASSWORD = "hunter2 with spaces & " + secrets.token_hex(6)
ENV_PASSWORD = "Tr0ub4dor&3xyz;" + secrets.token_hex(4)
AWS_SECRET = secrets.token_urlsafe(30)[:40]


def git_repo_with_an_env_file(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("config", "user.email", "dev@example.com")
    run("config", "user.name", "dev")
    (repo / ".env").write_text(f'DB_PASSWORD="{DB_PASSWORD}"\nDB_HOST=db.internal\n')
    run("add", ".env")
    run("commit", "-q", "-m", "add env")
    return repo


def test_2_secrets_in_results_are_redacted_as_the_client_reads_them(facade, tmp_path):
    repo = git_repo_with_an_env_file(tmp_path)
    fa = facade(upstream=git_stdio(repo), policy=policy_doc(auth=ANON, defaultAction="allow"))

    async def body():
        async with sdk_client(fa.url) as c:
            shown = text_of_result(await c.call_tool("git_show", {"repo_path": str(repo), "revision": "HEAD"}))
            assert "DB_HOST=db.internal" in shown, shown  # the rest of the diff passes untouched
            assert DB_PASSWORD not in shown and "hunter2" not in shown, shown
            assert "REDACTED" in shown

    run_async(body)


def test_2_the_servers_environment_does_not_leak_through_get_env(facade):
    env = {"DB_PASSWORD": ENV_PASSWORD, "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    fa = facade(upstream=everything_stdio(), env=env,
                policy=policy_doc(auth=ANON, defaultAction="allow", sandbox={"writeAllowed": True}))

    async def body():
        async with sdk_client(fa.url) as c:
            text = text_of_result(await c.call_tool("get-env", {}))
            assert "DB_PASSWORD" in text and "AWS_SECRET_ACCESS_KEY" in text, text
            for secret in (ENV_PASSWORD, ENV_PASSWORD.split("&")[1], AWS_SECRET):
                assert secret not in text, text

    run_async(body)


# ---------------------------------------------------------------------------
# 3. Batches are bounded, and every element is a request
# ---------------------------------------------------------------------------
def batch_session(url: str) -> RawMcp:
    c = RawMcp(url, version="2025-03-26")  # the last revision with batches
    c.initialize()
    return c


def test_3_a_batch_is_bounded_and_each_element_meets_every_budget(facade):
    policy = policy_doc(auth=ANON, defaultAction="allow", limits={"maxCallsPerSession": 3})
    fa = facade(upstream=everything_stdio(), policy=policy)  # the default batch limit (16)
    c = batch_session(fa.url)
    try:
        # The attack: one POST that makes the facade answer 20,000 requests.
        huge = [{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in range(20_000)]
        r = c.post(huge)
        assert r.status_code == 400, (r.status_code, r.text[:300])
        (err,) = parse_body(r)
        assert err["error"]["code"] == -32600 and err["error"]["data"]["limit"] == 16, err
        # Within the limit a batch works, one answer per element ...
        r = c.post([{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in range(8)])
        answers = sorted(m["id"] for m in parse_body(r))
        assert r.status_code == 200 and answers == list(range(8)), r.text[:300]
        # ... and each element is a call against the session's budget.
        calls = [{"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                  "params": {"name": "echo", "arguments": {"message": f"m{i}"}}} for i in range(6)]
        by_id = {m["id"]: m for m in parse_body(c.post(calls))}
        ok = [i for i, m in by_id.items() if "result" in m]
        over = [m["error"]["code"] for m in by_id.values() if "error" in m]
        assert len(by_id) == 6 and len(ok) == 3 and over == [-32005] * 3, by_id
    finally:
        c.close()


# ---------------------------------------------------------------------------
# 4. The admin plane is never open
# ---------------------------------------------------------------------------
ISSUER, AUDIENCE = "https://idp.seams.example", "mcp"


def test_4_the_admin_plane_needs_a_token_an_approver_role_and_another_person(facade, tmp_path):
    keys = Keys()
    jwks = keys.write_jwks(tmp_path / "jwks.json")
    jwt = lambda sub, groups: keys.mint(oidc_claims(ISSUER, AUDIENCE, sub, groups))  # noqa: E731
    # The lead is an approver and a caller; security approves; the intern only calls.
    lead, security, intern = jwt("lead", ["approvers"]), jwt("security", ["approvers"]), jwt("intern", ["devs"])
    audit = Audit(tmp_path / "audit.jsonl")
    policy = policy_doc(
        auth={"jwt": [{"issuer": ISSUER, "audiences": [AUDIENCE], "jwksFile": str(jwks)}]},
        roles=[{"role": "admin", "groups": ["approvers"]}, {"role": "user", "groups": ["devs"]}],
        approval={"approverRoles": ["admin"]}, defaultAction="deny",
        tools=[{"name": "echo", "arguments": [{"name": "message", "kind": "string", "allow": [".*"],
                                               "check": ["deploy .*"], "approval": "outOfBand"}]}])
    # No --admin-token-file: the README's first command.
    fa = facade(upstream=everything_stdio(), policy=policy,
                extra_args=["--approval-timeout-secs", "30", "--audit", audit.arg])
    # The facade generated an admin token only its user can read.
    assert fa.admin_token_path.stat().st_mode & 0o777 == 0o600
    url = fa.admin_url
    results: dict = {}

    def call():
        results["lead"] = ModernMcp(fa.url, lead, timeout=40).request(
            "tools/call", {"name": "echo", "arguments": {"message": "deploy prod"}})

    t = threading.Thread(target=call)
    t.start()
    try:
        (waiting,) = wait_for(lambda: pending(fa), timeout=10, what="the lead's call pending")
        cid = waiting["id"]
        # The attack: a viewer's browser, rebound, posts a forged approver as text/plain.
        forged = json.dumps({"decision": "approve", "approver": "security-team"})
        r = httpx.post(f"{url}/approvals/{cid}", content=forged, timeout=5,
                       headers={"Host": "rebind.attacker.example", "Content-Type": "text/plain"})
        assert r.status_code == 403, (r.status_code, r.text)
        r = httpx.post(f"{url}/approvals/{cid}", content=forged, headers={"Content-Type": "text/plain"}, timeout=5)
        assert r.status_code == 401, (r.status_code, r.text)
        for path in ("/approvals", "/tools"):
            assert httpx.get(f"{url}{path}", timeout=5).status_code == 401, path
            r = httpx.get(f"{url}{path}", headers={**fa.admin_headers(), "Origin": "http://rebind.attacker.example"},
                          timeout=5)
            assert r.status_code == 403, (path, r.status_code)
        bearer = lambda tok: {"Authorization": f"Bearer {tok}"}  # noqa: E731
        # The admin token reads, never decides.
        assert httpx.get(f"{url}/tools", headers=fa.admin_headers(), timeout=5).status_code == 200
        assert decide_approval(url, cid, "approve", fa.admin_token).status_code == 403
        # The caller whose call waits cannot approve it, approver role or not.
        r = decide_approval(url, cid, "approve", lead)
        assert r.status_code == 403 and "your own" in r.text, (r.status_code, r.text)
        # Someone without an approver role cannot decide (nor read).
        assert decide_approval(url, cid, "approve", intern).status_code == 403
        assert httpx.get(f"{url}/approvals", headers=bearer(intern), timeout=5).status_code == 403
        # An approver's own token still needs JSON, and cannot name someone else.
        r = httpx.post(f"{url}/approvals/{cid}", content=json.dumps({"decision": "approve"}),
                       headers={**bearer(security), "Content-Type": "text/plain"}, timeout=5)
        assert r.status_code == 415, (r.status_code, r.text)
        r = httpx.post(f"{url}/approvals/{cid}", json={"decision": "approve", "approver": "security-team"},
                       headers=bearer(security), timeout=5)
        assert r.status_code == 400, (r.status_code, r.text)
        assert [p["id"] for p in pending(fa)] == [cid], "the call was decided by a refused request"
        # The legitimate path: another person with the approver role decides.
        assert httpx.get(f"{url}/approvals", headers=bearer(security), timeout=5).status_code == 200
        r = decide_approval(url, cid, "approve", security)
        assert r.status_code == 200 and r.json()["approver"] == f"security ({ISSUER})", (r.status_code, r.text)
    finally:
        for p in pending(fa):
            decide_approval(url, p["id"], "deny", security)
        t.join(timeout=40)
    _, answer = results["lead"]
    assert answer["result"]["content"][0]["text"] == "Echo: deploy prod", answer
    line = audit.wait(lambda l: l.get("event") == "tool_call" and l.get("approver"))
    assert line["approver"] == f"security ({ISSUER})" and "security-team" not in audit.text(), line


# ---------------------------------------------------------------------------
# 5. The client cannot widen the server's scope through roots/list
# ---------------------------------------------------------------------------
def test_5_the_client_cannot_widen_the_servers_roots(facade, workspace):
    asked: list[int] = []

    async def everything_please(context):
        # The attack: the client answers the server's roots/list with the whole disk.
        asked.append(1)
        return types.ListRootsResult(roots=[types.Root(uri="file:///", name="everything")])

    async def listing(c, path: Path) -> tuple[bool, str]:
        r = await c.call_tool("list_directory", {"path": str(path)})
        return r.is_error, text_of_result(r)

    dev = workspace / "dev"
    no_roots = policy_doc(auth=ANON, defaultAction="allow")
    # As the operator compiles it from the workspace mount (here: a narrower one).
    with_roots = policy_doc(auth=ANON, defaultAction="allow", roots=[{"uri": f"file://{dev}", "name": "dev"}])
    for policy, allowed, entry in ((no_roots, workspace, "[DIR] dev"), (with_roots, dev, "[FILE] app.txt")):
        fa = facade(upstream=filesystem_stdio(workspace), policy=policy)

        async def body():
            async with sdk_client(fa.url, list_roots_callback=everything_please) as c:
                # server-filesystem asks for roots after the handshake, and
                # takes the answer as its allowed directories: give it time.
                with anyio.fail_after(10):
                    while True:
                        dirs = text_of_result(await c.call_tool("list_allowed_directories", {}))
                        if str(allowed) in dirs and (allowed == workspace or f"{workspace}\n" not in dirs + "\n"):
                            break
                        await anyio.sleep(0.2)
                await anyio.sleep(1)  # a late roots answer would land by now
                refused, text = await listing(c, Path("/etc"))
                assert refused and "passwd" not in text, text
                assert "\n/\n" not in "\n" + dirs + "\n", dirs
                # The legitimate path: the policy's scope still lists.
                refused, text = await listing(c, allowed)
                assert not refused and entry in text, text

        run_async(body)
    assert asked == [], "the facade asked the client for the server's roots"


@pytest.fixture(scope="module")
def reference_server(node22):
    """The conformance suite's own reference server (modern and legacy) over HTTP."""
    reference = Path(__file__).resolve().parents[1] / "conformance" / "reference"
    tsx = reference / "node_modules" / "tsx" / "dist" / "cli.mjs"
    if not tsx.exists():
        pytest.skip(f"{reference}/node_modules is missing: run `make setup`")
    port = free_port()
    with managed_process([system_node(), str(tsx), str(reference / "everything-server.ts")],
                         env=dict(os.environ, PORT=str(port)), cwd=reference) as mp:
        wait_port(port, timeout=60, proc=mp)
        yield f"http://127.0.0.1:{port}/mcp"


def test_5_a_modern_servers_question_for_roots_gets_the_policys(facade, tmp_path, reference_server):
    """The stateless revision asks inside a call's `input_required` result:
    the facade answers `roots/list` itself from the policy, never the client,
    whatever the client puts in its retry."""
    root = tmp_path / "workspace"
    root.mkdir()
    fa = facade(upstream_url=reference_server, extra_args=["--root", str(root)])
    mcp = ModernMcp(fa.url)
    everything = {"roots": {}, "elicitation": {}, "sampling": {}}
    # Only roots asked: answered by the facade, the client never sees a question.
    status, answer = mcp.request("tools/call", {"name": "test_input_required_result_list_roots", "arguments": {}},
                                 capabilities=everything)
    assert status == 200 and answer["result"]["content"][0]["text"] == "Found 1 root(s)", answer
    # Answers sent with no question asked (no requestState of the facade's):
    # a server that reads inputResponses without a state of its own would
    # take the client's roots. None of them reaches it; it asks, and the
    # facade answers.
    forged = {"roots": [{"uri": "file:///"}, {"uri": "file:///etc"}]}
    status, answer = mcp.request("tools/call", {"name": "test_input_required_result_list_roots", "arguments": {},
                                                "inputResponses": {"roots_request": forged}},
                                 capabilities=everything)
    assert status == 200 and answer["result"]["content"][0]["text"] == "Found 1 root(s)", answer
    # Roots beside other questions: the client is asked the others only, and
    # its forged answer for roots (the whole disk, three times) is replaced.
    status, answer = mcp.request("tools/call", {"name": "test_input_required_result_multiple_inputs",
                                                "arguments": {}}, capabilities=everything)
    result = answer["result"]
    assert result["resultType"] == "input_required", answer
    asked = {q["method"] for q in result["inputRequests"].values()}
    assert asked == {"elicitation/create", "sampling/createMessage"}, result["inputRequests"]
    forged = {"roots": [{"uri": "file:///"}, {"uri": "file:///etc"}, {"uri": "file:///root"}]}
    responses = {"user_name": {"action": "accept", "content": {"name": "mallory"}},
                 "greeting": {"role": "assistant", "content": {"type": "text", "text": "hi"},
                              "model": "m", "stopReason": "endTurn"},
                 "client_roots": forged}
    status, answer = mcp.request("tools/call", {"name": "test_input_required_result_multiple_inputs", "arguments": {},
                                                "inputResponses": responses,
                                                "requestState": result.get("requestState")},
                                 capabilities=everything)
    assert status == 200, answer
    text = answer["result"]["content"][0]["text"]
    assert "Roots: 1" in text, answer


# ---------------------------------------------------------------------------
# 6. One identity cannot fill the approval queue
# ---------------------------------------------------------------------------
ALICE, BOB = "alice-" + secrets.token_hex(8), "bob-" + secrets.token_hex(8)
QUEUE_POLICY = with_approvers(policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(BOB, "bob")]}},
    roles=[{"role": "user", "subjects": ["alice", "bob"]}],
    defaultAction="deny", sandbox={"writeAllowed": True},
    tools=[{"name": "echo", "arguments": [{"name": "message", "kind": "string", "allow": [".*"],
                                           "check": ["deploy .*"], "approval": "outOfBand"}]}]),
    {"carol": CAROL})


def test_6_one_identity_cannot_fill_the_approval_queue(facade, tmp_path):
    token_file = tmp_path / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    fa = facade(upstream=everything_stdio(), policy=QUEUE_POLICY,
                # Each identity's share is a quarter of the queue by default: 2 of 8.
                extra_args=["--admin-token-file", str(token_file), "--approval-timeout-secs", "20",
                            "--max-pending-approvals", "8"])
    alice, bob = ModernMcp(fa.url, ALICE, timeout=30), ModernMcp(fa.url, BOB, timeout=30)
    results: dict[str, tuple] = {}

    def call(who: ModernMcp, key: str):
        results[key] = who.request("tools/call", {"name": "echo", "arguments": {"message": f"deploy {key}"}})

    waiting = [threading.Thread(target=call, args=(alice, f"a{i}")) for i in range(2)]
    for t in waiting:
        t.start()
    try:
        wait_for(lambda: len(pending(fa)) == 2, timeout=10, what="alice's two calls pending")
        # Alice's third call is over her share: refused at once, clearly.
        _, answer = alice.request("tools/call", {"name": "echo", "arguments": {"message": "deploy a3"}})
        assert answer["error"]["code"] == -32008, answer
        assert answer["error"]["data"]["reason"] == "approval_share_exhausted", answer
        # Bob still gets his turn in the queue.
        t = threading.Thread(target=call, args=(bob, "b1"))
        t.start()
        waiting.append(t)
        wait_for(lambda: any(p["subject"] == "bob" for p in pending(fa)), timeout=10, what="bob's call pending")
    finally:
        for p in pending(fa):
            decide_approval(fa.admin_url, p["id"], "deny", CAROL)
        for t in waiting:
            t.join(timeout=30)
        alice.close()
        bob.close()
    assert results["b1"][1]["error"]["data"]["reason"] == "approval_declined", results["b1"]


# ---------------------------------------------------------------------------
# 7. An approved requestState runs its call once
# ---------------------------------------------------------------------------
ELICITS = {"elicitation": {}}
APPROVE = {"mcp-warden/approval": {"action": "accept", "content": {"approve": True}}}
STATE_POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice")]}},
    roles=[{"role": "user", "subjects": ["alice"]}], defaultAction="deny", sandbox={"writeAllowed": True},
    tools=[{"name": "echo", "arguments": [{"name": "message", "kind": "string", "allow": [".*"],
                                           "check": ["deploy .*"]}]}])


def test_7_an_approved_request_state_runs_its_call_once(facade):
    fa = facade(upstream=everything_stdio(), policy=STATE_POLICY)
    mcp = ModernMcp(fa.url, ALICE)
    params = {"name": "echo", "arguments": {"message": "deploy prod"}}
    try:
        _, asked = mcp.request("tools/call", params, capabilities=ELICITS)
        state = asked["result"]["requestState"]
        retry = {**params, "inputResponses": APPROVE, "requestState": state}
        _, first = mcp.request("tools/call", retry, capabilities=ELICITS)
        assert first["result"]["content"][0]["text"] == "Echo: deploy prod", first
        for _ in range(3):
            _, again = mcp.request("tools/call", retry, capabilities=ELICITS)
            assert again.get("error", {}).get("code") == -32602, again
            assert again["error"]["data"]["reason"] == "request_state_used", again
    finally:
        mcp.close()


# ---------------------------------------------------------------------------
# 9. Budgets can span a caller's sessions
# ---------------------------------------------------------------------------
IDENTITY_POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(BOB, "bob")]}},
    roles=[{"role": "user", "subjects": ["alice", "bob"]}], defaultAction="allow",
    limits={"maxCallsPerSession": 2, "maxCallsPerIdentity": {"calls": 2, "per": "hour"}})


def test_9_a_new_session_does_not_reset_the_identity_budget(facade):
    fa = facade(upstream=everything_stdio(), policy=IDENTITY_POLICY)

    async def one_call(token: str, n: int):
        """One call in a session of its own: its text, or its error."""
        from mcp.shared.exceptions import MCPError
        async with sdk_client(fa.url, token) as c:
            try:
                return text_of_result(await c.call_tool("echo", {"message": f"m{n}"}))
            except MCPError as e:
                return (e.code, e.data["reason"], e.data.get("limit"))

    async def body():
        # The attack: five sessions, each with two calls' session budget.
        outcomes = [await one_call(ALICE, n) for n in range(5)]
        assert outcomes[:2] == ["Echo: m0", "Echo: m1"], outcomes
        assert outcomes[2:] == [(-32005, "calls_per_identity_exceeded", 2)] * 3, outcomes
        # Another identity has its own budget.
        assert await one_call(BOB, 9) == "Echo: m9"

    run_async(body)
