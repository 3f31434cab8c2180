"""The tasks extension through an MCPGateway: a task made at a backend is
the caller's at the gateway and at the backend.

    modern fixture (serves tasks) ─ facade (its policy) ─┐ "tasks"
    modern fixture (--no-tasks)   ─ facade (its policy) ─┴ "plain" ─ gateway (its policy) ─ clients

Server: tests/conformance/modern-fixture-server.mjs over HTTP (its
tasks-extension.mjs: `slow_compute` sleeps `seconds` and answers "computed
LABEL in Ns"; `tasks_fixture_stats` counts the tasks it made and cancelled).
Clients: hand-driven modern requests and a raw legacy session. What is
shown: the gateway offers tasks because a backend does; a task made through
it is polled to its result; the id carries its backend under the gateway's
seal; another caller, or an altered id, reaches nothing; a cancel reaches
the backend; the backend binds the task to the caller the gateway vouched
for; the gateway's own watch polls as that caller; a legacy client sees no
tasks.
"""
from __future__ import annotations

import base64
import json
import time

import pytest

from conftest import free_port, managed_process, system_node, wait_port
from era_helpers import MODERN_FIXTURE, ModernMcp
from gateway_helpers import gateway_args, gateway_keys
from warden_helpers import Audit, AuthedMcp, policy_doc, token_entry

ALICE, BOB = "gwt-alice-token-0123456789", "gwt-bob-token-0123456789"
GW_ISSUER = "gw-tasks-e2e"
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("gwtasks").resolve()
    gateway_keys(root)
    return root


def backend_policy(tree, name: str, tools: list[dict]) -> dict:
    """A backend that believes only the gateway's assertions (for it)."""
    return policy_doc(
        auth={"gateways": [{"issuer": GW_ISSUER, "publicKeyFile": str(tree / "gateway.pub.pem"),
                            "audience": name, "callerIssuers": ["static"]}]},
        roles=[{"role": "user", "issuer": "static", "subjects": ["alice", "bob"]}],
        defaultAction="deny",
        sandbox={"writeAllowed": True},
        tools=tools,
    )


GATEWAY_POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(ALICE, "alice"), token_entry(BOB, "bob")]}},
    roles=[{"role": "user", "subjects": ["alice", "bob"]}],
    defaultAction="allow",
    sandbox={"writeAllowed": True},
)


def fixture_server(*extra: str):
    port = free_port()
    return port, managed_process([system_node(), str(MODERN_FIXTURE), "--http", str(port), *extra])


@pytest.fixture(scope="module")
def servers():
    (tasks_port, tasks_cm), (plain_port, plain_cm) = fixture_server(), fixture_server("--no-tasks")
    with tasks_cm as a, plain_cm as b:
        wait_port(tasks_port, proc=a)
        wait_port(plain_port, proc=b)
        yield {"tasks": f"http://127.0.0.1:{tasks_port}/mcp", "plain": f"http://127.0.0.1:{plain_port}/mcp"}


@pytest.fixture(scope="module")
def backends(module_facade, servers, tree):
    tasks_tools = [{"name": "slow_compute"}, {"name": "tasks_fixture_stats"}]
    return {
        "tasks": module_facade(upstream_url=servers["tasks"], policy=backend_policy(tree, "tasks", tasks_tools),
                               extra_args=["--audit", f"file:{tree / 'tasks-audit.jsonl'}"]),
        "plain": module_facade(upstream_url=servers["plain"],
                               policy=backend_policy(tree, "plain", [{"name": "test_simple_text"}])),
    }


def gateway_flags(tree) -> list[str]:
    return ["--gateway-key-file", str(tree / "gateway.key.pem"), "--gateway-issuer", GW_ISSUER]


@pytest.fixture(scope="module")
def gateway(module_facade, backends, tree):
    urls = {name: fa.url for name, fa in backends.items()}
    return module_facade(policy=GATEWAY_POLICY,
                         extra_args=gateway_args(urls) + gateway_flags(tree)
                         + ["--audit", f"file:{tree / 'gateway-audit.jsonl'}"])


@pytest.fixture
def alice(gateway):
    mcp = ModernMcp(gateway.url, ALICE)
    # The client's first question: does the server serve tasks?
    _, answer = mcp.request("server/discover", {})
    assert answer["result"]["capabilities"].get("extensions") == TASKS["extensions"], answer
    mcp.request("tools/list", {})
    yield mcp
    mcp.close()


def start_task(mcp: ModernMcp, seconds: float, label: str) -> dict:
    call = {"name": "tasks__slow_compute", "arguments": {"seconds": seconds, "label": label}}
    status, answer = mcp.request("tools/call", call, capabilities=TASKS)
    assert status == 200 and "result" in answer, answer
    assert answer["result"]["resultType"] == "task", answer
    return answer["result"]


def task_request(mcp: ModernMcp, method: str, task_id: str, **extra) -> dict:
    _, answer = mcp.request(method, {"taskId": task_id, **extra}, capabilities=TASKS,
                            headers={"Mcp-Name": task_id})
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


