"""Scale-out: three facade replicas behind a per-request round-robin balancer
(tests/e2e/balancer.py), as behind a Kubernetes Service. Session ids name
their owner and are HMAC-signed with a shared key; a replica relays requests
for another's session to it. Real clients: the official Python SDK against
server-everything over stdio."""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from conftest import free_port, sidecar_path, wait_http_ok, wait_port
from hardening_helpers import sse_events
from helpers import everything_stdio, metric, run_async

BALANCER = Path(__file__).with_name("balancer.py")
ACCEPT = "application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture
def cluster(start_process, tmp_path):
    """Three replicas with one shared key, and the balancer in front."""
    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    replicas = []
    for _ in range(3):
        port, admin = free_port(), free_port()
        proc = start_process([
            str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
            "--peer-key-file", str(key), "--advertise-addr", f"127.0.0.1:{port}",
            "--spares", "2", "--drain-timeout-secs", "15", "--", *everything_stdio(),
        ])
        replicas.append({"port": port, "admin": f"http://127.0.0.1:{admin}", "proc": proc})
    for r in replicas:
        wait_http_ok(r["admin"] + "/readyz", proc=r["proc"])
    lb = free_port()
    balancer = start_process([sys.executable, str(BALANCER), str(lb), *(str(r["port"]) for r in replicas)])
    wait_port(lb, proc=balancer)
    return {"url": f"http://127.0.0.1:{lb}/mcp", "replicas": replicas}


