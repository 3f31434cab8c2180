"""Who is calling: static bearer tokens, JWTs (RS256, ES256, EdDSA)
against a JWKS file, kubelet-style projected service-account tokens, role
mapping, session ownership, and token hygiene, with real clients.

The upstream is tests/fixtures/policy_fixture.py, which logs every raw line
it receives (stdio) or every request with its headers (`--http`), so the
tests can check that neither the Authorization header nor `params.auth` ever
reaches the server.
"""
from __future__ import annotations

import base64
import json
import os
import subprocess
import time

import httpx
import pytest
import yaml

from auth_helpers import AUDIENCE, ISSUER, NOBODY, ROOT, SA_AUDIENCE, SA_ISSUER, UMA, VIC, Ids
from conftest import free_port, wait_port
from helpers import ACCEPT_BOTH, metric, metrics_text, run_async
from warden_helpers import (Audit, AuthedMcp, Keys, kubelet_sa_claims, oidc_claims, policy_doc, policy_fixture_stdio,
                            sdk_client, sdk_error, sha256_hex, text_of_result, token_entry)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "auth-e2e", "version": "0"}}


@pytest.fixture(scope="module")
def ids(tmp_path_factory):
    return Ids(tmp_path_factory.mktemp("auth"))


@pytest.fixture(scope="module")
def fa(module_facade, ids):
    """The facade with every authenticator, in front of the stdio fixture (raw log on)."""
    audit = Audit(ids.dir / "audit.jsonl")
    f = module_facade(upstream=policy_fixture_stdio(), policy=str(ids.write_policy()),
                      extra_args=["--audit", audit.arg], env={"FIXTURE_LOG": str(ids.dir / "upstream.log")})
    f.audit = audit
    return f


def post(url: str, body: dict, token: str | None = None, headers: dict | None = None) -> httpx.Response:
    h = {"Accept": ACCEPT_BOTH, "Content-Type": "application/json", **(headers or {})}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=body, headers=h, timeout=10)


def new_audit_line(audit: Audit, before: int, timeout: float = 5) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = audit.lines()
        if len(lines) > before:
            return lines[before]
        time.sleep(0.02)
    raise AssertionError(f"no new audit line after {timeout}s:\n{audit.text()[-3000:]}")


# ---------------------------------------------------------------------------
# No token
# ---------------------------------------------------------------------------
def test_no_token_is_401_on_every_method(fa):
    for method, params in [("initialize", INIT), ("tools/list", {}), ("tools/call", {"name": "echo"}),
                           ("ping", None), ("resources/list", {})]:
        body = {"jsonrpc": "2.0", "id": 7, "method": method, **({"params": params} if params else {})}
        r = post(fa.url, body)
        assert r.status_code == 401, (method, r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == -32001 and err["data"]["reason"] == "auth_required", (method, err)
        assert r.headers["www-authenticate"].lower().startswith("bearer"), r.headers
    for verb in ("GET", "DELETE"):
        r = httpx.request(verb, fa.url, headers={"Accept": "text/event-stream"}, timeout=10)
        assert r.status_code == 401, (verb, r.status_code)
    # A session id is not a credential.
    raw = AuthedMcp(fa.url, UMA)
    try:
        raw.initialize()
        r = post(fa.url, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                 headers={"Mcp-Session-Id": raw.session_id, "MCP-Protocol-Version": raw.negotiated})
        assert r.status_code == 401 and r.json()["error"]["code"] == -32001
    finally:
        raw.close()


# ---------------------------------------------------------------------------
# Each kind of token
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["static", "jwt_rs256", "jwt_es256", "jwt_eddsa", "sa"])
def test_token_kind_accepted(fa, ids, kind):
    token = ids.good[kind]
    before = fa.audit.settle()

    async def body():
        async with sdk_client(fa.url, token) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"echo", "secret"}, names  # all of them are users
            r = await c.call_tool("echo", {"text": f"hello {kind}"})
            assert text_of_result(r) == f"hello {kind}"

    run_async(body)
    line = new_audit_line(fa.audit, before)
    assert line["event"] == "tool_call" and line["decision"] == "allow", line
    assert line["subject"] == ids.subject[kind] and line["auth"] == ids.method[kind], line
    assert line["role"] == "user"


