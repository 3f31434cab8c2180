"""The chart's PrometheusRule.

- It renders only when asked, every alert has a severity, a summary and a
  `runbook_url` whose section exists in docs/operating.md.
- Every alert is evaluated by `promtool test rules` (Debian's `prometheus`
  package) on series scraped from the running binaries: a facade in front of
  the stdio fixture (after real calls, a refusal and an unreachable audit
  store, so its labelled series exist) and the operator. Each scenario takes
  a scraped series — its exact name and labels, plus the `namespace`,
  `mcpserver`, `pod`, `instance` and `job` labels the facades' PodMonitor
  adds — starts it at the scraped value and moves it the way a failure
  would; beside it a healthy server's series must not alert. A renamed
  metric or label in the binaries fails here, and so does an alert that
  fires when it should not (checked: promtool fails on a wrong expectation).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import promql_parser
import pytest
import yaml

from chartkit import REPO, find, objects
from conftest import free_port, sidecar_path, wait_http_ok

PROMTOOL = shutil.which("promtool")
FIXTURE = REPO / "tests" / "fixtures" / "stdio_fixture.py"
OPERATING = (REPO / "docs" / "operating.md").read_text()
ALERTS = {"MCPWardenFacadeDown", "MCPWardenDenialSpike", "MCPWardenUpstreamRestarts",
          "MCPWardenApprovalPendingTooLong", "MCPWardenAuditDropped", "MCPWardenPolicyReloadFailed",
          "MCPWardenCapabilitiesPendingTooLong"}
RUNBOOKS = "https://github.com/mcp-warden/mcp-warden/blob/main/docs/operating.md"


def rule_groups(values: dict | None = None) -> list[dict]:
    objs = objects({"prometheusRule": {"enabled": True, **(values or {})}})
    return find(objs, "PrometheusRule")["spec"]["groups"]


def rules() -> dict[str, dict]:
    return {r["alert"]: r for g in rule_groups() for r in g["rules"]}


def test_the_rule_renders_only_when_asked_and_every_alert_has_a_runbook():
    assert not [o for o in objects() if o["kind"] == "PrometheusRule"]
    by_name = rules()
    assert set(by_name) == ALERTS
    headings = {h.strip().lower() for h in re.findall(r"^### (\S+)$", OPERATING, re.M)}
    for name, rule in by_name.items():
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        url = rule["annotations"]["runbook_url"]
        assert url == f"{RUNBOOKS}#{name.lower()}", url
        assert name.lower() in headings, f"docs/operating.md has no runbook section for {name}"
        promql_parser.parse(rule["expr"])
    # Values reach the rules.
    tuned = {r["alert"]: r for g in rule_groups({"approvalPending": {"seconds": 42},
                                                 "alertLabels": {"team": "platform"}}) for r in g["rules"]}
    assert tuned["MCPWardenApprovalPendingTooLong"]["expr"].endswith("> 42")
    assert all(r["labels"]["team"] == "platform" for r in tuned.values())


# ---------------------------------------------------------------------------
# Series from the running binaries
# ---------------------------------------------------------------------------
SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$")


def samples(exposition: str) -> list[tuple[str, dict, float]]:
    out = []
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, line
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out.append((m.group(1), labels, float(m.group(3))))
    return out


def _rpc(client, url, headers, rid, method, params=None):
    body = {"jsonrpc": "2.0", "method": method, **({"id": rid} if rid is not None else {}),
            **({"params": params} if params is not None else {})}
    r = client.post(url, headers=headers, json=body)
    r.raise_for_status()


@pytest.fixture(scope="module")
def scraped(start_module_process, tmp_path_factory) -> list[tuple[str, dict, float]]:
    """Samples from a running facade and a running operator."""
    binary = sidecar_path()
    operator = Path(__import__("os").environ.get("MCP_WARDEN_OPERATOR", REPO / "target/debug/mcp-warden-operator"))
    if not binary.exists() or not operator.exists():
        pytest.skip("the facade and operator binaries are not built")
    port, admin = free_port(), free_port()
    dead_store = f"http://127.0.0.1:{free_port()}/audit"
    proc = start_module_process([binary, "run", "--listen", f"127.0.0.1:{port}", "--admin-listen",
                                 f"127.0.0.1:{admin}", "--audit", "off", "--audit-http", dead_store,
                                 "--", sys.executable, FIXTURE])
    wait_http_ok(f"http://127.0.0.1:{admin}/readyz", proc=proc)
    url = f"http://127.0.0.1:{port}/mcp"
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(timeout=20) as client:
        r = client.post(url, headers=headers, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "alerts", "version": "1"}}})
        r.raise_for_status()
        headers |= {"Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
        _rpc(client, url, headers, None, "notifications/initialized")
        _rpc(client, url, headers, 2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        _rpc(client, url, headers, 3, "tools/call", {"name": "no_such_tool", "arguments": {}})
        facade = samples(client.get(f"http://127.0.0.1:{admin}/metrics").text)
    kubeconfig = tmp_path_factory.mktemp("kube") / "config"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "none", "user": {"token": "none"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none", "namespace": "default"}}]}))
    op_admin = free_port()
    op = start_module_process([operator, "run", "--mode", "controller", "--admin-listen", f"127.0.0.1:{op_admin}"],
                              env={"KUBECONFIG": str(kubeconfig), "RUST_LOG": "error"})
    wait_http_ok(f"http://127.0.0.1:{op_admin}/healthz", proc=op)
    operator_samples = samples(httpx.get(f"http://127.0.0.1:{op_admin}/metrics", timeout=10).text)
    return facade + [(n, {**l, "_from": "operator"}, v) for n, l, v in operator_samples]


class Series:
    """Series for promtool, built from scraped samples."""

    def __init__(self, scraped):
        self.scraped = scraped

    def pick(self, name: str, **match: str) -> tuple[dict, float]:
        for n, labels, value in self.scraped:
            if n == name and all(labels.get(k) == v for k, v in match.items()):
                return {k: v for k, v in labels.items() if k != "_from"}, value
        raise AssertionError(f"the binaries export no {name}{match}: "
                             f"{sorted({n for n, _, _ in self.scraped if n.startswith('mcpwarden_')})}")

    @staticmethod
    def pod(server: str) -> dict:
        """What the facades' PodMonitor adds to every series of a facade."""
        return {"namespace": "team-a", "mcpserver": server, "pod": f"{server}-7d9f8",
                "instance": f"10.0.0.{len(server)}:9090", "job": "mcp-warden-system/mcp-warden-facades"}

    def of(self, name: str, server: str | None, values: str, **match: str) -> dict:
        labels, start = self.pick(name, **match)
        if server:
            labels = {**labels, **self.pod(server)}
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        # `START+N` alone is the scraped value plus N; in `START+NxM` (promtool's
        # expanding notation) START is the first value.
        values = re.sub(r"START\+(\d+)(?=\s|$)", lambda m: f"{start + int(m.group(1)):g}", values)
        return {"series": f"{name}{{{text}}}", "values": values.replace("START", f"{start:g}")}


