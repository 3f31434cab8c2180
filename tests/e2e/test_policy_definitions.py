"""Tool definitions the facade does not take on trust, with the policy fixture
(tests/fixtures/policy_fixture.py) standing in for a server whose definitions
drift or carry instructions to the model: drift and pins, poisoning, reloads
of the policy itself, and policies refused at start.
"""
from __future__ import annotations

import os
import signal
import subprocess

import anyio
import pytest
import yaml

from helpers import metric, run_async
from warden_helpers import (fixture_facade, listed, policy_doc, policy_fixture_stdio, sdk_client, sdk_error,
                            text_of_result, tools_admin, wait_for)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


# ---------------------------------------------------------------------------
# Pinning, drift, poisoning
# ---------------------------------------------------------------------------
def test_drifted_definition_is_quarantined(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}}, tools=[{"name": "mutable"}, {"name": "drift"}, {"name": "echo"}]))
    changed = anyio.Event()

    async def on_message(message):
        if getattr(message, "method", None) == "notifications/tools/list_changed":
            changed.set()

    async def body():
        async with sdk_client(fa.url, message_handler=on_message) as c:
            assert {"mutable", "drift", "echo"} == set(await listed(c))
            assert text_of_result(await c.call_tool("mutable", {})) == "mutable ok"
            assert text_of_result(await c.call_tool("drift", {})) == "drifted"
            with anyio.fail_after(10):
                await changed.wait()  # forwarded after the facade re-read the list
            assert set(await listed(c)) == {"drift", "echo"}
            e = await sdk_error(c.call_tool("mutable", {}))
            assert e.code == -32004 and e.data["reason"] == "definition_drift", e.error
            assert text_of_result(await c.call_tool("echo", {"text": "still fine"})) == "still fine"

    run_async(body)
    t = tools_admin(fa)["mutable"]
    assert t["state"] == "quarantined" and t["reason"] == "definition_drift", t
    assert t["hash"] != t["firstSeenHash"]
    assert tools_admin(fa)["echo"]["state"] == "exposed"
    assert metric(fa.admin_url, "mcpwarden_tools", state="quarantined") >= 1


def test_drifted_tool_released_by_a_pin_for_its_new_definition(facade, tmp_path):
    policy = policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "mutable"}, {"name": "drift"}])
    fa = fixture_facade(facade, tmp_path, policy, extra_args=["--policy-poll-secs", "1"])

    async def body():
        async with sdk_client(fa.url) as c:
            assert text_of_result(await c.call_tool("drift", {})) == "drifted"
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: tools_admin(fa)["mutable"]["state"] == "quarantined", 10, "quarantine"))
            new_hash = tools_admin(fa)["mutable"]["hash"]
            # an admin reviews the new definition and pins it
            policy["tools"][0]["pin"] = new_hash
            fa.policy_path.write_text(yaml.safe_dump(policy, sort_keys=False))
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: tools_admin(fa)["mutable"]["state"] == "exposed", 10, "release by pin"))
            assert "mutable" in await listed(c)  # same session
            assert text_of_result(await c.call_tool("mutable", {})) == "mutable ok"
            tool = (await listed(c))["mutable"]
            assert "uploads your workspace" in tool.description  # the reviewed (new) definition

    run_async(body)


def test_poisoned_description_is_quarantined(facade, tmp_path):
    tools = [{"name": "poisoned"}, {"name": "invisible"}, {"name": "echo"}]
    fa = fixture_facade(facade, tmp_path, policy_doc(auth={"anonymous": {"role": "user"}}, tools=tools))

    async def body():
        async with sdk_client(fa.url) as c:
            assert set(await listed(c)) == {"echo"}
            for name in ("poisoned", "invisible"):
                e = await sdk_error(c.call_tool(name, {"a": 1, "b": 2} if name == "poisoned" else {}))
                assert e.code == -32004 and e.data["reason"] == "poisoned_definition", (name, e.error)

    run_async(body)
    admin = tools_admin(fa)
    for name in ("poisoned", "invisible"):
        assert admin[name]["state"] == "quarantined" and admin[name]["reason"] == "poisoned_definition", admin[name]
        assert admin[name]["findings"], admin[name]
    assert admin["echo"]["state"] == "exposed" and not admin["echo"]["findings"]


def test_poisoning_scan_warn_exposes_and_logs(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}}, poisoningScan="warn",
        tools=[{"name": "poisoned"}, {"name": "echo"}]))

    async def body():
        async with sdk_client(fa.url) as c:
            assert set(await listed(c)) == {"poisoned", "echo"}
            assert text_of_result(await c.call_tool("poisoned", {"a": 2, "b": 3})) in ("5", "5.0")

    run_async(body)
    assert tools_admin(fa)["poisoned"]["state"] == "exposed"
    wait_for(lambda: "poisoning scan finding" in fa.stderr_text(), 5, "a warning log line")


