"""OpenTelemetry traces through the facade.

An OTLP receiver built on the official `opentelemetry-proto` messages
(tests/e2e/otlp_receiver.py, gRPC and HTTP/protobuf) gets the facade's
spans; an MCP server that records what it receives (tests/fixtures/
trace_fixture.py, stdio and HTTP) shows what the facade sent on. A client
sends `traceparent` in `params._meta` or in the HTTP header; the trace must
go on unbroken: caller span → the facade's SERVER span → its CLIENT span →
the `traceparent` the server receives. No span may carry an argument, a
result or any other string the caller or the server wrote.
"""
from __future__ import annotations

import json
import re
import secrets
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import TESTS_DIR, free_port, wait_port
from helpers import RawMcp, parse_body, text_of
from otlp_receiver import CLIENT, SERVER, OtlpReceiver
from warden_helpers import Audit, policy_doc

TRACE_FIXTURE = TESTS_DIR / "fixtures" / "trace_fixture.py"
SECRET_RESULT = "result-text-that-must-never-reach-a-span"
POLICY = policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}, {"name": "secret"}])
# Export batches quickly: the tests wait for spans, not for the default 5 s.
FAST = {"OTEL_BSP_SCHEDULE_DELAY": "50"}


def traceparent(trace: str, span: str, flags: str = "01") -> str:
    return f"00-{trace}-{span}-{flags}"


def new_ids() -> tuple[str, str]:
    return secrets.token_hex(16), secrets.token_hex(8)


class Upstream:
    """What the trace fixture recorded: one entry per request it got."""

    def __init__(self, path: Path):
        self.path = path

    def entries(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def calls_in(self, trace: str) -> list[dict]:
        return [e for e in self.entries() if e["method"] == "tools/call"
                and trace in ((e.get("meta") or {}).get("traceparent") or "")]


def parts(tp: str) -> tuple[str, str, str]:
    version, trace, parent, flags = tp.split("-")
    assert version == "00", tp
    return trace, parent, flags


def call(client: RawMcp, name: str, arguments: dict, meta: dict | None = None,
         headers: dict | None = None) -> dict:
    params = {"name": name, "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    rid = client.next_id()
    r = client.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}, headers=headers)
    (msg,) = [m for m in parse_body(r) if m.get("id") == rid]
    return msg


def chain(spans, trace: str, caller_span: str):
    """The facade's SERVER span (child of the caller's) and its CLIENT child, in `trace`."""
    mine = [s for s in spans if s.trace_id == trace]
    servers = [s for s in mine if s.kind == SERVER]
    assert len(servers) == 1, [(s.name, s.kind) for s in mine]
    server = servers[0]
    assert server.parent_id == caller_span, "the facade's span must be a child of the caller's"
    clients = [s for s in mine if s.kind == CLIENT]
    for c in clients:
        assert c.parent_id == server.span_id, "the exchange with the server is a child of the request"
    return server, clients


def assert_no_content(spans, *contents: str) -> None:
    assert spans
    for s in spans:
        for text in s.strings():
            for c in contents:
                assert c not in text, f"span {s.name!r} carries caller or server content {c!r}: {text!r}"


