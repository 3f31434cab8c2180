"""The gateway hop (a section of run_bench.py, `--only gateway`).

Three targets in front of the same mcp-bench-echo over HTTP, interleaved
round by round at concurrency 1 and 16 in one run:

    direct   the echo server's own endpoint
    backend  a facade in front of it (--upstream-url, allow-all, audit off)
    backend-modern  the same backend facade, driven by stateless 2026-07-28
             requests (how the gateway speaks to it)
    gateway-modern  the same gateway, driven by stateless requests
    gateway  a facade in gateway mode in front of that backend facade
             (--backend echo=URL, prefix none, allow-all, audit off):
             client -> gateway -> backend facade -> server

Reported per level: p50, p99 and calls/s of each; the backend facade's own
overhead over direct and the gateway hop's over the backend (each the median
over rounds of the same-round difference, p50 and p99), and the ratio of the
two at the median. The `gateway` and `backend` rows use a legacy (2025-11-25
session) client, but behind the gateway the backend serves stateless
2026-07-28 requests: the hop between rows of the same client era (modern:
`gateway-modern` over `backend-modern`) is reported beside it. The goal: the gateway hop adds no more at the median
than the backend facade's own overhead over the direct server.
"""
from __future__ import annotations

from common import MESSAGE, Target, aggregate, fmt, free_port, log, paired_vs, table, wait_port

GOALS = {"gateway_hop_over_facade_overhead_p50": 1.0}
VARIANTS = ("direct", "backend", "backend-modern", "gateway", "gateway-modern")


def run(b, levels=(1, 16)) -> dict:
    a = b.a
    log("== gateway hop: client -> gateway -> backend facade -> mcp-bench-echo, vs the backend alone, vs direct")
    port = free_port()
    up = b.start("gw-echo", [a.echo, "http", "--listen", f"127.0.0.1:{port}"])
    wait_port(port, up)
    direct_url = f"http://127.0.0.1:{port}/mcp"
    res: dict = {"levels": {}, "upstream": "mcp-bench-echo (HTTP)",
                 "note": "allow-all facades, audit off; the gateway's one backend has prefix none"}
    try:
        p, backend_url, _ = b.facade("gw-backend", upstream_url=direct_url)
        backend = Target("backend", "facade", "http", backend_url, p.pid, note="facade --upstream-url")
        p, gateway_url, _ = b.facade("gw-gateway", extra=["--backend", f"echo={backend_url}",
                                                          "--backend-prefix", "echo=none"])
        gateway = Target("gateway", "facade", "http", gateway_url, p.pid, note="facade --backend (gateway mode)")
        direct = Target("direct", "direct", "http", direct_url, up.pid, note="the server's own endpoint")
        # The backend as the gateway speaks to it: stateless 2026-07-28
        # requests (no session), which is part of what the hop costs.
        modern = Target("backend-modern", "facade", "http", backend_url, backend.watch_pid, modern=True,
                        note="the backend facade, modern (stateless) client")
        gateway_modern = Target("gateway-modern", "facade", "http", gateway_url, gateway.watch_pid, modern=True,
                                note="the gateway, modern (stateless) client")
        targets = [direct, backend, modern, gateway, gateway_modern]
        for c in levels:
            runs: dict = {t.name: [] for t in targets}
            for r in range(a.rounds):
                for t in targets:
                    n = a.requests_c1 if c == 1 else a.requests
                    out = b.load(t, c, a.duration, a.warmup, n, expect=MESSAGE, sessions=min(c, 16))
                    if "failed" in out:
                        log(f"   gateway c={c} round {r} {t.name}: FAILED {out['failed'][:300]}")
                    runs[t.name].append(out)
            level = {name: aggregate(rs) for name, rs in runs.items()}
            summary = {"backend_vs_direct": paired_vs(runs["backend"], runs["direct"]),
                       "gateway_vs_backend": paired_vs(runs["gateway"], runs["backend"]),
                       "gateway_vs_direct": paired_vs(runs["gateway"], runs["direct"]),
                       "backend_modern_vs_backend": paired_vs(runs["backend-modern"], runs["backend"]),
                       "gateway_modern_vs_backend_modern": paired_vs(runs["gateway-modern"], runs["backend-modern"])}
            own = summary["backend_vs_direct"].get("added_p50_us")
            hop = summary["gateway_vs_backend"].get("added_p50_us")
            if own and hop is not None:
                summary["hop_over_facade_p50"] = hop / own
            level["summary"] = summary
            res["levels"][str(c)] = level
            log(f"   c={c:<3} " + "  ".join(f"{n} p50={fmt(level[n].get('p50_us'))}us" for n in VARIANTS)
                + f"  facade +{fmt(own)}us  gateway hop +{fmt(hop)}us")
    finally:
        b.stop_all()
    return res


def goals(res: dict) -> list[dict]:
    gw = res.get("gateway")
    if gw is None:
        return []
    out = []
    limit = GOALS["gateway_hop_over_facade_overhead_p50"]
    for c, level in gw["levels"].items():
        s = level.get("summary", {})
        ratio = s.get("hop_over_facade_p50")
        out.append({"goal": f"gateway hop adds <= the backend facade's own overhead at p50 (c={c})",
                    "value": round(ratio, 3) if ratio is not None else None, "limit": limit,
                    "met": ratio is not None and ratio <= limit,
                    "detail": (f"hop +{fmt(s['gateway_vs_backend'].get('added_p50_us'))} µs vs facade "
                               f"+{fmt(s['backend_vs_direct'].get('added_p50_us'))} µs; median over rounds of "
                               "the same-round difference") if ratio is not None else "missing measurement"})
    return out


def print_tables(res: dict) -> None:
    gw = res.get("gateway")
    if not gw:
        return
    print(f"\n### gateway hop ({gw['upstream']}; {gw['note']})")
    print("(added: the median over rounds of the same-round difference; hop/facade: the gateway hop's added "
          "p50 over the backend facade's own added p50)")
    rows = [("target", "c", "p50 µs", "p99 µs", "calls/s", "cpu µs/call", "err")]
    for c, level in gw["levels"].items():
        for name in VARIANTS:
            v = level.get(name, {})
            if "p50_us" not in v:
                rows.append((name, c, "FAILED", "", "", "", ""))
                continue
            rows.append((name, c, fmt(v["p50_us"]), fmt(v["p99_us"]), fmt(v["rps"]), fmt(v["cpu_us_per_call"], 1),
                         str(v["errors"])))
    table(rows)
    rows = [("c", "facade over direct +p50/+p99 µs", "gateway hop +p50/+p99 µs", "hop/facade p50",
             "gateway vs direct rps", "backend modern vs legacy +p50 µs", "hop, modern rows +p50 µs")]
    for c, level in gw["levels"].items():
        s = level.get("summary", {})
        f, h, d = s.get("backend_vs_direct", {}), s.get("gateway_vs_backend", {}), s.get("gateway_vs_direct", {})
        rows.append((c, f"{fmt(f.get('added_p50_us'))} / {fmt(f.get('added_p99_us'))}",
                     f"{fmt(h.get('added_p50_us'))} / {fmt(h.get('added_p99_us'))}",
                     fmt(s.get("hop_over_facade_p50"), 2), fmt(d.get("rps_ratio"), 3),
                     fmt(s.get("backend_modern_vs_backend", {}).get("added_p50_us")),
                     fmt(s.get("gateway_modern_vs_backend_modern", {}).get("added_p50_us"))))
    table(rows)
