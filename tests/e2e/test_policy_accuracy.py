"""Policy accuracy through the facade: command rules an attacker cannot talk around,
path rules that fold case, cover denied directories and read file:// URIs,
poisoning findings that say why, and the out-of-band approval path.

Upstreams: tests/fixtures/policy_fixture.py (its `echo` tool takes any
text, and its raw log shows what reached the server) and
`@modelcontextprotocol/server-filesystem` over a temporary tree (a real
server that would open what the facade let through).
"""
from __future__ import annotations

import json
import secrets
import threading

import anyio
import httpx
import pytest
from mcp import types

from helpers import run_async
from warden_helpers import (Audit, filesystem_stdio, policy_doc, policy_fixture_stdio, sdk_client, sdk_error,
                            text_of_result, tools_admin, wait_for, with_approvers,
                            decide_approval)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

ANON = {"anonymous": {"role": "user"}}


# ---------------------------------------------------------------------------
# Command rules
# ---------------------------------------------------------------------------
COMMAND_POLICY = policy_doc(auth=ANON, tools=[{"name": "echo", "arguments": [{
    "name": "text", "kind": "command",
    "allow": ["git status", "git log *", "git push *"],
    "check": ["git push"],
    "deny": ["git push --force", "git push -f", "git log --output"]}]}])

# (command line, expected reason): what a shell would run decides, not the text.
REFUSED = [
    ("git status -s", "command_not_allowed"),                      # exact pattern: no extra flags
    ("git status --output=/tmp/x", "command_not_allowed"),
    ("git push ${IFS}--force", "command_denied"),                  # the reproduction
    ("git push origin $'\\x2d\\x2dforce'", "command_denied"),      # ANSI-C hex escapes
    ("git push origin main --force", "command_denied"),            # the option anywhere
    ("git push -uf origin", "command_denied"),                     # in a cluster
    ("git push --forc", "command_denied"),                         # abbreviated
    ("git push \"$OPTS\"", "command_denied"),                      # an expansion that may be --force
    ("git push {origin,--force}", "command_denied"),               # brace expansion
    ("git log --output=/etc/cron.d/x", "command_denied"),          # file write under an allowed prefix
    ("$CMD status", "dynamic_command"),
    ("git log; git push -f", "command_denied"),
]


def test_command_rules_through_the_facade(facade, tmp_path):
    log = tmp_path / "upstream.log"
    fa = facade(upstream=policy_fixture_stdio(), policy=COMMAND_POLICY, env={"FIXTURE_LOG": str(log)})

    async def body():
        async with sdk_client(fa.url) as c:
            for ok in ["git status", "git log --oneline -n 3", "git log src/*.rs"]:
                assert text_of_result(await c.call_tool("echo", {"text": ok})) == ok
            for line, reason in REFUSED:
                e = await sdk_error(c.call_tool("echo", {"text": line}))
                assert (e.code, e.data["reason"]) == (-32004, reason), (line, e.error)
            # A push that is not forced needs a person; this client cannot ask one.
            e = await sdk_error(c.call_tool("echo", {"text": "git push origin main"}))
            assert (e.code, e.data["reason"]) == (-32008, "command_needs_approval"), e.error

    run_async(body)
    seen = log.read_text()
    for line, _ in REFUSED:
        assert json.dumps(line)[1:-1] not in seen, f"{line!r} reached the server"


# ---------------------------------------------------------------------------
# Path rules, against the real filesystem server
# ---------------------------------------------------------------------------
@pytest.fixture
def tree(tmp_path):
    ws = (tmp_path / "ws").resolve()
    for d in ("src", ".git", "secrets", "Docs"):
        (ws / d).mkdir(parents=True)
    (ws / "src" / "a.txt").write_text("hello\n")
    (ws / ".env").write_text("TOKEN=very-secret\n")
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "secrets" / "k.txt").write_text("secret key\n")
    (ws / "Docs" / "guide.md").write_text("# Guide\n")
    (tmp_path / "outside.txt").write_text("outside\n")
    return ws


