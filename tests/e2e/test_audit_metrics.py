"""Audit lines and Prometheus metrics for every kind of call.

One scenario runs once per module against two facades writing audit files:
server-everything (stdio, static tokens for a viewer and a user) and the
policy fixture (drift and poisoning). Every call carries a distinctive
argument value; the tests then check each call's audit line (decision, code,
reason), that no argument or result content reached the audit file, that the
counters moved, and that a client sending a thousand distinct unknown tool
names cannot grow the `tool` label set.
"""
from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass, field

import httpx
import pytest
from mcp import types

from helpers import everything_stdio, metrics_text, run_async
from warden_helpers import (Audit, AuthedMcp, policy_doc, policy_fixture_stdio, sdk_client, sdk_error,
                            text_of_result, token_entry, tools_admin)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

VIEWER = "viewer-" + secrets.token_hex(16)
USER = "user-" + secrets.token_hex(16)
FAKE_GITHUB = "ghp_" + "M4n5B6v7C8x9Z0l1K2j3H4g5F6d7S8a9P0o1"
# Distinctive argument values: none of them may appear in the audit file.
MARK = {k: f"{k}-{secrets.token_hex(6)}" for k in
        ("plain", "chained", "approval", "schema", "approved", "declined", "role", "hidden", "big", "timeout")}

AUDIT_FIELDS = {"v", "time", "event", "method", "call_id", "session", "issuer", "subject", "auth", "role", "tool",
                "upstream_tool", "prompt",
                "definition_hash", "args_sha256", "args_bytes", "decision", "code", "reason", "duration_ms",
                "output_bytes", "truncated", "redactions"}
# Present only when they say something: who approved out of band, why a
# quarantined tool looks poisoned, the request's span (tracing on).
OPTIONAL_FIELDS = {"approver", "finding", "trace_id", "span_id"}

EVERYTHING_TOOLS = ["echo", "add_numbers", "get-env", "long_operation", "toggle-simulated-logging",
                    "get-resource-links"]
POLICY = policy_doc(
    server={"namespace": "team-a", "name": "everything"},
    auth={"staticTokens": {"tokens": [token_entry(VIEWER, "vera"), token_entry(USER, "uma", ["devs"])]}},
    roles=[{"role": "viewer", "subjects": ["vera"]}, {"role": "user", "groups": ["devs"]}],
    tools=[
        {"name": "echo", "requiredRole": "viewer",
         "arguments": [{"name": "message", "kind": "command", "allow": ["git status", "ls *"],
                        "check": ["git commit"], "deny": ["rm"]}],
         "limits": {"maxArgBytes": 512}},
        {"name": "get-sum", "alias": "add_numbers", "requiredRole": "viewer"},
        {"name": "get-env", "requiredRole": "user"},
        {"name": "trigger-long-running-operation", "alias": "long_operation", "limits": {"callTimeoutSeconds": 1}},
        {"name": "toggle-simulated-logging", "writes": True},
        {"name": "get-resource-links", "limits": {"maxOutputBytes": 700}},
    ],
)


@dataclass
class Step:
    name: str
    decision: str
    code: int | None
    reason: str | None
    line: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


# name -> (decision, code, reason); reason None = any non-empty reason for a deny
EXPECTED = {
    "no_token": ("deny", -32001, "token_missing"),
    "allowed": ("allow", None, None),
    "redacted": ("allow", None, None),
    "role": ("deny", -32003, "role_too_low"),
    "hidden": ("deny", -32004, "tool_not_available"),
    "chained": ("deny", -32004, "*"),
    "arg_bytes": ("deny", -32005, "arg_bytes_exceeded"),
    "sandbox": ("deny", -32006, "write_without_sandbox"),
    "timeout": ("deny", -32007, "timeout"),
    "approval_required": ("deny", -32008, "command_needs_approval"),
    "schema": ("deny", -32602, "invalid_params"),
    "approved": ("allow", None, None),
    "declined": ("deny", -32004, "approval_declined"),
    "truncated": ("allow", None, None),
    "drift_before": ("allow", None, None),
    "drifted": ("deny", -32004, "definition_drift"),
    "poisoned": ("deny", -32004, "poisoned_definition"),
}