def test_service_account_token_audit_line_names_the_service_account(fa, ids):
    token = ids.good["sa"]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["kubernetes.io"]["serviceaccount"]["name"] == "agent"  # minted like the kubelet does
    assert claims["aud"] == [SA_AUDIENCE]
    before = fa.audit.settle()
    raw = AuthedMcp(fa.url, token)
    try:
        raw.initialize()
        r = raw.call_tool("secret", {})
        assert "[REDACTED:github_token]" in json.dumps(r)
    finally:
        raw.close()
    line = new_audit_line(fa.audit, before)
    assert line["subject"] == "system:serviceaccount:team-a:agent", line
    assert line["auth"] == "service_account" and line["tool"] == "secret" and line["decision"] == "allow"


# ---------------------------------------------------------------------------
# Bad JWTs
# ---------------------------------------------------------------------------
def test_bad_jwts_rejected_with_distinct_audit_reasons(fa, ids):
    reasons = {}
    for name, token in ids.bad.items():
        before = fa.audit.settle()
        r = post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token=token)
        assert r.status_code == 401, (name, r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == -32001 and err["data"]["reason"] == "auth_required", (name, err)
        line = new_audit_line(fa.audit, before)
        assert line["event"] == "auth_failure" and line["code"] == -32001 and line["decision"] == "deny", line
        reasons[name] = line["reason"]
        # why it failed is in the audit line only, never in the response
        assert line["reason"] not in r.text, (name, line["reason"], r.text)
    assert reasons["expired"] == "token_expired", reasons
    assert reasons["wrong_audience"] == "wrong_audience", reasons
    assert reasons["tampered"] == "bad_signature", reasons
    assert reasons["wrong_issuer"] in ("wrong_issuer", "unknown_issuer", "unknown_token"), reasons
    assert reasons["alg_none"] in ("unsupported_algorithm", "malformed_token", "alg_none"), reasons
    assert len(set(reasons.values())) == len(reasons), f"reasons are not distinct: {reasons}"
    # all the error bodies are the same: a caller cannot tell why
    bodies = {json.dumps(post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                              token=t).json()["error"], sort_keys=True) for t in ids.bad.values()}
    assert len(bodies) == 1, bodies


@pytest.mark.parametrize("name", ["hs256_with_public_key", "not_yet_valid", "foreign_key", "no_exp",
                                  "sa_kube_api_audience", "sa_other_server", "sa_expired",
                                  "oidc_key_for_sa_issuer", "garbage", "sa_subject_mismatch",
                                  "sa_without_k8s_claims"])
def test_more_bad_tokens_rejected(fa, ids, name):
    before = fa.audit.settle()
    r = post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token=ids.more_bad[name])
    assert r.status_code == 401 and r.json()["error"]["code"] == -32001, (name, r.status_code, r.text)
    line = new_audit_line(fa.audit, before)
    assert line["event"] == "auth_failure" and line["reason"], line


