"""Nothing gets past the facade: one test per way a caller with a valid token
got through it (message-integrity review of 8757630), each asserting that the
attack fails *and* that the legitimate path next to it still works.

1. smuggling a second message through line framing (raw LF/CR inside one
   JSON body), over HTTP to a stdio server, through the bridge, and through
   `--stdio` downstream;
2. answers crossing requests through id aliasing (`"\\u0031"` vs `"1"`);
3. identity that ignores the issuer (a partner IdP's `alice`, or its
   `platform-admins` group, becoming the corp admin);
4. methods other than tools/* unpoliced (resources, prompts, completion,
   unknown methods) and role-less callers reading them;
5. what the server sends during a call (log, progress, sampling) unfiltered;
6. one identity taking every session slot;
7. a cancelled call freeing its concurrency slot while the server still runs it;
8. `params.auth` reaching the server inside batches;
9. `/tools` on the admin port readable without a token.

Real servers where the finding was made with them: `mcp-server-git` (1, 2),
`@modelcontextprotocol/server-filesystem` behind the bridge (1),
`@modelcontextprotocol/server-everything` (4); tests/fixtures/policy_fixture.py
elsewhere. Run against an older binary with MCP_WARDEN_SIDECAR=<path>.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import free_port, sidecar_path, wait_port
from helpers import ACCEPT_BOTH, EVERYTHING_JS, RawMcp, everything_stdio, parse_body, start_bridge, text_of
from warden_helpers import (POLICY_FIXTURE, AuthedMcp, Keys, filesystem_stdio, git_stdio, oidc_claims,
                            policy_doc, policy_fixture_stdio, rpc_error, token_entry)

FAKE_AWS = "AKIAIOSFODNN7EXAMPLE"
FAKE_GITHUB = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
# Short, so that on a facade that loses a smuggled request the test fails in
# seconds instead of waiting out the default two minutes.
REQUEST_TIMEOUT = ["--request-timeout-secs", "6"]


def one_answer(resp: httpx.Response, rid) -> dict:
    """The single JSON-RPC response to `rid` in an HTTP answer (asserted)."""
    msgs = [m for m in parse_body(resp) if isinstance(m, dict) and "method" not in m]
    assert len(msgs) == 1, f"expected one response, got {msgs} (HTTP {resp.status_code})"
    assert msgs[0].get("id") == rid, msgs
    return msgs[0]


def smuggled(outer_id: int, inner: dict, sep: str) -> str:
    """A ping whose params hold `inner` between two raw line breaks: one JSON
    value to a JSON parser, three lines to a line-framed reader."""
    return ('{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"x":%s%s%s}}'
            % (outer_id, sep, json.dumps(inner, separators=(",", ":")), sep))


# ---------------------------------------------------------------------------
# A git repository with a long history, one commit message holding a key
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def git_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("git") / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    stream = []
    for i in range(3000):  # long enough that git_log keeps the server busy
        msg = f"commit {i}" if i != 1500 else f"add deploy key {FAKE_AWS} to config"
        data = f"line {i}\n"
        stream.append(f"commit refs/heads/main\ncommitter t <t@example.com> {1700000000 + i} +0000\n"
                      f"data {len(msg)}\n{msg}\nM 644 inline f.txt\ndata {len(data)}\n{data}\n")
    subprocess.run(["git", "fast-import", "--quiet"], input="".join(stream).encode(), cwd=repo, check=True)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=repo, check=True)
    return repo


def branches(repo: Path) -> set[str]:
    out = subprocess.run(["git", "branch", "--format=%(refname:short)"], cwd=repo, check=True,
                         capture_output=True, text=True).stdout
    return set(out.split())


GIT_POLICY = policy_doc(
    auth={"anonymous": {"role": "user"}},
    tools=[{"name": "git_status", "writes": False}, {"name": "git_log", "writes": False}],
)


@pytest.fixture(scope="module")
def git_facade(module_facade, git_repo):
    return module_facade(upstream=git_stdio(git_repo), policy=GIT_POLICY, extra_args=REQUEST_TIMEOUT)


# ---------------------------------------------------------------------------
# 1. Smuggling through line framing
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("sep", ["\n", "\r", "\r\n"], ids=["lf", "cr", "crlf"])
def test_smuggled_message_never_reaches_a_stdio_server(git_facade, git_repo, sep):
    s = RawMcp(git_facade.url)
    s.initialize()
    inner = {"jsonrpc": "2.0", "id": 91, "method": "tools/call",
             "params": {"name": "git_create_branch",
                        "arguments": {"repo_path": str(git_repo), "branch_name": f"smuggled-{len(sep)}{ord(sep[0])}"}}}
    r = s.post(smuggled(90, inner, sep))
    answer = one_answer(r, 90)
    # The server read one ping (params and all) and answered it.
    assert answer.get("result") == {}, answer
    assert not any(b.startswith("smuggled") for b in branches(git_repo)), branches(git_repo)
    # The legitimate path: the allowed tool still works, the hidden one is still hidden.
    assert "Repository status" in text_of(s.call_tool("git_status", {"repo_path": str(git_repo)}))
    hidden = s.call_tool("git_create_branch", {"repo_path": str(git_repo), "branch_name": "direct"})
    assert rpc_error(hidden)["code"] == -32004
    assert "direct" not in branches(git_repo)


def test_smuggled_message_never_reaches_a_bridged_server(facade, start_process, tmp_path):
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("public notes")
    (root / "secret.txt").write_text(f"token {FAKE_GITHUB}")
    sock = tmp_path / "bridge.sock"
    start_bridge(start_process, sock, filesystem_stdio(root))
    policy = policy_doc(
        auth={"anonymous": {"role": "user"}},
        tools=[{"name": "read_text_file", "writes": False, "arguments": [
            {"name": "path", "kind": "path", "root": str(root), "allow": ["**"], "deny": ["**/secret*"]}]}])
    fa = facade(upstream_socket=str(sock), policy=policy, extra_args=REQUEST_TIMEOUT)
    s = RawMcp(fa.url)
    s.initialize()
    write = {"jsonrpc": "2.0", "id": 70, "method": "tools/call",
             "params": {"name": "write_file", "arguments": {"path": str(root / "planted.txt"), "content": "x"}}}
    one_answer(s.post(smuggled(71, write, "\n")), 71)
    # Same id as the outer ping: on a facade that matches answers by the
    # client's id, the denied file's content would come back as the ping's answer.
    read = {"jsonrpc": "2.0", "id": 72, "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": str(root / "secret.txt")}}}
    answer = one_answer(s.post(smuggled(72, read, "\n")), 72)
    assert answer.get("result") == {}, answer
    time.sleep(0.5)  # anything the server still did would be on disk by now
    assert not (root / "planted.txt").exists(), "a smuggled write_file ran"
    assert text_of(s.call_tool("read_text_file", {"path": str(root / "notes.txt")})) == "public notes"
    denied = s.call_tool("read_text_file", {"path": str(root / "secret.txt")})
    assert rpc_error(denied)["code"] == -32004 and FAKE_GITHUB not in json.dumps(denied)


class StdioFacade:
    """`mcp-warden-sidecar run --stdio` driven line by line over pipes."""

    def __init__(self, cmd: list[str]):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.lines: list[dict] = []
        self._lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            with self._lock:
                self.lines.append(json.loads(raw))
                self._lock.notify_all()

    def send(self, raw: bytes):
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()

    def answer(self, rid, timeout: float = 15) -> dict:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for m in self.lines:
                    if m.get("id") == rid and "method" not in m:
                        return m
                left = deadline - time.monotonic()
                assert left > 0, f"no answer to id {rid!r}; saw {self.lines}"
                self._lock.wait(left)

    def close(self):
        self.proc.kill()
        self.proc.wait(5)


def test_smuggled_message_never_reaches_the_server_through_stdio_downstream(git_repo, tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(GIT_POLICY))
    fa = StdioFacade([str(sidecar_path()), "run", "--stdio", "--policy", str(policy), "--audit", "off",
                      *REQUEST_TIMEOUT, "--", *git_stdio(git_repo)])
    try:
        fa.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "stdio-attacker", "version": "0"}}}).encode() + b"\n")
        assert "result" in fa.answer(1)
        fa.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        inner = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "git_create_branch",
                            "arguments": {"repo_path": str(git_repo), "branch_name": "smuggled-stdio"}}}
        # CR, not LF: the line ends only at the last byte for a reader that
        # splits on LF, but a Python SDK server also splits on CR.
        fa.send(smuggled(2, inner, "\r").encode() + b"\n")
        fa.send(b'{"jsonrpc":"2.0","id":4,"method":"ping"}\n')
        assert fa.answer(4).get("result") == {}
        status = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                  "params": {"name": "git_status", "arguments": {"repo_path": str(git_repo)}}}
        fa.send(json.dumps(status).encode() + b"\n")
        assert "Repository status" in fa.answer(5)["result"]["content"][0]["text"]
        assert "smuggled-stdio" not in branches(git_repo)
    finally:
        fa.close()


# ---------------------------------------------------------------------------
# 2. Id aliasing
# ---------------------------------------------------------------------------
def test_answers_never_cross_requests_whose_ids_alias(git_facade, git_repo):
    """`"\\u0031"` and `"1"` are one id to the server. A tools/call sent as one
    (slow: git_log over 3,000 commits keeps mcp-server-git busy) and a ping
    sent as the other each get their own answer — the ping's own, or a
    duplicate_id refusal while the call runs, never the tool's — and the
    tool's output is filtered (the key in a commit message redacted)
    wherever it goes."""
    # mcp-server-git walks 3,000 commits in Python: on two busy cores that can take
    # more than half a minute, and the test is about which answer goes where, not when.
    s = RawMcp(git_facade.url, timeout=120)
    s.initialize()
    call = ('{"jsonrpc":"2.0","id":"\\u0031","method":"tools/call","params":{"name":"git_log",'
            '"arguments":{"repo_path":%s,"max_count":3000}}}' % json.dumps(str(git_repo)))
    with ThreadPoolExecutor(2) as pool:
        tool = pool.submit(s.post, call)
        time.sleep(0.3)  # the call is with the server
        ping = s.post('{"jsonrpc":"2.0","id":"1","method":"ping"}')
        tool = tool.result()
    ping_answer = one_answer(ping, "1")
    if "error" in ping_answer:
        # The call was still running: to the server both are id 1, so the
        # facade refuses the second rather than let the answers cross.
        assert ping_answer["error"]["data"]["reason"] == "duplicate_id", str(ping_answer)[:400]
    else:
        # The call had finished: the ping is a request of its own.
        assert ping_answer.get("result") == {}, str(ping_answer)[:400]
    tool_answer = one_answer(tool, "1")
    assert "Commit history" in text_of(tool_answer)
    for body in (ping.text, tool.text):
        assert FAKE_AWS not in body, "the tool's output reached the client unredacted"


def test_client_ids_never_reach_the_server(facade, tmp_path):
    """The server sees only the facade's own ids, so no client id can
    collide with another request (or the facade's own) on the server."""
    log = tmp_path / "upstream.log"
    fa = facade(upstream=policy_fixture_stdio(), env={"FIXTURE_LOG": str(log)},
                policy=policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}]))
    s = RawMcp(fa.url)
    s.initialize()
    for rid in ["mcp-warden:1", "1", 1, "client-chosen"]:
        assert text_of(s.request("tools/call", {"name": "echo", "arguments": {"text": "hi"}}, rid=rid)) == "hi"
    sent = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    # The readiness probe has a server process of its own: the session's
    # server starts with the session's initialize.
    start = max(i for i, m in enumerate(sent) if m.get("method") == "initialize"
                and m["params"]["clientInfo"]["name"] != "mcp-warden-readiness-probe")
    ids = [m["id"] for m in sent[start:] if "id" in m and "method" in m]
    assert ids and all(isinstance(i, int) for i in ids), ids
    assert len(ids) == len(set(ids)), f"the facade reused an upstream id: {ids}"
    assert "client-chosen" not in log.read_text() and "mcp-warden:1" not in log.read_text()


