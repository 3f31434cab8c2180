#!/usr/bin/env python3
"""Soak test (`make soak`, not part of `make test`): bounded mixed
load through the facade, with the upstream servers killed on a schedule.

    .venv/bin/python tests/soak/soak.py --seconds 600 [--sessions 6] [--kill-every 5]

The facade ($MCP_WARDEN_SIDECAR, else target/debug) runs in front of
tests/fixtures/stdio_fixture.py (one process per session), on loopback.
Load, all bounded by --seconds:
- long-lived sessions, each with worker threads: echo, short sleeps,
  progress (SSE), tools/list, ping, resources/read;
- session churn: short sessions opened, used and ended (DELETE), some
  abandoned to the idle reaper;
- bad input now and then (malformed JSON, unknown session);
- a killer SIGKILLs a session's server every --kill-every seconds, with a
  call in flight.
Every request is counted: sent vs answered (lost must be 0). RSS, open fds
and live sessions are sampled every --sample-every seconds.

Exit status 0 only when nothing was lost or answered twice, every error was
a clear one, and RSS stayed flat (last sample within --rss-slack-mb of the
median of the first quarter, after warm-up).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
sys.path[:0] = [str(TESTS), str(TESTS / "e2e")]

import httpx  # noqa: E402

from conftest import free_port, sidecar_path, wait_http_ok  # noqa: E402
from hardening_helpers import Ledger, fd_count, one_request, pid_alive, rss_kb  # noqa: E402
from helpers import RawMcp, fixture_stdio, metric  # noqa: E402


ROTATE_EVERY = 400  # requests by one worker before its session is replaced


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600)))
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--workers-per-session", type=int, default=2)
    ap.add_argument("--kill-every", type=float, default=5.0)
    ap.add_argument("--churn-every", type=float, default=1.0)
    ap.add_argument("--sample-every", type=float, default=5.0)
    ap.add_argument("--rss-slack-mb", type=float, default=20.0)
    ap.add_argument("--report", help="also write the report as JSON to this file")
    args = ap.parse_args()

    binary = sidecar_path()
    if not binary.exists():
        print(f"{binary} does not exist: cargo build -p mcp-warden-sidecar", file=sys.stderr)
        return 2
    port, admin = free_port(), free_port()
    # Budgets high enough that the soak measures the data path, not the
    # per-session call budget (long-lived sessions are also rotated below).
    policy = tempfile.NamedTemporaryFile("w", prefix="soak-policy-", suffix=".yaml", delete=False)
    policy.write(json.dumps({
        "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "FacadePolicy",
        "defaultAction": "allow", "riskCeiling": "critical", "sandbox": {"writeAllowed": True},
        "auth": {"anonymous": {"role": "admin"}},
        "limits": {"maxCallsPerSession": 100000, "callsPerMinute": 100000, "callTimeoutSeconds": 30},
    }))
    policy.close()
    log = tempfile.NamedTemporaryFile("w+", prefix="soak-facade-", suffix=".log", delete=False)
    cmd = [str(binary), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
           "--max-restarts", "1000", "--restart-backoff-ms", "50", "--restart-backoff-max-ms", "1000",
           "--idle-timeout-secs", "10", "--audit", "off", "--drain-timeout-secs", "1",
           "--policy", policy.name,
           "--", *fixture_stdio()]
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
    url, admin_url = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{admin}"
    try:
        wait_http_ok(f"{admin_url}/readyz", 30)
        report = run(args, proc.pid, url, admin_url)
    finally:
        alive = proc.poll() is None
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
    report["facade_alive_at_end"] = alive
    report["facade_log"] = log.name
    print_report(report)
    if args.report:
        Path(args.report).write_text(json.dumps(report, indent=2))
    return 0 if report["verdict"] == "PASS" and alive else 1


def run(args, facade_pid: int, url: str, admin_url: str) -> dict:
    ledger = Ledger()
    stop = threading.Event()
    t_start = time.monotonic()
    deadline = t_start + args.seconds
    sessions = []
    for i in range(args.sessions):
        s = RawMcp(url, timeout=30)
        s.initialize(client_name=f"soak-{i}")
        sessions.append(s)
    samples: list[dict] = []
    kills: list[int] = []
    churn = {"opened": 0, "ended": 0, "abandoned": 0, "refused": 0, "rotated": 0}
    bad = {"sent": 0, "clear": 0, "unclear": 0}
    in_flight = {"failed_clearly": 0, "other": 0}
    lock = threading.Lock()

    def rotate(slot: int) -> RawMcp:
        """End a long-lived session and put a fresh one in its place."""
        old = sessions[slot]
        new = RawMcp(url, timeout=30)
        new.initialize(client_name=f"soak-{slot}")
        sessions[slot] = new
        with lock:
            churn["rotated"] += 1
        try:
            old.delete()
        except httpx.HTTPError:
            pass
        return new

    def worker(slot: int, seed: int):
        rnd = random.Random(seed)
        s = sessions[slot]
        n = 0
        while not stop.is_set():
            n += 1
            if seed % 2 == 0 and n % ROTATE_EVERY == 0:  # one worker per slot rotates its session
                s = rotate(slot)
            elif sessions[slot] is not s:
                s = sessions[slot]
            p = rnd.random()
            if p < 0.45:
                one_request(s, ledger, "tools/call", {"name": "echo", "arguments": {"text": f"soak {seed}"}})
            elif p < 0.60:
                one_request(s, ledger, "tools/call",
                            {"name": "sleep", "arguments": {"seconds": round(rnd.uniform(0.05, 0.4), 2)}})
            elif p < 0.70:
                one_request(s, ledger, "tools/call", {"name": "progress", "arguments": {"steps": 3},
                                                      "_meta": {"progressToken": f"p-{seed}-{rnd.random()}"}})
            elif p < 0.80:
                one_request(s, ledger, "tools/list", None)
            elif p < 0.92:
                one_request(s, ledger, "ping", None)
            else:
                one_request(s, ledger, "resources/read", {"uri": f"fixture://item/{rnd.randrange(5)}"})

    def churner():
        rnd = random.Random(99)
        while not stop.wait(args.churn_every):
            s = RawMcp(url, timeout=30)
            try:
                try:
                    s.initialize(client_name="churn")
                except AssertionError as e:
                    with lock:
                        churn["refused"] += 1
                    print(f"churn: initialize refused: {e}", file=sys.stderr)
                    continue
                with lock:
                    churn["opened"] += 1
                for _ in range(rnd.randrange(1, 6)):
                    one_request(s, ledger, "tools/call", {"name": "echo", "arguments": {"text": "churn"}})
                # bad input: must get a clear 400 and not hurt the session
                raw = rnd.choice([b"{not json", b'{"jsonrpc":"2.0","id":1,"method":', b"[]", b'"x"',
                                  b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}'])
                with lock:
                    bad["sent"] += 1
                try:
                    r = s.http.post(url, content=raw, headers=s.headers(), timeout=10)
                    ok = r.status_code == 400 and r.json()["error"]["code"] in (-32700, -32600)
                except (httpx.HTTPError, ValueError, KeyError):
                    ok = False
                with lock:
                    bad["clear" if ok else "unclear"] += 1
                if rnd.random() < 0.8:
                    s.delete()
                    with lock:
                        churn["ended"] += 1
                else:
                    with lock:
                        churn["abandoned"] += 1  # left to the idle reaper
            finally:
                s.close()

    def killer():
        rnd = random.Random(7)
        side = []
        while not stop.wait(args.kill_every * rnd.uniform(0.7, 1.3)):
            s = rnd.choice(sessions)
            msg = one_request(s, ledger, "tools/call", {"name": "whoami", "arguments": {}})
            if not msg or "result" not in msg:
                continue
            pid = json.loads(msg["result"]["content"][0]["text"])["pid"]
            if pid in kills or not pid_alive(pid):
                continue
            box = {}
            t = threading.Thread(target=lambda: box.setdefault("m", one_request(
                s, ledger, "tools/call", {"name": "sleep", "arguments": {"seconds": 5}})))
            t.start()
            time.sleep(0.15)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            kills.append(pid)
            t.join(30)
            m = box.get("m") or {}
            err = m.get("error") or {}
            if err.get("code") == -32603 and (err.get("data") or {}).get("reason") == "upstream_failed":
                kind = "failed_clearly"
            elif "result" in m:
                kind = "reached_the_restarted_server"  # sent just after the kill: fine
            else:
                kind = "other"
            with lock:
                in_flight[kind] = in_flight.get(kind, 0) + 1
            side.append(t)

    def sampler():
        while True:
            try:
                active = metric(admin_url, "mcpwarden_sessions_active")
            except Exception:  # noqa: BLE001 - the facade may be busy; sample what we can
                active = None
            samples.append({"t": round(time.monotonic() - t_start, 1), "rss_kb": rss_kb(facade_pid),
                            "fds": fd_count(facade_pid), "sessions": active,
                            "sent": ledger.sent, "answered": ledger.answered})
            if stop.wait(args.sample_every):
                break

    threads = [threading.Thread(target=worker, args=(i, i * 100 + k), daemon=True)
               for i in range(len(sessions)) for k in range(args.workers_per_session)]
    threads += [threading.Thread(target=f, daemon=True) for f in (churner, killer, sampler)]
    for t in threads:
        t.start()
    last_print = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(1)
        if time.monotonic() - last_print >= 30:
            last_print = time.monotonic()
            s = samples[-1]
            print(f"[{s['t']:>6}s] sent={ledger.sent} answered={ledger.answered} kills={len(kills)} "
                  f"rss={s['rss_kb'] // 1024} MB fds={s['fds']} sessions={s['sessions']}", flush=True)
    stop.set()
    stuck = 0
    for t in threads:
        t.join(60)
        stuck += t.is_alive()

    # every long-lived session recovers
    recovered = 0
    for s in list(sessions):
        until = time.monotonic() + 15
        while time.monotonic() < until:
            m = one_request(s, ledger, "tools/call", {"name": "echo", "arguments": {"text": "final"}})
            if m and "result" in m:
                recovered += 1
                break
            time.sleep(0.2)
        s.close()

    restarts = metric(admin_url, "mcpwarden_upstream_restarts_total")
    rss = [x["rss_kb"] for x in samples]
    warm = max(1, len(rss) // 4)
    baseline = statistics.median(rss[1:warm + 1] or rss)
    growth_mb = (rss[-1] - baseline) / 1024
    errors = {k: v for k, v in ledger.kinds.items() if k not in ("ok",)}
    lost = ledger.sent - ledger.answered
    verdict_checks = {
        "no_lost_responses": lost == 0 and ledger.kinds["lost"] == 0,
        "no_duplicates": ledger.kinds["duplicated"] == 0,
        "no_stuck_threads": stuck == 0,
        "errors_clear": not ledger.problems,
        "bad_input_clear": bad["unclear"] == 0,
        "in_flight_failed_clearly": in_flight["other"] == 0,
        "sessions_recovered": recovered == len(sessions),
        "rss_flat": growth_mb <= args.rss_slack_mb,
    }
    return {
        "seconds": args.seconds,
        "requests_sent": ledger.sent,
        "responses_received": ledger.answered,
        "lost_responses": lost,
        "outcomes": dict(ledger.kinds),
        "errors_by_kind": errors,
        "unclear_errors": ledger.problems,
        "kills": len(kills),
        "upstream_restarts": restarts,
        "in_flight_at_kill": in_flight,
        "churn": churn,
        "bad_input": bad,
        "rss_mb": {"first": round(rss[0] / 1024, 1), "baseline": round(baseline / 1024, 1),
                   "min": round(min(rss) / 1024, 1), "max": round(max(rss) / 1024, 1),
                   "last": round(rss[-1] / 1024, 1), "growth_after_warmup": round(growth_mb, 1)},
        "fds": {"first": samples[0]["fds"], "max": max(x["fds"] for x in samples), "last": samples[-1]["fds"]},
        "samples": samples,
        "checks": verdict_checks,
        "verdict": "PASS" if all(verdict_checks.values()) else "FAIL",
    }


def print_report(r: dict) -> None:
    print("\n=== soak report ===")
    for k in ("seconds", "requests_sent", "responses_received", "lost_responses", "kills",
              "upstream_restarts", "in_flight_at_kill", "churn", "bad_input", "errors_by_kind",
              "rss_mb", "fds", "facade_alive_at_end"):
        print(f"{k:>20}: {r.get(k)}")
    step = max(1, len(r["samples"]) // 12)
    print("      RSS over time: " + ", ".join(f"{s['t']:.0f}s={s['rss_kb'] // 1024}MB"
                                             for s in r["samples"][::step]))
    if r["unclear_errors"]:
        print("     unclear errors: " + "\n  ".join(r["unclear_errors"][:10]))
    print(f"{'checks':>20}: {r['checks']}")
    print(f"{'verdict':>20}: {r['verdict']}  (facade log: {r.get('facade_log')})")


if __name__ == "__main__":
    sys.exit(main())
