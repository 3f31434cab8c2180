"""The benches cargo runs (sections of run_bench.py, `--only criterion` and
`--only operator`): the criterion micro-benchmarks of the policy crate, and the
operator's scale test (an ignored test of operator/tests/scale.rs against a mock
API, run in release) whose `SCALE_JSON` line is the result. Both build into the
harness's `--target-dir`.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path

from common import human_ns, log

ROOT = Path(__file__).resolve().parent.parent


def criterion(b) -> dict:
    log("== criterion micro-benchmarks (policy/benches/policy.rs)")
    env = {**os.environ, "CARGO_TARGET_DIR": b.a.target_dir}
    crit_dir = Path(b.a.target_dir) / "criterion"
    cmd = [*shlex.split(b.a.cargo), "bench", "-q", "-p", "mcp-warden-policy", "--bench", "policy", "--",
           "--warm-up-time", "1", "--measurement-time", str(b.a.criterion_secs), "--sample-size", "30",
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


def operator_scale(b) -> dict:
    log("== operator scale (operator/tests/scale.rs, ignored test, mock API)")
    env = {**os.environ, "CARGO_TARGET_DIR": b.a.target_dir, "SCALE_SERVERS": "1000"}
    cmd = [*shlex.split(b.a.cargo), "test", "-q", "--release", "-p", "mcp-warden-operator", "--test", "scale",
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