# ---------------------------------------------------------------------------
# 3. Identity is issuer-qualified
# ---------------------------------------------------------------------------
CORP, PARTNER, AUD = "https://corp.example", "https://partner.example", "mcp"


@pytest.fixture(scope="module")
def issuers(module_facade, tmp_path_factory):
    d = tmp_path_factory.mktemp("issuers")
    corp, partner = Keys(), Keys()
    corp.write_jwks(d / "corp.json")
    partner.write_jwks(d / "partner.json")
    policy = policy_doc(
        auth={"jwt": [{"issuer": CORP, "audiences": [AUD], "jwksFile": str(d / "corp.json")},
                      {"issuer": PARTNER, "audiences": [AUD], "jwksFile": str(d / "partner.json")}]},
        roles=[{"role": "admin", "issuer": CORP, "subjects": ["alice"], "groups": ["platform-admins"]},
               {"role": "viewer", "issuer": PARTNER, "subjects": ["alice"]}],
        tools=[{"name": "echo", "requiredRole": "viewer"}, {"name": "secret", "requiredRole": "admin"}],
        redaction={"enabled": False})
    fa = module_facade(upstream=policy_fixture_stdio(), policy=policy)
    fa.corp = lambda sub, **kw: corp.mint(oidc_claims(CORP, AUD, sub, **kw))
    fa.partner = lambda sub, **kw: partner.mint(oidc_claims(PARTNER, AUD, sub, **kw))
    return fa