# ---------------------------------------------------------------------------
# Roles
# ---------------------------------------------------------------------------
def test_tools_list_differs_by_role_and_viewer_cannot_call_user_tool(fa, ids):
    async def body():
        seen = {}
        for who, token in [("viewer", VIC), ("user", UMA), ("admin", ROOT)]:
            async with sdk_client(fa.url, token) as c:
                seen[who] = {t.name for t in (await c.list_tools()).tools}
                if who == "viewer":
                    e = await sdk_error(c.call_tool("secret", {}))
                    assert e.code == -32003 and e.data["reason"] == "role_too_low", e.error
                    assert (e.data["limit"], e.data["observed"]) == ("user", "viewer")
                    assert text_of_result(await c.call_tool("echo", {"text": "v"})) == "v"
        assert seen["viewer"] == {"echo"}
        assert seen["user"] == {"echo", "secret"}
        assert seen["admin"] == {"echo", "secret", "cancelled"}

    run_async(body)
    # Authenticated but bound to no role: no session at all (it could do
    # nothing in one, and each holds a server process).
    for token in (NOBODY, ids.jwt_nobody):
        r = post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token=token)
        assert r.status_code == 403 and "mcp-session-id" not in r.headers, (r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == -32003 and err["data"]["reason"] == "no_role", err


def test_session_of_one_identity_is_404_for_another(fa, ids):
    owner = AuthedMcp(fa.url, UMA)
    try:
        owner.initialize()
        # each refused request on a fresh connection (keep-alive reuse has its own test below)
        foreign = {"Mcp-Session-Id": owner.session_id, "MCP-Protocol-Version": owner.negotiated}
        other = ids.good["jwt_rs256"]
        r = post(fa.url, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, token=other, headers=foreign)
        assert r.status_code == 404, (r.status_code, r.text)
        r = post(fa.url, {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                          "params": {"name": "echo", "arguments": {"text": "hijack"}}}, token=other, headers=foreign)
        assert r.status_code == 404, (r.status_code, r.text)
        d = httpx.delete(fa.url, headers={**foreign, "Authorization": f"Bearer {other}"}, timeout=10)
        assert d.status_code == 404
        g = httpx.get(fa.url, headers={**foreign, "Authorization": f"Bearer {other}", "Accept": "text/event-stream"},
                      timeout=10)
        assert g.status_code == 404
        # a foreign session looks exactly like an unknown one
        unknown = post(fa.url, {"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                                "params": {"name": "echo", "arguments": {"text": "hijack"}}}, token=other,
                       headers={**foreign, "Mcp-Session-Id": "0" * 32})
        assert unknown.status_code == 404 and unknown.text == r.text, (unknown.text, r.text)
        # the owner's session is untouched
        assert "result" in owner.request("tools/list")
        assert owner.delete().status_code in (200, 204)
    finally:
        owner.close()
    assert "hijack" not in (ids.dir / "upstream.log").read_text()


def test_refused_request_keeps_the_connection_usable(fa, ids):
    """Regression: a POST refused before its body was read (401, 404) closed the
    keep-alive connection without `Connection: close`, so a client reusing it
    lost its next request ('Server disconnected without sending a response')."""
    owner = AuthedMcp(fa.url, UMA)
    try:
        owner.initialize()
        good = owner.headers()
        refused = [{**good, "Authorization": "Bearer not-a-token"},                           # 401
                   {**good, "Authorization": f"Bearer {ids.good['jwt_rs256']}"}]              # 404
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        failures = []
        with httpx.Client(timeout=10) as client:
            for i in range(150):
                r = client.post(fa.url, content=body, headers=refused[i % 2])
                assert r.status_code in (401, 404)
                try:
                    ok = client.post(fa.url, content=body, headers={**good, "Authorization": f"Bearer {UMA}"})
                    assert ok.status_code == 200, ok.text
                except httpx.RemoteProtocolError as e:
                    failures.append((i, repr(e)))
        assert not failures, f"{len(failures)} of 150 requests after a refusal failed: {failures[:3]}"
    finally:
        owner.close()


# ---------------------------------------------------------------------------
# Token hygiene
# ---------------------------------------------------------------------------
def test_token_never_reaches_logs_audit_metrics_or_upstream(facade, start_process, ids, tmp_path):
    """Every kind of token, good and bad, with debug logging on: none of them may
    appear in the facade's logs, its audit file, /metrics, or what the stdio or
    the Streamable HTTP upstream receives (headers included)."""
    stdio_log, http_log = tmp_path / "stdio-upstream.log", tmp_path / "http-upstream.log"
    audit = Audit(tmp_path / "audit.jsonl")
    policy = ids.write_policy("policy-hygiene.yaml")
    env = {"MCP_WARDEN_LOG": "debug"}
    stdio_fa = facade(upstream=policy_fixture_stdio(), policy=str(policy), extra_args=["--audit", audit.arg],
                      env={**env, "FIXTURE_LOG": str(stdio_log)})
    port = free_port()
    up = start_process([*policy_fixture_stdio(), "--http", str(port)], env={"FIXTURE_LOG": str(http_log)})
    wait_port(port, proc=up)
    http_fa = facade(upstream_url=f"http://127.0.0.1:{port}/mcp", policy=str(policy),
                     extra_args=["--audit", audit.arg.replace("audit.jsonl", "audit-http.jsonl")], env=env)
    http_audit = Audit(tmp_path / "audit-http.jsonl")

    for f in (stdio_fa, http_fa):
        for token in [*ids.good.values(), VIC, ROOT]:
            raw = AuthedMcp(f.url, token)
            try:
                raw.initialize()
                assert "result" in raw.request("tools/list")
                assert "result" in raw.call_tool("echo", {"text": "hygiene"})
                # a token in params.auth over HTTP is not forwarded either
                raw.request("tools/call", {"name": "echo", "arguments": {"text": "x"}, "auth": {"token": UMA}})
                raw.delete()
            finally:
                raw.close()
        for token in [*ids.bad.values(), *ids.more_bad.values(), NOBODY]:
            post(f.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token=token)
    time.sleep(0.5)  # let the audit writers flush
    places = {
        "stdio facade stderr": stdio_fa.stderr_text(),
        "http facade stderr": http_fa.stderr_text(),
        "audit": audit.text() + http_audit.text(),
        "metrics": metrics_text(stdio_fa.admin_url) + metrics_text(http_fa.admin_url),
        "stdio upstream traffic": stdio_log.read_text(),
        "http upstream traffic": http_log.read_text(),
    }
    assert "hygiene" in places["stdio upstream traffic"] and "hygiene" in places["http upstream traffic"]
    assert audit.lines() and http_audit.lines()
    for token in ids.all_tokens():
        needles = {token}
        if token.count(".") == 2 and len(token.split(".")[2]) > 20:
            needles.add(token.split(".")[2])  # the signature alone
        needles.add(sha256_hex(token))  # not even the hash a static token is stored as
        for where, text in places.items():
            for needle in needles:
                assert needle not in text, f"a token ({needle[:12]}…) appears in the {where}"
    for line in places["http upstream traffic"].splitlines():
        req = json.loads(line)
        assert "authorization" not in {k.lower() for k in req["headers"]}, req["headers"]
    for where in ("stdio upstream traffic", "http upstream traffic"):
        for line in places[where].splitlines():
            msg = json.loads(line)
            msg = json.loads(msg["body"]) if "body" in msg and isinstance(msg.get("body"), str) \
                and msg["body"] else msg
            if isinstance(msg, dict):
                assert "auth" not in (msg.get("params") or {}), f"params.auth reached the {where}: {msg}"


def test_stdio_downstream_params_auth_token(sidecar_binary, ids, tmp_path):
    """`run --stdio`: the token travels in params.auth.token, is checked per
    message, and is stripped before the message goes upstream."""
    log = tmp_path / "upstream.log"
    audit = Audit(tmp_path / "audit.jsonl")
    policy = ids.write_policy("policy-stdio.yaml")
    proc = subprocess.Popen(
        [str(sidecar_binary), "run", "--stdio", "--policy", str(policy), "--audit", audit.arg,
         "--admin-listen", f"127.0.0.1:{free_port()}", "--server-env", "FIXTURE_LOG", "--", *policy_fixture_stdio()],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(tmp_path / "stderr.log", "w"),
        env={**os.environ, "FIXTURE_LOG": str(log), "MCP_WARDEN_LOG": "debug"}, start_new_session=True)
    import selectors
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    buf = b""

    def send(msg: dict) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def answer(rid, timeout: float = 15) -> dict:
        nonlocal buf
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if line.strip():
                    msg = json.loads(line)
                    if msg.get("id") == rid and "method" not in msg:
                        return msg
            left = deadline - time.monotonic()
            assert left > 0, f"no answer to id {rid}"
            if sel.select(left):
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, "the facade closed stdout"
                buf += chunk

    def auth(token):
        return {"auth": {"token": token}}

    sa = ids.good["sa"]
    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {**INIT, **auth(sa)}})
        assert "result" in answer(1), "initialize with params.auth.token failed"
        send({"jsonrpc": "2.0", "method": "notifications/initialized", "params": auth(sa)})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": auth(sa)})
        assert {t["name"] for t in answer(2)["result"]["tools"]} == {"echo", "secret"}
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": "over stdio"}, **auth(sa)}})
        assert answer(3)["result"]["content"][0]["text"] == "over stdio"
        send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}})
        assert answer(4)["error"]["code"] == -32001
        send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
              "params": {"name": "echo", "arguments": {"text": "x"}, **auth(ids.bad["expired"])}})
        assert answer(5)["error"]["code"] == -32001
        send({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
              "params": {"name": "secret", "arguments": {}, **auth(VIC)}})
        assert answer(6)["error"]["code"] == -32003
        send({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": auth(VIC)})
        assert {t["name"] for t in answer(7)["result"]["tools"]} == {"echo"}
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(5)
        sel.close()
    traffic = log.read_text()
    assert "over stdio" in traffic
    for line in traffic.splitlines():
        assert "auth" not in (json.loads(line).get("params") or {}), line
    reasons = [line["reason"] for line in audit.lines() if line["event"] == "auth_failure"]
    assert "token_missing" in reasons and "token_expired" in reasons, reasons
    sa_lines = [line for line in audit.lines() if line["event"] == "tool_call" and line["decision"] == "allow"]
    assert sa_lines and sa_lines[0]["subject"] == "system:serviceaccount:team-a:agent"
    for where, text in [("upstream traffic", traffic), ("audit", audit.text()),
                        ("stderr", (tmp_path / "stderr.log").read_text())]:
        for token in (sa, VIC, ids.bad["expired"], sa.split(".")[2]):
            assert token not in text, f"a token appears in the {where}"


@pytest.fixture
def sidecar_binary():
    from conftest import sidecar_path
    p = sidecar_path()
    if not p.exists():
        pytest.skip(f"facade binary {p} does not exist")
    return p


def test_more_tokens_accepted(fa, ids):
    """Expired but within clockSkewSeconds; `aud` as a list holding ours among
    others; the `bearer` scheme in lower case; an SA of another namespace
    authenticates but has no role (so it opens no session: 403, -32003)."""
    now = int(time.time())
    within_skew = ids.oidc.mint({**oidc_claims(ISSUER, AUDIENCE, "rita", groups=["devs"]),
                                 "exp": now - 10, "iat": now - 600, "nbf": now - 600})
    aud_list = ids.oidc.mint(oidc_claims(ISSUER, ["other", AUDIENCE], "rita", groups=["devs"]), "ES256")
    other_sa = ids.sa.mint(kubelet_sa_claims(SA_ISSUER, "team-b", "agent", SA_AUDIENCE))
    r = post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token=other_sa)
    assert r.status_code == 403 and r.json()["error"]["data"]["reason"] == "no_role", (r.status_code, r.text)
    # Nor, as a stateless 2026-07-28 caller, a bridge: the legacy server's session the facade
    # would hold for them (a server process) is never started.
    from era_helpers import ModernMcp
    bridges = metric(fa.admin_url, "mcpwarden_upstream_bridges_active")
    modern = ModernMcp(fa.url, other_sa)
    try:
        # A method the facade does not serve (or not in this revision) is no way around it.
        for method in ("tools/list", "server/discover", "tools/call", "no/such-method", "initialize"):
            params = {"name": "echo", "arguments": {"text": "x"}} if method == "tools/call" else {}
            status, answer = modern.request(method, params)
            assert (status, answer["error"]["data"]["reason"]) == (200, "no_role"), (method, status, answer)
    finally:
        modern.close()
    assert metric(fa.admin_url, "mcpwarden_upstream_bridges_active") == bridges
    for token, scheme, want in [(within_skew, "Bearer", {"echo", "secret"}), (aud_list, "Bearer", {"echo", "secret"}),
                                (UMA, "bearer", {"echo", "secret"})]:
        r = post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                 headers={"Authorization": f"{scheme} {token}"})
        assert r.status_code == 200, (r.status_code, r.text)
        raw = AuthedMcp(fa.url)
        raw.http.headers["Authorization"] = f"{scheme} {token}"
        try:
            raw.initialize()
            assert {t["name"] for t in raw.request("tools/list")["result"]["tools"]} == want
        finally:
            raw.close()
    r = post(fa.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
             headers={"Authorization": f"Basic {UMA}"})
    assert r.status_code == 401


