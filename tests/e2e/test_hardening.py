"""Hardening: the bad-input corpus test_bad_input.py does not cover,
and an upstream that lies, floods, hangs and dies. Each case: the facade
answers clearly (or drops the connection where HTTP says so), stays up,
keeps its memory bounded, and every other session keeps working.

The facade: `rogue`, tests/fixtures/rogue_fixture.py over stdio with a
policy that has a call timeout and an alias (ROGUE_POLICY), shared by the
module's tests; client bad input and upstream misbehaviour. Slow clients and
abandoned sessions are in test_hardening_clients.py.

Regressions for the facade bugs these tests found (fixed in 1c43124): the
`-0` id that panicked the alias rewrite, numbers mangled by it, a
notification burst that cost a call its answer, CR in server JSON cutting
SSE events, and silent connections never timed out.
"""
from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from hardening_helpers import (CALL_TIMEOUT, MANY_PER_CALLER, ROGUE_POLICY, children_of, messages_of, pid_alive,
                               rogue_stdio, rss_kb, sse_events)
from helpers import RawMcp, metric, text_of

MAX_UPSTREAM_MESSAGE = 1 << 20
REQUEST_TIMEOUT = 2   # --request-timeout-secs: forwarded requests other than tools/call
RSS_BUDGET_KB = 60 * 1024  # growth allowed over a module's whole run


# ---------------------------------------------------------------------------
# The rogue upstream facade
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def rogue(module_facade, tmp_path_factory):
    log = tmp_path_factory.mktemp("rogue") / "upstream.log"
    fa = module_facade(upstream=rogue_stdio(), policy=ROGUE_POLICY, env={"ROGUE_LOG": str(log)},
                       extra_args=["--max-upstream-message-bytes", str(MAX_UPSTREAM_MESSAGE),
                                   "--max-restarts", "20", "--restart-backoff-ms", "50",
                                   "--request-timeout-secs", str(REQUEST_TIMEOUT),
                                   "--drain-timeout-secs", "1", *MANY_PER_CALLER])
    fa.log = log
    fa.rss0 = rss_kb(fa.proc.proc.pid)
    yield fa
    grown = rss_kb(fa.proc.proc.pid) - fa.rss0
    assert grown < RSS_BUDGET_KB, f"facade RSS grew {grown} kB over the module"


@pytest.fixture(scope="module")
def bystander(rogue):
    """A session on its own upstream process: must keep working whatever the others do."""
    s = RawMcp(rogue.url, timeout=10)
    s.initialize(client_name="bystander")
    yield s
    assert s.sent == s.answered
    s.close()


@pytest.fixture
def sess(rogue):
    s = RawMcp(rogue.url, timeout=15)
    s.initialize()
    yield s
    s.close()


def all_fine(fa, bystander: RawMcp) -> None:
    """The facade is up and an unrelated session still works."""
    assert fa.proc.alive(), fa.stderr_text()[-3000:]
    assert text_of(bystander.call_tool("say", {"text": "still here"})) == "still here"


def post_raw(sess: RawMcp, raw: bytes | str, timeout: float = 10) -> httpx.Response:
    try:
        return sess.http.post(sess.url, content=raw, headers=sess.headers(), timeout=timeout)
    except httpx.TimeoutException:
        pytest.fail(f"no answer within {timeout} s to {raw[:200]!r}")


def answer_to(resp: httpx.Response, rid) -> dict:
    """The one JSON-RPC response in an HTTP answer (asserting there is exactly one)."""
    msgs = [m for m in messages_of(resp) if isinstance(m, dict) and "method" not in m
            and ("result" in m or "error" in m)]
    assert len(msgs) == 1, f"expected one response, got {msgs} (HTTP {resp.status_code})"
    assert msgs[0].get("id") == rid, msgs
    return msgs[0]