def test_path_rules_through_the_facade(facade, tree):
    ws = tree
    rule = {"name": "path", "kind": "path", "root": str(ws), "allow": ["**", str(ws)],
            "deny": ["**/.env", "**/.git/**", "secrets/**"]}
    fa = facade(upstream=filesystem_stdio(ws.parent), policy=policy_doc(auth=ANON, tools=[
        {"name": "read_text_file", "arguments": [rule]},
        {"name": "list_directory", "arguments": [rule]}]))

    async def body():
        async with sdk_client(fa.url) as c:
            r = await c.call_tool("read_text_file", {"path": str(ws / "src" / "a.txt")})
            assert text_of_result(r) == "hello\n"
            # A directory a deny covers is denied itself, however it is spelled.
            for d in [ws / ".git", f"{ws}/secrets/.", f"{ws}/secrets/", f"{ws}/SECRETS", f"{ws}/.GIT"]:
                e = await sdk_error(c.call_tool("list_directory", {"path": str(d)}))
                assert (e.code, e.data["reason"]) == (-32004, "path_denied"), (d, e.error)
            # Denied names in any case: a case-insensitive filesystem opens .env for .ENV.
            for p in [f"{ws}/.ENV", f"{ws}/src/../.Env", f"{ws}/.GIT/config"]:
                e = await sdk_error(c.call_tool("read_text_file", {"path": p}))
                assert (e.code, e.data["reason"]) == (-32004, "path_denied"), (p, e.error)
            # A file:// URI is the absolute path it names.
            for uri, reason in [(f"file://{ws}/.env", "path_denied"),
                                (f"file://localhost{ws}/.git/config", "path_denied"),
                                (f"file://{ws.parent}/outside.txt", "path_not_allowed"),
                                ("file:///etc/passwd", "path_not_allowed"),
                                ("file://other-host/etc/passwd", "file_uri_host")]:
                e = await sdk_error(c.call_tool("read_text_file", {"path": uri}))
                assert (e.code, e.data["reason"]) == (-32004, reason), (uri, e.error)
            # Allow stays case-sensitive and what it allows still works.
            r = await c.call_tool("list_directory", {"path": str(ws / "Docs")})
            assert "guide.md" in text_of_result(r)

    run_async(body)


# ---------------------------------------------------------------------------
# Poisoning findings say why
# ---------------------------------------------------------------------------
def test_quarantined_tools_say_why_in_tools_and_the_audit_line(facade, tmp_path):
    audit = Audit(tmp_path / "audit.jsonl")
    fa = facade(upstream=policy_fixture_stdio(), extra_args=["--audit", audit.arg],
                policy=policy_doc(auth=ANON, tools=[{"name": "poisoned"}, {"name": "invisible"}, {"name": "echo"}]))

    async def body():
        async with sdk_client(fa.url) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"echo"}, names
            e = await sdk_error(c.call_tool("poisoned", {"a": 1, "b": 2}))
            assert (e.code, e.data["reason"]) == (-32004, "poisoned_definition"), e.error

    run_async(body)
    admin = tools_admin(fa)
    assert admin["poisoned"]["finding"].startswith("model_instruction/"), admin["poisoned"]
    assert admin["invisible"]["finding"] == "hidden_unicode/zero_width", admin["invisible"]
    details = {f["detail"] for f in admin["poisoned"]["findings"]}
    assert {"instruction_tag", "sensitive_file", "conceal_from_user"} <= details, details
    line = audit.wait(lambda l: l.get("reason") == "poisoned_definition")
    assert line["finding"] == admin["poisoned"]["finding"], line


# ---------------------------------------------------------------------------
# Out-of-band approval
# ---------------------------------------------------------------------------
ADMIN_TOKEN = "admin-" + secrets.token_hex(16)
# The people who decide, each with a token of their own and the admin role.
APPROVERS = {"carol": "carol-" + secrets.token_hex(16), "dave": "dave-" + secrets.token_hex(16)}
OOB_POLICY = with_approvers(policy_doc(auth=ANON, tools=[{"name": "echo", "arguments": [{
    "name": "text", "kind": "string", "allow": [".*"], "check": ["deploy .*"], "approval": "outOfBand"}]}]),
    APPROVERS)