def tool_names(s: RawMcp) -> set[str]:
    return {t["name"] for t in s.request("tools/list")["result"]["tools"]}


def test_a_subject_from_another_issuer_is_another_person(issuers):
    corp_alice = AuthedMcp(issuers.url, issuers.corp("alice"))
    corp_alice.initialize()
    assert tool_names(corp_alice) == {"echo", "secret"}
    assert FAKE_GITHUB in text_of(corp_alice.call_tool("secret", {}))
    partner_alice = AuthedMcp(issuers.url, issuers.partner("alice"))
    partner_alice.initialize()
    assert tool_names(partner_alice) == {"echo"}
    err = rpc_error(partner_alice.call_tool("secret", {}))
    assert err["code"] == -32003 and FAKE_GITHUB not in json.dumps(err)


def test_groups_count_only_for_bindings_on_their_issuer(issuers):
    claimant = AuthedMcp(issuers.url, issuers.partner("mallory", groups=["platform-admins"]))
    r = claimant.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}},
        session=False)
    assert rpc_error(one_answer(r, 1))["code"] == -32003, r.text
    assert "mcp-session-id" not in r.headers


def test_a_session_belongs_to_the_issuer_qualified_subject(issuers):
    corp_alice = AuthedMcp(issuers.url, issuers.corp("alice"))
    corp_alice.initialize()
    partner_alice = AuthedMcp(issuers.url, issuers.partner("alice"))
    partner_alice.session_id, partner_alice.negotiated = corp_alice.session_id, corp_alice.negotiated
    r = partner_alice.post({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                            "params": {"name": "secret", "arguments": {}}})
    assert r.status_code == 404 and FAKE_GITHUB not in r.text, (r.status_code, r.text)
    assert tool_names(corp_alice) == {"echo", "secret"}  # the owner's session is untouched


