"""The conformance suite against its *own* reference server
(tests/conformance/reference/, the suite authors' `everything-server.ts`: one
`/mcp` endpoint serving 2025-11-25 sessions and stateless 2026-07-28
requests), directly and through the facade with an HTTP upstream in the
default era choice (`auto`):

  legacy suite 0.1.16                  (2025-11-25 sessions)
  suite 0.2.0-alpha.12 at 2025-11-25   (sessions)
  suite 0.2.0-alpha.12 at 2026-07-28   (stateless)

Every scenario that passes directly must pass through the facade; the
module prints the scenario × direct × facade table. Three seams the fixtures
written in this repository did not show get a test of their own:

  - a legacy client in front of a server that speaks both eras keeps the
    server's requests (sampling, elicitation): it gets the legacy side;
  - `resources/subscribe` and `resources/unsubscribe` of a legacy client on
    a modern link are answered, well within the request timeout, although
    the server's `subscriptions/listen` stream never ends;
  - a `subscriptions/listen` stream the server writes as newline-delimited
    JSON (`application/json`, chunked) is relayed, frame by frame.
"""
from __future__ import annotations

import importlib.util
import json
import os
import time

import httpx
import pytest

from conftest import TESTS_DIR, free_port, managed_process, system_node, wait_port
from era_helpers import MODERN, modern_meta
from helpers import RawMcp

REFERENCE = TESTS_DIR / "conformance" / "reference"
TSX = REFERENCE / "node_modules" / "tsx" / "dist" / "cli.mjs"


