"""A small OTLP trace receiver for the tests, on the official `opentelemetry-proto`
messages: gRPC (`TraceService/Export`, grpcio) and HTTP/protobuf (`POST
/v1/traces`), both on loopback. Every span received is kept, flattened with
its resource attributes, for the tests to query.

    with OtlpReceiver() as rx:
        rx.grpc_endpoint, rx.http_endpoint     # http://127.0.0.1:PORT
        rx.wait(lambda spans: ..., timeout)    # spans so far, once pred holds
"""
from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2

from conftest import free_port

SERVER, CLIENT = 2, 3  # Span.SpanKind values


def any_value(v: common_pb2.AnyValue):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attrs(kvs) -> dict:
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    attributes: dict
    events: list[tuple[str, dict]]
    status_code: int
    resource: dict
    transport: str
    raw: object = field(repr=False, default=None)

    def strings(self) -> list[str]:
        """Every string this span carries: name, attributes, events, resource."""
        out = [self.name]
        values = [*self.attributes.values(), *self.resource.values()]
        for name, a in self.events:
            out.append(name)
            values.extend(a.values())
        while values:
            v = values.pop()
            if isinstance(v, list):
                values.extend(v)
            elif isinstance(v, dict):
                values.extend(v.values())
            else:
                out.append(str(v))
        return out


class OtlpReceiver:
    def __init__(self):
        self.spans: list[Span] = []
        self.requests = {"grpc": 0, "http": 0}
        self._lock = threading.Lock()
        self.grpc_port, self.http_port = free_port(), free_port()

    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def take(self, request: trace_service_pb2.ExportTraceServiceRequest, transport: str) -> None:
        got = []
        for rs in request.resource_spans:
            resource = attrs(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(Span(
                        trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex(),
                        name=s.name, kind=s.kind, attributes=attrs(s.attributes),
                        events=[(e.name, attrs(e.attributes)) for e in s.events],
                        status_code=s.status.code, resource=resource, transport=transport, raw=s))
        with self._lock:
            self.requests[transport] += 1
            self.spans.extend(got)

    def snapshot(self) -> list[Span]:
        with self._lock:
            return list(self.spans)

    def wait(self, pred: Callable[[list[Span]], bool], timeout: float = 15, what: str = "spans") -> list[Span]:
        deadline = time.monotonic() + timeout
        while True:
            spans = self.snapshot()
            if pred(spans):
                return spans
            if time.monotonic() > deadline:
                names = [(s.name, s.trace_id[:8]) for s in spans]
                raise AssertionError(f"timed out waiting for {what}; received {names}")
            time.sleep(0.05)

    def __enter__(self) -> "OtlpReceiver":
        receiver = self

        class Service(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):
                receiver.take(request, "grpc")
                return trace_service_pb2.ExportTraceServiceResponse()

        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), self._grpc)
        self._grpc.add_insecure_port(f"127.0.0.1:{self.grpc_port}")
        self._grpc.start()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                ok = self.path == "/v1/traces" and self.headers.get("Content-Type") == "application/x-protobuf"
                if ok:
                    request = trace_service_pb2.ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    receiver.take(request, "http")
                data = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._http = ThreadingHTTPServer(("127.0.0.1", self.http_port), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None)