# ---------------------------------------------------------------------------
# Hot reload
# ---------------------------------------------------------------------------
def test_hot_reload_keeps_sessions_and_rejects_a_broken_policy(facade, tmp_path):
    base = policy_doc(auth={"anonymous": {"role": "user"}}, tools=[{"name": "echo"}, {"name": "poisoned"}])
    fa = fixture_facade(facade, tmp_path, base, extra_args=["--policy-poll-secs", "1"])
    path = fa.policy_path

    def write(doc_or_text):
        text = doc_or_text if isinstance(doc_or_text, str) else yaml.safe_dump(doc_or_text, sort_keys=False)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)

    async def body():
        async with sdk_client(fa.url) as c:
            assert set(await listed(c)) == {"echo"}  # poisoned is quarantined
            pin = tools_admin(fa)["poisoned"]["hash"]
            assert pin.startswith("sha256:")
            applied = metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="applied")
            # An admin pins the reviewed definition and allows one more tool.
            write(policy_doc(auth={"anonymous": {"role": "user"}},
                             tools=[{"name": "echo"}, {"name": "poisoned", "pin": pin}, {"name": "mutable"}]))
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="applied") > applied,
                10, "the reload"))
            assert set(await listed(c)) == {"echo", "poisoned", "mutable"}  # same session
            assert text_of_result(await c.call_tool("poisoned", {"a": 1, "b": 1})) in ("2", "2.0")
            assert text_of_result(await c.call_tool("mutable", {})) == "mutable ok"

            # A broken policy: rejected, counted, logged; the previous one stays.
            rejected = metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="rejected")
            write(yaml.safe_dump(policy_doc(tools=[{"name": "echo", "aliass": "oops"}])))
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="rejected") > rejected,
                10, "the rejection"))
            assert set(await listed(c)) == {"echo", "poisoned", "mutable"}
            assert text_of_result(await c.call_tool("echo", {"text": "kept"})) == "kept"
            # A semantically invalid one (alias collision) is rejected too.
            rejected += 1
            write(policy_doc(auth={"anonymous": {"role": "user"}},
                             tools=[{"name": "echo", "alias": "same_name"}, {"name": "mutable", "alias": "same_name"}]))
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="rejected") > rejected,
                10, "the second rejection"))
            assert text_of_result(await c.call_tool("echo", {"text": "still kept"})) == "still kept"

    run_async(body, timeout=60)
    assert "rejected" in fa.stderr_text()
    assert metric(fa.admin_url, "mcpwarden_sessions_active") >= 0


def test_pin_mismatch_quarantines_from_the_start(facade, tmp_path):
    fa = fixture_facade(facade, tmp_path, policy_doc(
        auth={"anonymous": {"role": "user"}},
        tools=[{"name": "echo", "pin": "sha256:" + "0" * 64}, {"name": "mutable"}]))

    async def body():
        async with sdk_client(fa.url) as c:
            assert set(await listed(c)) == {"mutable"}
            e = await sdk_error(c.call_tool("echo", {"text": "x"}))
            assert e.code == -32004 and e.data["reason"] == "pin_mismatch", e.error

    run_async(body)
    t = tools_admin(fa)["echo"]
    assert t["state"] == "quarantined" and t["reason"] == "pin_mismatch" and t["hash"] != "sha256:" + "0" * 64


@pytest.mark.parametrize("bad", [
    {"tools": [{"name": "echo", "alias": "mutable"}, {"name": "mutable"}]},          # alias = another's name
    {"tools": [{"name": "echo", "alias": "same"}, {"name": "mutable", "alias": "same"}]},
    {"tools": [{"name": "echo", "alias": "Not Snake"}]},
    {"tools": [{"name": "echo", "pin": "sha256:XYZ"}]},
    {"tools": [{"name": "echo", "arguments": [{"name": "text", "kind": "string", "allow": ["(unclosed"]}]}]},
    {"tools": [{"name": "echo", "requiredRole": "superuser"}]},
    {"toolz": []},
])
def test_invalid_policy_refused_at_start(tmp_path, bad):
    from conftest import free_port, sidecar_path
    if not sidecar_path().exists():
        pytest.skip("no facade binary")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(policy_doc(auth={"anonymous": {"role": "user"}}, **bad)))
    proc = subprocess.Popen([str(sidecar_path()), "run", "--policy", str(path), "--listen",
                             f"127.0.0.1:{free_port()}", "--admin-listen", f"127.0.0.1:{free_port()}", "--",
                             *policy_fixture_stdio()],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, stderr = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=5)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, "", stderr)
    assert r.returncode != 0, f"started with an invalid policy {bad}:\n{r.stderr[-2000:]}"
    assert "bad.yaml" in r.stderr or "policy" in r.stderr.lower(), r.stderr[-2000:]
