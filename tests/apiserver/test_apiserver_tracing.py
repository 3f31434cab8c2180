"""The operator's own spans, end to end: the controller, run as the chart runs
it but with the standard OTEL_* variables pointing at an OTLP receiver on the
official `opentelemetry-proto` messages, exports one `reconcile` span per
reconcile of a real MCPServer on a real API server (namespace, name,
generation, result; the pipeline steps as events), and only its own spans
(not the Kubernetes client's or HTTP's).

The session's controller is stopped for the test and started again after it
(one leader at a time: the traced one takes the Lease).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import free_port
from k8s_fixtures import OperatorProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from otlp_receiver import OtlpReceiver  # noqa: E402

NS = "team-traced"


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_reconciles_are_exported_as_spans(cluster, controller, webhook, protocol):
    name = f"traced-{protocol.split('/')[0]}"
    with OtlpReceiver() as rx:
        endpoint = rx.http_endpoint if protocol == "http/protobuf" else rx.grpc_endpoint
        env = {**controller.env, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
               "OTEL_BSP_SCHEDULE_DELAY": "100"}
        traced = OperatorProcess(controller.args, env, free_port())
        controller.stop()
        try:
            traced.start()
            cluster.namespace(NS)
            # No ToolProfile: the reconcile ends waiting for one (PolicyCompiled=False).
            cluster.apply({"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
                           "metadata": {"name": name, "namespace": NS},
                           "spec": {"image": "ghcr.io/example/mcp:1", "command": ["srv"],
                                    "toolProfileRef": {"name": "absent"}}})

            def ours(spans):
                return [s for s in spans if s.attributes.get("name") == name]

            spans = rx.wait(lambda s: ours(s), timeout=30, what=f"a reconcile span of {NS}/{name}")
            span = ours(spans)[0]
            assert span.name == "reconcile"
            assert span.transport == protocol.split("/")[0]
            assert span.parent_id == "", "each reconcile is a trace of its own"
            assert span.attributes["namespace"] == NS
            assert span.attributes["generation"] == 1
            assert span.attributes["result"] == "waiting"
            steps = [a.get("step") for n, a in span.events if n == "reconcile step"]
            assert steps == ["resolve", "plan"]
            assert span.resource["service.name"] == "mcp-warden-operator"
            # Only the operator's own spans leave the process.
            assert {s.name for s in rx.snapshot()} == {"reconcile"}
            assert "OpenTelemetry tracing on" in traced.log()
        finally:
            traced.finish()
            controller.start()
            cluster.kubectl("delete", "mcpserver", name, "-n", NS, "--wait=false", check=False)