def test_token_files_and_jwks_reload_without_restart(facade, ids, tmp_path):
    """Revoking a static token (tokens file) and rotating the JWKS take effect
    on the next poll; sessions of still-valid callers keep working."""
    d = tmp_path / "rot"
    d.mkdir()
    for name in ("tokens.yaml", "jwks.json", "sa-jwks.json"):
        (d / name).write_text((ids.dir / name).read_text())
    rot = Ids.__new__(Ids)
    rot.dir = d
    policy = Ids.write_policy(rot)
    f = facade(upstream=policy_fixture_stdio(), policy=str(policy), extra_args=["--policy-poll-secs", "1"])
    rita = ids.good["jwt_rs256"]
    keep = AuthedMcp(f.url, VIC)
    try:
        keep.initialize()
        for token in (UMA, rita):
            assert post(f.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                        token=token).status_code == 200
        # Revoke uma; rotate the OIDC keys.
        (d / "tokens.yaml").write_text(yaml.safe_dump([token_entry(VIC, "vic")]))
        new_keys = Keys()
        new_keys.write_jwks(d / "jwks.json")
        new_rita = new_keys.mint(oidc_claims(ISSUER, AUDIENCE, "rita", groups=["devs"]))
        def status(token):
            return post(f.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                        token=token).status_code
        deadline = time.monotonic() + 15
        while (status(UMA), status(rita)) != (401, 401):  # the files may be picked up in two polls
            assert time.monotonic() < deadline, "the revoked token or the retired key still works after 15 s"
            time.sleep(0.2)
        assert post(f.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT},
                    token=new_rita).status_code == 200
        assert "result" in keep.request("tools/list")  # a still-valid caller's session survives
    finally:
        keep.close()