def clear_error(msg: dict, *codes: int) -> dict:
    assert "error" in msg and "result" not in msg, msg
    err = msg["error"]
    assert err["code"] in codes, msg
    assert isinstance(err.get("message"), str) and len(err["message"]) > 10, msg
    return err


def unique_id(tag: str) -> str:
    """A request id no other test or session uses (to find the call in the server's log)."""
    return f"{tag}-{uuid.uuid4().hex}"


def upstream_calls(fa, rid) -> list[dict]:
    """The tools/call requests the server read (from ROGUE_LOG) for the client
    request `rid`. The server only sees the facade's own ids: a request is
    found by the `_meta.probe` the test put in it (`_meta` passes untouched)."""
    out = []
    for line in fa.log.read_bytes().splitlines():
        if b'"tools/call"' in line and rid.encode() in line:
            msg = json.loads(line)
            if (msg.get("params", {}).get("_meta") or {}).get("probe") == rid:
                out.append(msg)
    return out


def upstream_lines(fa) -> list[dict]:
    """Every JSON line the server read (from ROGUE_LOG)."""
    out = []
    for line in fa.log.read_bytes().splitlines():
        try:
            out.append(json.loads(line))
        except (ValueError, RecursionError):
            pass
    return out


def whoami_pid(sess: RawMcp) -> int:
    return json.loads(text_of(sess.call_tool("whoami")))["pid"]


def call_body(rid, name: str, arguments_json: str) -> bytes:
    """A tools/call with raw arguments, its id also in `_meta.probe` (see upstream_calls)."""
    return (f'{{"jsonrpc":"2.0","id":{json.dumps(rid)},"method":"tools/call",'
            f'"params":{{"_meta":{{"probe":{json.dumps(rid)}}},"name":"{name}",'
            f'"arguments":{arguments_json}}}}}').encode()


# ---------------------------------------------------------------------------
# Client bad input
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("depth", [10_000, 500_000])
def test_deeply_nested_json(rogue, sess, bystander, depth):
    """10,000 and 500,000 levels (within the 4 MiB body limit): no stack
    overflow, a clear error, or (for a member the facade does not read) the
    server's own answer."""
    deep_arr = "[" * depth + "]" * depth
    deep_obj = '{"a":' * depth + "1" + "}" * depth
    # the whole body is a nested array: a batch (refused on 2025-06-18), or unreadable
    r = post_raw(sess, deep_arr)
    assert r.status_code == 400 and r.json()["error"]["code"] in (-32600, -32700), r.text[:300]
    # an unknown member of the envelope nests deeply
    r = post_raw(sess, '{"jsonrpc":"2.0","id":1,"method":"ping","x":' + deep_obj + "}")
    if r.status_code == 400:
        assert r.json()["error"]["code"] in (-32600, -32700), r.text[:300]
    else:  # the facade reads every request strictly: too deep to read is a clear -32602
        msg = answer_to(r, 1)
        assert msg["error"]["code"] == -32602 and msg["error"]["data"]["reason"] == "unreadable_params", msg
    # the arguments of a tool call nest deeply: the pipeline cannot read them
    for arg in (deep_arr, deep_obj):
        rid = sess.next_id()
        r = post_raw(sess, call_body(rid, "say", '{"text":"x","deep":' + arg + "}"))
        if r.status_code == 400:
            assert r.json()["error"]["code"] in (-32600, -32700), r.text[:300]
        else:
            clear_error(answer_to(r, rid), -32602, -32600)
    assert text_of(sess.call_tool("say", {"text": "shallow"})) == "shallow"
    all_fine(rogue, bystander)


def test_duplicate_envelope_keys_are_invalid(sess):
    for raw in ['{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}',
                '{"jsonrpc":"2.0","id":3,"method":"tools/call","method":"ping"}',
                '{"jsonrpc":"2.0","jsonrpc":"2.0","id":4,"method":"ping"}']:
        r = post_raw(sess, raw)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600, (raw, r.text)


