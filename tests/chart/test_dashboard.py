"""The Grafana dashboard (charts/mcp-warden/dashboards/mcp-warden.json):

- fresh: it is what dashboards/generate.py (Grafana's typed builders) writes;
- valid Grafana dashboard JSON: it decodes into Grafana's own dashboard model
  (PyPI grafana-foundation-sdk) and encodes back to the same JSON, so no key is
  unknown to Grafana; panel ids are unique and the grid has no overlaps;
- every query parses as PromQL, and every metric it queries is one the binaries
  export: the facade (`mcp-warden-sidecar run` in front of the stdio fixture,
  after a few real calls so that histograms and labelled counters have series)
  and the operator (`mcp-warden-operator run` against an unreachable API server:
  its admin server still serves /metrics) — plus the operator's labelled
  counters that only get a series after a reconcile, read from its source.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import httpx
import promql_parser
import pytest
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from chartkit import CHART, REPO
from conftest import free_port, sidecar_path, wait_http_ok

DASHBOARD = CHART / "dashboards" / "mcp-warden.json"
DOC = json.loads(DASHBOARD.read_text())
FIXTURE = REPO / "tests" / "fixtures" / "stdio_fixture.py"
FAKE_GITHUB_TOKEN = "ghp_" + "M4n5B6v7C8x9Z0l1K2j3H4g5F6d7S8a9P0o1"


def _generator():
    spec = importlib.util.spec_from_file_location("dashboard_generate", CHART / "dashboards" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def panels(doc: dict = DOC) -> list[dict]:
    out = []
    for p in doc["panels"]:
        out.append(p)
        out += p.get("panels", [])
    return out


def queries(doc: dict = DOC) -> list[str]:
    return [t["expr"] for p in panels(doc) for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """Every metric a PromQL expression selects (Grafana variables substituted)."""
    text = expr.replace("$__rate_interval", "5m").replace("$namespace", ".*").replace("$mcpserver", ".*")
    names: set[str] = set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)

    promql_parser.walk(promql_parser.parse(text), visit)
    return names


# ---------------------------------------------------------------------------
# Grafana JSON
# ---------------------------------------------------------------------------
def test_dashboard_is_fresh():
    assert DASHBOARD.read_text() == _generator().render(), \
        "dashboards/mcp-warden.json is stale: run .venv/bin/python charts/mcp-warden/dashboards/generate.py"


def _roundtrip(doc: dict) -> dict:
    return json.loads(json.dumps(Dashboard.from_json(doc), cls=JSONEncoder))


def test_dashboard_is_grafana_dashboard_json():
    assert _roundtrip(DOC) == DOC
    assert DOC["uid"] == "mcp-warden" and DOC["title"] and isinstance(DOC["schemaVersion"], int)
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids)) and all(isinstance(i, int) and i > 0 for i in ids)
    cells: set[tuple[int, int]] = set()
    for p in DOC["panels"]:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['title']!r} overlaps another"
        cells |= mine
    for p in panels():
        if p["type"] == "row":
            continue
        assert p["type"] in {"timeseries", "stat"} and p["datasource"]["uid"] == "${datasource}"
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
    variables = {v["name"]: v for v in DOC["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"


def test_every_facade_panel_filters_by_namespace_and_server():
    """Per-namespace and per-server variables, applied to every facade query."""
    variables = {v["name"]: v for v in DOC["templating"]["list"]}
    for name in ("namespace", "mcpserver"):
        v = variables[name]
        assert v["type"] == "query" and v["multi"] and v["includeAll"] and v["allValue"] == ".*", name
    assert '$namespace' in variables["mcpserver"]["query"], "the server list follows the namespace choice"
    facade = [e for e in queries() if any(n.startswith("mcpwarden_") and "reconcile" not in n
                                           and "capabilities" not in n for n in metric_names(e))]
    assert len(facade) >= 20
    for expr in facade:
        assert 'namespace=~"$namespace"' in expr and 'mcpserver=~"$mcpserver"' in expr, expr


def test_roundtrip_catches_keys_grafana_does_not_know():
    """Guard against a vacuous pass: a misspelled key does not survive the round trip."""
    for mutate in (lambda d: d["panels"][1].__setitem__("titel", "x"),
                   lambda d: d.__setitem__("refresh_rate", "5s"),
                   lambda d: d["templating"]["list"][0].__setitem__("querry", "x")):
        broken = copy.deepcopy(DOC)
        mutate(broken)
        assert _roundtrip(broken) != broken


def test_dashboard_covers_what_an_sre_asks():
    """Tool calls by outcome, denials by reason, latency percentiles, output
    bytes, quarantined tools, sessions, upstream restarts, reconcile errors."""
    by_title = {p["title"]: p for p in panels() if p["type"] != "row"}
    wanted = {
        "Tool calls by outcome": ("mcpwarden_tool_calls_total", "by (outcome)"),
        "Policy denials by reason": ("mcpwarden_policy_denials_total", "by (reason)"),
        "Tool call latency": ("mcpwarden_tool_call_duration_seconds_bucket", "histogram_quantile(0.99"),
        "Tool output size": ("mcpwarden_tool_output_bytes_bucket", "histogram_quantile(0.95"),
        "Quarantined tools": ("mcpwarden_tools", 'state="quarantined"'),
        "Active sessions": ("mcpwarden_sessions_active", "sum("),
        "Upstream restarts": ("mcpwarden_upstream_restarts_total", "increase("),
        "Reconcile errors": ("mcpwarden_reconcile_total", '_error"'),
    }
    for title, (metric, fragment) in wanted.items():
        text = " ".join(t["expr"] for t in by_title[title]["targets"])
        assert metric in text and fragment in text, title


def test_every_query_is_promql():
    exprs = queries()
    assert len(exprs) >= 20
    for expr in exprs:
        assert metric_names(expr), expr
    with pytest.raises(Exception):
        promql_parser.parse("sum(rate(mcpwarden_tool_calls_total[5m])")


# ---------------------------------------------------------------------------
# Every metric queried is exported
# ---------------------------------------------------------------------------
def _families(exposition: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, re.M))


def _series_names(families: dict[str, str]) -> set[str]:
    out = set()
    for name, kind in families.items():
        out |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return out


def _rpc(client: httpx.Client, url: str, headers: dict, rid: int | None, method: str, params=None) -> dict | None:
    body = {"jsonrpc": "2.0", "method": method, **({"id": rid} if rid is not None else {}),
            **({"params": params} if params is not None else {})}
    r = client.post(url, headers=headers, json=body)
    r.raise_for_status()
    if rid is None:
        return None
    text = r.text
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and line[5:].strip())
    return json.loads(text)


@pytest.fixture(scope="module")
def sidecar_metrics(start_module_process) -> dict[str, str]:
    binary = sidecar_path()
    if not binary.exists():
        pytest.skip(f"facade binary {binary} not built")
    port, admin = free_port(), free_port()
    # An HTTP audit store (not there): the HTTP sink's series exist.
    store = f"http://127.0.0.1:{free_port()}/audit"
    proc = start_module_process([binary, "run", "--listen", f"127.0.0.1:{port}", "--admin-listen",
                                 f"127.0.0.1:{admin}", "--audit-http", store, "--", sys.executable, FIXTURE])
    wait_http_ok(f"http://127.0.0.1:{admin}/readyz", proc=proc)
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(timeout=20) as client:
        r = client.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "chart-test", "version": "1"}}})
        r.raise_for_status()
        headers |= {"Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        _rpc(client, url, headers, None, "notifications/initialized")
        assert "tools" in _rpc(client, url, headers, 2, "tools/list")["result"]
        # A result with a token in it: the facade redacts it (mcpwarden_redactions_total{kind}).
        echoed = _rpc(client, url, headers, 3, "tools/call", {"name": "echo", "arguments": {"text": FAKE_GITHUB_TOKEN}})
        assert FAKE_GITHUB_TOKEN not in json.dumps(echoed["result"])
        # A refusal (mcpwarden_policy_denials_total{reason}).
        assert "error" in _rpc(client, url, headers, 4, "tools/call", {"name": "no_such_tool", "arguments": {}})
        return _families(client.get(f"http://127.0.0.1:{admin}/metrics").text)


def operator_path() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_OPERATOR", REPO / "target/debug/mcp-warden-operator"))
    return p if p.is_absolute() else REPO / p


@pytest.fixture(scope="module")
def operator_metrics(start_module_process, tmp_path_factory) -> dict[str, str]:
    binary = operator_path()
    if not binary.exists():
        pytest.skip(f"operator binary {binary} not built")
    # A kubeconfig naming an API server that is not there: the operator keeps
    # retrying its Lease while its admin endpoints serve.
    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "none", "user": {"token": "none"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none", "namespace": "default"}}]}))
    admin = free_port()
    proc = start_module_process([binary, "run", "--mode", "controller", "--admin-listen", f"127.0.0.1:{admin}"],
                                env={"KUBECONFIG": str(kubeconfig), "RUST_LOG": "error"})
    wait_http_ok(f"http://127.0.0.1:{admin}/healthz", proc=proc)
    return _families(httpx.get(f"http://127.0.0.1:{admin}/metrics", timeout=10).text)


def operator_declared_families() -> dict[str, str]:
    """Metric families the operator's source registers ("histogram" for HistogramOpts)."""
    out = {}
    for path in (REPO / "operator" / "src").rglob("*.rs"):
        for kind, name in re.findall(r"\b(Opts|HistogramOpts)::new\(\s*\"(mcpwarden_[a-z_]+)\"", path.read_text()):
            out[name] = "histogram" if kind == "HistogramOpts" else "counter"
    return out