# ---------------------------------------------------------------------------
# 4. Every method has a gate
# ---------------------------------------------------------------------------
EVERYTHING_TOKENS = {"alice-token": "alice", "nobody-token": "nobody"}


def everything_policy(**extra) -> dict:
    return policy_doc(
        auth={"staticTokens": {"tokens": [token_entry(t, s) for t, s in EVERYTHING_TOKENS.items()]}},
        roles=[{"role": "user", "subjects": ["alice"]}],
        tools=[{"name": "echo"}], **extra)


def test_a_caller_without_a_role_reads_nothing(facade):
    fa = facade(upstream=everything_stdio(), policy=everything_policy(), extra_args=REQUEST_TIMEOUT)
    nobody = AuthedMcp(fa.url, "nobody-token")
    r = nobody.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}},
        session=False)
    answer = one_answer(r, 1)
    if "result" in answer:  # a session was opened: what can the role-less caller read?
        nobody.session_id, nobody.negotiated = r.headers.get("mcp-session-id"), answer["result"]["protocolVersion"]
        leaked = {m: nobody.request(m, p) for m, p in [
            ("resources/list", {}),
            ("resources/read", {"uri": "demo://resource/static/document/architecture.md"}),
            ("prompts/get", {"name": "simple-prompt"}),
            ("completion/complete", {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
                                     "argument": {"name": "department", "value": "E"}})]}
        pytest.fail(f"a caller without a role opened a session and got {json.dumps(leaked)[:600]}")
    err = rpc_error(answer)
    assert err["code"] == -32003 and err["data"]["reason"] == "no_role", err
    # The legitimate path: a caller with a role gets in and can call its tool.
    alice = AuthedMcp(fa.url, "alice-token")
    alice.initialize()
    assert text_of(alice.call_tool("echo", {"message": "hi"})).endswith("hi")