def test_no_auth_section_means_nobody_gets_in(facade):
    f = facade(upstream=policy_fixture_stdio(), policy=policy_doc(tools=[{"name": "echo"}]))
    r = post(f.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
    assert r.status_code == 401 and r.json()["error"]["code"] == -32001
    r = post(f.url, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}, token=UMA)
    assert r.status_code == 401


def test_service_account_jwks_published_late(facade, ids, tmp_path):
    """The operator publishes the cluster's SA JWKS after the pod starts: until
    then SA tokens are refused (the audit line says why), afterwards accepted."""
    d = tmp_path / "late"
    d.mkdir()
    for name in ("tokens.yaml", "jwks.json"):
        (d / name).write_text((ids.dir / name).read_text())
    late = Ids.__new__(Ids)
    late.dir = d
    audit = Audit(d / "audit.jsonl")
    f = facade(upstream=policy_fixture_stdio(), policy=str(Ids.write_policy(late)),
               extra_args=["--policy-poll-secs", "1", "--audit", audit.arg])
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
    assert post(f.url, init, token=UMA).status_code == 200  # the rest of auth works meanwhile
    assert post(f.url, init, token=ids.good["sa"]).status_code == 401
    line = audit.wait(lambda line: line["event"] == "auth_failure")
    assert line["reason"] and line["reason"] != "unknown_token", line
    (d / "sa-jwks.json").write_text((ids.dir / "sa-jwks.json").read_text())
    deadline = time.monotonic() + 10
    while post(f.url, init, token=ids.good["sa"]).status_code != 200:
        assert time.monotonic() < deadline, "SA tokens still refused 10 s after the JWKS appeared"
        time.sleep(0.2)


def test_role_change_applies_to_live_sessions(facade, ids, tmp_path):
    d = tmp_path / "roles"
    d.mkdir()
    for name in ("tokens.yaml", "jwks.json", "sa-jwks.json"):
        (d / name).write_text((ids.dir / name).read_text())
    r = Ids.__new__(Ids)
    r.dir = d
    path = Ids.write_policy(r)
    f = facade(upstream=policy_fixture_stdio(), policy=str(path), extra_args=["--policy-poll-secs", "1"])
    raw = AuthedMcp(f.url, UMA)
    try:
        raw.initialize()
        assert "result" in raw.call_tool("secret", {})
        doc = yaml.safe_load(path.read_text())
        doc["roles"] = [{"role": "viewer", "issuer": "static", "groups": ["devs"]}]  # uma: user -> viewer
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        deadline = time.monotonic() + 10
        while "result" in (resp := raw.call_tool("secret", {})):
            assert time.monotonic() < deadline, "the demoted caller can still call a user tool after 10 s"
            time.sleep(0.2)
        assert resp["error"]["code"] == -32003, resp
        assert {t["name"] for t in raw.request("tools/list")["result"]["tools"]} == {"echo"}  # same session
    finally:
        raw.close()
