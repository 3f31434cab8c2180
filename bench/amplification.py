"""Bounded amplification (a section of run_bench.py, `--only amplification`).

The facade caps a JSON-RPC batch at `--max-batch-size` (default 16) and each
element passes every budget, so one POST cannot make it hold unbounded work;
and a request body has a size cap. What this measures, against mcp-bench-echo
over HTTP through the allow-all facade (audit off), with a 2025-03-26 session
(the last protocol revision with batches):

  batch RSS      the facade's RSS (VmRSS from /proc, sampled every 10 ms) while
                 one client sends the largest accepted batch (16 `tools/call`
                 echo elements) back to back, against the same facade idle
                 just before; growth = peak - idle, and after = 1 s later - idle
  5 MB RSS       the same while one client sends `tools/call` requests whose
                 argument is 5 MB of text, back to back (whatever the facade
                 answers: a size refusal is fine; the answers are counted)
  batch vs single  over one session at concurrency 1, rounds interleaved: a
                 batch of 16 echo calls per POST vs single calls; per element,
                 the batch's throughput and p50 (POST p50 / 16) against the
                 single calls', each the median over rounds of the same-round ratio

Each RSS measurement gets its own fresh facade, so one does not inherit what
the allocator kept from the other.
"""
from __future__ import annotations

import http.client
import json
import statistics
import threading
import time
from urllib.parse import urlsplit

from common import MESSAGE, MIB, Target, fmt, free_port, log, proc_status_kib, table, wait_port

PROTOCOL = "2025-03-26"  # the last revision with JSON-RPC batches
BATCH = 16               # the facade's default --max-batch-size: the largest batch it accepts
BIG_BYTES = 5_000_000    # "a 5 MB request"
GOALS = {"amplification_rss_growth_mib": 64.0, "batch_per_element_vs_single": 0.80}


def add_arguments(ap) -> None:
    ap.add_argument("--amplification-secs", type=float, default=3.0,
                    help="seconds each amplification RSS load runs (batches, 5 MB requests)")


class RssSampler:
    """The peak of a process's VmRSS while the block runs (a thread reads
    /proc every 10 ms: VmHWM alone would also hold the start-up peak)."""

    def __init__(self, pid: int):
        self.pid, self.peak_kib, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, proc_status_kib(self.pid, "VmRSS:") or 0)
            self._stop.wait(0.01)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def rss_mib(pid: int) -> float:
    return (proc_status_kib(pid, "VmRSS:") or 0) / MIB


class Client:
    """A minimal 2025-03-26 Streamable HTTP client (stdlib): one session, one
    keep-alive connection, reopened when the facade closes it."""

    def __init__(self, url: str):
        u = urlsplit(url)
        self.host, self.port, self.path = u.hostname, u.port, u.path
        self.conn: http.client.HTTPConnection | None = None
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        status, body = self.post(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}))
        if status != 200 or b'"protocolVersion"' not in body:
            raise RuntimeError(f"initialize: HTTP {status}: {body[:300]!r}")
        self.post('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def post(self, body: str | bytes) -> tuple[int, bytes]:
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            self.conn.request("POST", self.path, body=body, headers=self.headers)
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException) as e:  # the facade may refuse before reading it all
            self.conn.close()
            self.conn = None
            return -1, repr(e).encode()
        if sid := r.getheader("Mcp-Session-Id"):
            self.headers["Mcp-Session-Id"] = sid
            self.headers["MCP-Protocol-Version"] = PROTOCOL
        if r.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = None
        return r.status, data

    def close(self) -> None:
        if self.conn:
            self.conn.close()