def test_resources_prompts_and_completion_are_policed_like_tools(facade):
    policy = everything_policy(
        resources={"rules": [{"uri": "demo://resource/static/document/*"}]},
        prompts={"rules": [{"name": "simple-prompt"}]})
    fa = facade(upstream=everything_stdio(), policy=policy, extra_args=REQUEST_TIMEOUT)
    s = AuthedMcp(fa.url, "alice-token")
    s.initialize()
    listed = [r["uri"] for r in s.request("resources/list")["result"]["resources"]]
    assert listed and all(u.startswith("demo://resource/static/document/") for u in listed), listed
    assert s.request("resources/templates/list")["result"]["resourceTemplates"] == []
    ok = s.request("resources/read", {"uri": "demo://resource/static/document/features.md"})
    assert ok["result"]["contents"][0]["text"]
    for method, params in [
        ("resources/read", {"uri": "demo://resource/dynamic/text/1"}),
        ("resources/subscribe", {"uri": "demo://resource/dynamic/text/1"}),
        ("prompts/get", {"name": "args-prompt", "arguments": {"city": "x"}}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "completable-prompt"},
                                 "argument": {"name": "department", "value": "E"}}),
        ("completion/complete", {"ref": {"type": "ref/resource", "uri": "demo://resource/dynamic/text/{resourceId}"},
                                 "argument": {"name": "resourceId", "value": "1"}}),
    ]:
        err = rpc_error(s.request(method, params))
        assert err["code"] == -32004, (method, err)
    assert [p["name"] for p in s.request("prompts/list")["result"]["prompts"]] == ["simple-prompt"]
    assert s.request("prompts/get", {"name": "simple-prompt"})["result"]["messages"]
    for method in ["tasks/list", "tasks/get", "mcp-warden/anything", "sampling/createMessage"]:
        err = rpc_error(s.request(method, {}))
        assert err["code"] == -32601 and err["data"]["reason"] == "method_not_allowed", (method, err)


def test_file_resources_use_the_path_rules_and_results_are_filtered(facade):
    policy = policy_doc(
        auth={"anonymous": {"role": "viewer"}},
        resources={"rules": [{"uri": "file:///srv/docs/**"}, {"uri": "**/.env", "action": "deny"}]},
        prompts={"rules": [{"name": "greeting"}]})
    fa = facade(upstream=policy_fixture_stdio(), policy=policy, extra_args=REQUEST_TIMEOUT)
    s = RawMcp(fa.url)
    s.initialize()
    listed = {r["uri"] for r in s.request("resources/list")["result"]["resources"]}
    assert listed == {"file:///srv/docs/readme.md"}, listed
    assert s.request("resources/read", {"uri": "file:///srv/docs/readme.md"})["result"]["contents"][0]["text"]
    for uri in ["file:///srv/docs/.env", "file:///srv/docs/sub/../.env", "file:///srv/docs/%2eenv",
                "file:///srv/docs/.ENV", "file:///srv/other/x", "note://private"]:
        err = rpc_error(s.request("resources/read", {"uri": uri}))
        assert err["code"] == -32004, (uri, err)
    prompt = s.request("prompts/get", {"name": "greeting"})
    assert FAKE_GITHUB not in json.dumps(prompt) and "Say hello" in json.dumps(prompt)


