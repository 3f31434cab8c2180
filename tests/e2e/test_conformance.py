"""The official MCP conformance server suite (@modelcontextprotocol/conformance,
active + pending scenarios) against tests/conformance/fixture-server.mjs:

  direct                 the fixture over Streamable HTTP: every scenario passes
  facade-http-upstream   facade -> fixture over Streamable HTTP
  facade-stdio-upstream  facade -> fixture as a stdio child

Through the facade, every scenario that does not fail directly must not fail
(no FAILURE check). New WARNINGs (e.g. SSE priming/retry hints) are printed,
and fail the test only with MCP_CONFORMANCE_STRICT=1.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from conftest import TESTS_DIR, free_port, managed_process, system_node, wait_port

FIXTURE = TESTS_DIR / "conformance" / "fixture-server.mjs"
STRICT = os.environ.get("MCP_CONFORMANCE_STRICT") == "1"

_spec = importlib.util.spec_from_file_location("mcp_conformance_run", TESTS_DIR / "conformance" / "run.py")
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)


@pytest.fixture(scope="module")
def fixture_http(node22):
    """The fixture server over Streamable HTTP: yields its /mcp URL."""
    port = free_port()
    with managed_process([system_node(), FIXTURE, "--http", str(port)]) as mp:
        wait_port(port, proc=mp)
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def direct_results(fixture_http):
    results = conformance.run_suite(fixture_http)
    print(conformance.format_results(results))
    return results


def test_direct(direct_results):
    assert len(direct_results) > 0, "the conformance CLI reported no scenarios"
    bad = {n: r for n, r in direct_results.items() if r["status"] != "pass"}
    assert not bad, "fixture server does not pass every scenario directly:\n" + conformance.format_results(bad)


def _compare(direct: dict, through: dict) -> None:
    failed, warned = [], []
    for name, d in direct.items():
        f = through.get(name)
        if d["status"] == "fail":
            continue
        if f is None or f["status"] == "fail":
            failed.append(name)
        elif d["status"] == "pass" and f["status"] != "pass":
            warned.append(name)
    report = []
    for label, names in (("FAIL through the facade", failed), ("WARN through the facade", warned)):
        for n in names:
            report.append(f"{label} (direct: {direct[n]['status']}): {n}")
            report += [f"     {p}" for p in (through.get(n) or {"problems": ["not run"]})["problems"]]
    summary = "\n".join(report)
    print("\n" + conformance.format_results(through))
    if summary:
        print("\nDifferences from the direct run:\n" + summary, file=sys.stderr)
    assert len(through) > 0
    assert not failed and not (STRICT and warned), (
        f"{len(failed)} scenario(s) fail and {len(warned)} newly warn through the facade "
        f"(of {len(direct)}):\n{summary}")


def test_facade_http_upstream(direct_results, fixture_http, facade):
    fa = facade(upstream_url=fixture_http)
    _compare(direct_results, conformance.run_suite(fa.url))


def test_facade_stdio_upstream(direct_results, facade):
    fa = facade(upstream=[system_node(), FIXTURE, "--stdio"])
    _compare(direct_results, conformance.run_suite(fa.url))


# Every policy feature that has an "on" turned on: redaction (base64 too),
# schema cleaning, drift quarantine, the poisoning scan quarantining, risk
# prefixes on descriptions. A client must not be able to tell.
EVERY_DEFAULT_ON = """
apiVersion: mcpwarden.dev/v1alpha1
kind: FacadePolicy
auth: {anonymous: {role: admin}}
defaultAction: allow
riskPrefix: true
cleanSchemas: true
quarantineOnDrift: true
poisoningScan: quarantine
redaction: {enabled: true, decodeBase64: true}
riskCeiling: high
sandbox: {writeAllowed: true}
resources: {defaultAction: allow}
prompts: {defaultAction: allow}
"""


def test_facade_with_every_default_on(direct_results, fixture_http, facade):
    fa = facade(upstream_url=fixture_http, policy=EVERY_DEFAULT_ON)
    _compare(direct_results, conformance.run_suite(fa.url))
