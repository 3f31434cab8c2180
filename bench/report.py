"""The harness's report (run_bench.py): ratios against `direct` and peers,
the goal rows, the tables printed at the end and the plot. The section
modules (amplification.py, before_after.py, gateway.py) add their own goals and tables."""
from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import amplification
import before_after
import gateway
from common import fmt, human_ns, log

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
    """Every goal row: the harness's, then the sections'."""
    out = []

    def g(name, value, limit, ok, detail=""):
        out.append({"goal": name, "value": value, "limit": limit, "met": bool(ok), "detail": detail})

    echo = res["runs"].get("echo", {}).get("levels", {})
    try:
        if "echo" in res["runs"]:  # not when the section was not run (--only, --skip)
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
    return out + amplification.goals(res) + before_after.goals(res) + gateway.goals(res)


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
    amplification.print_tables(res)
    before_after.print_tables(res)
    gateway.print_tables(res)
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
