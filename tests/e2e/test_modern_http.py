"""Modern (2026-07-28) requests over Streamable HTTP, as a caller who wants
more would send them: the headers that mirror the body are checked against
it (the policy decides on the body, never a header alone), and whatever the
facade refuses never reaches the server.

Server: the TypeScript SDK 2.4 fixture (modern only) over HTTP; a second
facade over stdio for the parts that differ by transport. Requests are
hand-built (era_helpers.ModernMcp) so each header can be wrong on its own.
"""
from __future__ import annotations

import json

import httpx
import pytest

from era_helpers import MODERN, ModernMcp, modern_fixture_http, modern_meta
from helpers import metric
from warden_helpers import policy_doc

POLICY = policy_doc(
    auth={"anonymous": {"role": "user"}},
    defaultAction="deny",
    sandbox={"writeAllowed": True},
    tools=[{"name": "test_simple_text"},
           {"name": "test_custom_header_param",
            "arguments": [{"name": "region", "kind": "string", "allow": ["^us-[a-z0-9]+$"]}]},
           {"name": "test_counters"}],
    resources={"defaultAction": "allow"},
    prompts={"defaultAction": "allow"},
)


@pytest.fixture(scope="module")
def fa(module_facade, start_module_process):
    return module_facade(upstream_url=modern_fixture_http(start_module_process), policy=POLICY)


def calls_seen(fa) -> float:
    return metric(fa.admin_url, "mcpwarden_requests_total", method="tools/call", outcome="ok")


def test_a_name_header_cannot_launder_a_denied_call(fa):
    mcp = ModernMcp(fa.url)
    # The header names an allowed tool; the body calls one the policy hides.
    status, answer = mcp.request("tools/call", {"name": "test_error_handling", "arguments": {}},
                                 headers={"Mcp-Name": "test_simple_text"})
    assert status == 400 and answer["error"]["code"] == -32020, (status, answer)
    # With honest headers the body is judged: the tool is not allowed.
    status, answer = mcp.request("tools/call", {"name": "test_error_handling", "arguments": {}})
    assert status == 200 and answer["error"]["code"] == -32004, answer


@pytest.mark.parametrize("headers,why", [
    ({"MCP-Protocol-Version": None}, "MCP-Protocol-Version"),
    ({"Mcp-Method": None}, "Mcp-Method"),
    ({"Mcp-Method": "tools/list"}, "Mcp-Method"),
    ({"Mcp-Name": None}, "Mcp-Name"),
    ({"Mcp-Name": "=?base64?!!?="}, "Mcp-Name"),
    ({"Mcp-Name": "TEST_SIMPLE_TEXT"}, "Mcp-Name"),
])
def test_headers_that_disagree_with_the_body_are_refused(fa, headers, why):
    mcp = ModernMcp(fa.url)
    status, answer = mcp.request("tools/call", {"name": "test_simple_text", "arguments": {}}, headers=headers)
    assert status == 400 and answer["error"]["code"] == -32020, (status, answer)
    assert why in answer["error"]["message"], answer


def test_a_base64_name_header_is_decoded_before_comparing(fa):
    mcp = ModernMcp(fa.url)
    encoded = "=?base64?dGVzdF9zaW1wbGVfdGV4dA==?="  # test_simple_text
    status, answer = mcp.request("tools/call", {"name": "test_simple_text", "arguments": {}},
                                 headers={"Mcp-Name": encoded})
    assert status == 200 and "simple text" in answer["result"]["content"][0]["text"], answer