def test_every_dashboard_metric_is_exported(sidecar_metrics, operator_metrics):
    # The binaries really export the contract names the dashboard is about.
    assert {"mcpwarden_tool_calls_total", "mcpwarden_policy_denials_total", "mcpwarden_tool_call_duration_seconds",
            "mcpwarden_tool_output_bytes", "mcpwarden_tools", "mcpwarden_sessions_active",
            "mcpwarden_upstream_restarts_total", "mcpwarden_redactions_total"} <= sidecar_metrics.keys()
    assert operator_metrics.get("mcpwarden_reconcile_duration_seconds") == "histogram"
    # Labelled operator counters have no series before the first reconcile: take
    # those names from the source, and only those the running binary did not show.
    declared = operator_declared_families()
    assert "mcpwarden_reconcile_total" in declared
    source_only = {n: k for n, k in declared.items() if n not in operator_metrics}
    exported = _series_names(sidecar_metrics) | _series_names(operator_metrics) | _series_names(source_only)
    queried = set().union(*map(metric_names, queries()))
    for variable in DOC["templating"]["list"]:
        if m := re.match(r"label_values\((\w+),", str(variable.get("query", ""))):
            queried.add(m.group(1))
    assert queried - exported == set(), f"queried but not exported: {sorted(queried - exported)}"
    # The cross-check can fail: a misspelled metric is not exported.
    assert "mcpwarden_tool_call_total" not in exported
