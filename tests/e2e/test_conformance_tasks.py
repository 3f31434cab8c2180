"""The tasks extension (`io.modelcontextprotocol/tasks`) scenarios of the
official MCP conformance suite 0.2.0-alpha.12 (tasks-*), against
tests/conformance/modern-fixture-server.mjs, whose tasks-extension.mjs
implements the extension by hand (the TypeScript SDK 2.4 has no runtime for
it):

  direct                  the fixture over Streamable HTTP
  facade-http-upstream    facade -> fixture over HTTP (modern: one shared
                          channel for every caller)
  facade-stdio-upstream   facade -> fixture as one stdio process

Every scenario that passes directly must pass through the facade: the task
ids the client sees there are the facade's own (sealed over the caller, the
server's task and the replica), the server's go upstream in their place.

tasks-status-notifications is skipped by the suite itself (its only check is
SKIPPED, pending a rewrite onto subscriptions/listen).
"""
from __future__ import annotations

import importlib.util

import pytest

from conftest import TESTS_DIR, free_port, managed_process, system_node, wait_port

FIXTURE = TESTS_DIR / "conformance" / "modern-fixture-server.mjs"
_spec = importlib.util.spec_from_file_location("mcp_conformance_next", TESTS_DIR / "conformance" / "run_next.py")
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)


def run_tasks(url: str) -> dict[str, dict]:
    names = [n for n in conformance.extension_scenarios() if n.startswith("tasks-")]
    return {n: conformance.run_scenario(url, n, None, "extension") for n in names}


@pytest.fixture(scope="module")
def fixture_http(node22):
    port = free_port()
    with managed_process([system_node(), FIXTURE, "--http", str(port)]) as mp:
        wait_port(port, proc=mp)
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def direct_tasks(fixture_http):
    results = run_tasks(fixture_http)
    print(conformance.format_results(results))
    return results


def test_direct(direct_tasks):
    assert len(direct_tasks) >= 10
    failing = {n: r for n, r in direct_tasks.items() if r["status"] not in ("pass", "skip")}
    assert not failing, conformance.format_results(failing)
    passed = [n for n, r in direct_tasks.items() if r["status"] == "pass"]
    assert len(passed) >= 9, conformance.format_results(direct_tasks)


def _compare(direct: dict, through: dict) -> None:
    print("\n" + conformance.format_results(through))
    lost = [n for n, d in direct.items() if d["status"] == "pass" and (through.get(n) or {}).get("status") != "pass"]
    detail = "\n".join(f"{n}: {(through.get(n) or {'problems': ['not run']})['problems']}" for n in lost)
    assert not lost, f"{len(lost)} scenario(s) pass directly but not through the facade:\n{detail}"


def test_facade_http_upstream(direct_tasks, fixture_http, facade):
    fa = facade(upstream_url=fixture_http)
    _compare(direct_tasks, run_tasks(fa.url))


def test_facade_stdio_upstream(direct_tasks, facade):
    fa = facade(upstream=[system_node(), FIXTURE, "--stdio"])
    _compare(direct_tasks, run_tasks(fa.url))