@pytest.mark.parametrize("params", [
    '{"name":"crash","name":"whoami","arguments":{}}',
    '{"name":"whoami","name":"crash","arguments":{}}',
    '{"name":"whoami","arguments":{"mode":"ROOT!"},"arguments":{"mode":"ok"}}',
    '{"name":"whoami","arguments":{"mode":"ok","mode":"ROOT!"}}',
    '{"name":"whoami","arguments":{"nested":{"k":1,"\\u006b":2}}}',   # the same key, spelled twice
])
def test_duplicate_keys_cannot_smuggle_past_the_policy(rogue, sess, bystander, params):
    """Parsers disagree on which of two equal keys wins (most keep the last,
    some the first) and the server gets the client's bytes: a tools/call with
    a key given twice is refused before the policy, and nothing reaches the server."""
    pid = whoami_pid(sess)
    rid = unique_id("dup")
    probed = '{"_meta":{"probe":"%s"},' % rid + params[1:]
    raw = f'{{"jsonrpc":"2.0","id":"{rid}","method":"tools/call","params":{probed}}}'
    msg = answer_to(post_raw(sess, raw), rid)
    err = clear_error(msg, -32602)
    assert err["data"]["reason"] == "duplicate_key" and "duplicate key" in err["message"], err
    assert upstream_calls(rogue, rid) == [], "a call with duplicate keys reached the server"
    assert whoami_pid(sess) == pid, "the smuggled `crash` ran"
    all_fine(rogue, bystander)