async def one_session(url: str, calls: int) -> list[str]:
    async with streamable_http_client(url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert "echo" in [t.name for t in tools.tools]
            out = []
            for i in range(calls):
                result = await session.call_tool("echo", {"message": f"m{i}"})
                out.append(result.content[0].text)
            return out


def test_sessions_survive_round_robin_across_replicas(cluster):
    results: dict[int, list[str]] = {}

    async def main():
        async with anyio.create_task_group() as tg:
            for n in range(9):
                async def run(n=n):
                    results[n] = await one_session(cluster["url"], 5)
                tg.start_soon(run)

    run_async(main, timeout=120)
    assert len(results) == 9
    for out in results.values():
        assert out == [f"Echo: m{i}" for i in range(5)]
    forwarded = sum(metric(r["admin"], "mcpwarden_forwarded_requests_total") for r in cluster["replicas"])
    # Every session made 8+ requests over 3 replicas in turn: most were relayed.
    assert forwarded >= 9 * 4, forwarded


def test_forged_and_tampered_session_ids_are_rejected(cluster):
    replica = cluster["replicas"][0]
    url = f"http://127.0.0.1:{replica['port']}/mcp"
    with httpx.Client(timeout=10) as http:
        r = http.post(url, json=INIT, headers={"Accept": ACCEPT})
        assert r.status_code == 200
        sid = r.headers["mcp-session-id"]
        random, owner, mac = sid.split(".")
        assert len(mac) == 32
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        ok = http.post(url, json=ping, headers={"Accept": ACCEPT, "Mcp-Session-Id": sid})
        assert ok.status_code == 200
        other = cluster["replicas"][1]
        import base64
        redirected_owner = base64.urlsafe_b64encode(f"127.0.0.1:{other['port']}".encode()).decode().rstrip("=")
        for forged in (
            f"{random}.{redirected_owner}.{mac}",                # points another replica at it
            f"{'0' * 32}.{owner}.{mac}",                         # new random part, old MAC
            f"{random}.{owner}.{'f' * 32}",                      # made-up MAC
        ):
            for target in (url, f"http://127.0.0.1:{other['port']}/mcp"):
                r = http.post(target, json=ping, headers={"Accept": ACCEPT, "Mcp-Session-Id": forged})
                assert r.status_code == 404, (forged, target, r.status_code, r.text)


def test_stopping_a_replica_mid_call_loses_nothing(cluster):
    """Every call a replica has accepted completes when it is stopped: it
    drains its own sessions' calls and the calls it relays for others. The
    replica is stopped only once every call has reported progress, so the
    test does not depend on how fast a loaded machine gets them started."""
    calls = 6
    outcomes: list[str] = []
    in_flight: set[int] = set()
    all_in_flight = anyio.Event()

    async def long_call(n: int):
        async def progressed(_progress, _total, _message):
            in_flight.add(n)
            if len(in_flight) == calls:
                all_in_flight.set()

        try:
            async with streamable_http_client(cluster["url"]) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    # The SDK lists tools after a call whose output schema it
                    # has not seen: listed first, the call is the session's
                    # last request, and nothing after it can meet a stopped owner.
                    await session.list_tools()
                    r = await session.call_tool("trigger-long-running-operation", {"duration": 4, "steps": 4},
                                                progress_callback=progressed)
                    outcomes.append("ok" if r.content else "empty")
        except BaseException as e:  # noqa: BLE001 - ExceptionGroup from the SDK's task group
            if isinstance(e, anyio.get_cancelled_exc_class()):
                raise
            outcomes.append(f"error: {e!r}")

    async def main():
        async with anyio.create_task_group() as tg:
            for n in range(calls):
                tg.start_soon(long_call, n)
            await all_in_flight.wait()
            victim = cluster["replicas"][1]["proc"]
            victim.proc.send_signal(signal.SIGTERM)

    run_async(main, timeout=90)
    if outcomes != ["ok"] * calls:
        import shutil
        for i, r in enumerate(cluster["replicas"]):
            shutil.copy(r["proc"].log_path, f"/tmp/replica{i}.log")
    assert outcomes == ["ok"] * calls, outcomes
    # The stopped replica is gone; new sessions still work through the rest.
    deadline = time.monotonic() + 20
    while cluster["replicas"][1]["proc"].alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not cluster["replicas"][1]["proc"].alive()
    out = run_async(one_session, cluster["url"], 3, timeout=60)
    assert out == ["Echo: m0", "Echo: m1", "Echo: m2"]


def test_a_stopping_replica_finishes_the_call_it_relays(cluster):
    """A replica told to stop while it relays another replica's call keeps
    the relayed stream open until the owner's answer has passed through: it
    owes that answer as much as its own sessions' answers."""
    owner, relay = cluster["replicas"][0], cluster["replicas"][1]
    with httpx.Client(timeout=30) as http:
        r = http.post(f"http://127.0.0.1:{owner['port']}/mcp", json=INIT, headers={"Accept": ACCEPT})
        assert r.status_code == 200, r.text
        headers = {"Accept": ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"],
                   "Mcp-Protocol-Version": "2025-11-25"}
        done = http.post(f"http://127.0.0.1:{owner['port']}/mcp", headers=headers,
                         json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status_code == 202, done.text
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "trigger-long-running-operation", "arguments": {"duration": 3, "steps": 3},
                           "_meta": {"progressToken": "p"}}}
        received = b""
        stopped = False
        with http.stream("POST", f"http://127.0.0.1:{relay['port']}/mcp", json=call, headers=headers) as stream:
            assert stream.status_code == 200
            for chunk in stream.iter_bytes():
                received += chunk
                if not stopped and b"notifications/progress" in received:
                    # The relaying replica has no call of its own in flight.
                    relay["proc"].proc.send_signal(signal.SIGTERM)
                    stopped = True
    assert stopped, received
    answers = [json.loads(e["data"]) for e in sse_events(received) if e["data"]]
    final = [a for a in answers if a.get("id") == 7]
    assert final and "result" in final[0], received
    assert final[0]["result"]["content"], final


