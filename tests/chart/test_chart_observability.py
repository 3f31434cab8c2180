"""The chart's `observability` values reach the operator, and through it every
facade: the operator Deployment's environment, handed to the operator binary's
own `render`, gives the facade the standard OTEL_* variables and
`--audit-http`, and its NetworkPolicy the egress to the collector and the
audit store; the objects stay valid Kubernetes. Off by default: no OTEL_*
anywhere.

The binary comes from $MCP_WARDEN_OPERATOR (set by `make test`), else
target/debug/mcp-warden-operator.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from chartkit import REPO, VALUE_SETS, find, objects, operator_pod

EXAMPLE = REPO / "examples" / "stdio-server.yaml"


def operator() -> Path:
    path = Path(os.environ.get("MCP_WARDEN_OPERATOR", REPO / "target/debug/mcp-warden-operator"))
    if not path.exists():
        pytest.skip(f"operator binary not built: {path}")
    return path


def operator_env(values: dict | None) -> dict[str, str]:
    (container,) = operator_pod(objects(values))["spec"]["containers"]
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def render_with(env: dict[str, str]) -> list[dict]:
    """`mcp-warden-operator render` with the chart's settings for the operator."""
    chart_env = {k: v for k, v in env.items() if k.startswith("MCP_WARDEN_FACADE_")}
    out = subprocess.run(
        [str(operator()), "render", "-f", str(EXAMPLE)],
        capture_output=True, text=True, timeout=60,
        env={"PATH": os.environ.get("PATH", ""), **chart_env},
    )
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def facade(objs: list[dict]) -> dict:
    pod = find(objs, "Deployment")["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "facade")


def test_off_by_default():
    env = operator_env(None)
    assert env["MCP_WARDEN_FACADE_OTLP_ENDPOINT"] == ""
    assert env["MCP_WARDEN_FACADE_AUDIT_HTTP"] == ""
    assert not [k for k in env if k.startswith("OTEL_")], "the operator traces only when asked"
    objs = render_with(env)
    c = facade(objs)
    assert not [e for e in c["env"] if e["name"].startswith("OTEL_")]
    assert "--audit-http" not in c["args"]
    assert find(objs, "NetworkPolicy")["spec"]["egress"] == []


def test_all_on_reaches_the_facade_and_its_network_policy():
    values = VALUE_SETS["all-on"]
    env = operator_env(values)
    assert env["MCP_WARDEN_FACADE_TELEMETRY_EGRESS"] == "10.96.0.0/12:4317,10.96.0.50/32:8080"
    # The operator's own spans: the same collector, its own sampling.
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.observability:4317"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc"
    assert (env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"]) == ("traceidratio", "0.5")

    objs = render_with(env)
    c = facade(objs)
    fenv = {e["name"]: e.get("value") for e in c["env"]}
    assert fenv["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.observability:4317"
    assert fenv["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc"
    assert (fenv["OTEL_TRACES_SAMPLER"], fenv["OTEL_TRACES_SAMPLER_ARG"]) == ("parentbased_traceidratio", "0.05")
    assert fenv["OTEL_RESOURCE_ATTRIBUTES"] == "k8s.namespace.name=team-a,mcpwarden.server=git"
    i = c["args"].index("--audit-http")
    assert c["args"][i + 1] == "http://10.96.0.50:8080/audit"
    egress = find(objs, "NetworkPolicy")["spec"]["egress"]
    ports = {(peer["ipBlock"]["cidr"], p["port"]) for rule in egress for peer in rule["to"]
             if "ipBlock" in peer for p in rule["ports"]}
    assert ports == {("10.96.0.0/12", 4317), ("10.96.0.50/32", 8080)}
    # The collector is named by a host name: the pod needs the cluster DNS.
    assert any(p["port"] == 53 for rule in egress for p in rule["ports"])
    for obj in objs:
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_ip_endpoints_need_no_dns():
    values = {"observability": {
        "tracing": {"otlpEndpoint": "http://10.96.0.20:4318", "egress": [{"cidr": "10.96.0.20/32", "port": 4318}]},
    }}
    egress = find(render_with(operator_env(values)), "NetworkPolicy")["spec"]["egress"]
    assert egress == [{"ports": [{"port": 4318, "protocol": "TCP"}], "to": [{"ipBlock": {"cidr": "10.96.0.20/32"}}]}]