def exp(server: str, severity: str, **extra: str) -> dict:
    return {"namespace": "team-a", "mcpserver": server, "severity": severity, **extra}


def promtool_test(tmp_path: Path, tests: list[dict]) -> subprocess.CompletedProcess:
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    test_file = tmp_path / "test.yaml"
    test_file.write_text(yaml.safe_dump({"rule_files": [rules_file.name], "evaluation_interval": "1m",
                                         "tests": tests}, sort_keys=False))
    return subprocess.run([PROMTOOL, "test", "rules", test_file.name], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)


def scenarios(s: Series) -> list[dict]:
    pod_bad, pod_ok = Series.pod("git"), Series.pod("time")
    return [
        {"name": "facade down", "interval": "1m", "input_series": [
            {"series": "up{" + ",".join(f'{k}="{v}"' for k, v in sorted(pod_bad.items())) + "}",
             "values": "1 1 0x10"},
            {"series": "up{" + ",".join(f'{k}="{v}"' for k, v in sorted(pod_ok.items())) + "}",
             "values": "1x12"}],
         "alert_rule_test": [
             {"eval_time": "5m", "alertname": "MCPWardenFacadeDown", "exp_alerts": []},
             {"eval_time": "10m", "alertname": "MCPWardenFacadeDown", "exp_alerts": [{
                 "exp_labels": {**pod_bad, "severity": "critical"},
                 "exp_annotations": {
                     "summary": "The facade of MCPServer team-a/git (git-7d9f8) does not answer",
                     "description": f"Prometheus cannot scrape {pod_bad['instance']}: agents cannot reach "
                                    "the server through it.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardenfacadedown"}}]}]},
        {"name": "denial spike", "interval": "1m", "input_series": [
            # Quiet for 5 minutes, then a refusal a second among two requests a second.
            s.of("mcpwarden_policy_denials_total", "git", "START+0x5 START+60x25", reason="tool_not_available"),
            s.of("mcpwarden_requests_total", "git", "START+0x5 START+60x25", method="tools/call", outcome="denied"),
            s.of("mcpwarden_requests_total", "git", "START+0x5 START+60x25", method="tools/call", outcome="ok"),
            # A healthy server: a refusal a minute among a request a second.
            s.of("mcpwarden_policy_denials_total", "time", "START+1x30", reason="tool_not_available"),
            s.of("mcpwarden_requests_total", "time", "START+60x30", method="tools/call", outcome="ok")],
         "alert_rule_test": [
             {"eval_time": "14m", "alertname": "MCPWardenDenialSpike", "exp_alerts": []},
             {"eval_time": "20m", "alertname": "MCPWardenDenialSpike", "exp_alerts": [{
                 "exp_labels": exp("git", "warning"),
                 "exp_annotations": {
                     "summary": "The policy refuses 50% of the requests to team-a/git",
                     "description": "An agent probing, a broken client or a profile that lost a tool: see "
                                    "the reasons in mcpwarden_policy_denials_total and the audit trail.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardendenialspike"}}]}]},
        {"name": "upstream restarts", "interval": "1m", "input_series": [
            s.of("mcpwarden_upstream_restarts_total", "git", "START+1x20"),
            s.of("mcpwarden_upstream_restarts_total", "time", "START+0x20")],
         "alert_rule_test": [
             {"eval_time": "3m", "alertname": "MCPWardenUpstreamRestarts", "exp_alerts": []},
             {"eval_time": "15m", "alertname": "MCPWardenUpstreamRestarts", "exp_alerts": [{
                 "exp_labels": exp("git", "warning"),
                 "exp_annotations": {
                     "summary": "The MCP server team-a/git restarted 15 times in 15 minutes",
                     "description": "The facade restarts a server that crashes or disconnects; calls in "
                                    "flight fail with upstream_failed.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardenupstreamrestarts"}}]}]},
        {"name": "approval pending", "interval": "1m", "input_series": [
            s.of("mcpwarden_approval_oldest_pending_seconds", "git", "START 0 60 120 180 240"),
            s.of("mcpwarden_approval_oldest_pending_seconds", "time", "START 0 60 0 60 0")],
         "alert_rule_test": [
             {"eval_time": "3m", "alertname": "MCPWardenApprovalPendingTooLong", "exp_alerts": []},
             {"eval_time": "5m", "alertname": "MCPWardenApprovalPendingTooLong", "exp_alerts": [{
                 "exp_labels": exp("git", "warning"),
                 "exp_annotations": {
                     "summary": "A tool call to team-a/git has waited 4m 0s for an out-of-band approval",
                     "description": "Nobody decided on /approvals; the call fails with approval_timeout "
                                    "when --approval-timeout-secs runs out.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardenapprovalpendingtoolong"}}]}]},
        {"name": "audit dropped", "interval": "1m", "input_series": [
            s.of("mcpwarden_audit_dropped_total", "git", "START START START+5 START+5 START+5", sink="http"),
            s.of("mcpwarden_audit_dropped_total", "git", "STARTx5", sink="queue"),
            s.of("mcpwarden_audit_dropped_total", "time", "STARTx5", sink="http")],
         "alert_rule_test": [
             {"eval_time": "1m", "alertname": "MCPWardenAuditDropped", "exp_alerts": []},
             {"eval_time": "4m", "alertname": "MCPWardenAuditDropped", "exp_alerts": [{
                 "exp_labels": exp("git", "critical", sink="http"),
                 "exp_annotations": {
                     "summary": "team-a/git dropped 5 audit records (http sink)",
                     "description": "The audit trail has a gap: the sink was unwritable, too slow, or (http) "
                                    "its store was down longer than the buffer lasts.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardenauditdropped"}}]}]},
        {"name": "policy reload failed", "interval": "1m", "input_series": [
            s.of("mcpwarden_policy_reload_failing", "git", "START 1x10"),
            s.of("mcpwarden_policy_reload_failing", "time", "START 1 1 0x8")],
         "alert_rule_test": [
             {"eval_time": "4m", "alertname": "MCPWardenPolicyReloadFailed", "exp_alerts": []},
             {"eval_time": "10m", "alertname": "MCPWardenPolicyReloadFailed", "exp_alerts": [{
                 "exp_labels": exp("git", "warning"),
                 "exp_annotations": {
                     "summary": "team-a/git rejected its new policy and enforces the previous one",
                     "description": "The facade's log says why (\"new policy rejected\"); the server runs "
                                    "on its last good policy.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardenpolicyreloadfailed"}}]}]},
        {"name": "capabilities pending", "interval": "5m", "input_series": [
            s.of("mcpwarden_capabilities_pending", None, "START 2x20", _from="operator")],
         "alert_rule_test": [
             {"eval_time": "30m", "alertname": "MCPWardenCapabilitiesPendingTooLong", "exp_alerts": []},
             {"eval_time": "70m", "alertname": "MCPWardenCapabilitiesPendingTooLong", "exp_alerts": [{
                 "exp_labels": {"severity": "info"},
                 "exp_annotations": {
                     "summary": "2 MCPServers have waited longer than their grace for a capability approval",
                     "description": "They run without the capabilities they asked for until an approver "
                                    "annotates the digest.",
                     "runbook_url": f"{RUNBOOKS}#mcpwardencapabilitiespendingtoolong"}}]}]},
        {"name": "capabilities approved in time", "interval": "5m", "input_series": [
            s.of("mcpwarden_capabilities_pending", None, "START 2x6 0x14", _from="operator")],
         "alert_rule_test": [
             {"eval_time": "100m", "alertname": "MCPWardenCapabilitiesPendingTooLong", "exp_alerts": []}]},
    ]


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package `prometheus`; .ci/run installs it)")
def test_every_alert_fires_on_the_binaries_series_and_only_then(scraped, tmp_path):
    tests = scenarios(Series(scraped))
    covered = {t["alertname"] for s in tests for t in s["alert_rule_test"] if t["exp_alerts"]}
    assert covered == ALERTS
    result = promtool_test(tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian package `prometheus`; .ci/run installs it)")
def test_promtool_fails_when_an_alert_is_expected_that_does_not_fire(scraped, tmp_path):
    """Guard against a vacuous pass: the healthy server alerting is a failure."""
    wrong = scenarios(Series(scraped))[2]  # upstream restarts
    wrong["alert_rule_test"][1]["exp_alerts"].append({"exp_labels": exp("time", "warning")})
    result = promtool_test(tmp_path, [wrong])
    assert result.returncode != 0
    assert "MCPWardenUpstreamRestarts" in result.stdout + result.stderr