# ---------------------------------------------------------------------------
# 5. Everything the server sends is filtered
# ---------------------------------------------------------------------------
def test_server_messages_during_a_call_are_filtered(facade, tmp_path):
    log = tmp_path / "upstream.log"
    fa = facade(upstream=policy_fixture_stdio(), env={"FIXTURE_LOG": str(log)},
                policy=policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "chatter"}]))
    s = RawMcp(fa.url)
    s.initialize()
    r = s.post({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "chatter", "arguments": {}, "_meta": {"progressToken": "p-7"}}})
    msgs = parse_body(r)
    assert FAKE_GITHUB not in r.text, f"a secret reached the client: {r.text[:800]}"
    kinds = {m.get("method") for m in msgs}
    assert {"notifications/message", "notifications/progress", "sampling/createMessage"} <= kinds, msgs
    progress = next(m for m in msgs if m.get("method") == "notifications/progress")
    assert progress["params"]["progressToken"] == "p-7"  # the client's own token, restored
    sampling = next(m for m in msgs if m.get("method") == "sampling/createMessage")
    assert "summarise" in json.dumps(sampling)
    assert text_of(next(m for m in msgs if m.get("id") == 7)) == "chatted"
    # The client answers the sampling request by the id the facade gave it;
    # an id it was never sent is dropped. The server gets its own id back.
    for rid in ["fixture-sampling-1", 999]:
        assert s.post({"jsonrpc": "2.0", "id": rid, "result": {"forged": True}}).status_code == 202
    assert s.post({"jsonrpc": "2.0", "id": sampling["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "summary"}, "model": "m"}}).status_code == 202
    time.sleep(0.5)
    answers = [json.loads(line) for line in log.read_text().splitlines()
               if line.strip() and '"result"' in line and '"method"' not in line]
    assert [a["id"] for a in answers] == ["fixture-sampling-1"], answers
    assert "forged" not in json.dumps(answers)


# ---------------------------------------------------------------------------
# 6. Session quotas per identity
# ---------------------------------------------------------------------------
def open_session(url: str, token: str) -> tuple[AuthedMcp, httpx.Response]:
    s = AuthedMcp(url, token)
    r = s.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}},
        session=False)
    if r.status_code == 200:
        s.session_id = r.headers["mcp-session-id"]
        s.negotiated = r.json()["result"]["protocolVersion"]
        assert s.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202
    return s, r


def test_one_identity_cannot_take_every_session(facade, start_process):
    tokens = {"alice-token": "alice", "bob-token": "bob"}
    policy = policy_doc(auth={"staticTokens": {"tokens": [token_entry(t, s) for t, s in tokens.items()]}},
                        roles=[{"role": "user", "subjects": ["alice", "bob"]}], tools=[{"name": "echo"}])
    # A cap of 12 sessions; the per-identity default (8) is below it. An
    # HTTP upstream, so that sessions cost no server process each.
    fa = facade(upstream_url=start_fixture_http(start_process), policy=policy,
                extra_args=["--max-sessions", "12"])
    # Idle sessions she left behind make room for her new ones: she never
    # holds more than 8, and the ones she lost answer 404.
    left = [open_session(fa.url, "alice-token") for _ in range(12)]
    assert all(r.status_code == 200 for _, r in left), [r.status_code for _, r in left]
    alive = [s for s, _ in left if s.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 200]
    assert len(alive) == 8, f"alice holds {len(alive)} sessions"
    # Busy sessions (a stream open) are hers to keep, and then she is refused.
    streams = []
    try:
        for s in alive:
            cm = s.http.stream("GET", s.url, headers=s.headers({"Accept": "text/event-stream"}), timeout=30)
            resp = cm.__enter__()
            assert resp.status_code == 200
            streams.append(cm)
        _, refused = open_session(fa.url, "alice-token")
        assert refused.status_code == 429, (refused.status_code, refused.text)
        assert "sessions" in refused.json()["error"]["message"]
        # Bob still gets in: one caller cannot take every slot.
        bob, r = open_session(fa.url, "bob-token")
        assert r.status_code == 200, (r.status_code, r.text)
        assert text_of(bob.call_tool("echo", {"text": "room for bob"})) == "room for bob"
    finally:
        for cm in streams:
            cm.__exit__(None, None, None)


def start_fixture_http(start_process) -> str:
    """The policy fixture serving Streamable HTTP on a free port."""
    port = free_port()
    start_process([sys.executable, str(POLICY_FIXTURE), "--http", str(port)])
    wait_port(port)
    return f"http://127.0.0.1:{port}/mcp"


