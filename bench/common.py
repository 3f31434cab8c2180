"""Shared by the benchmark harness's sections (run_bench.py and the section
modules beside it): the processes it starts, /proc readings, what a target is,
and how rounds are aggregated and compared. Stdlib only: it runs in bench/.venv,
which holds mcp-proxy's `mcp` 1.x, not the tests' packages."""
from __future__ import annotations

import contextlib
import hashlib
import threading
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


MESSAGE = "The quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ."
TOKEN = "bench-token-0123456789abcdef0123456789abcdef"
MIB = 1024.0

def log(*a) -> None:
    print("[bench]", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Processes (the same pattern as tests/conftest.py)
# ---------------------------------------------------------------------------
class Proc:
    def __init__(self, name: str, cmd: list[str], env: dict | None = None, cwd: Path | None = None):
        self.name = name
        self.cmd = [str(c) for c in cmd]
        self.log = tempfile.NamedTemporaryFile("w+", prefix=f"bench-{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(self.cmd, env={**os.environ, **(env or {})}, cwd=cwd or ROOT,
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 3000) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-n:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.log.name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: Proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited ({proc.proc.returncode}):\n{proc.tail()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"{proc.name}: nothing on 127.0.0.1:{port} after {timeout}s\n{proc.tail()}")


def wait_http_ok(url: str, proc: Proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited ({proc.proc.returncode}):\n{proc.tail()}")
        with contextlib.suppress(OSError):
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name}: {url} not ready after {timeout}s\n{proc.tail()}")


def metric_sum(admin_url: str, name: str) -> float | None:
    """Sum of the samples of one Prometheus metric on the facade's admin port."""
    with contextlib.suppress(OSError, ValueError):
        with urllib.request.urlopen(f"{admin_url}/metrics", timeout=5) as r:
            text = r.read().decode()
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name) and (line[len(name)] in " {"))
    return None


def proc_status_kib(pid: int, key: str) -> int | None:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    return None


def children_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (d / "stat").read_text()
                if int(stat[stat.rfind(")") + 2:].split()[1]) == pid:
                    out.append(int(d.name))
    return out


# ---------------------------------------------------------------------------
# Targets and aggregation
# ---------------------------------------------------------------------------
@dataclass
class Target:
    name: str
    kind: str               # direct | facade | peer
    transport: str          # upstream transport: http | stdio
    url: str
    watch_pid: int          # the proxy's (or, for direct, the server's) pid
    headers: list[str] = field(default_factory=list)
    note: str = ""
    policy: bool = False
    modern: bool = False    # the load speaks 2026-07-28 (no sessions)



def aggregate(runs: list[dict]) -> dict:
    good = [r for r in runs if "failed" not in r]
    if not good:
        return {"failed": runs[0].get("failed") if runs else "no runs"}
    med = lambda xs: statistics.median(xs)  # noqa: E731
    calls = sum(r["ok"] + r["errors"] for r in good)
    return {
        "rounds": len(good),
        "p50_us": med([r["latency_us"]["p50"] for r in good]),
        "p90_us": med([r["latency_us"]["p90"] for r in good]),
        "p99_us": med([r["latency_us"]["p99"] for r in good]),
        "mean_us": med([r["latency_us"]["mean"] for r in good]),
        "rps": med([r["throughput_rps"] for r in good]),
        "ok": sum(r["ok"] for r in good),
        "errors": sum(r["errors"] for r in good),
        "error_samples": sorted({e for r in good for e in r["error_samples"]})[:3],
        "cpu_us_per_call": sum(r["cpu_us_per_call"] * (r["ok"] + r["errors"]) for r in good) / max(calls, 1),
        "cpu_tree_us_per_call": sum(r["cpu_tree_us_per_call"] * (r["ok"] + r["errors"]) for r in good)
        / max(calls, 1),
        "peak_rss_mib": max(r["vmhwm_mib"] for r in good),
        "client_cpu_us_per_call": sum((r["client_cpu_us_per_call"] or 0) * (r["ok"] + r["errors"]) for r in good)
        / max(calls, 1),
        "sessions": good[0]["sessions"],
        "per_round": [{k: r[k] for k in ("ok", "errors", "throughput_rps", "latency_us")} for r in good],
    }


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------
def fmt(v, nd: int = 0) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return f"{v:,.{nd}f}"