class Recorder:
    """Runs calls one at a time and pairs each with the audit line it produced."""

    def __init__(self, audit: Audit):
        self.audit = audit
        self.steps: dict[str, Step] = {}

    async def record(self, name: str, call, **extra):
        import anyio
        before = len(self.audit.lines())
        outcome = await call
        decision, code, reason = EXPECTED[name]
        step = Step(name, decision, code, reason, extra={"outcome": outcome, **extra})

        def newest():
            lines = self.audit.lines()
            return lines[before:] if len(lines) > before else None
        with anyio.fail_after(5):
            while not (got := newest()):
                await anyio.sleep(0.02)
        assert len(got) == 1, f"{name}: expected one audit line, got {got}"
        step.line = got[0]
        self.steps[name] = step
        return outcome


async def ok(awaitable):
    return await awaitable


class Approver:
    def __init__(self, approve):
        self.approve = approve

    async def __call__(self, context, params):
        if self.approve:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")


@pytest.fixture(scope="module")
def scenario(module_facade, tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    ev_audit, fx_audit = Audit(d / "everything.audit"), Audit(d / "fixture.audit")
    ev = module_facade(upstream=everything_stdio(), policy=POLICY, extra_args=["--audit", ev_audit.arg])
    fx = module_facade(upstream=policy_fixture_stdio(),
                       policy=policy_doc(auth={"anonymous": {"role": "user"}},
                                         tools=[{"name": "mutable"}, {"name": "drift"}, {"name": "poisoned"}]),
                       extra_args=["--audit", fx_audit.arg],
                       env={"FIXTURE_STATE": str(d / "drift.state")})
    before = {"ev": metrics_text(ev.admin_url), "fx": metrics_text(fx.admin_url)}
    ev_rec, fx_rec = Recorder(ev_audit), Recorder(fx_audit)
    session_ids: list[str] = []

    async def no_token():
        r = httpx.post(ev.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": MARK["plain"], "version": "0"}}},
            headers={"Accept": "application/json, text/event-stream"}, timeout=10)
        assert r.status_code == 401 and r.json()["error"]["code"] == -32001
        return r

    async def body():
        await ev_rec.record("no_token", no_token())
        async with sdk_client(ev.url, USER) as c:
            r = await ev_rec.record("allowed", ok(c.call_tool("echo", {"message": f"ls {MARK['plain']}"})))
            assert MARK["plain"] in text_of_result(r)
            r = await ev_rec.record("redacted", ok(c.call_tool("echo", {"message": f"ls {FAKE_GITHUB}"})))
            assert "[REDACTED:github_token]" in text_of_result(r)
            await ev_rec.record("hidden", sdk_error(c.call_tool("get-tiny-image", {"x": MARK["hidden"]})))
            await ev_rec.record("chained", sdk_error(c.call_tool(
                "echo", {"message": f"git status; rm -rf /{MARK['chained']}"})))
            await ev_rec.record("arg_bytes", sdk_error(c.call_tool("echo", {"message": "ls " + MARK["big"] * 80})))
            await ev_rec.record("sandbox", sdk_error(c.call_tool("toggle-simulated-logging", {})))
            await ev_rec.record("timeout", sdk_error(c.call_tool(
                "long_operation", {"duration": 6, "steps": 2, "note": MARK["timeout"]})))
            await ev_rec.record("approval_required", sdk_error(c.call_tool(
                "echo", {"message": f"git commit -m {MARK['approval']}"})))
            await ev_rec.record("schema", sdk_error(c.call_tool("add_numbers", {"a": MARK["schema"], "b": 1})))
            r = await ev_rec.record("truncated", ok(c.call_tool("get-resource-links", {"count": 10})))
            assert "output truncated" in text_of_result(r)
        async with sdk_client(ev.url, VIEWER) as c:
            await ev_rec.record("role", sdk_error(c.call_tool("get-env", {"filter": MARK["role"]})))
        async with sdk_client(ev.url, USER, elicitation_callback=Approver(True)) as c:
            await ev_rec.record("approved", ok(c.call_tool("echo", {"message": f"git commit -m {MARK['approved']}"})))
        async with sdk_client(ev.url, USER, elicitation_callback=Approver(False)) as c:
            await ev_rec.record("declined", sdk_error(c.call_tool(
                "echo", {"message": f"git commit -m {MARK['declined']}"})))
        async with sdk_client(fx.url) as c:
            await fx_rec.record("drift_before", ok(c.call_tool("mutable", {})))
            assert text_of_result(await c.call_tool("drift", {})) == "drifted"
            # Its audit line may land just after the answer; let it, so that
            # the next record sees only its own line.
            fx_audit.wait(lambda line: line.get("tool") == "drift", what="the drift call's audit line")
            import anyio
            with anyio.fail_after(10):  # the facade re-reads the list after list_changed
                while "mutable" in {t.name for t in (await c.list_tools()).tools}:
                    await anyio.sleep(0.1)
            await fx_rec.record("drifted", sdk_error(c.call_tool("mutable", {})))
            await fx_rec.record("poisoned", sdk_error(c.call_tool("poisoned", {"a": 1, "b": 2})))

    # A raw session too, so its Mcp-Session-Id can be looked for in the audit file.
    raw = AuthedMcp(ev.url, USER)
    try:
        raw.initialize()
        session_ids.append(raw.session_id)
        raw.call_tool("echo", {"message": "ls raw-session"})
        ev_audit.wait(lambda line: line["event"] == "tool_call", what="the raw session's audit line")
    finally:
        raw.close()
    run_async(body, timeout=120)
    after = {"ev": metrics_text(ev.admin_url), "fx": metrics_text(fx.admin_url)}
    return {"ev": ev, "fx": fx, "ev_audit": ev_audit, "fx_audit": fx_audit,
            "steps": {**ev_rec.steps, **fx_rec.steps}, "before": before, "after": after,
            "session_ids": session_ids}


# ---------------------------------------------------------------------------
# Audit
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(EXPECTED))
def test_audit_line_per_call(scenario, name):
    step = scenario["steps"][name]
    line = step.line
    assert set(line) - OPTIONAL_FIELDS == AUDIT_FIELDS, set(line) ^ AUDIT_FIELDS
    decision, code, reason = EXPECTED[name]
    assert line["decision"] == decision, line
    assert line["code"] == code, line
    if reason == "*":
        assert line["reason"], line
    else:
        assert line["reason"] == reason, line
    assert line["event"] == ("auth_failure" if name == "no_token" else "tool_call"), line
    if name == "no_token":
        assert line["subject"] is None and line["tool"] is None
        return
    assert re.fullmatch(r"[0-9a-f]{64}", line["args_sha256"]), line
    assert line["args_bytes"] > 0 and line["duration_ms"] >= 0 and line["session"]
    if decision == "allow":
        assert line["definition_hash"].startswith("sha256:") and line["upstream_tool"], line
        assert line["output_bytes"] > 0
    if name in ("allowed", "redacted", "role", "approved", "declined", "schema"):
        assert line["subject"] == ("vera" if name == "role" else "uma")
        assert line["auth"] == "static_token"
        assert line["role"] == ("viewer" if name == "role" else "user")
    if name == "redacted":
        assert line["redactions"] == 1
    if name == "truncated":
        assert line["truncated"] is True and line["output_bytes"] <= 700 + 64, line
    if name == "timeout":
        assert line["duration_ms"] >= 900, line
    if name == "schema":
        assert line["tool"] == "add_numbers" and line["upstream_tool"] == "get-sum"