def test_a_call_continues_the_callers_trace_from_meta_and_header_to_the_server(facade, tmp_path):
    upstream = Upstream(tmp_path / "upstream.jsonl")
    audit = Audit(tmp_path / "audit.jsonl")
    arg_mark = "argument-" + secrets.token_hex(8)
    unknown_tool = "no-such-tool-" + secrets.token_hex(4)
    with OtlpReceiver() as rx:
        f = facade(upstream=[sys.executable, TRACE_FIXTURE], policy=POLICY,
                   extra_args=["--audit", audit.arg],
                   env={"TRACE_FIXTURE_LOG": str(upstream.path),
                        "OTEL_EXPORTER_OTLP_ENDPOINT": rx.http_endpoint, **FAST})
        client = RawMcp(f.url)
        client.initialize()

        # 1. trace context in `_meta`, with state and baggage that must pass.
        t1, c1 = new_ids()
        r = call(client, "echo", {"text": arg_mark},
                 meta={"traceparent": traceparent(t1, c1), "tracestate": "caller=1", "baggage": "k=v"})
        assert text_of(r) == arg_mark
        # 2. only the HTTP header.
        t2, c2 = new_ids()
        r = call(client, "secret", {}, headers={"traceparent": traceparent(t2, c2)})
        assert text_of(r) == SECRET_RESULT
        # 3. `_meta` wins over the header.
        t3, c3 = new_ids()
        th, ch = new_ids()
        call(client, "echo", {"text": arg_mark}, meta={"traceparent": traceparent(t3, c3)},
             headers={"traceparent": traceparent(th, ch)})
        # 4. refused by the policy gate, and by the schema gate.
        t4, c4 = new_ids()
        r = call(client, unknown_tool, {"text": arg_mark}, meta={"traceparent": traceparent(t4, c4)})
        assert r["error"]["code"] == -32004
        t5, c5 = new_ids()
        r = call(client, "echo", {"text": 12345}, meta={"traceparent": traceparent(t5, c5)})
        assert r["error"]["code"] == -32602

        spans = rx.wait(lambda ss: {t1, t2, t3, t4, t5} <= {s.trace_id for s in ss}
                        and sum(1 for s in ss if s.trace_id in (t1, t2, t3) and s.kind == CLIENT) >= 3,
                        what="the five calls' spans")

    # 1: caller → SERVER → CLIENT → what the server received.
    server, clients = chain(spans, t1, c1)
    assert len(clients) == 1
    (got,) = upstream.calls_in(t1)
    trace, parent, flags = parts(got["meta"]["traceparent"])
    assert (trace, parent, flags) == (t1, clients[0].span_id, "01")
    assert got["meta"]["tracestate"] == "caller=1" and got["meta"]["baggage"] == "k=v"
    assert server.name == "tools/call echo"
    a = server.attributes
    assert a["mcp.method.name"] == "tools/call" and a["gen_ai.tool.name"] == "echo"
    assert a["mcpwarden.decision"] == "allow" and a["mcpwarden.outcome"] == "ok"
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", a["mcpwarden.definition_hash"])
    gates = [(name, e["mcpwarden.gate.result"]) for name, e in server.events]
    assert gates == [("policy", "pass"), ("budget", "pass"), ("schema", "pass"),
                     ("upstream", "pass"), ("output", "pass")], gates
    assert server.resource["service.name"] == "mcp-warden-sidecar"
    assert server.transport == "http"
    # The audit line names the same call, trace and span.
    line = audit.wait(lambda l: l.get("trace_id") == t1)
    assert line["span_id"] == server.span_id and line["call_id"] == a["mcpwarden.call_id"]

    # 2: the header's trace, carried on in `_meta`.
    server2, clients2 = chain(spans, t2, c2)
    (got2,) = upstream.calls_in(t2)
    assert parts(got2["meta"]["traceparent"])[:2] == (t2, clients2[0].span_id)
    assert server2.name == "tools/call secret"

    # 3: `_meta` won; nothing joined the header's trace.
    chain(spans, t3, c3)
    assert not [s for s in spans if s.trace_id == th]

    # 4: refused at the policy gate: an error span, the gate as an event, never forwarded.
    server4, clients4 = chain(spans, t4, c4)
    assert clients4 == [] and upstream.calls_in(t4) == []
    assert server4.name == "tools/call", "a name the policy does not vouch for stays out of span names"
    assert server4.status_code == 2  # STATUS_CODE_ERROR
    assert server4.attributes["mcpwarden.gate"] == "policy"
    assert server4.attributes["mcpwarden.code"] == -32004
    assert server4.attributes["mcpwarden.reason"] == "tool_not_available"
    assert ("policy", {"mcpwarden.gate.result": "deny", "mcpwarden.code": -32004,
                       "mcpwarden.reason": "tool_not_available"}) in server4.events
    # 5: refused at the schema gate, after policy and budget passed.
    server5, _ = chain(spans, t5, c5)
    assert [n for n, _ in server5.events] == ["policy", "budget", "schema"]
    assert server5.attributes["mcpwarden.gate"] == "schema"

    # No argument, result or caller-chosen name in any span, attribute or event.
    assert_no_content(spans, arg_mark, SECRET_RESULT, unknown_tool, "12345")