def _load(name: str, file: str):
    spec = importlib.util.spec_from_file_location(name, TESTS_DIR / "conformance" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


legacy_suite = _load("mcp_conformance_run", "run.py")
next_suite = _load("mcp_conformance_next", "run_next.py")

# (label, run(url) -> {scenario: result})
SUITES = {
    "0.1.16": lambda url: legacy_suite.run_suite(url),
    "0.2.0@2025-11-25": lambda url: next_suite.run_suite(url, spec_version="2025-11-25"),
    "0.2.0@2026-07-28": lambda url: next_suite.run_suite(url, spec_version=MODERN),
}


@pytest.fixture(scope="module")
def reference(node22):
    """The reference server over HTTP: yields its /mcp URL."""
    if not TSX.exists():
        pytest.skip(f"{REFERENCE}/node_modules is missing: run `make setup`")
    port = free_port()
    env = dict(os.environ, PORT=str(port))
    with managed_process([system_node(), str(TSX), str(REFERENCE / "everything-server.ts")],
                         env=env, cwd=REFERENCE) as mp:
        wait_port(port, timeout=60, proc=mp)
        yield f"http://127.0.0.1:{port}/mcp"


# The scenarios that check the server's question for roots reaches the
# client. Through the facade the server's roots are the policy's: the facade
# answers that question itself and never puts it to the client, so these fail
# through it by design (tests/e2e/test_seams.py checks what the server gets).
ROOTS_ASKED_OF_CLIENT = {"input-required-result-basic-list-roots", "input-required-result-multiple-input-requests"}


@pytest.fixture(scope="module")
def through(reference, module_facade, tmp_path_factory):
    """The facade in front of the reference server, every default as shipped
    but one: through the facade the server's roots are the policy's, never the
    client's, so it is given one root (`--root`) as the suite's client offers
    one, and the scenarios in which the server asks for roots pass through it."""
    root = tmp_path_factory.mktemp("roots") / "root"
    root.mkdir()
    return module_facade(upstream_url=reference, extra_args=["--root", str(root)])


@pytest.fixture(scope="module")
def direct_results(reference) -> dict[str, dict]:
    return {label: run(reference) for label, run in SUITES.items()}


# Checks a scenario may only *warn* about through the facade, because they
# mutate the server with diagnostic tools the server does not list and the
# facade, by policy, refuses a tool it has not seen listed. Each is a SHOULD
# (a WARNING, never a FAILURE); test_a_listen_stream_written_as_ndjson_…
# shows the same list change relayed when the server makes it.
UNLISTED_TRIGGER_CHECKS = {
    "server-stateless": {
        "sep-2575-server-sends-tools-list-changed-on-subscription",
        "sep-2575-server-sends-prompts-list-changed-on-subscription",
    },
}


def _passes(name: str, result: dict | None) -> bool:
    if result is None or result["status"] == "fail":
        return False
    if result["status"] == "pass":
        return True
    warned = {c.get("id") for c in result["checks"] if c.get("status") == "WARNING"}
    return bool(warned) and warned <= UNLISTED_TRIGGER_CHECKS.get(name, set())


def _table(label: str, direct: dict, facade: dict) -> str:
    rows = [f"{'scenario':48} {'direct':7} facade   ({label})"]
    for name in sorted(set(direct) | set(facade)):
        d = (direct.get(name) or {}).get("status", "-")
        f = (facade.get(name) or {}).get("status", "-")
        rows.append(f"{name:48} {d:7} {f}")
    passed = lambda r: sum(1 for x in r.values() if x["status"] == "pass")  # noqa: E731
    rows.append(f"{'total pass':48} {passed(direct)}/{len(direct):<5} {passed(facade)}/{len(facade)}")
    return "\n".join(rows)


@pytest.mark.parametrize("label", list(SUITES))
def test_every_scenario_that_passes_directly_passes_through_the_facade(label, direct_results, through):
    direct = direct_results[label]
    assert direct, f"the {label} CLI reported no scenarios"
    facade = SUITES[label](through.url)
    table = _table(label, direct, facade)
    print("\n" + table)
    # The scenarios that check the client is asked for its roots: through the
    # facade it never is (the facade answers the server from the policy).
    asked = [n for n in ROOTS_ASKED_OF_CLIENT if n in direct and _passes(n, facade.get(n))]
    assert not asked, f"the client was asked for the server's roots: {asked}"
    lost = [n for n, d in direct.items()
            if d["status"] == "pass" and n not in ROOTS_ASKED_OF_CLIENT and not _passes(n, facade.get(n))]
    detail = "\n".join(f"{n}: {(facade.get(n) or {'problems': ['not run']})['problems']}" for n in lost)
    assert not lost, f"{len(lost)} of {label}'s scenarios pass directly but not through the facade:\n{detail}\n{table}"


def test_a_legacy_client_of_a_dual_era_server_gets_its_sampling_and_elicitation_requests(through):
    """The server asks for sampling only on its session side: a legacy client
    must be served there, not on the stateless side `auto` found first."""
    results = {n: legacy_suite.run_scenario(through.url, n, suite="active")
               for n in ("tools-call-sampling", "tools-call-elicitation")}
    bad = {n: r["problems"] for n, r in results.items() if r["status"] != "pass"}
    assert not bad, bad


def test_resource_subscriptions_of_a_legacy_client_on_a_modern_link_are_answered(reference, facade):
    """`resources/subscribe` becomes a `subscriptions/listen` the server never
    ends: the client's answer must not wait for that stream's end."""
    fa = facade(upstream_url=reference, extra_args=["--upstream-era", "modern", "--request-timeout-secs", "60"])
    client = RawMcp(fa.url, version="2025-11-25", timeout=15)
    try:
        client.initialize()
        started = time.monotonic()
        sub = client.request("resources/subscribe", {"uri": "test://static-text"})
        unsub = client.request("resources/unsubscribe", {"uri": "test://static-text"})
        took = time.monotonic() - started
    finally:
        client.close()
    assert sub.get("result") == {} or "error" in sub, sub
    assert unsub.get("result") == {} or "error" in unsub, unsub
    assert took < 10, f"subscribe + unsubscribe took {took:.1f} s"


class _Frames:
    """JSON-RPC messages read off one streaming response, SSE or NDJSON."""

    def __init__(self, resp: httpx.Response):
        self.sse = resp.headers.get("content-type", "").startswith("text/event-stream")
        self.chunks = resp.iter_text()
        self.buf = ""
        self.ready: list[dict] = []

    def next(self) -> dict:
        while not self.ready:
            self.buf += next(self.chunks)  # httpx's read timeout bounds the wait
            if self.sse:
                *events, self.buf = self.buf.replace("\r\n", "\n").split("\n\n")
                for event in events:
                    data = "\n".join(l[5:].lstrip(" ") for l in event.split("\n") if l.startswith("data:"))
                    if data.strip():
                        self.ready.append(json.loads(data))
            else:
                *lines, self.buf = self.buf.split("\n")
                self.ready += [json.loads(l) for l in lines if l.strip()]
        return self.ready.pop(0)


def _modern_post(http: httpx.Client, url: str, rid: int, method: str, params: dict) -> httpx.Request:
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": modern_meta()}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    return http.build_request("POST", url, content=json.dumps(body), headers=headers)


def test_a_listen_stream_written_as_ndjson_is_relayed_frame_by_frame(reference, through):
    """The reference server answers `subscriptions/listen` with one JSON
    message per line under `application/json`: the acknowledgement first,
    then each list change while the stream is open. The change is made on
    the server directly (its trigger tool is not one it lists, so the
    facade, rightly, does not let a client call it)."""
    with httpx.Client(timeout=httpx.Timeout(15, read=10)) as http:
        listen = http.send(_modern_post(http, through.url, 41, "subscriptions/listen",
                                        {"notifications": {"toolsListChanged": True}}), stream=True)
        try:
            assert listen.status_code == 200, listen.read()
            frames = _Frames(listen)
            ack = frames.next()
            assert ack["method"] == "notifications/subscriptions/acknowledged", ack
            assert ack["params"]["notifications"] == {"toolsListChanged": True}, ack
            trigger = http.send(_modern_post(http, reference, 42, "tools/call",
                                             {"name": "test_trigger_tool_change", "arguments": {}}))
            assert trigger.status_code == 200, trigger.text
            change = frames.next()
            assert change["method"] == "notifications/tools/list_changed", change
        finally:
            listen.close()
