"""The tasks extension (`io.modelcontextprotocol/tasks`) through the facade:
every task bound to the caller who created it, and the policy applied to
what a task returns.

Server: tests/conformance/modern-fixture-server.mjs over HTTP (its
tasks-extension.mjs serves tasks: `slow_compute` sleeps `seconds` and
answers "computed LABEL in Ns"; `tasks_fixture_stats` says how many tasks
the server created and cancelled). Clients: hand-driven modern requests
(era_helpers.ModernMcp) and a raw legacy session.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import free_port, managed_process, system_node, wait_port
from era_helpers import MODERN_FIXTURE, ModernMcp
from helpers import metric
from warden_helpers import AuthedMcp, check_audit_record, policy_doc, token_entry

ALICE, MALLORY = "alice-token-0123456789", "mallory-token-0123456789"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
WITH_ELICITATION = {"elicitation": {}, **TASKS}
APPROVE = {"mcp-warden/approval": {"action": "accept", "content": {"approve": True}}}
FAKE_GITHUB = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"

POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(MALLORY, "mallory")]}},
    roles=[{"role": "user", "subjects": ["alice", "mallory"]}],
    defaultAction="deny",
    sandbox={"writeAllowed": True},
    tools=[
        # A person approves any label that starts with "deploy".
        {"name": "slow_compute",
         "arguments": [{"name": "label", "kind": "string", "allow": [".*"], "check": ["deploy.*"]}]},
        {"name": "confirm_delete"},
        {"name": "tasks_fixture_stats"},
        # Sync only at the server: an approved call's direct result.
        {"name": "greet",
         "arguments": [{"name": "name", "kind": "string", "allow": [".*"], "check": ["boss.*"]}]},
    ],
)


def fixture(*extra: str):
    port = free_port()
    return port, [system_node(), str(MODERN_FIXTURE), "--http", str(port), *extra]


@pytest.fixture(scope="module")
def server():
    port, cmd = fixture()
    with managed_process(cmd) as mp:
        wait_port(port, proc=mp)
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def audit_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.jsonl"


@pytest.fixture(scope="module")
def fa(module_facade, server, audit_path):
    return module_facade(upstream_url=server, policy=POLICY,
                         extra_args=["--audit", f"file:{audit_path}", "--task-wall-time-secs", "3",
                                     "--max-live-tasks-per-identity", "3"])


def audit(path: Path) -> list[dict]:
    """Every audit line so far, each valid against the published schema."""
    if not path.exists():
        return []
    return [check_audit_record(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def start_task(mcp: ModernMcp, seconds: float, label: str = "job", tool: str = "slow_compute", token=None) -> dict:
    status, answer = mcp.request("tools/call", {"name": tool, "arguments": {"seconds": seconds, "label": label}},
                                 capabilities=TASKS, token=token)
    assert status == 200 and "result" in answer, answer
    result = answer["result"]
    assert result["resultType"] == "task", result
    return result


def task_request(mcp: ModernMcp, method: str, task_id: str, token=None, **extra) -> dict:
    _, answer = mcp.request(method, {"taskId": task_id, **extra}, capabilities=TASKS,
                            headers={"Mcp-Name": task_id}, token=token)
    return answer


def until_done(mcp: ModernMcp, task_id: str, limit: float = 15) -> dict:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        answer = task_request(mcp, "tasks/get", task_id)
        assert "result" in answer, answer
        if answer["result"]["status"] in ("completed", "failed", "cancelled"):
            return answer["result"]
        time.sleep(0.2)
    raise AssertionError(f"task {task_id} did not end within {limit}s")


def refused(answer: dict, code: int = -32602) -> str:
    assert "error" in answer, answer
    assert answer["error"]["code"] == code, answer
    return answer["error"]["data"]["reason"]


def stats(mcp: ModernMcp) -> dict:
    _, answer = mcp.request("tools/call", {"name": "tasks_fixture_stats", "arguments": {}})
    return json.loads(answer["result"]["content"][0]["text"])


def test_the_task_id_is_the_facades_and_another_caller_reaches_nothing(fa, audit_path):
    alice, mallory = ModernMcp(fa.url, ALICE), ModernMcp(fa.url, MALLORY)
    task = start_task(alice, 30, "alice-job")
    task_id = task["taskId"]
    assert task_id.startswith("mw1."), task  # never the server's own id
    assert task_request(alice, "tasks/get", task_id)["result"]["status"] == "working"
    for method in ("tasks/get", "tasks/cancel"):
        assert refused(task_request(mallory, method, task_id)) == "task_other_caller"
    update = task_request(mallory, "tasks/update", task_id, inputResponses={})
    assert refused(update) == "task_other_caller"
    # Mallory's cancel never reached the server: Alice's task still runs.
    assert task_request(alice, "tasks/get", task_id)["result"]["status"] == "working"
    denied = [r for r in audit(audit_path) if r["event"] == "request_denied" and r["subject"] == "mallory"]
    assert {r["method"] for r in denied} >= {"tasks/get", "tasks/cancel"}, denied
    assert all(r["code"] == -32602 and r["reason"] == "task_other_caller" for r in denied), denied
    assert task_request(alice, "tasks/cancel", task_id)["result"] == {"resultType": "complete"}


def test_a_tampered_or_made_up_task_id_is_refused(fa):
    alice = ModernMcp(fa.url, ALICE)
    task_id = start_task(alice, 0.2)["taskId"]
    head, body, mac = task_id.split(".")
    flipped = body[:10] + ("A" if body[10] != "A" else "B") + body[11:]
    for bad in (f"{head}.{flipped}.{mac}", "not-a-task", task_id + "x"):
        assert refused(task_request(alice, "tasks/get", bad)) == "task_id_tampered", bad
    assert until_done(alice, task_id)["status"] == "completed"
    # The removed methods of the tasks extension are not served.
    _, answer = alice.request("tasks/list", {}, capabilities=TASKS)
    assert answer["error"]["code"] == -32601, answer
    _, answer = alice.request("tasks/result", {"taskId": task_id}, capabilities=TASKS)
    assert answer["error"]["code"] == -32601, answer


def test_a_task_request_without_the_extension_is_refused(fa):
    alice = ModernMcp(fa.url, ALICE)
    task_id = start_task(alice, 0.2)["taskId"]
    _, answer = alice.request("tasks/get", {"taskId": task_id}, headers={"Mcp-Name": task_id})
    assert refused(answer, -32021) == "missing_tasks_extension"
    assert answer["error"]["data"]["requiredCapabilities"] == TASKS, answer
    # The same call without the extension runs synchronously on the server.
    _, answer = alice.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0, "label": "sync"}})
    assert answer["result"]["resultType"] == "complete", answer
    assert answer["result"]["content"][0]["text"] == "computed sync in 0s", answer


def test_a_secret_in_a_tasks_result_is_redacted(fa, audit_path):
    alice = ModernMcp(fa.url, ALICE)
    task_id = start_task(alice, 0, FAKE_GITHUB)["taskId"]
    done = until_done(alice, task_id)
    text = done["result"]["content"][0]["text"]
    assert FAKE_GITHUB not in json.dumps(done) and "[REDACTED:github_token]" in text, done
    ended = [r for r in audit(audit_path) if r["event"] == "task_ended" and r["subject"] == "alice"
             and r["reason"] == "completed"]
    assert ended and all(FAKE_GITHUB not in json.dumps(r) for r in audit(audit_path))


def test_a_task_past_its_wall_time_is_cancelled_on_the_server_without_anyone_polling(fa, audit_path):
    alice = ModernMcp(fa.url, ALICE)
    before = stats(alice)
    start_task(alice, 60, "forgotten")
    # Nobody polls: the facade's own watch cancels it at the 3 s limit.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and stats(alice)["cancelled"] == before["cancelled"]:
        time.sleep(0.5)
    assert stats(alice)["cancelled"] == before["cancelled"] + 1
    walled = [r for r in audit(audit_path) if r["event"] == "task_ended" and r["reason"] == "wall_time_exceeded"]
    assert len(walled) == 1 and walled[0]["tool"] == "slow_compute" and walled[0]["duration_ms"] >= 3000, walled
    assert metric(fa.admin_url, "mcpwarden_tasks_total", event="wall_time_exceeded") == 1
    assert metric(fa.admin_url, "mcpwarden_tasks_total", event="created") >= 1


def test_each_identity_has_a_cap_on_running_tasks(fa):
    alice, mallory = ModernMcp(fa.url, ALICE), ModernMcp(fa.url, MALLORY)
    ids = [start_task(alice, 20, f"cap-{i}")["taskId"] for i in range(3)]
    _, answer = alice.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 20, "label": "cap-3"}},
                              capabilities=TASKS)
    assert refused(answer, -32005) == "live_tasks_exceeded"
    assert answer["error"]["data"]["limit"] == 3, answer
    # Another identity is not held to Alice's tasks.
    other = start_task(mallory, 20, "mallory")["taskId"]
    # One of Alice's ends: she may start another.
    assert task_request(alice, "tasks/cancel", ids[0])["result"] == {"resultType": "complete"}
    assert until_done(alice, ids[0])["status"] == "cancelled"
    ids.append(start_task(alice, 20, "cap-4")["taskId"])
    for task_id in ids[1:]:
        task_request(alice, "tasks/cancel", task_id)
    task_request(mallory, "tasks/cancel", other)


def held_task(mcp: ModernMcp, call: dict) -> dict:
    """A call the policy asks a person to approve, by a caller that may get a
    task: the facade's own task, waiting for the answer."""
    _, answer = mcp.request("tools/call", call, capabilities=WITH_ELICITATION)
    task = answer["result"]
    assert task["resultType"] == "task" and task["status"] == "input_required", task
    assert task["taskId"].startswith("mw1."), task
    return task