def test_a_stopping_replica_ends_the_get_stream_it_relays(cluster):
    """A relayed GET stream owes no answer: the stopping replica ends it
    (the client resumes through another replica) instead of holding its own
    exit until the drain deadline (15 s here)."""
    owner, relay = cluster["replicas"][0], cluster["replicas"][1]
    with httpx.Client(timeout=30) as http:
        r = http.post(f"http://127.0.0.1:{owner['port']}/mcp", json=INIT, headers={"Accept": ACCEPT})
        headers = {"Accept": ACCEPT, "Mcp-Session-Id": r.headers["mcp-session-id"],
                   "Mcp-Protocol-Version": "2025-11-25"}
        http.post(f"http://127.0.0.1:{owner['port']}/mcp", headers=headers,
                  json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        with http.stream("GET", f"http://127.0.0.1:{relay['port']}/mcp", headers=headers) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            relay["proc"].proc.send_signal(signal.SIGTERM)
            started = time.monotonic()
            for _ in stream.iter_bytes():
                pass
        ended = time.monotonic() - started
        deadline = time.monotonic() + 20
        while relay["proc"].alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        exited = time.monotonic() - started
    assert ended < 10 and exited < 10, (ended, exited)
    # The session lives on at its owner.
    with httpx.Client(timeout=10) as http:
        ping = http.post(f"http://127.0.0.1:{owner['port']}/mcp", headers=headers,
                         json={"jsonrpc": "2.0", "id": 3, "method": "ping"})
    assert ping.status_code == 200, ping.text


def test_a_modern_retry_landing_on_another_replica_completes(cluster):
    """A modern client's call that a legacy server paused with a question is
    parked on the replica that sent it; the client's retry, carrying the
    signed requestState, lands on another replica, which relays it to the
    owner (the state names it under the shared key), and the call completes."""
    from era_helpers import ModernMcp

    first, second = cluster["replicas"][0], cluster["replicas"][1]
    asker = ModernMcp(f"http://127.0.0.1:{first['port']}/mcp")
    caps = {"elicitation": {}}
    status, answer = asker.request("tools/call", {"name": "trigger-elicitation-request", "arguments": {}},
                                   capabilities=caps)
    assert status == 200 and answer["result"]["resultType"] == "input_required", answer
    (key, _), = answer["result"]["inputRequests"].items()
    before = metric(second["admin"], "mcpwarden_forwarded_requests_total")
    other = ModernMcp(f"http://127.0.0.1:{second['port']}/mcp")
    status, done = other.request("tools/call", {
        "name": "trigger-elicitation-request", "arguments": {},
        "requestState": answer["result"]["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "octocat", "check": True}}},
    }, capabilities=caps)
    text = " ".join(c.get("text", "") for c in done["result"]["content"])
    assert status == 200 and "octocat" in text, done
    assert metric(second["admin"], "mcpwarden_forwarded_requests_total") == before + 1


# ---------------------------------------------------------------------------
# One identity budget across the replicas
# ---------------------------------------------------------------------------
import hashlib  # noqa: E402
import secrets  # noqa: E402
from contextlib import AsyncExitStack  # noqa: E402

from warden_helpers import Audit, policy_doc, sdk_client, text_of_result, token_entry  # noqa: E402

# Callers by subject; each identity is `static\0<subject>` (static tokens' issuer).
SUBJECTS = [f"user{n}" for n in range(12)]
TOKENS = {s: f"{s}-{secrets.token_hex(8)}" for s in SUBJECTS}
BUDGET_POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(t, s) for s, t in TOKENS.items()]}},
    roles=[{"role": "user", "subjects": SUBJECTS}], defaultAction="allow",
    limits={"maxCallsPerIdentity": {"calls": 4, "per": "minute"}})
ASKS = "mcpwarden_identity_budget_asks_total"


def budget_cluster(start_process, tmp_path, n: int, peers_file: Path | None = None,
                   extra: tuple[str, ...] = ()) -> list[dict]:
    """`n` replicas sharing a key and told each other's addresses (`--peer`),
    or told to read them from `peers_file` (`--peers-file`), as the operator
    has them do."""
    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(BUDGET_POLICY))
    ports = [free_port() for _ in range(n)]
    peers = [arg for p in ports for arg in ("--peer", f"127.0.0.1:{p}")]
    if peers_file is not None:
        peers = ["--peers-file", str(peers_file)]
    replicas = []
    for i, port in enumerate(ports):
        admin = free_port()
        audit = Audit(tmp_path / f"audit-{i}.jsonl")
        proc = start_process([
            str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
            "--peer-key-file", str(key), "--advertise-addr", f"127.0.0.1:{port}", *peers,
            "--policy", str(policy), "--audit", audit.arg, "--spares", "1", *extra, "--", *everything_stdio(),
        ])
        replicas.append({"addr": f"127.0.0.1:{port}", "url": f"http://127.0.0.1:{port}/mcp",
                         "admin": f"http://127.0.0.1:{admin}", "proc": proc, "audit": audit})
    for r in replicas:
        wait_http_ok(r["admin"] + "/readyz", proc=r["proc"])
    return replicas


def owner_of(replicas: list[dict], subject: str) -> int:
    """Which replica counts `subject`'s calls: rendezvous hashing over the
    peer addresses, as every replica computes it."""
    identity = f"static\0{subject}".encode()
    scores = [hashlib.sha256(r["addr"].encode() + b"\0" + identity).digest() for r in replicas]
    return scores.index(max(scores))


def fresh_window() -> None:
    """Start the calls early in a UTC minute, so one window holds them all."""
    left = 60 - time.time() % 60
    if left < 20:
        time.sleep(left + 0.5)


