"""Hardening against clients that cost the facade by being slow or by
leaving: connections that drip headers or bodies, send oversized headers or
say nothing, and sessions opened and abandoned by the hundred. Each case:
the facade cuts what it must on time, stays up, keeps its memory bounded,
and every other session keeps working.

Facades (one per concern, shared by the tests of that concern):
- `slow`: short body timeout, small header limit; slow clients;
- `many`: an HTTP upstream (cheap sessions), a small session cap and idle
  timeout.
"""
from __future__ import annotations

import json
import socket
import statistics
import sys
import threading
import time
from collections import Counter

import httpx
import pytest

from conftest import free_port, wait_port
from hardening_helpers import MANY_PER_CALLER, ROGUE_POLICY, rogue_stdio, rss_kb
from helpers import ACCEPT_BOTH, RawMcp, metric, text_of
from warden_helpers import POLICY_FIXTURE, policy_doc

# ---------------------------------------------------------------------------
# Slow and oversized clients
# ---------------------------------------------------------------------------
HEADER_TIMEOUT = 4  # --header-timeout-secs (the default is 10)
BODY_TIMEOUT = 2
SLOW_CLIENTS = 40


class SlowClients:
    """Connections that misbehave in the background, each timed until the facade closes it."""

    def __init__(self, port: int, session_id: str):
        self.port, self.session_id = port, session_id
        self.closed: dict[str, float] = {}
        self.answers: dict[str, bytes] = {}
        self.t0 = time.monotonic()
        self.threads = []

    def _conn(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
        return s

    def _watch(self, name: str, s: socket.socket, drip: bytes | None, every: float, limit: float):
        got = b""
        s.settimeout(every)
        while time.monotonic() - self.t0 < limit:
            try:
                data = s.recv(65536)
                if not data:
                    break
                got += data
                continue
            except socket.timeout:
                pass
            except OSError:
                break
            if drip:
                try:
                    s.sendall(drip)
                except OSError:
                    break
        else:
            self.answers[name] = got
            s.close()
            return  # still open at the limit
        self.closed[name] = time.monotonic() - self.t0
        self.answers[name] = got
        s.close()

    def start(self, name, first: bytes, drip: bytes | None, every: float, limit: float):
        s = self._conn()
        if first:
            s.sendall(first)
        t = threading.Thread(target=self._watch, args=(name, s, drip, every, limit), daemon=True)
        t.start()
        self.threads.append(t)

    def join(self):
        for t in self.threads:
            t.join()


@pytest.fixture(scope="module")
def slow(module_facade):
    return module_facade(upstream=rogue_stdio(), policy=ROGUE_POLICY,
                         extra_args=["--body-timeout-secs", str(BODY_TIMEOUT),
                                     "--header-timeout-secs", str(HEADER_TIMEOUT),
                                     "--max-header-bytes", "16384", "--drain-timeout-secs", "1",
                                     *MANY_PER_CALLER])


@pytest.fixture(scope="module")
def slow_run(slow):
    """Start every kind of slow client at once, keep a healthy session busy
    meanwhile, and wait until the header timeout has passed for all of them."""
    victim = RawMcp(slow.url)
    victim.initialize()
    sc = SlowClients(slow.port, victim.session_id)
    limit = HEADER_TIMEOUT + 4
    post_head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{slow.port}\r\n"
                 f"Accept: {ACCEPT_BOTH}\r\nContent-Type: application/json\r\n"
                 f"Mcp-Session-Id: {victim.session_id}\r\nMCP-Protocol-Version: {victim.negotiated}\r\n")
    for i in range(SLOW_CLIENTS):
        # headers dripped one line a second, never finished
        sc.start(f"header-drip-{i}", b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: 1\r\n", 1.0, limit)
        # headers done, the body dripped a byte at a time
        sc.start(f"body-drip-{i}", (post_head + "Content-Length: 100000\r\n\r\n").encode() + b'{"jsonrpc":',
                 b" ", 0.5, limit)
        # a connection that never sends a byte
        sc.start(f"silent-{i}", b"", None, 1.0, limit)
        # an HTTP/2 preface, cut short
        sc.start(f"h2-stall-{i}", b"PRI * HTTP/2.0\r\n", None, 1.0, limit)
    rss0 = rss_kb(slow.proc.proc.pid)
    healthy, latencies = RawMcp(slow.url, timeout=5), []
    healthy.initialize()
    while time.monotonic() - sc.t0 < limit - 0.5:
        t = time.monotonic()
        assert text_of(healthy.call_tool("say", {"text": "ok"})) == "ok"
        latencies.append(time.monotonic() - t)
        time.sleep(0.2)
    sc.join()
    sc.latencies, sc.rss = latencies, (rss0, rss_kb(slow.proc.proc.pid))
    sc.healthy = healthy
    yield sc
    healthy.close()
    victim.close()


def test_slow_header_drip_is_cut_at_the_header_timeout(slow_run):
    for i in range(SLOW_CLIENTS):
        when = slow_run.closed.get(f"header-drip-{i}")
        assert when is not None and HEADER_TIMEOUT - 1 < when < HEADER_TIMEOUT + 2, (i, when)


def test_slow_body_drip_gets_408(slow_run):
    for i in range(SLOW_CLIENTS):
        name = f"body-drip-{i}"
        answer = slow_run.answers.get(name, b"")
        assert answer.startswith(b"HTTP/1.1 408"), (name, answer[:200])
        assert b"did not arrive within" in answer, answer[:400]
        when = slow_run.closed.get(name)
        assert when is not None and when < BODY_TIMEOUT + 3, (name, when)


def test_other_sessions_work_while_slow_clients_hang_on(slow, slow_run):
    assert len(slow_run.latencies) > 20
    assert statistics.median(slow_run.latencies) < 0.5, sorted(slow_run.latencies)[-5:]
    assert max(slow_run.latencies) < 5, sorted(slow_run.latencies)[-5:]
    assert slow.proc.alive()
    rss0, rss1 = slow_run.rss
    assert rss1 - rss0 < 50 * 1024, slow_run.rss


def test_silent_connections_are_cut_at_the_header_timeout(slow_run):
    for kind in ("silent", "h2-stall"):
        for i in range(SLOW_CLIENTS):
            when = slow_run.closed.get(f"{kind}-{i}")
            assert when is not None and when < HEADER_TIMEOUT + 2, (kind, i, when)
            if kind == "silent":  # (an HTTP/2 preface is refused at once)
                assert when > HEADER_TIMEOUT - 1, (kind, i, when)


@pytest.mark.parametrize("headers", [
    {"X-Big": "b" * 20_000},                          # one header over --max-header-bytes
    {f"X-Many-{i}": "v" * 100 for i in range(150)},   # many headers, within the bytes
    {"Cookie": "c=" + "k" * 15_000, "X-More": "m" * 3_000},
], ids=["one-big", "many", "together-over"])
def test_oversized_headers(slow, slow_run, headers):
    s = slow_run.healthy
    try:
        r = httpx.post(slow.url, content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}',
                       headers={**s.headers(), **headers}, timeout=10)
        assert r.status_code == 431, (r.status_code, r.text[:200])
    except httpx.RemoteProtocolError:
        pass  # the connection dropped: what HTTP/1.1 servers may do for a header block this size
    assert s.request("ping")["result"] == {}
    assert slow.proc.alive()