def big_requests(url: str, secs: float) -> dict:
    """`tools/call` echo with a 5 MB argument, back to back for `secs`: how
    the facade answered (HTTP status and JSON-RPC error code, counted)."""
    text = (MESSAGE + " ") * (BIG_BYTES // (len(MESSAGE) + 1) + 1)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {"message": text[:BIG_BYTES]}}}).encode()
    c, answers, n = Client(url), {}, 0
    deadline = time.monotonic() + secs
    try:
        while time.monotonic() < deadline or n == 0:
            status, data = c.post(body)
            n += 1
            code = None
            try:
                m = json.loads(data)
                m = m[0] if isinstance(m, list) and m else m
                code = (m.get("error") or {}).get("code") if isinstance(m, dict) else None
                kind = "result" if isinstance(m, dict) and "result" in m else f"error {code}"
            except ValueError:
                kind = "not JSON" if status != -1 else "connection closed"
            key = f"HTTP {status}: {kind}"
            answers[key] = answers.get(key, 0) + 1
    finally:
        c.close()
    return {"requests": n, "request_bytes": len(body), "answers": answers}


def over_cap_status(url: str) -> int:
    """The HTTP status of a batch one element over the cap: a refusal (400)
    shows the measured batch is the largest the facade accepts."""
    c = Client(url)
    try:
        calls = [{"jsonrpc": "2.0", "id": i, "method": "tools/call",
                  "params": {"name": "echo", "arguments": {"message": MESSAGE}}} for i in range(BATCH + 1)]
        return c.post(json.dumps(calls))[0]
    finally:
        c.close()


def run(b) -> dict:
    a = b.a
    log(f"== amplification: facade RSS under {BATCH}-call batches and 5 MB requests; batch vs single calls")
    port = free_port()
    up = b.start("amp-echo", [a.echo, "http", "--listen", f"127.0.0.1:{port}"])
    wait_port(port, up)
    upstream = f"http://127.0.0.1:{port}/mcp"
    batch_args = ["--version", PROTOCOL, "--batch", str(BATCH)]
    # The cap stated, not assumed, where the binary knows the flag: the
    # largest batch measured is then the largest the facade accepts.
    cap = ["--max-batch-size", str(BATCH)] if "--max-batch-size" in b.sidecar_help() else []
    res: dict = {"upstream": "mcp-bench-echo (HTTP)", "protocol": PROTOCOL, "batch": BATCH, "facade_args": cap,
                 "big_request_bytes": BIG_BYTES, "load_secs": a.amplification_secs}
    try:
        for phase in ("batch", "big"):
            p, url, _ = b.facade(f"amp-{phase}", upstream_url=upstream, extra=cap)
            time.sleep(0.5)
            idle = rss_mib(p.pid)
            with RssSampler(p.pid) as s:
                if phase == "batch":
                    t = Target("facade-allow", "facade", "http", url, p.pid)
                    out = b.load(t, 1, a.amplification_secs, 0.0, 10_000_000, expect=MESSAGE, sessions=1,
                                 extra=batch_args)
                    load = {"posts": out.get("ok"), "errors": out.get("errors"),
                            "failed": out.get("failed"), "error_samples": out.get("error_samples")}
                else:
                    load = big_requests(url, a.amplification_secs)
            time.sleep(1.0)
            rec = {"idle_rss_mib": idle, "peak_rss_mib": s.peak_kib / MIB, "growth_mib": s.peak_kib / MIB - idle,
                   "after_rss_mib": rss_mib(p.pid), "after_growth_mib": rss_mib(p.pid) - idle,
                   "vmhwm_mib": (proc_status_kib(p.pid, "VmHWM:") or 0) / MIB,
                   **{k: v for k, v in load.items() if v is not None}}
            res[f"{phase}_rss"] = rec
            log(f"   {phase}: idle {fmt(idle, 1)} MiB, peak {fmt(rec['peak_rss_mib'], 1)} MiB "
                f"(+{fmt(rec['growth_mib'], 1)}), after {fmt(rec['after_rss_mib'], 1)} MiB; {load}")
            if phase == "batch":
                res["over_cap_batch_http_status"] = over_cap_status(url)
                res["batch_vs_single"] = batch_vs_single(b, Target("facade-allow", "facade", "http", url, p.pid),
                                                         batch_args)
            p.stop()
            b.procs.remove(p)
    finally:
        b.stop_all()
    return res


def batch_vs_single(b, t: Target, batch_args: list[str]) -> dict:
    """16 calls in one POST vs 16 POSTs of one call, one session, c=1, rounds
    interleaved; per element."""
    a = b.a
    runs: dict = {"single": [], "batch": []}
    for r in range(a.rounds):
        for name, extra in (("single", ["--version", PROTOCOL]), ("batch", batch_args)):
            out = b.load(t, 1, a.duration, a.warmup, a.requests_c1, expect=MESSAGE, sessions=1, extra=extra)
            if "failed" in out or not out.get("ok"):
                log(f"   batch-vs-single round {r} {name}: FAILED {str(out.get('failed') or out)[:300]}")
            runs[name].append(out)
    per = BATCH
    pairs = [(bt, sg) for bt, sg in zip(runs["batch"], runs["single"])
             if bt.get("ok") and sg.get("ok") and "failed" not in bt and "failed" not in sg]
    res: dict = {"rounds": len(pairs)}
    if not pairs:
        res["failed"] = next((str(o.get("failed") or o.get("error_samples")) for o in runs["batch"] + runs["single"]
                              if "failed" in o or not o.get("ok")), "no rounds")
        return res
    med = statistics.median
    res.update({
        "single_rps": med(sg["throughput_rps"] for _, sg in pairs),
        "single_p50_us": med(sg["latency_us"]["p50"] for _, sg in pairs),
        "batch_elements_per_s": med(bt["throughput_rps"] * per for bt, _ in pairs),
        "batch_p50_us_per_element": med(bt["latency_us"]["p50"] / per for bt, _ in pairs),
        "batch_post_p50_us": med(bt["latency_us"]["p50"] for bt, _ in pairs),
        # The same-round ratios: > 1 for throughput and < 1 for latency is the batch doing better.
        "tput_ratio": med(bt["throughput_rps"] * per / sg["throughput_rps"] for bt, sg in pairs),
        "p50_ratio": med(bt["latency_us"]["p50"] / per / sg["latency_us"]["p50"] for bt, sg in pairs),
        "errors": sum(o.get("errors", 0) for o in runs["batch"] + runs["single"] if "failed" not in o),
    })
    log(f"   batch vs single (per element): throughput x{res['tput_ratio']:.3f}, p50 x{res['p50_ratio']:.3f}")
    return res


def goals(res: dict) -> list[dict]:
    amp = res.get("amplification")
    if amp is None:
        return []
    out = []
    limit = GOALS["amplification_rss_growth_mib"]
    for phase, what in (("batch", f"{BATCH}-call batches"), ("big", "5 MB requests")):
        r = amp.get(f"{phase}_rss", {})
        ok = "growth_mib" in r and max(r["growth_mib"], r["after_growth_mib"]) < limit
        out.append({"goal": f"facade RSS grows < {limit:.0f} MiB under {what} (vs the same facade idle)",
                    "value": round(r["growth_mib"], 1) if "growth_mib" in r else None, "limit": limit, "met": ok,
                    "detail": (f"peak {fmt(r.get('peak_rss_mib'), 1)} MiB, idle {fmt(r.get('idle_rss_mib'), 1)} MiB, "
                               f"1 s after {fmt(r.get('after_rss_mib'), 1)} MiB") if r else "missing measurement"})
    bs, lim = amp.get("batch_vs_single", {}), GOALS["batch_per_element_vs_single"]
    out.append({"goal": f"a batch of {BATCH} within 20% of single calls per element (throughput, c=1)",
                "value": round(bs["tput_ratio"], 3) if "tput_ratio" in bs else None, "limit": lim,
                "met": bs.get("tput_ratio", 0) >= lim,
                "detail": (f"per-element p50 ratio {fmt(bs['p50_ratio'], 3)}; median over rounds of "
                           "(batch / single) in the same round") if "tput_ratio" in bs
                else f"missing measurement: {bs.get('failed', '')[:200]}"})
    return out


def print_tables(res: dict) -> None:
    amp = res.get("amplification")
    if not amp:
        return
    print(f"\n### bounded amplification ({amp['upstream']}, allow-all facade, protocol {amp['protocol']}; "
          f"each load {amp['load_secs']} s; growth against the same facade idle)")
    rows = [("load", "idle MiB", "peak MiB", "growth MiB", "1 s after MiB", "VmHWM MiB", "answers")]
    for phase, what in (("batch", f"batches of {amp['batch']} echo calls"),
                        ("big", f"{amp['big_request_bytes']:,}-byte tools/call")):
        r = amp.get(f"{phase}_rss", {})
        answers = (f"{r.get('posts')} POSTs, {r.get('errors')} errors" if phase == "batch"
                   else ", ".join(f"{k} x{v}" for k, v in r.get("answers", {}).items()))
        rows.append((what, fmt(r.get("idle_rss_mib"), 1), fmt(r.get("peak_rss_mib"), 1), fmt(r.get("growth_mib"), 1),
                     fmt(r.get("after_rss_mib"), 1), fmt(r.get("vmhwm_mib"), 1), answers))
    table(rows)
    print(f"(a batch of {amp['batch'] + 1} got HTTP {amp.get('over_cap_batch_http_status')}: "
          f"{amp['batch']} is the largest the facade accepts when that is 400)")
    bs = amp.get("batch_vs_single", {})
    if "tput_ratio" in bs:
        print(f"\n### a batch of {amp['batch']} vs single calls (one session, c=1, per element; ratio = median "
              "over rounds of batch / single in the same round)")
        table([("", "calls/s per element", "p50 µs per element"),
               ("single", fmt(bs["single_rps"]), fmt(bs["single_p50_us"], 1)),
               (f"batch of {amp['batch']}", fmt(bs["batch_elements_per_s"]), fmt(bs["batch_p50_us_per_element"], 1)),
               ("ratio", fmt(bs["tput_ratio"], 3), fmt(bs["p50_ratio"], 3))])