async def call_each(clients: list, n: int):
    """Call echo `n` times, call i on clients[i % len]: texts, or (code, reason, limit)."""
    from mcp.shared.exceptions import MCPError
    out = []
    for i in range(n):
        try:
            out.append(text_of_result(await clients[i % len(clients)].call_tool("echo", {"message": f"m{i}"})))
        except MCPError as e:
            out.append((e.code, e.data["reason"], e.data.get("limit")))
    return out


async def spread_calls(replicas: list[dict], subject: str, n: int):
    """One session per replica for `subject`, its calls spread over them in turn."""
    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(sdk_client(r["url"], TOKENS[subject])) for r in replicas]
        return await call_each(clients, n)


def test_an_identity_budget_holds_across_replicas(start_process, tmp_path):
    """maxCallsPerIdentity 4/min over three replicas, calls spread by the
    test: exactly four succeed whatever replica takes them; each identity
    has its own four."""
    replicas = budget_cluster(start_process, tmp_path, 3)
    # Two identities with different owners, so both paths (counted here,
    # asked of another replica) serve each of them.
    first = SUBJECTS[0]
    second = next(s for s in SUBJECTS if owner_of(replicas, s) != owner_of(replicas, first))
    fresh_window()
    for subject in (first, second):
        outcomes = run_async(spread_calls, replicas, subject, 9, timeout=90)
        assert outcomes[:4] == [f"Echo: m{i}" for i in range(4)], (subject, outcomes)
        assert outcomes[4:] == [(-32005, "calls_per_identity_exceeded", 4)] * 5, (subject, outcomes)
    # Each call on a replica that does not own its identity asked the owner
    # (granted for the first four calls, refused after), and only those.
    for i, r in enumerate(replicas):
        asked = [n for s in (first, second) if owner_of(replicas, s) != i for n in range(i, 9, 3)]
        assert metric(r["admin"], ASKS, outcome="granted") == len([n for n in asked if n < 4]), i
        assert metric(r["admin"], ASKS, outcome="refused") == len([n for n in asked if n >= 4]), i
        assert metric(r["admin"], ASKS, outcome="unreachable") == 0
    # Every refusal is audited, on the replica that refused the call.
    refusals = [line for r in replicas for line in r["audit"].lines()
                if line.get("reason") == "calls_per_identity_exceeded"]
    assert len(refusals) == 10, refusals
    assert {line.get("code") for line in refusals} == {-32005}


def test_replicas_learn_each_other_from_a_peers_file(start_process, tmp_path):
    """The operator's way: no `--peer` list at start (the pods do not know
    each other's addresses yet, and DNS is closed to them), a file the
    operator writes later. Before it exists each replica counts alone;
    once it lists both, the budget holds across them."""
    peers_file = tmp_path / "peers"
    replicas = budget_cluster(start_process, tmp_path, 2, peers_file=peers_file)
    for r in replicas:
        assert metric(r["admin"], "mcpwarden_identity_budget_peers") == 0
    peers_file.write_text("# replicas of one server\n" + "\n".join(r["addr"] for r in replicas) + "\n")
    deadline = time.monotonic() + 20
    while any(metric(r["admin"], "mcpwarden_identity_budget_peers") != 2 for r in replicas):
        assert time.monotonic() < deadline, "the replicas never read the peers file"
        time.sleep(0.3)
    fresh_window()
    subject = SUBJECTS[0]
    outcomes = run_async(spread_calls, replicas, subject, 7, timeout=90)
    assert outcomes[:4] == [f"Echo: m{i}" for i in range(4)], outcomes
    assert outcomes[4:] == [(-32005, "calls_per_identity_exceeded", 4)] * 3, outcomes
    asker = 1 - owner_of(replicas, subject)
    assert metric(replicas[asker]["admin"], ASKS, outcome="granted") == 2
    # An emptied file (a ConfigMap being replaced) keeps the last set.
    peers_file.write_text("")
    time.sleep(6)
    for r in replicas:
        assert metric(r["admin"], "mcpwarden_identity_budget_peers") == 2