def test_grpc_export_and_an_http_server_gets_the_trace_in_headers_and_meta(facade, start_process, tmp_path):
    upstream = Upstream(tmp_path / "upstream.jsonl")
    port = free_port()
    start_process([sys.executable, TRACE_FIXTURE, "--http", str(port)],
                  env={"TRACE_FIXTURE_LOG": str(upstream.path)})
    wait_port(port)
    with OtlpReceiver() as rx:
        f = facade(upstream_url=f"http://127.0.0.1:{port}/mcp", policy=POLICY,
                   env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.grpc_endpoint,
                        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_SERVICE_NAME": "facade-under-test", **FAST})
        client = RawMcp(f.url)
        client.initialize()
        trace, caller = new_ids()
        r = call(client, "echo", {"text": "hello"}, headers={"traceparent": traceparent(trace, caller),
                                                            "tracestate": "caller=2"})
        assert text_of(r) == "hello"
        spans = rx.wait(lambda ss: any(s.trace_id == trace and s.kind == CLIENT for s in ss),
                        what="the call's spans over gRPC")
    server, (client_span,) = chain(spans, trace, caller)
    assert {s.transport for s in spans} == {"grpc"}
    assert server.resource["service.name"] == "facade-under-test"
    (got,) = upstream.calls_in(trace)
    assert got["headers"]["traceparent"] == got["meta"]["traceparent"]
    assert parts(got["headers"]["traceparent"])[:2] == (trace, client_span.span_id)
    assert got["headers"]["tracestate"] == "caller=2"


def test_off_by_default_the_callers_context_passes_untouched(facade, tmp_path):
    upstream = Upstream(tmp_path / "upstream.jsonl")
    with OtlpReceiver() as rx:
        f = facade(upstream=[sys.executable, TRACE_FIXTURE], policy=POLICY,
                   env={"TRACE_FIXTURE_LOG": str(upstream.path)})
        client = RawMcp(f.url)
        client.initialize()
        trace, caller = new_ids()
        sent = traceparent(trace, caller)
        call(client, "echo", {"text": "x"}, meta={"traceparent": sent, "tracestate": "a=b"})
        (got,) = upstream.calls_in(trace)
        assert got["meta"] == {"traceparent": sent, "tracestate": "a=b"}
        time.sleep(0.5)
        assert rx.snapshot() == [] and rx.requests == {"grpc": 0, "http": 0}


def test_a_trace_the_sampler_drops_still_reaches_the_server(facade, tmp_path):
    upstream = Upstream(tmp_path / "upstream.jsonl")
    with OtlpReceiver() as rx:
        f = facade(upstream=[sys.executable, TRACE_FIXTURE], policy=POLICY,
                   env={"TRACE_FIXTURE_LOG": str(upstream.path), "OTEL_EXPORTER_OTLP_ENDPOINT": rx.http_endpoint,
                        "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0", **FAST})
        client = RawMcp(f.url)
        client.initialize()
        trace, caller = new_ids()
        call(client, "echo", {"text": "x"}, meta={"traceparent": traceparent(trace, caller)})
        (got,) = upstream.calls_in(trace)
        got_trace, _, flags = parts(got["meta"]["traceparent"])
        assert (got_trace, flags) == (trace, "00"), "the trace goes on, marked as not sampled"
        time.sleep(0.5)
        assert [s for s in rx.snapshot() if s.trace_id == trace] == []