def test_param_headers_mirror_the_argument_the_rules_judge(fa):
    mcp = ModernMcp(fa.url)
    args = {"name": "test_custom_header_param", "arguments": {"region": "us-west1"}}
    # The tool's schema designates `region` for Mcp-Param-Region.
    status, answer = mcp.request("tools/call", args)
    assert status == 400 and "Mcp-Param-Region" in answer["error"]["message"], answer
    status, answer = mcp.request("tools/call", args, headers={"Mcp-Param-Region": "us-west1"})
    assert status == 200 and answer["result"]["content"][0]["text"] == "region=us-west1", answer
    # A header that says an allowed region while the body holds a denied one.
    status, answer = mcp.request("tools/call", {**args, "arguments": {"region": "eu-west1"}},
                                 headers={"Mcp-Param-Region": "us-west1"})
    assert status == 400 and answer["error"]["code"] == -32020, answer
    # Honest headers: the argument rule judges the body's value.
    status, answer = mcp.request("tools/call", {**args, "arguments": {"region": "eu-west1"}},
                                 headers={"Mcp-Param-Region": "eu-west1"})
    assert answer["error"]["code"] == -32004, answer
    # A header for an argument the body does not set.
    status, answer = mcp.request("tools/call", {**args, "arguments": {}},
                                 headers={"Mcp-Param-Region": "us-west1"})
    assert status == 400 and answer["error"]["code"] == -32020, answer


def test_versions_the_facade_does_not_serve_are_named_with_the_supported_list(fa):
    mcp = ModernMcp(fa.url)
    status, answer = mcp.request("tools/list", {}, headers={"MCP-Protocol-Version": "2099-01-01"},
                                 meta=False)
    assert status == 400 and answer["error"]["code"] == -32022, answer
    assert MODERN in answer["error"]["data"]["supported"] and answer["error"]["data"]["requested"] == "2099-01-01"
    # Header and body disagree about the version.
    status, answer = mcp.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}})
    assert status == 400 and answer["error"]["code"] == -32020, answer
    # No capabilities in _meta: -32602, HTTP 400.
    status, answer = mcp.request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}},
                                 meta=False)
    assert status == 400 and answer["error"]["code"] == -32602, answer


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "resources/subscribe",
                                    "tasks/list", "tasks/result", "unknown/method"])
def test_methods_a_modern_client_cannot_use_are_404(fa, method):
    mcp = ModernMcp(fa.url)
    status, answer = mcp.request(method, {})
    assert status == 404 and answer["error"]["code"] == -32601, (status, answer)


def test_discover_lists_what_the_facade_passes_and_is_never_public(fa):
    mcp = ModernMcp(fa.url)
    status, answer = mcp.request("server/discover", {})
    result = answer["result"]
    assert status == 200 and MODERN in result["supportedVersions"] and "2025-11-25" in result["supportedVersions"]
    assert result["cacheScope"] == "private" and result["resultType"] == "complete"
    # Of the server's extensions only tasks, which the facade serves (the
    # skills extension is withheld); never the 2025-11-25 tasks capability.
    assert result["capabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}, result
    assert "tasks" not in result["capabilities"]
    _, listed = mcp.request("tools/list", {})
    names = [t["name"] for t in listed["result"]["tools"]]
    assert sorted(names) == ["test_counters", "test_custom_header_param", "test_simple_text"], names
    assert listed["result"]["cacheScope"] == "private"


def test_no_client_message_but_requests_is_taken(fa):
    h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
         "MCP-Protocol-Version": MODERN, "Mcp-Method": "notifications/cancelled"}
    with httpx.Client(timeout=10) as http:
        r = http.post(fa.url, headers=h, content=json.dumps(
            {"jsonrpc": "2.0", "method": "notifications/cancelled",
             "params": {"requestId": 1, "_meta": modern_meta()}}))
        assert r.status_code == 202
        r = http.post(fa.url, headers=h, content=json.dumps({"jsonrpc": "2.0", "id": 5, "result": {}}))
        assert r.status_code == 400


def test_a_modern_request_carries_no_session_and_leaves_none(fa):
    mcp = ModernMcp(fa.url)
    r = mcp.http.post(fa.url, content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                                  "params": {"_meta": modern_meta()}}),
                      headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                               "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/list"})
    assert r.status_code == 200 and "mcp-session-id" not in r.headers
    assert metric(fa.admin_url, "mcpwarden_sessions_active") == 0