def test_an_unreachable_owner_fails_closed_and_only_its_identities(start_process, tmp_path):
    """The owner of an identity stops: a call of that identity on another
    replica is refused at once with a retryable -32005 (no local share);
    identities the live replica owns are served as before."""
    replicas = budget_cluster(start_process, tmp_path, 2)
    victim, live = replicas[0], replicas[1]
    orphan = next(s for s in SUBJECTS if owner_of(replicas, s) == 0)
    kept = next(s for s in SUBJECTS if owner_of(replicas, s) == 1)
    fresh_window()
    # While the owner runs, the other replica asks it and is granted.
    assert run_async(spread_calls, [live], orphan, 1) == ["Echo: m0"]
    assert metric(live["admin"], ASKS, outcome="granted") == 1
    victim["proc"].proc.send_signal(signal.SIGKILL)
    victim["proc"].proc.wait(timeout=10)
    started = time.monotonic()
    outcomes = run_async(spread_calls, [live], orphan, 3)
    elapsed = time.monotonic() - started
    assert outcomes == [(-32005, "identity_budget_unavailable", 4)] * 3, outcomes
    assert elapsed < 3 * 2 + 5, elapsed  # each ask bounded by its deadline
    assert metric(live["admin"], ASKS, outcome="unreachable") == 3
    refusal = live["audit"].wait(lambda line: line.get("reason") == "identity_budget_unavailable")
    assert refusal["code"] == -32005
    # An identity the live replica counts itself has its four calls.
    outcomes = run_async(spread_calls, [live], kept, 5)
    assert outcomes[:4] == [f"Echo: m{i}" for i in range(4)], outcomes
    assert outcomes[4] == (-32005, "calls_per_identity_exceeded", 4), outcomes


def test_only_a_peer_can_ask_for_an_identity_budget(start_process, tmp_path):
    """The ask path answers only asks signed with the peers' key: anything
    else is 403 and takes nothing; a replica without peers does not serve it."""
    replicas = budget_cluster(start_process, tmp_path, 2, extra=("--body-timeout-secs", "2"))
    path = "/peer/identity-budget"
    fresh_window()
    owner = replicas[owner_of(replicas, SUBJECTS[0])]
    ask = {"from": replicas[1 - replicas.index(owner)]["addr"], "to": owner["addr"],
           "identity": f"static\0{SUBJECTS[0]}", "budgets": [["", {"calls": 4, "per": "minute"}]],
           "at": int(time.time()), "nonce": secrets.token_hex(16)}
    with httpx.Client(timeout=10) as http:
        for body in (json.dumps({"msg": json.dumps(ask), "mac": "00" * 32}),
                     json.dumps({"msg": json.dumps(ask), "mac": "zz"}),
                     json.dumps(ask), "not json"):
            r = http.post(owner["url"].replace("/mcp", path), content=body,
                          headers={"Content-Type": "application/json"})
            assert r.status_code == 403, (body, r.status_code, r.text)
    assert metric(owner["admin"], "mcpwarden_http_rejections_total", reason="peer_ask") == 4
    # The path needs no token (a peer's signature is checked on the body): a body sent a byte
    # at a time is cut at the body timeout, as on /mcp.
    with socket.create_connection(("127.0.0.1", int(owner["addr"].rsplit(":", 1)[1])), timeout=10) as raw:
        raw.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    "Content-Length: 1000\r\n\r\n{".encode())
        started = time.monotonic()
        answer = raw.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert time.monotonic() - started < 6, "the body read was not cut at its timeout"
    # The refused asks took nothing: the identity still has its four calls.
    outcomes = run_async(spread_calls, replicas, SUBJECTS[0], 5)
    assert outcomes[:4] == [f"Echo: m{i}" for i in range(4)], outcomes
    assert outcomes[4][1] == "calls_per_identity_exceeded", outcomes



# ---------------------------------------------------------------------------
# Tasks (io.modelcontextprotocol/tasks) across the replicas
# ---------------------------------------------------------------------------
def test_a_task_request_landing_on_another_replica_reaches_the_task(start_process, tmp_path):
    """Each replica has a server of its own (as each pod does); a task lives
    on the server of the replica whose facade made it. Its sealed task id
    names that replica, so a tasks/get or tasks/cancel that lands on another
    replica is relayed there and reaches the task."""
    from era_helpers import MODERN_FIXTURE, ModernMcp
    from conftest import system_node

    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    replicas = []
    for _ in range(2):
        port, admin = free_port(), free_port()
        proc = start_process([
            str(sidecar_path()), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
            "--peer-key-file", str(key), "--advertise-addr", f"127.0.0.1:{port}",
            "--", system_node(), str(MODERN_FIXTURE), "--stdio",
        ])
        replicas.append({"url": f"http://127.0.0.1:{port}/mcp", "admin": f"http://127.0.0.1:{admin}", "proc": proc})
    for r in replicas:
        wait_http_ok(r["admin"] + "/readyz", proc=r["proc"])
    caps = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    maker, other = ModernMcp(replicas[0]["url"]), ModernMcp(replicas[1]["url"])
    _, answer = maker.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.5, "label": "far"}},
                              capabilities=caps)
    task_id = answer["result"]["taskId"]
    before = metric(replicas[1]["admin"], "mcpwarden_forwarded_requests_total")
    deadline = time.monotonic() + 15
    while True:
        _, got = other.request("tasks/get", {"taskId": task_id}, capabilities=caps, headers={"Mcp-Name": task_id})
        assert "result" in got, got
        if got["result"]["status"] == "completed" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got["result"]["taskId"] == task_id and got["result"]["result"]["content"][0]["text"] == "computed far in 0.5s"
    assert metric(replicas[1]["admin"], "mcpwarden_forwarded_requests_total") > before
    # The other replica's own server never heard of it.
    _, stats = other.request("tools/call", {"name": "tasks_fixture_stats", "arguments": {}})
    assert json.loads(stats["result"]["content"][0]["text"])["created"] == 0, stats