def claims(task_id: str) -> dict:
    body = task_id.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def reseal(task_id: str, claims_: dict) -> str:
    """The id with its claims replaced and its old MAC kept."""
    head, _, mac = task_id.split(".")
    body = base64.urlsafe_b64encode(json.dumps(claims_).encode()).decode().rstrip("=")
    return f"{head}.{body}.{mac}"


def stats(mcp: ModernMcp) -> dict:
    _, answer = mcp.request("tools/call", {"name": "tasks__tasks_fixture_stats", "arguments": {}})
    return json.loads(answer["result"]["content"][0]["text"])


def test_a_task_through_the_gateway_runs_to_its_result(alice, tree):
    task = start_task(alice, 0.3, "via-gateway")
    task_id = task["taskId"]
    # The caller's id is the gateway's seal over the backend's id, which
    # names its backend: readable, never the backend's own bytes alone.
    assert task_id.startswith("mw1."), task
    inner = claims(task_id)["task"]
    assert inner.startswith("tasks:mw1."), inner
    done = until_done(alice, task_id)
    assert done["status"] == "completed", done
    assert done["result"]["content"][0]["text"] == "computed via-gateway in 0.3s", done
    # The backend's facade made the task the caller's, as the gateway vouched.
    record = Audit(tree / "tasks-audit.jsonl").wait(
        lambda r: r.get("event") == "task_created" and r.get("tool") == "slow_compute")
    assert (record["issuer"], record["subject"], record["auth"]) == ("static", "alice", "gateway"), record


def test_another_caller_or_an_altered_id_reaches_nothing(gateway, alice):
    bob = ModernMcp(gateway.url, BOB)
    try:
        task_id = start_task(alice, 30, "alice-only")["taskId"]
        for method in ("tasks/get", "tasks/cancel"):
            assert refused(task_request(bob, method, task_id)) == "task_other_caller"
        # The backend a task is at cannot be swapped: the seal covers it.
        swapped = claims(task_id)
        swapped["task"] = "plain:" + swapped["task"].split(":", 1)[1]
        assert refused(task_request(alice, "tasks/get", reseal(task_id, swapped))) == "task_id_tampered"
        assert task_request(alice, "tasks/get", task_id)["result"]["status"] == "working"
    finally:
        task_request(alice, "tasks/cancel", task_id)
        bob.close()


def test_a_cancel_reaches_the_backend(alice, tree):
    before = stats(alice)
    task_id = start_task(alice, 30, "to-cancel")["taskId"]
    assert task_request(alice, "tasks/cancel", task_id)["result"] == {"resultType": "complete"}
    assert until_done(alice, task_id)["status"] == "cancelled"
    assert stats(alice)["cancelled"] == before["cancelled"] + 1
    ended = Audit(tree / "tasks-audit.jsonl").wait(
        lambda r: r.get("event") == "task_ended" and r.get("reason") == "cancelled")
    assert ended["subject"] == "alice", ended


def test_the_gateways_own_watch_polls_as_the_caller(alice, tree):
    """Nobody polls: the gateway's watch still sees the task end at the
    backend, whose facade answers only the caller the task is bound to."""
    audit = Audit(tree / "gateway-audit.jsonl")
    completed = lambda r: r.get("event") == "task_ended" and r.get("reason") == "completed"  # noqa: E731
    before = len([r for r in audit.lines() if completed(r)])
    start_task(alice, 0.2, "unpolled")
    ended = audit.wait_count(completed, before + 1, timeout=10)
    assert len(ended) == before + 1, audit.text()[-3000:]
    assert (ended[-1]["subject"], ended[-1]["tool"]) == ("alice", "tasks__slow_compute"), ended[-1]


def test_a_legacy_client_sees_no_tasks_through_the_gateway(gateway, alice):
    legacy = AuthedMcp(gateway.url, ALICE)
    try:
        caps = legacy.initialize()["capabilities"]
        assert "io.modelcontextprotocol/tasks" not in json.dumps(caps), caps
        answer = legacy.call_tool("tasks__slow_compute", {"seconds": 0, "label": "legacy"})
        assert answer["result"]["content"][0]["text"] == "computed legacy in 0s", answer
        assert "taskId" not in answer["result"], answer
        assert legacy.request("tasks/get", {"taskId": "x"})["error"]["code"] == -32601
    finally:
        legacy.close()


def test_a_gateway_offers_tasks_only_when_a_backend_does(gateway, facade, backends, tree):
    mcp = ModernMcp(gateway.url, BOB)
    try:
        _, answer = mcp.request("server/discover", {})
        assert answer["result"]["capabilities"]["extensions"] == TASKS["extensions"], answer
    finally:
        mcp.close()
    bare = facade(policy=GATEWAY_POLICY,
                  extra_args=gateway_args({"plain": backends["plain"].url}) + gateway_flags(tree))
    mcp = ModernMcp(bare.url, ALICE)
    try:
        _, answer = mcp.request("server/discover", {})
        assert "extensions" not in answer["result"]["capabilities"], answer
        mcp.request("tools/list", {})
        _, answer = mcp.request("tools/call", {"name": "plain__test_simple_text", "arguments": {}},
                                capabilities=TASKS)
        assert answer["result"]["resultType"] == "complete", answer
    finally:
        mcp.close()