def human_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def paired_vs(runs: list[dict], base: list[dict]) -> dict:
    """Against `base`, round by round (the rounds interleave the variants in
    time, so each pair saw the same machine load): the median difference."""
    pairs = [(a, b) for a, b in zip(runs, base) if "failed" not in a and "failed" not in b]
    if not pairs:
        return {}
    med = statistics.median
    return {
        "added_p50_us": med(a["latency_us"]["p50"] - b["latency_us"]["p50"] for a, b in pairs),
        "added_p99_us": med(a["latency_us"]["p99"] - b["latency_us"]["p99"] for a, b in pairs),
        "rps_ratio": med(a["throughput_rps"] / b["throughput_rps"] for a, b in pairs if b["throughput_rps"]),
        "added_cpu_us_per_call": med(a["cpu_us_per_call"] - b["cpu_us_per_call"] for a, b in pairs),
        "rounds": len(pairs),
    }


def table(rows: list[tuple], left_first: bool = True) -> None:
    """A Markdown table; the first row is the header."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for i, r in enumerate(rows):
        print("| " + " | ".join(str(x).rjust(w) if (j or not left_first) else str(x).ljust(w)
                                for j, (x, w) in enumerate(zip(r, widths))) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")


# ---------------------------------------------------------------------------
# What the facades are given, and the stand-in OTLP collector
# ---------------------------------------------------------------------------
def realistic_policy(path: Path, audit_tool: str = "echo") -> None:
    """defaultAction deny; the one tool allowed for role `user`, with an argument
    rule; a static token; redaction (default on); output cap; budgets set high
    so they are evaluated but never trip during a benchmark."""
    sha = hashlib.sha256(TOKEN.encode()).hexdigest()
    path.write_text(f"""\
apiVersion: mcpwarden.dev/v1alpha1
kind: FacadePolicy
defaultAction: deny
auth:
  staticTokens:
    tokens:
      - {{sha256: "{sha}", subject: bench, groups: [agents]}}
roles:
  - {{role: user, groups: [agents]}}
tools:
  - name: {audit_tool}
    requiredRole: user
    arguments:
      - name: message
        kind: string
        allow: ['^[ -~]{{0,4096}}$']
        deny: ['(?i)drop\\s+table', '(?i)rm\\s+-rf']
        otherwise: deny
    limits: {{maxOutputBytes: 65536, callTimeoutSeconds: 30}}
limits:
  maxArgBytes: 65536
  maxCallsPerSession: 100000000
  callsPerMinute: 1000000000
  maxConcurrentCalls: 1024
  maxConcurrentCallsTotal: 8192
redaction: {{enabled: true}}
""")


def allow_all_policy(path: Path) -> None:
    """`FacadePolicy::allow_all()` (what the facade runs without --policy) with
    the budgets lifted: its defaults (600 calls/min and 1,000 calls per session)
    would refuse a benchmark's calls within a second."""
    path.write_text("""\
apiVersion: mcpwarden.dev/v1alpha1
kind: FacadePolicy
defaultAction: allow
cleanSchemas: false
quarantineOnDrift: false
poisoningScan: warn
riskCeiling: critical
auth: {anonymous: {role: admin}}
sandbox: {writeAllowed: true}
limits: {maxCallsPerSession: 100000000, callsPerMinute: 1000000000, maxConcurrentCalls: 1024, maxConcurrentCallsTotal: 8192}
""")


class OtlpSink:
    """A stand-in OTLP/HTTP collector on loopback: answers every export with an
    empty ExportTraceServiceResponse (200) and counts requests and bytes. It
    does not decode: what is measured is the facade's cost, not a collector's."""

    def __init__(self):
        sink = self
        self.requests = 0
        self.bytes = 0
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                n = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(n)
                with sink.lock:
                    sink.requests += 1
                    sink.bytes += n
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