# ---------------------------------------------------------------------------
# 7. A cancelled call keeps its concurrency slot
# ---------------------------------------------------------------------------
def test_a_cancelled_call_keeps_its_slot_until_the_server_lets_go(facade):
    # A cancelled call holds its slot as long as it could have run: its
    # limit, short here so the test can wait it out.
    policy = policy_doc(auth={"anonymous": {"role": "user"}}, limits={"maxConcurrentCalls": 1},
                        tools=[{"name": "sleep", "limits": {"callTimeoutSeconds": 4}}, {"name": "echo"},
                               {"name": "cancelled"}])
    fa = facade(upstream=policy_fixture_stdio(), policy=policy)
    s = RawMcp(fa.url, timeout=20)
    s.initialize()
    with ThreadPoolExecutor(1) as pool:
        # The fixture never answers a call it was told to cancel: only the
        # call's limit can give the slot back.
        pool.submit(s.post, {"jsonrpc": "2.0", "id": 40, "method": "tools/call",
                             "params": {"name": "sleep", "arguments": {"seconds": 30}}})
        time.sleep(0.5)
        assert s.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 40, "reason": "changed my mind"}}).status_code == 202
        busy = s.call_tool("echo", {"text": "too soon"})
        err = rpc_error(busy)
        assert err["code"] == -32005 and err["data"]["reason"] == "concurrency_exceeded", err
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            after = s.call_tool("echo", {"text": "after"})
            if "result" in after:
                break
            time.sleep(0.3)
        assert text_of(after) == "after", after
        # The server was told, by the facade's id for the call.
        cancelled = json.loads(text_of(s.call_tool("cancelled", {})))
        assert cancelled == [] or all(isinstance(i, int) for i in cancelled)


# ---------------------------------------------------------------------------
# 8. params.auth never reaches the server, batch or not
# ---------------------------------------------------------------------------
def test_params_auth_is_stripped_from_every_batch_element(facade, tmp_path):
    log = tmp_path / "upstream.log"
    fa = facade(upstream=policy_fixture_stdio(), env={"FIXTURE_LOG": str(log)},
                policy=policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}]))
    s = RawMcp(fa.url, version="2025-03-26")
    s.initialize()
    batch = [{"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": f"b{i}"}, "auth": {"token": "batch-s3cret"}}}
             for i in range(3)]
    batch.append({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": "x", "progress": 1, "auth": {"token": "batch-s3cret"}}})
    r = s.post(batch)
    got = sorted(text_of(m) for m in parse_body(r) if "id" in m)
    assert got == ["b0", "b1", "b2"], r.text
    time.sleep(0.3)
    assert "batch-s3cret" not in log.read_text() and '"auth"' not in log.read_text()


# ---------------------------------------------------------------------------
# 9. /tools needs the admin token
# ---------------------------------------------------------------------------
def test_admin_tools_needs_the_admin_token(facade, tmp_path):
    """On a loopback admin listener too: no endpoint is open by default."""
    token_file = tmp_path / "admin-token"
    token_file.write_text("operator-s3cret-0123456789\n")
    fa = facade(upstream=policy_fixture_stdio(), extra_args=["--admin-token-file", str(token_file)],
                policy=policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}]))
    s = RawMcp(fa.url)
    s.initialize()
    s.request("tools/list")
    for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic operator-s3cret-0123456789"}]:
        r = httpx.get(f"{fa.admin_url}/tools", headers=headers, timeout=5)
        assert r.status_code == 401 and "poisoned" not in r.text, (headers, r.status_code, r.text[:200])
    ok = httpx.get(f"{fa.admin_url}/tools", headers={"Authorization": "Bearer operator-s3cret-0123456789"}, timeout=5)
    assert ok.status_code == 200 and {"echo", "poisoned"} <= {t["name"] for t in ok.json()["tools"]}
    # Probes and metrics stay open to the kubelet and the scraper.
    assert httpx.get(f"{fa.admin_url}/readyz", timeout=5).status_code == 200
    assert httpx.get(f"{fa.admin_url}/metrics", timeout=5).status_code == 200