# ---------------------------------------------------------------------------
# An approval runs its call once across the replicas
# ---------------------------------------------------------------------------
APPROVER = secrets.token_hex(8)
APPROVAL_POLICY = policy_doc(
    auth={"staticTokens": {"tokens": [token_entry(APPROVER, "alice")]}},
    roles=[{"role": "user", "subjects": ["alice"]}], defaultAction="deny", sandbox={"writeAllowed": True},
    tools=[{"name": "echo", "arguments": [{"name": "message", "kind": "string", "allow": [".*"],
                                           "check": ["deploy .*"]}]}])
APPROVED = {"mcp-warden/approval": {"action": "accept", "content": {"approve": True}}}


def test_an_approval_runs_its_call_once_whatever_replica_a_replay_lands_on(start_process, tmp_path):
    """Every replica opens a state any replica sealed, but each remembers
    only the approvals it saw spent: an approval's state names the replica
    that issued it, so its retry and every replay are relayed there and
    refused after the first. A replica restarted at the same address has
    forgotten what was spent: it refuses its earlier run's states."""
    from era_helpers import ModernMcp

    key = tmp_path / "peer.key"
    key.write_bytes(os.urandom(32))
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps(APPROVAL_POLICY))
    ports = [free_port(), free_port()]

    def start(i: int) -> dict:
        admin = free_port()
        proc = start_process([
            str(sidecar_path()), "run", "--listen", f"127.0.0.1:{ports[i]}", "--admin-listen", f"127.0.0.1:{admin}",
            "--peer-key-file", str(key), "--advertise-addr", f"127.0.0.1:{ports[i]}",
            "--policy", str(policy), "--", *everything_stdio(),
        ])
        wait_http_ok(f"http://127.0.0.1:{admin}/readyz", proc=proc)
        return {"mcp": ModernMcp(f"http://127.0.0.1:{ports[i]}/mcp", APPROVER),
                "admin": f"http://127.0.0.1:{admin}", "proc": proc}

    issuer, other = start(0), start(1)
    caps = {"elicitation": {}}
    params = {"name": "echo", "arguments": {"message": "deploy prod"}}

    def ask() -> str:
        _, asked = issuer["mcp"].request("tools/call", params, capabilities=caps)
        assert asked["result"]["resultType"] == "input_required", asked
        return asked["result"]["requestState"]

    def retry(replica: dict, state: str) -> dict:
        _, answer = replica["mcp"].request(
            "tools/call", {**params, "inputResponses": APPROVED, "requestState": state}, capabilities=caps)
        return answer

    state = ask()
    relayed = metric(other["admin"], "mcpwarden_forwarded_requests_total")
    first = retry(other, state)
    assert first["result"]["content"][0]["text"] == "Echo: deploy prod", first
    assert metric(other["admin"], "mcpwarden_forwarded_requests_total") == relayed + 1
    for replica in (other, issuer, other):
        again = retry(replica, state)
        assert again.get("error", {}).get("code") == -32602, again
        assert again["error"]["data"]["reason"] == "request_state_used", again

    unused = ask()
    issuer["proc"].stop(grace=30)
    issuer = start(0)
    for replica in (other, issuer):
        refused = retry(replica, unused)
        assert refused.get("error", {}).get("code") == -32602, refused
        assert refused["error"]["data"]["reason"] == "request_state_issuer_restarted", refused