FAKE_TOKEN = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"


class SelfApprover:
    """A client that declares elicitation and approves everything it is asked:
    the agent answering its own elicitation."""

    def __init__(self):
        self.asked = 0

    async def __call__(self, context, params):
        self.asked += 1
        return types.ElicitResult(action="accept", content={"approve": True})


@pytest.fixture
def oob(facade, tmp_path):
    token_file = tmp_path / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    audit = Audit(tmp_path / "audit.jsonl")
    fa = facade(upstream=policy_fixture_stdio(), policy=OOB_POLICY,
                extra_args=["--admin-token-file", str(token_file), "--approval-timeout-secs", "3",
                            "--audit", audit.arg])
    fa.audit = audit
    return fa


def admin(fa, method: str, path: str, token: str | None = ADMIN_TOKEN, **kw) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, f"{fa.admin_url}{path}", headers=headers, timeout=5, **kw)


def pending(fa) -> list[dict]:
    r = admin(fa, "GET", "/approvals")
    assert r.status_code == 200, r.text
    return r.json()["approvals"]


def decide_when_pending(fa, decision: str, approver: str, results: dict):
    """In a thread: wait for the one pending call, check what a person sees, and
    decide it as `approver` (with that person's own token)."""
    calls = wait_for(lambda: pending(fa), timeout=10, what="a pending approval")
    results["pending"] = calls
    results["post"] = decide_approval(fa.admin_url, calls[0]["id"], decision, APPROVERS[approver])


def test_out_of_band_approval_admits_declines_and_times_out(oob):
    fa = oob
    # The admin endpoints are protected like /tools.
    assert admin(fa, "GET", "/approvals", token=None).status_code == 401
    assert admin(fa, "GET", "/approvals", token="wrong-token-0123456789").status_code == 401
    assert admin(fa, "POST", "/approvals/x", token=None, json={}).status_code == 401
    assert pending(fa) == []
    carol = APPROVERS["carol"]
    assert decide_approval(fa.admin_url, "nope", "approve", carol).status_code == 404
    assert decide_approval(fa.admin_url, "nope", "maybe", carol).status_code == 400
    # The approver is who authenticated: a body naming one is refused ...
    assert admin(fa, "POST", "/approvals/nope", token=carol,
                 json={"decision": "approve", "approver": "x"}).status_code == 400
    # ... and the admin token reads but never decides.
    assert admin(fa, "POST", "/approvals/nope", json={"decision": "approve"}).status_code == 403

    approved, declined = {}, {}

    async def body():
        async with sdk_client(fa.url) as c:
            # A value no check pattern matches asks nobody.
            assert text_of_result(await c.call_tool("echo", {"text": "status"})) == "status"
            t = threading.Thread(target=decide_when_pending, args=(fa, "approve", "carol", approved))
            t.start()
            r = await c.call_tool("echo", {"text": f"deploy prod {FAKE_TOKEN}"})
            await anyio.to_thread.run_sync(t.join)
            assert text_of_result(r) == "deploy prod [REDACTED:github_token]"
            t = threading.Thread(target=decide_when_pending, args=(fa, "deny", "dave", declined))
            t.start()
            e = await sdk_error(c.call_tool("echo", {"text": "deploy staging"}))
            await anyio.to_thread.run_sync(t.join)
            assert (e.code, e.data["reason"]) == (-32004, "approval_declined"), e.error
            # Nobody decides: refused after the bounded wait, and gone from the list.
            e = await sdk_error(c.call_tool("echo", {"text": "deploy nightly"}))
            assert (e.code, e.data["reason"], e.data["limit"]) == (-32008, "approval_timeout", 3), e.error
            assert pending(fa) == []

    run_async(body)
    call = approved["pending"][0]
    assert (call["tool"], call["rule"], call["reason"]) == ("echo", "text", "value_needs_approval"), call
    assert "deploy prod [REDACTED:github_token]" in call["argument"] and call["session"], call
    assert FAKE_TOKEN not in json.dumps(approved["pending"]), "a secret shown on /approvals"
    assert approved["post"].status_code == 200 and approved["post"].json()["approver"] == "carol (static)"
    assert declined["post"].status_code == 200
    lines = fa.audit.lines()
    by_reason = {(l["decision"], l.get("reason")): l for l in lines if l["event"] == "tool_call"}
    assert by_reason[("deny", "approval_declined")]["approver"] == "dave (static)"
    assert by_reason[("deny", "approval_timeout")]["code"] == -32008
    allowed = [l for l in lines if l["decision"] == "allow" and l.get("approver")]
    assert [l["approver"] for l in allowed] == ["carol (static)"], lines
    assert "deploy" not in fa.audit.text(), "argument content in the audit file"


