"""Bad input over raw HTTP (httpx) against a facade in front of server-everything
(stdio): each gets a clear JSON-RPC error with the right HTTP status, and the
session that sent it keeps working afterwards.
"""
from __future__ import annotations

import json

import httpx
import pytest

from helpers import ACCEPT_BOTH, RawMcp, everything_stdio, parse_body, text_of

MAX_BODY = 65536


@pytest.fixture(scope="module")
def fa(module_facade):
    return module_facade(upstream=everything_stdio(),
                         extra_args=["--max-body-bytes", str(MAX_BODY), "--drain-timeout-secs", "1"])


@pytest.fixture(scope="module")
def sess(fa):
    """One 2025-06-18 session shared by the tests: it must survive all of them."""
    s = RawMcp(fa.url, version="2025-06-18")
    s.initialize()
    assert s.negotiated == "2025-06-18"
    yield s
    s.close()


def assert_still_works(sess: RawMcp) -> None:
    r = sess.call_tool("echo", {"message": "after bad input"})
    assert text_of(r) == "Echo: after bad input"


def rpc_error(resp: httpx.Response, status: int, code: int) -> dict:
    """Assert an HTTP status carrying one JSON-RPC error object; return the error."""
    assert resp.status_code == status, (resp.status_code, resp.text)
    assert resp.headers.get("content-type", "").startswith("application/json"), resp.headers
    body = resp.json()
    assert body.get("jsonrpc") == "2.0" and "result" not in body, body
    err = body["error"]
    assert err["code"] == code, body
    assert isinstance(err["message"], str) and len(err["message"]) > 10, body
    return {**err, "id": body.get("id")}


@pytest.mark.parametrize("raw", [
    b'{"jsonrpc": "2.0", "id": 1, "method": ',
    b"{not json}",
    b"\xff\xfe\x00garbage",
    b"",
])
def test_malformed_json_is_parse_error(sess, raw):
    err = rpc_error(sess.post(raw), 400, -32700)
    assert "parse error" in err["message"].lower()
    assert err["id"] is None
    assert_still_works(sess)


@pytest.mark.parametrize("raw", [b"42", b'"x"', b"null", b"true", b"{}",
                                 b'{"jsonrpc": "1.0", "id": 5, "method": "ping"}',
                                 b'{"jsonrpc": "2.0", "id": 6, "method": 7}'])
def test_non_object_or_non_message_is_invalid_request(sess, raw):
    err = rpc_error(sess.post(raw), 400, -32600)
    assert "invalid request" in err["message"].lower()
    if b'"id": 5' in raw:
        assert err["id"] == 5  # the id is echoed when it can be read
    assert_still_works(sess)


def test_unknown_session_is_404(sess):
    r = sess.post({"jsonrpc": "2.0", "id": 99, "method": "ping"},
                  headers={"Mcp-Session-Id": "no-such-session-0000"})
    err = rpc_error(r, 404, -32000)
    assert "session" in err["message"].lower()
    r = httpx.get(sess.url, headers={"Accept": "text/event-stream", "Mcp-Session-Id": "nope"}, timeout=5)
    assert r.status_code == 404
    assert_still_works(sess)