# ---------------------------------------------------------------------------
# Sessions opened and abandoned by the hundred
# ---------------------------------------------------------------------------
MAX_SESSIONS = 100
IDLE_SECS = 3
ROUNDS, ATTEMPTS = 2, 800  # 1,600 sessions asked for; the cap and the reaper decide how many open
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "abandoner", "version": "0"}}})


@pytest.fixture(scope="module")
def many(module_facade, start_module_process):
    port = free_port()
    up = start_module_process([sys.executable, str(POLICY_FIXTURE),
                               "--http", str(port)])
    wait_port(port, proc=up)
    return module_facade(upstream_url=f"http://127.0.0.1:{port}/mcp",
                         policy=policy_doc(auth={"anonymous": {"role": "user"}}, defaultAction="allow"),
                         extra_args=["--max-sessions", str(MAX_SESSIONS), "--idle-timeout-secs",
                                     str(IDLE_SECS), "--drain-timeout-secs", "1", *MANY_PER_CALLER])


def abandon_sessions(url: str, n: int, workers: int = 4) -> Counter:
    """Open n sessions (initialize only) and walk away from them."""
    counts: Counter = Counter()
    lock = threading.Lock()
    bodies: dict[int, str] = {}

    def work(k):
        with httpx.Client(timeout=10) as h:
            for _ in range(k):
                r = h.post(url, content=INIT, headers={"Accept": ACCEPT_BOTH, "Content-Type": "application/json"})
                with lock:
                    counts[r.status_code] += 1
                    bodies.setdefault(r.status_code, r.text)

    threads = [threading.Thread(target=work, args=(n // workers,)) for _ in range(workers)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    counts.bodies = bodies
    return counts


def test_thousands_of_abandoned_sessions(many):
    pid = many.proc.proc.pid
    keeper = RawMcp(many.url, timeout=10)
    keeper.initialize(client_name="keeper")
    stop, keeper_errors = threading.Event(), []

    def keep_alive():  # a live client in the middle of it all: never idle, never refused
        while not stop.wait(0.5):
            try:
                assert keeper.request("ping")["result"] == {}
            except Exception as e:  # noqa: BLE001 - reported below
                keeper_errors.append(repr(e))

    pinger = threading.Thread(target=keep_alive, daemon=True)
    pinger.start()
    rss = [rss_kb(pid)]
    opened = refused = 0
    try:
        for rnd in range(ROUNDS):
            counts = abandon_sessions(many.url, ATTEMPTS)
            assert set(counts) <= {200, 503}, dict(counts)
            opened += counts[200]
            refused += counts[503]
            if 503 in counts:
                err = json.loads(counts.bodies[503])["error"]
                assert "session" in err["message"].lower() and str(MAX_SESSIONS) in err["message"], err
            active = metric(many.admin_url, "mcpwarden_sessions_active")
            assert active <= MAX_SESSIONS, active
            # the keeper's session still works while the table is full
            assert keeper.request("ping")["result"] == {}
            # the idle reaper frees the abandoned ones
            deadline = time.monotonic() + IDLE_SECS * 3
            while time.monotonic() < deadline:
                if metric(many.admin_url, "mcpwarden_sessions_active") <= 5:
                    break
                time.sleep(0.5)
            assert metric(many.admin_url, "mcpwarden_sessions_active") <= 5
            rss.append(rss_kb(pid))
        assert opened >= MAX_SESSIONS + 50 and refused > 0, (opened, refused)  # the reaper freed slots
        # memory is bounded: after the first round it stays flat (within 15 MB)
        assert max(rss[1:]) - rss[1] < 15 * 1024, rss
        # and a new client still gets in
        fresh = RawMcp(many.url)
        fresh.initialize()
        assert fresh.request("ping")["result"] == {}
        fresh.close()
        assert keeper_errors == [], keeper_errors[:3]
    finally:
        stop.set()
        pinger.join()
        keeper.close()
