"""Audit that reaches a store: the file sink rotates
by size and keeps a fixed number of files; the HTTP sink holds records
through an outage and delivers them, in order, when the store is back, and
when its buffer is full it drops records with a metric and a log line.
Every record read here is checked against docs/audit-record.v1.schema.json.
"""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import TESTS_DIR, free_port
from helpers import RawMcp, metric, text_of
from warden_helpers import Audit, check_audit_record, policy_doc, wait_for

TRACE_FIXTURE = TESTS_DIR / "fixtures" / "trace_fixture.py"
POLICY = policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}])


class Store:
    """An audit store: takes POSTed application/x-ndjson batches; while
    `down`, answers 503 without keeping anything."""

    def __init__(self, port: int):
        self.port = port
        self.records: list[dict] = []
        self.down = False
        self.refused = 0
        self.content_types: set[str] = set()
        self._server = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/audit"

    def start(self) -> "Store":
        store = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if store.down:
                    store.refused += 1
                    self.send_response(503)
                else:
                    store.content_types.add(self.headers.get("Content-Type", ""))
                    store.records.extend(json.loads(line) for line in body.decode().splitlines() if line)
                    self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server:
            self._server.shutdown()
            self._server.server_close()


def calls(client: RawMcp, n: int, start: int = 0) -> list[str]:
    texts = [f"call-{i}" for i in range(start, start + n)]
    for t in texts:
        assert text_of(client.call_tool("echo", {"text": t})) == t
    return texts


def call_numbers(records: list[dict]) -> list[int]:
    """The client's request ids of the tool_call records (the call_id's tail)."""
    return [int(r["call_id"].rsplit(":", 1)[1]) for r in records if r["event"] == "tool_call"]


def test_the_audit_file_rotates_by_size_and_keeps_the_newest(facade, tmp_path):
    audit = Audit(tmp_path / "audit.jsonl")
    f = facade(upstream=[sys.executable, TRACE_FIXTURE], policy=POLICY,
               extra_args=["--audit", audit.arg, "--audit-max-bytes", "3000", "--audit-keep", "2"])
    client = RawMcp(f.url)
    client.initialize()
    calls(client, 60)
    wait_for(lambda: audit.lines() and call_numbers(audit.lines())[-1] == client._next, what="the last record")
    rotated = [Audit(Path(f"{audit.path}.{n}")) for n in (1, 2)]
    assert all(r.path.exists() for r in rotated) and not Path(f"{audit.path}.3").exists()
    files = [rotated[1], rotated[0], audit]  # oldest first
    for a in files:
        assert 0 < a.path.stat().st_size <= 3000, (a.path, a.path.stat().st_size)
        assert a.text().endswith("\n")
    # The kept files hold the newest records, contiguous and in order (each
    # line also checked against the schema by Audit.lines()).
    numbers = [n for a in files for n in call_numbers(a.lines())]
    assert numbers == list(range(numbers[0], client._next + 1)), numbers
    assert numbers[0] > 2, "older records were rotated out"


def test_http_sink_holds_records_through_an_outage_and_delivers_them_in_order(facade, tmp_path):
    store = Store(free_port())  # not listening yet: connections are refused
    f = facade(upstream=[sys.executable, TRACE_FIXTURE], policy=POLICY,
               extra_args=["--audit", "off", "--audit-http", store.url])
    client = RawMcp(f.url)
    client.initialize()
    calls(client, 5)
    wait_for(lambda: metric(f.admin_url, "mcpwarden_audit_delivery_failures_total", sink="http") >= 1,
             what="a failed delivery")
    assert metric(f.admin_url, "mcpwarden_audit_buffered", sink="http") == 5
    try:
        store.start()
        wait_for(lambda: len(store.records) >= 5, timeout=20, what="delivery after the outage")
        calls(client, 3, start=5)
        wait_for(lambda: len(store.records) >= 8, what="delivery of later records")
    finally:
        store.stop()
    assert call_numbers(store.records) == list(range(2, client._next + 1))
    for r in store.records:
        check_audit_record(r)
    assert store.content_types == {"application/x-ndjson"}
    assert metric(f.admin_url, "mcpwarden_audit_dropped_total", sink="http") == 0
    assert metric(f.admin_url, "mcpwarden_audit_delivered_total", sink="http") == 8
    assert metric(f.admin_url, "mcpwarden_audit_buffered", sink="http") == 0
    assert "delivery failed; holding records and retrying" in f.stderr_text()


def test_http_sink_drops_with_a_metric_and_a_log_line_when_its_buffer_is_full(facade, tmp_path):
    store = Store(free_port()).start()
    store.down = True
    try:
        f = facade(upstream=[sys.executable, TRACE_FIXTURE], policy=POLICY,
                   extra_args=["--audit", "off", "--audit-http", store.url, "--audit-http-buffer", "3"])
        client = RawMcp(f.url)
        client.initialize()
        calls(client, 8)
        wait_for(lambda: store.refused >= 1, what="the store refusing a batch")
        assert metric(f.admin_url, "mcpwarden_audit_dropped_total", sink="http") == 5
        assert metric(f.admin_url, "mcpwarden_audit_buffered", sink="http") == 3
        wait_for(lambda: "audit records dropped: the HTTP sink's buffer is full" in f.stderr_text(),
                 what="the drop's log line")
        store.down = False
        wait_for(lambda: len(store.records) >= 3, timeout=20, what="the buffered records")
    finally:
        store.stop()
    # The three held (the first three calls) arrive; the five dropped never do.
    assert call_numbers(store.records) == [2, 3, 4]
    for r in store.records:
        check_audit_record(r)