def test_a_client_cannot_approve_its_own_out_of_band_call(oob):
    """Declaring elicitation and answering it does not let the call through:
    the facade never asks the client, it waits for the admin port."""
    fa = oob
    me = SelfApprover()

    async def body():
        async with sdk_client(fa.url, elicitation_callback=me) as c:
            e = await sdk_error(c.call_tool("echo", {"text": "deploy prod"}))
            assert (e.code, e.data["reason"]) == (-32008, "approval_timeout"), e.error

    run_async(body)
    assert me.asked == 0


def test_stdio_mode_has_no_out_of_band_channel(tmp_path):
    """Without an admin listener nobody could decide: refused at once."""
    import queue
    import subprocess

    from conftest import sidecar_path
    if not sidecar_path().exists():
        pytest.skip("sidecar binary not built")
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps(OOB_POLICY))
    proc = subprocess.Popen([str(sidecar_path()), "run", "--stdio", "--policy", str(policy), "--",
                             *policy_fixture_stdio()],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(json.loads(raw)) for raw in proc.stdout], daemon=True).start()

    def send(msg: dict):
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def answer(rid: int) -> dict:
        while True:
            msg = lines.get(timeout=20)
            if msg.get("id") == rid:
                return msg

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        answer(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": "deploy prod"}}})
        err = answer(2)["error"]
        assert (err["code"], err["data"]["reason"]) == (-32008, "approval_unavailable"), err
    finally:
        proc.kill()
        proc.wait(5)


# Two rules ask about one call: the first through an elicitation, the second
# out of band. The call must wait for the stronger channel, and the person
# on the admin port must see both rules.
TWO_CHANNEL_POLICY = with_approvers(policy_doc(auth=ANON, tools=[{"name": "echo", "arguments": [
    {"name": "text", "kind": "string", "allow": [".*"], "check": ["deploy .*"]},
    {"name": "/text", "kind": "string", "allow": [".*"], "check": [".* prod.*"], "approval": "outOfBand"},
]}]), APPROVERS)


def test_two_rules_asking_wait_for_the_strongest_channel_and_name_both(facade, tmp_path):
    token_file = tmp_path / "admin.token"
    token_file.write_text(ADMIN_TOKEN + "\n")
    fa = facade(upstream=policy_fixture_stdio(), policy=TWO_CHANNEL_POLICY,
                extra_args=["--admin-token-file", str(token_file), "--approval-timeout-secs", "10"])
    me = SelfApprover()
    approved = {}

    async def body():
        async with sdk_client(fa.url, elicitation_callback=me) as c:
            # Only the elicitation rule asks: the client's user answers it.
            assert text_of_result(await c.call_tool("echo", {"text": "deploy staging"})) == "deploy staging"
            assert me.asked == 1
            # Both ask: the agent's own answer is not enough; a person decides.
            t = threading.Thread(target=decide_when_pending, args=(fa, "approve", "carol", approved))
            t.start()
            r = await c.call_tool("echo", {"text": "deploy prod"})
            await anyio.to_thread.run_sync(t.join)
            assert text_of_result(r) == "deploy prod"
            assert me.asked == 1, "the out-of-band call was put to the client"

    run_async(body)
    call = approved["pending"][0]
    assert [(r["rule"], r["reason"]) for r in call["rules"]] == [
        ("text", "value_needs_approval"), ("/text", "value_needs_approval")], call
    assert all("deploy prod" in r["argument"] for r in call["rules"]), call