def test_ended_session_is_404(fa):
    other = RawMcp(fa.url)
    try:
        other.initialize()
        assert other.call_tool("echo", {"message": "x"})
        assert other.delete().status_code in (200, 204)
        r = other.post({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        rpc_error(r, 404, -32000)
    finally:
        other.close()


@pytest.mark.parametrize("version", ["1999-01-01", "2025-13-45", "latest"])
def test_unsupported_protocol_version_header_is_400(sess, version):
    r = sess.post({"jsonrpc": "2.0", "id": 10, "method": "tools/list"},
                  headers={"MCP-Protocol-Version": version})
    err = rpc_error(r, 400, -32600)
    assert version in err["message"] and "2025-06-18" in err["message"], err
    assert_still_works(sess)


def test_body_over_limit_is_413(sess):
    big = {"jsonrpc": "2.0", "id": 11, "method": "tools/call",
           "params": {"name": "echo", "arguments": {"message": "x" * (MAX_BODY + 10)}}}
    err = rpc_error(sess.post(big), 413, -32600)
    assert str(MAX_BODY) in err["message"] and "larger" in err["message"], err
    assert_still_works(sess)


def test_chunked_body_over_limit_is_413(sess):
    """No Content-Length: the limit holds while the body streams in."""
    def chunks():
        yield b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"echo","arguments":{"message":"'
        for _ in range(MAX_BODY // 4096 + 2):
            yield b"y" * 4096
        yield b'"}}}'
    r = sess.http.post(sess.url, content=chunks(), headers=sess.headers())
    err = rpc_error(r, 413, -32600)
    assert str(MAX_BODY) in err["message"]
    assert_still_works(sess)


def test_body_just_under_limit_passes(sess):
    msg = "z" * (MAX_BODY - 200)
    r = sess.call_tool("echo", {"message": msg})
    assert text_of(r) == f"Echo: {msg}"


def _batch():
    return [{"jsonrpc": "2.0", "id": 21, "method": "tools/call", "params": {"name": "echo", "arguments": {"message": "a"}}},
            {"jsonrpc": "2.0", "id": 22, "method": "ping"}]


def test_batch_rejected_on_2025_06_18(sess):
    err = rpc_error(sess.post(_batch()), 400, -32600)
    assert "2025-06-18" in err["message"] and "batch" in err["message"].lower(), err
    assert_still_works(sess)


def test_batch_rejected_on_2025_11_25(fa):
    s = RawMcp(fa.url, version="2025-11-25")
    try:
        s.initialize()
        assert s.negotiated == "2025-11-25"
        err = rpc_error(s.post(_batch()), 400, -32600)
        assert "2025-11-25" in err["message"] and "batch" in err["message"].lower(), err
        assert_still_works(s)
    finally:
        s.close()


def test_batch_allowed_on_2025_03_26(fa):
    """Control: the version that had batches gets one answer per request."""
    s = RawMcp(fa.url, version="2025-03-26")
    try:
        s.initialize()
        assert s.negotiated == "2025-03-26"
        r = s.post(_batch())
        assert r.status_code == 200, r.text
        answers = {m["id"]: m for m in parse_body(r) if "id" in m}
        assert set(answers) == {21, 22}, answers
        assert text_of(answers[21]) == "Echo: a" and answers[22]["result"] == {}
    finally:
        s.close()


def test_batch_cannot_initialize(fa):
    r = httpx.post(fa.url, content=json.dumps([{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}]),
        headers={"Accept": ACCEPT_BOTH, "Content-Type": "application/json"}, timeout=10)
    err = rpc_error(r, 400, -32600)
    assert "initialize" in err["message"]
    assert "mcp-session-id" not in r.headers


def test_a_batch_in_a_session_cannot_initialize_it_again(fa):
    """As on a POST of its own, `initialize` inside a live session's batch is
    refused (it would redo the handshake the facade replays to the server),
    and the batch's other requests are answered."""
    s = RawMcp(fa.url, version="2025-03-26")
    try:
        s.initialize()
        again = {"jsonrpc": "2.0", "id": 23, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "again", "version": "1"}}}
        r = s.post([again, *_batch()])
        assert r.status_code == 200, r.text
        answers = {m["id"]: m for m in parse_body(r) if "id" in m}
        assert set(answers) == {21, 22, 23}, answers
        assert answers[23]["error"]["code"] == -32600 and "already initialized" in answers[23]["error"]["message"]
        assert text_of(answers[21]) == "Echo: a" and answers[22]["result"] == {}
        assert_still_works(s)
    finally:
        s.close()


def test_missing_session_header_is_400(sess):
    r = sess.post({"jsonrpc": "2.0", "id": 30, "method": "tools/list"}, session=False)
    err = rpc_error(r, 400, -32600)
    assert "Mcp-Session-Id" in err["message"]
    assert_still_works(sess)


def test_initialize_on_existing_session_is_400(sess):
    r = sess.post({"jsonrpc": "2.0", "id": 31, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}})
    err = rpc_error(r, 400, -32600)
    assert err["id"] == 31 and "already initialized" in err["message"]
    assert_still_works(sess)


@pytest.mark.parametrize("headers", [
    {"Host": "evil.example"},
    {"Host": "evil.example:8080"},
    {"Origin": "http://evil.example"},
    {"Origin": "null"},
])
def test_wrong_host_or_origin_is_403(sess, headers):
    r = sess.post({"jsonrpc": "2.0", "id": 40, "method": "tools/list"}, headers=headers)
    err = rpc_error(r, 403, -32600)
    assert "Forbidden" in err["message"] and ("Host" in err["message"] or "Origin" in err["message"])
    # refused before the body was read: the connection closes, and says so
    assert r.headers.get("connection") == "close", r.headers
    assert_still_works(sess)


def test_loopback_origin_is_allowed(sess, fa):
    r = sess.post({"jsonrpc": "2.0", "id": 41, "method": "ping"},
                  headers={"Origin": f"http://localhost:{fa.port}"})
    assert r.status_code == 200 and parse_body(r)[0]["result"] == {}


@pytest.mark.parametrize("headers,status", [
    ({"Accept": "application/json"}, 406),
    ({"Accept": "text/html"}, 406),
    ({"Content-Type": "text/plain"}, 415),
])
def test_wrong_accept_or_content_type(sess, headers, status):
    r = sess.post({"jsonrpc": "2.0", "id": 50, "method": "ping"}, headers=headers)
    rpc_error(r, status, -32600)
    assert_still_works(sess)


def test_unknown_method_and_bad_tool_pass_through(sess):
    r = sess.request("no/such-method", {})
    assert r["error"]["code"] == -32601
    r = sess.call_tool("no-such-tool", {})
    assert ("error" in r) or r["result"].get("isError"), r
    assert_still_works(sess)



@pytest.mark.parametrize("rid", [
    pytest.param(1.5, id="fractional"),
    pytest.param(None, id="null"),
])
def test_request_id_must_be_string_or_integer(sess, rid):
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"})
    try:
        r = sess.http.post(sess.url, content=body, headers=sess.headers(), timeout=3)
    except httpx.TimeoutException:
        pytest.fail(f"no response within 3 s to a ping with id {rid!r}")
    err = rpc_error(r, 400, -32600)
    assert "id" in err["message"]
    assert_still_works(sess)



def test_lone_surrogate_in_arguments_gets_a_truthful_answer(sess):
    raw = (b'{"jsonrpc":"2.0","id":60,"method":"tools/call",'
           b'"params":{"name":"echo","arguments":{"message":"a\\ud800b"}}}')
    (msg,) = parse_body(sess.post(raw))
    assert msg["id"] == 60
    if "error" in msg:  # refusing is fine, if the reason given is the real one
        assert msg["error"]["code"] in (-32600, -32602, -32700), msg
        assert "``" not in msg["error"]["message"], msg
    else:
        assert text_of(msg).startswith("Echo: a"), msg
    assert_still_works(sess)


def test_every_request_answered_once(sess):
    """The raw session counted every request it sent through `request()`."""
    assert sess.sent > 0 and sess.sent == sess.answered


@pytest.mark.parametrize("args,expected", [
    (["--upstream-url", "ftp://127.0.0.1:9/mcp"], "the URL scheme `ftp` is not supported"),
    (["--upstream-url", "https://u:p@127.0.0.1:9/mcp"], "must not carry a user name or password"),
    (["--upstream-url", "/mcp"], "is not an absolute http(s) URL"),
    (["--upstream-url", "http://:9/mcp"], "the URL has no host"),
    ([], "no upstream"),
    (["--upstream-url", "http://127.0.0.1:9/mcp", "--", "true"], "exactly one upstream"),
], ids=["scheme", "userinfo", "relative", "no-host", "none", "two"])
def test_bad_upstream_arguments_fail_at_start(args, expected):
    """A facade that could never reach its server says why and exits,
    instead of starting and failing every request."""
    import subprocess
    from conftest import free_port, sidecar_path
    if not sidecar_path().exists():
        pytest.skip("no facade binary")
    r = subprocess.run([str(sidecar_path()), "run", "--listen", f"127.0.0.1:{free_port()}",
                        "--admin-listen", f"127.0.0.1:{free_port()}", *args],
                       capture_output=True, text=True, timeout=15)
    assert r.returncode != 0 and expected in r.stderr, (r.returncode, r.stderr[-2000:])
