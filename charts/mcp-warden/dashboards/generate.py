#!/usr/bin/env python3
"""Generate dashboards/mcp-warden.json, the mcp-warden Grafana dashboard, with
Grafana's own typed builders (PyPI `grafana-foundation-sdk`).

    .venv/bin/python charts/mcp-warden/dashboards/generate.py          # rewrite the JSON
    .venv/bin/python charts/mcp-warden/dashboards/generate.py --check  # exit 1 when stale

tests/chart/test_dashboard.py checks that the committed JSON is fresh, that it
decodes into Grafana's dashboard model without losing a key, that every query
parses as PromQL and that every metric it queries is exported by the binaries.

Facade metrics carry `namespace` and `mcpserver` labels added by Prometheus
(the chart's facade PodMonitor); the `$namespace` and `$mcpserver` variables
filter every facade panel, and match every series when "All" is selected,
also series scraped without those labels.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, timeseries
from grafana_foundation_sdk.builders.common import ReduceDataOptions, StackingConfig, VizLegendOptions
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (DashboardCursorSync, DataSourceRef,
                                                     VariableRefresh, VariableSort)

OUT = Path(__file__).resolve().parent / "mcp-warden.json"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'namespace=~"$namespace",mcpserver=~"$mcpserver"'  # facade series of the selected namespaces and servers
RATE = "$__rate_interval"


def query(expr: str, legend: str, ref: str = "A") -> prometheus.Dataquery:
    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)


def series(title: str, description: str, unit: str, *queries: prometheus.Dataquery,
           width: int = 12, stacked: bool = False) -> timeseries.Panel:
    panel = (timeseries.Panel().title(title).description(description).datasource(DS)
             .unit(unit).span(width).height(8).fill_opacity(10).line_width(1)
             .legend(VizLegendOptions().show_legend(True).display_mode(common.LegendDisplayMode.TABLE)
                     .placement(common.LegendPlacement.BOTTOM).calcs(["mean", "max"])))
    if stacked:
        panel = panel.stacking(StackingConfig().mode(common.StackingMode.NORMAL))
    for q in queries:
        panel = panel.with_target(q)
    return panel


def single(title: str, description: str, unit: str, expr: str, width: int = 6) -> stat.Panel:
    return (stat.Panel().title(title).description(description).datasource(DS).unit(unit)
            .span(width).height(4).with_target(query(expr, title))
            .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]))
            .graph_mode(common.BigValueGraphMode.AREA)
            .color_mode(common.BigValueColorMode.VALUE))


def quantiles(metric: str, by: str = "") -> list[prometheus.Dataquery]:
    extra = f", {by}" if by else ""
    sel = SEL if metric.startswith("mcpwarden_tool") or metric.startswith("mcpwarden_request") else ""
    legend_by = f" {{{{{by}}}}}" if by else ""
    return [query(f"histogram_quantile({q}, sum by (le{extra}) (rate({metric}_bucket{{{sel}}}[{RATE}])))",
                  f"p{int(q * 100)}{legend_by}", ref)
            for q, ref in ((0.5, "A"), (0.95, "B"), (0.99, "C"))]


def build() -> dict:
    d = (dash.Dashboard("mcp-warden")
         .uid("mcp-warden")
         .description("MCP servers behind the mcp-warden tool facade: tool calls, policy denials, latency, "
                      "output sizes, quarantined tools, sessions, upstream restarts, and the operator's reconciles.")
         .tags(["mcp", "mcp-warden"])
         .editable()
         .tooltip(DashboardCursorSync.CROSSHAIR)
         .time("now-6h", "now")
         .refresh("30s")
         .timezone("browser")
         .with_variable(dash.DatasourceVariable("datasource").label("Data source").type("prometheus"))
         .with_variable(dash.QueryVariable("namespace").label("Namespace").datasource(DS)
                        .query("label_values(mcpwarden_requests_total, namespace)")
                        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC)
                        .multi(True).include_all(True).all_value(".*"))
         .with_variable(dash.QueryVariable("mcpserver").label("MCP server").datasource(DS)
                        .query('label_values(mcpwarden_requests_total{namespace=~"$namespace"}, mcpserver)')
                        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC)
                        .multi(True).include_all(True).all_value(".*")))

    d = (d.with_row(dash.Row("Overview"))
         .with_panel(single("Tool calls / s", "Tool calls answered per second, every outcome.", "reqps",
                            f"sum(rate(mcpwarden_tool_calls_total{{{SEL}}}[{RATE}]))"))
         .with_panel(single("Denied share", "Share of tool calls refused by the policy.", "percentunit",
                            f'sum(rate(mcpwarden_tool_calls_total{{{SEL},outcome="denied"}}[{RATE}])) / '
                            f"sum(rate(mcpwarden_tool_calls_total{{{SEL}}}[{RATE}]))"))
         .with_panel(single("Quarantined tools", "Upstream tools quarantined (definition drift, pin mismatch, "
                            "poisoning): an admin must pin their new hash.", "short",
                            f'sum(mcpwarden_tools{{{SEL},state="quarantined"}})'))
         .with_panel(single("Active sessions", "Live client sessions across the facades.", "short",
                            f"sum(mcpwarden_sessions_active{{{SEL}}})")))

    d = (d.with_row(dash.Row("Tool calls"))
         .with_panel(series("Tool calls by outcome", "Tool calls per second by outcome.", "reqps",
                            query(f"sum by (outcome) (rate(mcpwarden_tool_calls_total{{{SEL}}}[{RATE}]))",
                                  "{{outcome}}"), stacked=True))
         .with_panel(series("Policy denials by reason", "Refusals per second by the policy's stable reason.",
                            "reqps",
                            query(f"sum by (reason) (rate(mcpwarden_policy_denials_total{{{SEL}}}[{RATE}]))",
                                  "{{reason}}"), stacked=True))
         .with_panel(series("Tool calls by tool and code", "Tool calls per second by exposed tool and JSON-RPC "
                            "code (0 is success; -32001…-32008 are the policy's gates).", "reqps",
                            query(f"sum by (tool, code) (rate(mcpwarden_tool_calls_total{{{SEL}}}[{RATE}]))",
                                  "{{tool}} {{code}}")))
         .with_panel(series("Tool calls in flight", "Tool calls currently running.", "short",
                            query(f"sum(mcpwarden_tool_calls_in_flight{{{SEL}}})", "in flight"))))

    d = (d.with_row(dash.Row("Latency and output"))
         .with_panel(series("Tool call latency", "Tool call latency through the facade (p50, p95, p99).", "s",
                            *quantiles("mcpwarden_tool_call_duration_seconds")))
         .with_panel(series("Tool call latency p95 by tool", "p95 tool call latency per exposed tool.", "s",
                            query("histogram_quantile(0.95, sum by (le, tool) "
                                  f"(rate(mcpwarden_tool_call_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
                                  "{{tool}}")))
         .with_panel(series("Tool output size", "Size of tool results sent to clients (p50, p95, p99).", "bytes",
                            *quantiles("mcpwarden_tool_output_bytes")))
         .with_panel(series("Tool output bytes / s", "Result bytes sent to clients per second, by tool.", "Bps",
                            query(f"sum by (tool) (rate(mcpwarden_tool_output_bytes_sum{{{SEL}}}[{RATE}]))",
                                  "{{tool}}"), stacked=True)))

    d = (d.with_row(dash.Row("Sessions, tools and upstreams"))
         .with_panel(series("Tools by state", "Upstream tools exposed, hidden by the profile, or quarantined.",
                            "short", query(f"sum by (state) (mcpwarden_tools{{{SEL}}})", "{{state}}")))
         .with_panel(series("Active sessions", "Live client sessions (an HPA can scale on this).", "short",
                            query(f"sum(mcpwarden_sessions_active{{{SEL}}})", "sessions")))
         .with_panel(series("Upstream restarts", "MCP server restarts after a crash or disconnect.", "short",
                            query(f"sum(increase(mcpwarden_upstream_restarts_total{{{SEL}}}[{RATE}]))",
                                  "restarts")))
         .with_panel(series("Redactions by kind", "Secrets scrubbed from results per second, by kind.", "short",
                            query(f"sum by (kind) (rate(mcpwarden_redactions_total{{{SEL}}}[{RATE}]))",
                                  "{{kind}}"), stacked=True))
         .with_panel(series("Requests by method and outcome", "Every MCP request the facades answered.",
                            "reqps",
                            query(f"sum by (method, outcome) (rate(mcpwarden_requests_total{{{SEL}}}[{RATE}]))",
                                  "{{method}} {{outcome}}")))
         .with_panel(series("Request latency p95 by method", "p95 time from a client request to its answer.",
                            "s",
                            query("histogram_quantile(0.95, sum by (le, method) "
                                  f"(rate(mcpwarden_request_duration_seconds_bucket{{{SEL}}}[{RATE}])))",
                                  "{{method}}"))))

    d = (d.with_row(dash.Row("Audit and approvals"))
         .with_panel(series("Audit records dropped", "Audit records lost, by sink (queue, file, http): a gap "
                            "in the audit trail (alert MCPWardenAuditDropped).", "short",
                            query(f"sum by (sink) (increase(mcpwarden_audit_dropped_total{{{SEL}}}[{RATE}]))",
                                  "{{sink}}"), width=8))
         .with_panel(series("Audit records held for the store", "Records the HTTP audit sink holds while its "
                            "store is slow or down (bounded by --audit-http-buffer).", "short",
                            query(f"sum by (mcpserver) (mcpwarden_audit_buffered{{{SEL}}})", "{{mcpserver}}"),
                            width=8))
         .with_panel(series("Calls waiting for approval", "Tool calls held for an out-of-band approval, and "
                            "the oldest one's wait.", "short",
                            query(f"sum(mcpwarden_approvals_pending{{{SEL}}})", "waiting"),
                            query(f"max(mcpwarden_approval_oldest_pending_seconds{{{SEL}}})", "oldest (s)", "B"),
                            width=8)))

    d = (d.with_row(dash.Row("Operator"))
         .with_panel(series("Reconciles by result", "MCPServer reconciles per second by result.", "ops",
                            query(f"sum by (result) (rate(mcpwarden_reconcile_total[{RATE}]))", "{{result}}"),
                            width=6, stacked=True))
         .with_panel(series("Reconcile errors", "Reconciles that failed (resolve, apply or status errors); "
                            "`waiting` (an invalid spec) is not an error.", "ops",
                            query(f'sum by (result) (rate(mcpwarden_reconcile_total{{result=~".+_error"}}[{RATE}]))',
                                  "{{result}}"), width=6))
         .with_panel(series("Reconcile duration", "Duration of one MCPServer reconcile (p50, p95, p99).", "s",
                            *quantiles("mcpwarden_reconcile_duration_seconds"), width=6))
         .with_panel(series("Servers waiting for approval", "MCPServers whose requested capabilities wait for "
                            "an admin's `mcpwarden.dev/approve` (counted by the leading operator).", "short",
                            query("max(mcpwarden_capabilities_pending)", "pending"), width=6)))
    doc = json.loads(json.dumps(d.build(), cls=JSONEncoder))
    for n, panel in enumerate(doc["panels"], 1):  # Grafana wants unique panel ids
        panel["id"] = n
    return doc


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