@pytest.mark.parametrize("raw", [
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","arguments":{"text":"\xff\xfe"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","arguments":{"te\xc3":"x"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","arguments":{"text":"\xc0\xaf"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"say","arguments":{"text":"\xed\xa0\x80"}}}',
    b'{"jsonrpc":"2.0","id":1,"method":"tools/\xff"}',
    b'{"jsonrpc":"2.0","id":"\xf8\x88\x80\x80\x80","method":"ping"}',
], ids=["in-value", "in-key", "overlong-slash", "raw-surrogate", "in-method", "in-id"])
def test_invalid_utf8_is_a_parse_error(rogue, sess, bystander, raw):
    r = post_raw(sess, raw)
    assert r.status_code == 400, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["code"] == -32700 and "parse error" in err["message"].lower(), err
    all_fine(rogue, bystander)


def test_huge_ids(rogue, sess, bystander):
    # a 1 MB string id is an id like any other: echoed back exactly
    big = "i" * (256 << 10)  # the answer must fit --max-upstream-message-bytes
    assert sess.request("ping", rid=big)["result"] == {}
    assert sess.request("ping", rid=9007199254740991)["result"] == {}
    assert sess.request("ping", rid=-9007199254740991)["result"] == {}
    for rid in ["9007199254740992", "-9007199254740992", "1" * 400, "1e3", "1.0", "0x10", "-", "01"]:
        r = post_raw(sess, f'{{"jsonrpc":"2.0","id":{rid},"method":"ping"}}')
        assert r.status_code == 400, (rid, r.status_code, r.text[:200])
        assert r.json()["error"]["code"] in (-32600, -32700), (rid, r.text[:200])
    all_fine(rogue, bystander)


def test_negative_zero_id_on_an_aliased_tool(facade):
    # its own facade: the panic's backtrace alone costs the process ~160 MB of RSS
    fa = facade(upstream=rogue_stdio(), policy=ROGUE_POLICY)
    s = RawMcp(fa.url, timeout=2)
    try:
        s.initialize()
        r = post_raw(s, call_body(0, "say", '{"text":"x"}').replace(b'"id":0', b'"id":-0'), timeout=2)
        msg = answer_to(r, 0)
        assert "result" in msg or "error" in msg
        assert fa.proc.alive()
    finally:
        s.close()


def test_huge_numbers_in_arguments(rogue, sess, bystander):
    """Out of f64 range: a clear -32602; in range: passes through unchanged."""
    for args in ['{"text":"x","n":1e400}', '{"text":"x","n":-1e99999}']:
        rid = sess.next_id()
        msg = answer_to(post_raw(sess, call_body(rid, "say", args)), rid)
        err = clear_error(msg, -32602)
        assert err.get("data", {}).get("reason") == "unreadable_params", err
    rid = unique_id("bignum")
    msg = answer_to(post_raw(sess, call_body(rid, "whoami", '{"n":123456789012345678901234567890}')), rid)
    assert "result" in msg, msg
    (call,) = upstream_calls(rogue, rid)
    assert call["params"]["arguments"]["n"] == 123456789012345678901234567890, call
    all_fine(rogue, bystander)


def test_aliased_call_keeps_argument_numbers(rogue, sess):
    rid = unique_id("alias-num")
    msg = answer_to(post_raw(sess, call_body(rid, "say", '{"text":"x","n":123456789012345678901234567890,"z":-0}')), rid)
    assert "result" in msg, msg
    (call,) = upstream_calls(rogue, rid)
    assert call["params"]["arguments"]["n"] == 123456789012345678901234567890, call
    assert isinstance(call["params"]["arguments"]["z"], int), call


# ---------------------------------------------------------------------------
# The upstream misbehaves
# ---------------------------------------------------------------------------
def test_unknown_response_ids_are_dropped(rogue, sess, bystander):
    unmatched0 = metric(rogue.admin_url, "mcpwarden_upstream_unmatched_responses_total")
    assert text_of(sess.call_tool("unknown_ids", {"count": 40})) == "ok"
    assert text_of(sess.call_tool("say", {"text": "next"})) == "next"
    assert metric(rogue.admin_url, "mcpwarden_upstream_unmatched_responses_total") >= unmatched0 + 20
    assert sess.sent == sess.answered
    all_fine(rogue, bystander)


def test_non_json_on_stdout_is_dropped(rogue, sess, bystander):
    invalid0 = metric(rogue.admin_url, "mcpwarden_upstream_invalid_messages_total")
    pid = whoami_pid(sess)
    assert text_of(sess.call_tool("garbage")) == "ok"
    assert whoami_pid(sess) == pid, "text on stdout must not cost the server its life"
    assert metric(rogue.admin_url, "mcpwarden_upstream_invalid_messages_total") >= invalid0 + 8
    all_fine(rogue, bystander)


def test_invalid_utf8_on_stdout_is_dropped(rogue, sess, bystander):
    """A line that is not UTF-8 is a line that is not JSON-RPC: dropped and
    counted, the call answered, the server kept."""
    invalid0 = metric(rogue.admin_url, "mcpwarden_upstream_invalid_messages_total")
    pid = whoami_pid(sess)
    assert text_of(sess.call_tool("garbage", {"utf8": True})) == "ok"
    assert whoami_pid(sess) == pid, "undecodable output must not cost the server its life"
    assert metric(rogue.admin_url, "mcpwarden_upstream_invalid_messages_total") >= invalid0 + 9
    all_fine(rogue, bystander)


def test_forwarded_requests_time_out(rogue, sess, bystander):
    """A request the policy does not time (here logging/setLevel, which the
    rogue server never answers at level `emergency`) fails with -32007 after
    --request-timeout-secs, and the server is told to cancel it by the
    facade's id for it."""
    rid = unique_id("hang")
    t0 = time.monotonic()
    msg = sess.request("logging/setLevel", {"level": "emergency", "_meta": {"probe": rid}}, rid=rid)
    took = time.monotonic() - t0
    err = clear_error(msg, -32007)
    assert (err["data"]["reason"], err["data"]["limit"]) == ("timeout", REQUEST_TIMEOUT), err
    assert REQUEST_TIMEOUT - 0.5 < took < REQUEST_TIMEOUT + 2.5, took
    (sent,) = [m for m in upstream_lines(rogue) if m.get("method") == "logging/setLevel"
                and (m.get("params", {}).get("_meta") or {}).get("probe") == rid]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        cancels = [m for m in upstream_lines(rogue) if m.get("method") == "notifications/cancelled"
                   and m.get("params", {}).get("requestId") == sent["id"]]
        if cancels:
            break
        time.sleep(0.1)
    assert cancels, "the server was not told to cancel the request"
    assert sess.request("ping")["result"] == {}
    all_fine(rogue, bystander)


def test_notification_flood_within_queue_depth(rogue, bystander):
    """A burst the client can take (well under --queue-depth per read): every
    notification and the answer arrive, on both response styles."""
    for version in ("2025-06-18", "2025-11-25"):
        s = RawMcp(rogue.url, version=version, timeout=30)
        try:
            s.initialize()
            rid = s.next_id()
            r = post_raw(s, call_body(rid, "flood", '{"count":200,"size":32}'), timeout=30)
            msgs = messages_of(r)
            assert answer_to(r, rid)["result"]["content"][0]["text"] == "flooded 200"
            notes = [m for m in msgs if m.get("method") == "notifications/message"]
            assert len(notes) == 200, len(notes)
        finally:
            s.close()
    all_fine(rogue, bystander)


def read_slowly(s: RawMcp, body: str, rate_bytes_per_s: int = 2_000_000) -> bytes:
    """POST and read the answer like a healthy client on a modest link."""
    buf = b""
    with s.http.stream("POST", s.url, content=body, headers=s.headers(), timeout=30) as r:
        assert r.status_code == 200, r.status_code
        for chunk in r.iter_bytes(4096):
            buf += chunk
            time.sleep(len(chunk) / rate_bytes_per_s)
    return buf


def test_notification_flood_never_costs_the_response(rogue, bystander):
    lost = []
    for version in ("2025-06-18", "2025-11-25"):
        s = RawMcp(rogue.url, version=version, timeout=30)
        try:
            s.initialize()
            rid = s.next_id()
            raw = read_slowly(s, call_body(rid, "flood", '{"count":12000,"size":16}').decode())
            events = sse_events(raw)
            answers = [e for e in events if '"result"' in e["data"] or '"error"' in e["data"]]
            if not answers and any(e["id"] for e in events):
                # the spec's way back: resume the stream after the last event seen
                last = [e["id"] for e in events if e["id"]][-1]
                g = s.http.get(s.url, headers={**s.headers(), "Last-Event-ID": last}, timeout=10)
                if g.status_code == 200:
                    answers = [m for m in messages_of(g) if m.get("id") == rid]
            if len(answers) != 1:
                lost.append((version, len(events)))
            s.delete()
        finally:
            s.close()
    all_fine(rogue, bystander)
    assert lost == [], f"answers lost after (version, events received): {lost}"


def test_floods_leave_the_facade_healthy(rogue, bystander):
    """Whatever happens to a flooded stream, the facade and other sessions
    are fine and memory stays bounded."""
    pid = rogue.proc.proc.pid
    rss0 = rss_kb(pid)
    for _ in range(2):
        s = RawMcp(rogue.url, timeout=30)
        try:
            s.initialize()
            rid = s.next_id()
            r = post_raw(s, call_body(rid, "flood", '{"count":5000,"size":256}'), timeout=30)
            assert r.status_code == 200
            s.delete()
        finally:
            s.close()
    assert rss_kb(pid) - rss0 < 50 * 1024, (rss0, rss_kb(pid))
    all_fine(rogue, bystander)


def test_cr_whitespace_in_server_messages_survives_sse(rogue):
    s = RawMcp(rogue.url, version="2025-11-25", timeout=20)
    try:
        s.initialize()
        rid = s.next_id()
        r = post_raw(s, call_body(rid, "flood", '{"count":3,"size":8,"cr":true}'))
        assert r.headers["content-type"].startswith("text/event-stream")
        msgs = messages_of(r)
        assert not [m for m in msgs if "unparsable" in m], msgs
        assert len([m for m in msgs if m.get("method") == "notifications/message"]) == 3, msgs
    finally:
        s.close()


@pytest.mark.parametrize("version", [
    "2025-06-18",  # a plain JSON answer
    "2025-11-25",  # an SSE stream: CR must not cut the event (regression)
])
def test_cr_whitespace_in_a_tool_answer(rogue, bystander, version):
    s = RawMcp(rogue.url, version=version, timeout=20)
    try:
        s.initialize()
        rid = s.next_id()
        msg = answer_to(post_raw(s, call_body(rid, "cr_json", '{"text":"crlf"}')), rid)
        assert text_of(msg) == "crlf"
    finally:
        s.close()
    all_fine(rogue, bystander)


def test_duplicate_answer_is_dropped(rogue, sess, bystander):
    assert text_of(sess.call_tool("twice", {"text": "once"})) == "once"
    assert text_of(sess.call_tool("say", {"text": "after"})) == "after"
    assert sess.sent == sess.answered
    all_fine(rogue, bystander)


def test_hanging_call_times_out(rogue, sess, bystander):
    t0 = time.monotonic()
    err = clear_error(sess.call_tool("hang"), -32007)
    took = time.monotonic() - t0
    assert CALL_TIMEOUT - 0.2 < took < CALL_TIMEOUT + 3, took
    assert err["data"]["reason"] == "timeout", err
    assert text_of(sess.call_tool("say", {"text": "after hang"})) == "after hang"
    all_fine(rogue, bystander)


def test_wedged_server_times_out_calls_and_the_session_can_end(rogue, bystander):
    """A server that stops reading and writing: every call still gets -32007 on
    time (even once its stdin pipe is full), other sessions are unaffected, and
    ending the session kills the process."""
    s = RawMcp(rogue.url, timeout=20)
    try:
        s.initialize()
        pid = whoami_pid(s)
        clear_error(s.call_tool("wedge"), -32007)
        fill = "w" * 60_000  # under maxArgBytes; a few of these fill a 64 KiB pipe

        def one(_):
            t0 = time.monotonic()
            msg = s.call_tool("say", {"text": fill})
            return msg, time.monotonic() - t0

        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(one, range(6)))
        for msg, took in results:
            clear_error(msg, -32007)
            assert took < CALL_TIMEOUT + 4, took
        all_fine(rogue, bystander)
        assert pid_alive(pid)
        assert s.delete().status_code in (200, 204)
        deadline = time.monotonic() + 10
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not pid_alive(pid), "the wedged server outlived its session"
        assert s.sent == s.answered
    finally:
        s.close()


def test_exit_mid_response(rogue, sess, bystander):
    pid = whoami_pid(sess)
    err = clear_error(sess.call_tool("exit_mid"), -32603)
    assert err["data"]["reason"] == "upstream_failed" and "exited" in err["message"], err
    assert whoami_pid(sess) != pid
    assert text_of(sess.call_tool("say", {"text": "again"})) == "again"
    all_fine(rogue, bystander)


def test_message_over_upstream_limit(rogue, sess, bystander):
    err = clear_error(sess.call_tool("huge", {"bytes": 2 * MAX_UPSTREAM_MESSAGE}), -32603)
    assert str(MAX_UPSTREAM_MESSAGE) in err["message"], err
    assert text_of(sess.call_tool("huge", {"bytes": MAX_UPSTREAM_MESSAGE // 2})) == "h" * (MAX_UPSTREAM_MESSAGE // 2)
    all_fine(rogue, bystander)


def test_no_stray_processes(rogue):
    """Sessions ended above leave no server behind: at most the live sessions' plus spares."""
    live = metric(rogue.admin_url, "mcpwarden_sessions_active")
    kids = [p for p in children_of(rogue.proc.proc.pid) if pid_alive(p)]
    assert len(kids) <= live + 2, (kids, live)