def test_an_approval_inside_a_task(fa, audit_path):
    """The facade holds the call as a task of its own while the person is
    asked; the server hears of it only after the yes, and the task then
    follows the server's."""
    alice, mallory = ModernMcp(fa.url, ALICE), ModernMcp(fa.url, MALLORY)
    before = stats(alice)["created"]
    call = {"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "deploy prod"}}
    task_id = held_task(alice, call)["taskId"]
    got = task_request(alice, "tasks/get", task_id)["result"]
    assert got["status"] == "input_required", got
    asked = got["inputRequests"]["mcp-warden/approval"]
    assert asked["method"] == "elicitation/create" and "deploy prod" in json.dumps(asked), got
    assert stats(alice)["created"] == before  # no server task while the approval is open
    # Another caller neither reads nor answers it.
    assert refused(task_request(mallory, "tasks/get", task_id)) == "task_other_caller"
    assert refused(task_request(mallory, "tasks/update", task_id, inputResponses=APPROVE)) == "task_other_caller"
    # An answer that would change the approved call is refused, and spends nothing.
    tampered = task_request(alice, "tasks/update", task_id, inputResponses=APPROVE,
                            arguments={"seconds": 0, "label": "deploy everything"})
    assert refused(tampered) == "request_state_tampered"
    assert task_request(alice, "tasks/get", task_id)["result"]["status"] == "input_required"
    assert stats(alice)["created"] == before
    assert task_request(alice, "tasks/update", task_id, inputResponses=APPROVE)["result"] == {"resultType": "complete"}
    done = until_done(alice, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "computed deploy prod in 0.2s", done
    assert stats(alice)["created"] == before + 1
    # A second answer runs nothing again.
    task_request(alice, "tasks/update", task_id, inputResponses=APPROVE)
    assert stats(alice)["created"] == before + 1
    calls = [r for r in audit(audit_path) if r["event"] == "tool_call" and r["subject"] == "alice"
             and r["tool"] == "slow_compute" and r["decision"] in ("ask", "allow")]
    assert [r["decision"] for r in calls][-2:] == ["ask", "allow"], calls


def test_a_declined_approval_ends_the_task_failed(fa, audit_path):
    alice = ModernMcp(fa.url, ALICE)
    before = stats(alice)["created"]

    def failed_ends() -> int:
        return len([r for r in audit(audit_path) if r["event"] == "task_ended" and r["subject"] == "alice"
                    and r["reason"] == "failed"])
    ends_before = failed_ends()
    task_id = held_task(alice, {"name": "slow_compute", "arguments": {"seconds": 0, "label": "deploy never"}})["taskId"]
    declined = task_request(alice, "tasks/update", task_id,
                            inputResponses={"mcp-warden/approval": {"action": "decline"}})
    assert declined["result"] == {"resultType": "complete"}, declined
    done = task_request(alice, "tasks/get", task_id)["result"]
    assert done["status"] == "failed", done
    assert done["error"]["code"] == -32004 and done["error"]["data"]["reason"] == "approval_declined", done
    # Declined is final: a later yes reaches nothing.
    task_request(alice, "tasks/update", task_id, inputResponses=APPROVE)
    assert task_request(alice, "tasks/get", task_id)["result"]["status"] == "failed"
    assert stats(alice)["created"] == before
    assert failed_ends() == ends_before + 1  # ended once
    denied = [r for r in audit(audit_path) if r["event"] == "tool_call" and r["subject"] == "alice"
              and r["decision"] == "deny"]
    assert denied and denied[-1]["code"] == -32004 and denied[-1]["reason"] == "approval_declined", denied


def test_an_approved_direct_result_is_kept_for_the_task_through_the_filter(fa):
    """A server that answers the approved call directly: the facade keeps the
    filtered result for the task."""
    alice = ModernMcp(fa.url, ALICE)
    task_id = held_task(alice, {"name": "greet", "arguments": {"name": "boss " + FAKE_GITHUB}})["taskId"]
    assert task_request(alice, "tasks/update", task_id, inputResponses=APPROVE)["result"] == {"resultType": "complete"}
    done = task_request(alice, "tasks/get", task_id)["result"]
    assert done["status"] == "completed", done
    text = done["result"]["content"][0]["text"]
    assert text.startswith("Hello, boss ") and "[REDACTED:github_token]" in text, done
    assert FAKE_GITHUB not in json.dumps(done)
    # Delivered once, then let go of (it no longer holds memory or a live-task slot).
    again = task_request(alice, "tasks/get", task_id)["result"]
    assert again["status"] == "completed" and "result" not in again, again
    # The sync path is unchanged for a caller without the extension: asked first.
    _, answer = alice.request("tools/call", {"name": "greet", "arguments": {"name": "boss"}},
                              capabilities={"elicitation": {}})
    assert answer["result"]["resultType"] == "input_required", answer


def test_a_legacy_client_never_sees_tasks(fa):
    legacy = AuthedMcp(fa.url, ALICE)
    try:
        init = legacy.initialize()
        caps = init["capabilities"]
        assert "tasks" not in caps and "io.modelcontextprotocol/tasks" not in json.dumps(caps), caps
        answer = legacy.call_tool("slow_compute", {"seconds": 0, "label": "legacy"})
        assert answer["result"]["content"][0]["text"] == "computed legacy in 0s", answer
        assert "taskId" not in answer["result"], answer
        assert legacy.request("tasks/get", {"taskId": "x"})["error"]["code"] == -32601
    finally:
        legacy.close()


def test_discover_offers_tasks_only_when_the_server_does(fa, facade):
    alice = ModernMcp(fa.url, ALICE)
    _, answer = alice.request("server/discover", {})
    assert answer["result"]["capabilities"]["extensions"] == TASKS["extensions"], answer
    port, cmd = fixture("--no-tasks")
    with managed_process(cmd) as mp:
        wait_port(port, proc=mp)
        bare = facade(upstream_url=f"http://127.0.0.1:{port}/mcp", policy=POLICY)
        _, answer = ModernMcp(bare.url, ALICE).request("server/discover", {})
        assert "extensions" not in answer["result"]["capabilities"], answer


def test_a_task_id_past_its_time_to_live_is_refused(facade, server):
    fa = facade(upstream_url=server, policy=POLICY, extra_args=["--max-task-ttl-secs", "2"])
    alice = ModernMcp(fa.url, ALICE)
    task = start_task(alice, 0.1)
    assert task["ttlMs"] == 2000, task
    assert until_done(alice, task["taskId"])["status"] == "completed"
    time.sleep(3.2)
    assert refused(task_request(alice, "tasks/get", task["taskId"])) == "task_expired"


def test_a_task_answers_to_the_policy_of_now_not_of_when_it_was_made(facade, server):
    """A task outlives the decision that let its call through. When the
    policy changes (here: the tool is no longer allowed), its creator can no
    longer read it or drive it with updates, as a retry of the call would be
    refused; cancelling it only takes away, and stays the creator's to do."""
    import yaml

    from warden_helpers import wait_for

    fa = facade(upstream_url=server, policy=POLICY)
    alice = ModernMcp(fa.url, ALICE)
    task = start_task(alice, 5, label="long")
    assert task_request(alice, "tasks/get", task["taskId"])["result"]["status"] == "working"
    applied = metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="applied")
    narrower = {**POLICY, "tools": [t for t in POLICY["tools"] if t["name"] != "slow_compute"]}
    staged = fa.policy_path.with_suffix(".tmp")
    staged.write_text(yaml.safe_dump(narrower, sort_keys=False))
    staged.replace(fa.policy_path)
    wait_for(lambda: metric(fa.admin_url, "mcpwarden_policy_reloads_total", result="applied") > applied,
             10, "the reload")
    for method, extra in (("tasks/get", {}), ("tasks/update", {"inputResponses": {}})):
        answer = task_request(alice, method, task["taskId"], **extra)
        assert refused(answer, -32004) == "tool_not_available", (method, answer)
    cancelled = task_request(alice, "tasks/cancel", task["taskId"])
    assert "result" in cancelled, cancelled
    assert stats(alice)["cancelled"] >= 1


def test_a_task_asking_only_for_roots_goes_on_with_the_policys_while_its_client_only_polls(facade, server):
    """A server's `roots/list` question inside a task is the facade's to
    answer and is never put to the client: the facade's own watch over the
    task answers it with the policy's roots, so a task that asks nothing
    else completes while its client only polls (to which it is still at
    work), instead of waiting out its time to live for an update."""
    policy = {**POLICY, "roots": [{"uri": "file:///srv/work", "name": "work"}],
              "tools": [*POLICY["tools"], {"name": "ask_roots"}]}
    fa = facade(upstream_url=server, policy=policy)
    alice = ModernMcp(fa.url, ALICE)
    status, answer = alice.request("tools/call", {"name": "ask_roots", "arguments": {}}, capabilities=TASKS)
    assert status == 200 and answer["result"]["resultType"] == "task", answer
    task_id, seen = answer["result"]["taskId"], []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = task_request(alice, "tasks/get", task_id)["result"]
        seen.append(got)
        if got["status"] in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.1)
    statuses = [got["status"] for got in seen]
    assert statuses[-1] == "completed", seen[-3:]
    assert seen[-1]["result"]["content"][0]["text"] == "roots: file:///srv/work", seen[-1]
    assert "input_required" not in statuses and not any("inputRequests" in got for got in seen), statuses
