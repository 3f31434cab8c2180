"""The official MCP conformance suite 0.2.0-alpha.12 (the 2026-07-28
scenarios) against tests/conformance/modern-fixture-server.mjs, a dual-era
server written with the TypeScript SDK 2.4:

  direct                  the fixture over Streamable HTTP
  facade-http-upstream    facade -> fixture over HTTP (the facade speaks modern
                          to it: one shared channel for every caller)
  facade-stdio-upstream   facade -> fixture as one stdio process for all callers
  legacy suite            the same CLI's 2025-11-25 scenarios, legacy clients
                          in front of the modern server (the facade makes the
                          handshake and turns input_required into requests)
  client scenarios        the CLI as the server, a real SDK 2.4 client as the
                          client, the facade in between (through_facade.py)

Every scenario that passes directly must pass through the facade, but two:
the server's roots are the policy's through the facade (the client could
widen the server's scope), so the facade answers the server's questions for
roots itself and never puts them to the client; the scenarios that check
the client is asked fail through it by design (ROOTS_ASKED_OF_CLIENT). The
tasks extension scenarios run in test_conformance_tasks.py.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from conftest import TESTS_DIR, free_port, managed_process, sidecar_path, system_node, wait_port

FIXTURE = TESTS_DIR / "conformance" / "modern-fixture-server.mjs"
_spec = importlib.util.spec_from_file_location("mcp_conformance_next", TESTS_DIR / "conformance" / "run_next.py")
conformance = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(conformance)


@pytest.fixture(scope="module")
def fixture_http(node22):
    port = free_port()
    with managed_process([system_node(), FIXTURE, "--http", str(port)]) as mp:
        wait_port(port, proc=mp)
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def direct_modern(fixture_http):
    results = conformance.run_suite(fixture_http)
    print(conformance.format_results(results))
    return results


@pytest.fixture(scope="module")
def direct_legacy(fixture_http):
    return conformance.run_suite(fixture_http, spec_version="2025-11-25")


# Through the facade the server's roots are the policy's, never the client's:
# each facade here is given one root (`--root`), as the suite's client offers
# one, and answers the server's questions for roots itself. The scenarios that
# check the client is asked for its roots fail through the facade by design
# (the client never is).
ROOTS_ASKED_OF_CLIENT = {"input-required-result-basic-list-roots", "input-required-result-multiple-input-requests"}


@pytest.fixture
def root(tmp_path) -> list[str]:
    path = tmp_path / "root"
    path.mkdir()
    return ["--root", str(path)]


def _compare(direct: dict, through: dict) -> None:
    print("\n" + conformance.format_results(through))
    assert direct and through
    asked = [n for n in ROOTS_ASKED_OF_CLIENT if n in direct and (through.get(n) or {}).get("status") == "pass"]
    assert not asked, f"the client was asked for the server's roots: {asked}"
    lost = [n for n, d in direct.items() if d["status"] == "pass" and n not in ROOTS_ASKED_OF_CLIENT
            and (through.get(n) or {}).get("status") != "pass"]
    detail = "\n".join(f"{n}: {(through.get(n) or {'problems': ['not run']})['problems']}" for n in lost)
    assert not lost, f"{len(lost)} scenario(s) pass directly but not through the facade:\n{detail}"


def test_direct(direct_modern):
    failing = {n: r for n, r in direct_modern.items() if r["status"] != "pass"}
    assert len(direct_modern) >= 40 and not failing, conformance.format_results(failing)


def test_facade_http_upstream(direct_modern, fixture_http, facade, root):
    fa = facade(upstream_url=fixture_http, extra_args=root)
    _compare(direct_modern, conformance.run_suite(fa.url))


def test_facade_stdio_upstream(direct_modern, facade, root):
    fa = facade(upstream=[system_node(), FIXTURE, "--stdio"], extra_args=root)
    _compare(direct_modern, conformance.run_suite(fa.url))


def test_legacy_clients_in_front_of_the_modern_server(direct_legacy, fixture_http, facade, root):
    fa = facade(upstream_url=fixture_http, extra_args=root)
    _compare(direct_legacy, conformance.run_suite(fa.url, spec_version="2025-11-25"))


@pytest.mark.parametrize("scenario", conformance.INTERMEDIARY_CLIENT_SCENARIOS)
def test_the_facade_as_a_client(scenario, node22):
    """The facade is the client the CLI's server judges: a real SDK client
    talks to the facade, whose upstream is the scenario's server."""
    wrapper = f"{sys.executable} {TESTS_DIR / 'conformance' / 'through_facade.py'}"
    env = {"MCP_WARDEN_SIDECAR": str(sidecar_path())}
    direct = conformance.run_client_scenario(scenario)
    assert direct["status"] == "pass", conformance.format_results({scenario: direct})
    through = conformance.run_client_scenario(scenario, command=wrapper, env=env)
    assert through["status"] == "pass", conformance.format_results({scenario: through})