def test_audit_has_no_content(scenario):
    text = scenario["ev_audit"].text() + scenario["fx_audit"].text()
    assert text.count("\n") >= len(EXPECTED), text
    for value in [*MARK.values(), FAKE_GITHUB, FAKE_GITHUB[4:20], "rm -rf", "git commit", "Echo:",
                  "resource links", "raw-session", "drifted", VIEWER, USER]:
        assert value not in text, f"{value!r} found in the audit file"
    for sid in scenario["session_ids"]:
        assert sid not in text, "raw Mcp-Session-Id in the audit file (should be hashed)"
    # each line is exactly the contract's fields, nothing more
    for line in scenario["ev_audit"].lines() + scenario["fx_audit"].lines():
        assert set(line) - OPTIONAL_FIELDS == AUDIT_FIELDS, line
        if line.get("reason") == "poisoned_definition":
            assert line["finding"].split("/")[0] in {"model_instruction", "hidden_unicode", "exfiltration",
                                                     "sensitive_path", "obfuscation"}, line


# ---------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def samples(text: str, name: str) -> list[tuple[dict, float]]:
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line.strip())
        if m and m.group(1) == name:
            out.append((dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return out


def total(text: str, name: str, **labels) -> float:
    return sum(v for lab, v in samples(text, name) if all(lab.get(k) == w for k, w in labels.items()))


def delta(scenario, which: str, name: str, **labels) -> float:
    return total(scenario["after"][which], name, **labels) - total(scenario["before"][which], name, **labels)


def test_metrics_move_for_those_calls(scenario):
    d = lambda name, **kw: delta(scenario, "ev", name, **kw)  # noqa: E731
    # allowed calls, by tool (the raw session's echo counts too)
    assert d("mcpwarden_tool_calls_total", tool="echo", outcome="ok") == 4  # allowed, redacted, approved, raw
    assert d("mcpwarden_tool_calls_total", tool="get-resource-links", outcome="ok") == 1
    # every denial, by code
    for code, n in {"-32003": 1, "-32004": 3, "-32005": 1, "-32006": 1, "-32007": 1, "-32008": 1,
                    "-32602": 1}.items():
        assert d("mcpwarden_tool_calls_total", outcome="denied", code=code) == n, code
    for reason in ("role_too_low", "tool_not_available", "arg_bytes_exceeded", "write_without_sandbox",
                   "timeout", "command_needs_approval", "invalid_params", "approval_declined"):
        assert d("mcpwarden_policy_denials_total", reason=reason) == 1, reason
    assert d("mcpwarden_policy_denials_total", reason="auth_required") >= 1
    assert d("mcpwarden_redactions_total", kind="github_token") == 1
    assert d("mcpwarden_tool_output_bytes_count", tool="echo") == 4
    assert d("mcpwarden_tool_output_bytes_sum", tool="get-resource-links") > 0
    assert d("mcpwarden_tool_call_duration_seconds_count", tool="echo") == 4
    assert d("mcpwarden_requests_total", method="tools/call") == 14
    assert total(scenario["after"]["ev"], "mcpwarden_sessions_active") >= 0
    assert total(scenario["after"]["ev"], "mcpwarden_tools", state="exposed") == len(EVERYTHING_TOOLS) - 1
    # fixture: drift and poisoning
    f = lambda name, **kw: delta(scenario, "fx", name, **kw)  # noqa: E731
    assert f("mcpwarden_policy_denials_total", reason="definition_drift") == 1
    assert f("mcpwarden_policy_denials_total", reason="poisoned_definition") == 1
    # mutable (drift), poisoned and invisible (poisoned, and not in the allowlist either)
    assert total(scenario["after"]["fx"], "mcpwarden_tools", state="quarantined") == 3
    admin = tools_admin(scenario["fx"])
    assert {n for n, t in admin.items() if t["state"] == "quarantined"} == {"mutable", "poisoned", "invisible"}


def test_tool_label_cardinality_is_bounded(scenario):
    ev = scenario["ev"]
    raw = AuthedMcp(ev.url, USER)
    try:
        raw.initialize()
        for i in range(1000):
            resp = raw.request("tools/call", {"name": f"probe_{i}_{secrets.token_hex(4)}", "arguments": {}})
            assert resp["error"]["code"] == -32004
        # and one absurdly long name
        assert raw.request("tools/call", {"name": "x" * 20000, "arguments": {}})["error"]["code"] == -32004
    finally:
        raw.close()
    text = metrics_text(ev.admin_url)
    allowed = set(EVERYTHING_TOOLS) | {"unknown"}
    for name in ("mcpwarden_tool_calls_total", "mcpwarden_tool_call_duration_seconds_count",
                 "mcpwarden_tool_output_bytes_count"):
        tools = {lab.get("tool") for lab, _ in samples(text, name)}
        assert tools <= allowed, f"{name}: unexpected tool labels {sorted(tools - allowed)[:10]}"
    assert total(text, "mcpwarden_tool_calls_total", tool="unknown", outcome="denied") >= 1000
    reasons = {lab.get("reason") for lab, _ in samples(text, "mcpwarden_policy_denials_total")}
    assert len(reasons) < 30, reasons
    assert len(text) < 200_000, f"/metrics grew to {len(text)} bytes"
    # the audit line names what was asked for, bounded in size
    lines = scenario["ev_audit"].wait_count(lambda line: (line.get("tool") or "").startswith(("probe_", "xxx")),
                                            1001, timeout=10)
    assert len(lines) == 1001
    assert max(len(line["tool"]) for line in lines) <= 256
    assert all(len(json.dumps(line)) < 2048 for line in lines)
