"""Before/after a facade change (a section of run_bench.py, `--only before-after`).

The allow-all facade (audit off) in front of mcp-bench-echo over HTTP, as in
the tracing section, in three copies interleaved round by round at concurrency
1 and 16: `after` (the binary under test, --sidecar), `after-again` (the same
binary and settings: its distance from `after` is the noise floor) and
`before` (an older release build, --before-sidecar). Reported per level: the
throughput loss of `after` against `before` (1 - the median over rounds of
after/before in the same round) and the noise floor (|1 - the median over
rounds of after-again/after|); the goal is loss <= noise floor + 5%.

Both binaries get the same policy file and only the flags both know (the
harness reads each binary's `run --help`).
"""
from __future__ import annotations

import statistics
from pathlib import Path

from common import MESSAGE, Target, aggregate, fmt, free_port, log, paired_vs, table, wait_port

GOALS = {"before_after_loss_over_noise": 0.05}
VARIANTS = ("after", "after-again", "before")


def add_arguments(ap) -> None:
    ap.add_argument("--before-sidecar", default=None,
                    help="a release mcp-warden-sidecar of the older commit to compare with (bench/README.md: "
                         "how to build it); without it the before/after section is skipped")


def run(b, levels=(1, 16)) -> dict:
    a = b.a
    before = str(Path(a.before_sidecar).resolve())
    log(f"== before/after: {a.sidecar} (after, after-again) vs {before} (before)")
    port = free_port()
    up = b.start("ba-echo", [a.echo, "http", "--listen", f"127.0.0.1:{port}"])
    wait_port(port, up)
    upstream = f"http://127.0.0.1:{port}/mcp"
    binaries = {"after": a.sidecar, "after-again": a.sidecar, "before": before}
    res: dict = {"levels": {}, "upstream": "mcp-bench-echo (HTTP)", "binaries": binaries,
                 "note": "allow-all facade, audit off"}
    try:
        targets = []
        for name in VARIANTS:
            p, url, _ = b.facade(f"ba-{name}", upstream_url=upstream, binary=binaries[name])
            targets.append(Target(name, "facade", "http", url, p.pid, note=binaries[name]))
        for c in levels:
            runs: dict = {t.name: [] for t in targets}
            for r in range(a.rounds):
                for t in targets:
                    n = a.requests_c1 if c == 1 else a.requests
                    out = b.load(t, c, a.duration, a.warmup, n, expect=MESSAGE, sessions=min(c, 16))
                    if "failed" in out:
                        log(f"   before/after c={c} round {r} {t.name}: FAILED {out['failed'][:300]}")
                    runs[t.name].append(out)
            level = {name: aggregate(rs) for name, rs in runs.items()}
            for name, v in level.items():
                if name != "after":
                    v["vs_after"] = paired_vs(runs[name], runs["after"])
            res["levels"][str(c)] = level
            summary = compare(runs)
            res["levels"][str(c)]["summary"] = summary
            log(f"   c={c:<3} " + "  ".join(f"{n} rps={fmt(level[n].get('rps'))}" for n in VARIANTS)
                + f"  loss={fmt(summary.get('loss'), 3)} noise={fmt(summary.get('noise'), 3)}")
    finally:
        b.stop_all()
    return res


def compare(runs: dict) -> dict:
    """loss: 1 - median(after/before); noise: |1 - median(after-again/after)|;
    each ratio taken within one round (the rounds interleave the builds)."""
    def ratio(num: str, den: str) -> float | None:
        rs = [x["throughput_rps"] / y["throughput_rps"] for x, y in zip(runs[num], runs[den])
              if "failed" not in x and "failed" not in y and y["throughput_rps"]]
        return statistics.median(rs) if rs else None

    after_before, again_after = ratio("after", "before"), ratio("after-again", "after")
    if after_before is None or again_after is None:
        return {}
    return {"after_vs_before_rps": after_before, "loss": 1 - after_before, "noise": abs(1 - again_after)}


def goals(res: dict) -> list[dict]:
    ba = res.get("before_after")
    if ba is None:
        return []
    out = []
    extra = GOALS["before_after_loss_over_noise"]
    for c, level in ba["levels"].items():
        s = level.get("summary", {})
        ok = "loss" in s and s["loss"] <= s["noise"] + extra
        out.append({"goal": f"after loses <= noise floor + {extra:.0%} throughput vs before (c={c})",
                    "value": round(s["loss"], 3) if "loss" in s else None,
                    "limit": round(s["noise"] + extra, 3) if "noise" in s else None, "met": ok,
                    "detail": (f"noise floor (after vs after-again) {s['noise']:.3f}; median over rounds of the "
                               "same-round ratio") if s else "missing measurement"})
    return out


def print_tables(res: dict) -> None:
    ba = res.get("before_after")
    if not ba:
        return
    print(f"\n### before/after ({ba['upstream']}; {ba['note']}; before = {ba['binaries']['before']})")
    print("(vs after: the median over rounds of the ratio/difference with `after` in the same round; "
          "`after-again` is the noise floor)")
    rows = [("build", "c", "p50 µs", "p99 µs", "calls/s", "cpu µs/call", "rps/after", "+p50 µs vs after", "err")]
    for c, level in ba["levels"].items():
        for name in VARIANTS:
            v = level.get(name, {})
            if "p50_us" not in v:
                rows.append((name, c, "FAILED", *[""] * 6))
                continue
            d = v.get("vs_after", {})
            rows.append((name, c, fmt(v["p50_us"]), fmt(v["p99_us"]), fmt(v["rps"]), fmt(v["cpu_us_per_call"], 1),
                         fmt(d.get("rps_ratio"), 3), fmt(d.get("added_p50_us")), str(v["errors"])))
        s = level.get("summary", {})
        rows.append(("loss / noise", c, "", "", "", "", f"{fmt(s.get('loss'), 3)} / {fmt(s.get('noise'), 3)}", "", ""))
    table(rows)
