#!/usr/bin/env python3
"""Score mcp-warden's content detectors and the open-source MCP scanners on
the same corpora (tests/corpora/), and write one table to bench/results/.

    make bench-detectors            # installs the scanners, builds, runs this

or by hand, after `cargo build --release -p mcp-warden-policy --example detectors`:

    python3 bench/detectors.py --warden target/release/examples/detectors \
        --peer-python bench/.venv-detectors/bin/python --label after

Poisoning: every definition of poison_poisoned.jsonl (attack classes),
poison_benign.jsonl (harvested from real servers) and
poison_hard_benign.jsonl (benign wording that looks like an attack) goes
through each scanner. mcp-warden counts a definition as caught when the
facade would quarantine it (a warning does not count; warnings are shown
apart); a peer when it flags it. Per attack class and overall: recall; per
benign set: false positives; time per definition; on the whole corpus and
on the held-out third (`"split": "heldout"` in each line, fixed by a hash
of the case's id, never used for tuning).

Redaction (mcp-warden only; the peers scan definitions, not outputs): the
formats of secrets.jsonl fully removed (no 8-character piece left) and the
strings of secretish_benign.jsonl left untouched, per split.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPORA = ROOT / "tests" / "corpora"
PEERS = ["pyatr", "cisco-yara", "tool-scan"]
# Siblings the poisoned and hand-written definitions are listed beside (the
# names their payloads mention), as the corpus test uses.
SIBLINGS = ["get_weather", "add", "search_docs", "translate_text", "create_invoice", "list_events",
            "format_code", "send_message", "read_file", "send_email"]


def load(name: str) -> list[dict]:
    return [json.loads(line) for line in (CORPORA / name).read_text().splitlines() if line.strip()]


def base_class(row: dict) -> str:
    return row["class"].split("+")[0]


def run_lines(cmd: list[str], rows: list[dict]) -> list[dict]:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    out = subprocess.run(cmd, input=text, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def scan_inputs(poisoned, benign, hard) -> list[dict]:
    by_source = defaultdict(list)
    for r in benign:
        by_source[r["source"]].append(r["tool"].get("name", ""))
    rows = [{"tool": r["tool"], "others": SIBLINGS} for r in poisoned]
    rows += [{"tool": r["tool"], "others": by_source[r["source"]]} for r in benign]
    rows += [{"tool": r["tool"], "others": SIBLINGS} for r in hard]
    return rows


def pct(n: int, of: int) -> str:
    return f"{n}/{of} ({100.0 * n / of:.1f}%)" if of else "–"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warden", required=True, help="the detectors example binary")
    ap.add_argument("--peer-python", help="python of the scanners' virtualenv (none: peers not run)")
    ap.add_argument("--label", default="run", help="the results file's name: detectors-<label>.md")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()

    poisoned, benign, hard = load("poison_poisoned.jsonl"), load("poison_benign.jsonl"), load("poison_hard_benign.jsonl")
    inputs = scan_inputs(poisoned, benign, hard)
    sets = [("poisoned", poisoned), ("benign", benign), ("hard", hard)]
    results: dict[str, list[dict]] = {}
    notes: dict[str, str] = {}
    warden = run_lines([args.warden, "scan"], inputs)
    results["mcp-warden"] = [{"flagged": w["verdict"] == "quarantine", "warned": w["verdict"] == "warn",
                              "reasons": w["reasons"], "micros": w["micros"]} for w in warden]
    for peer in PEERS:
        if not args.peer_python:
            notes[peer] = "not run (no --peer-python)"
            continue
        print(f"bench-detectors: {peer} on {len(inputs)} definitions", file=sys.stderr)
        got = run_lines([args.peer_python, str(Path(__file__).with_name("detector_peers.py")), peer], inputs)
        if got and "error" in got[0]:
            notes[peer] = f"could not run: {got[0]['error']}"
            continue
        results[peer] = got
    scanners = list(results)

    # Slice the flat result lists back into the three sets.
    sliced: dict[str, dict[str, list[dict]]] = {s: {} for s in scanners}
    for s in scanners:
        i = 0
        for name, rows in sets:
            sliced[s][name] = results[s][i:i + len(rows)]
            i += len(rows)

    def table_rows(split: str | None) -> list[str]:
        keep = lambda row: split is None or row.get("split") == split
        lines = []
        classes = sorted({base_class(r) for r in poisoned})
        for cls in classes + ["**all poisoned (recall)**"]:
            cells = []
            for s in scanners:
                pairs = [(r, g) for r, g in zip(poisoned, sliced[s]["poisoned"]) if keep(r)
                         and (cls.startswith("**") or base_class(r) == cls)]
                cells.append(pct(sum(g["flagged"] for _, g in pairs), len(pairs)))
            lines.append(f"| {cls} | " + " | ".join(cells) + " |")
        for name, label in [("benign", "**real servers' benign flagged (FP)**"),
                            ("hard", "**hard benign flagged (FP)**")]:
            rows = dict(sets)[name]
            cells = []
            for s in scanners:
                pairs = [(r, g) for r, g in zip(rows, sliced[s][name]) if keep(r)]
                cells.append(pct(sum(g["flagged"] for _, g in pairs), len(pairs)))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        return lines

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = "| class | " + " | ".join(scanners) + " |\n|---|" + "---|" * len(scanners)
    out = [f"# Content detectors side by side ({args.label}, {now})", "",
           "Made by `make bench-detectors` (bench/detectors.py). Caught = mcp-warden would quarantine "
           "the definition / a peer flags it. Held out: the fixed third of each corpus "
           "(`\"split\": \"heldout\"`) no detector is tuned on.", "",
           f"Corpora: {len(poisoned)} poisoned definitions, {len(benign)} benign from "
           f"{len({r['source'] for r in benign})} real servers, {len(hard)} hard benign.", "",
           "## Poisoning scan, whole corpus", "", head, *table_rows(None), "",
           "## Poisoning scan, held-out third", "", head, *table_rows("heldout"), ""]
    out += ["## Time per definition (mean / p99, µs)", "", "| scanner | mean | p99 |", "|---|---|---|"]
    for s in scanners:
        t = sorted(g["micros"] for g in results[s])
        out.append(f"| {s} | {statistics.mean(t):.1f} | {t[int(len(t) * 0.99) - 1]:.1f} |")
    w = sliced["mcp-warden"]
    out += ["", "mcp-warden warnings (lower tier, not quarantined): "
            + ", ".join(f"{name} {sum(g['warned'] for g in w[name])}/{len(rows)}" for name, rows in sets), ""]
    for peer, why in notes.items():
        out.append(f"- {peer}: {why}")

    # Redaction, mcp-warden only.
    secrets, clean = load("secrets.jsonl"), load("secretish_benign.jsonl")
    red = run_lines([args.warden, "redact"], [{"text": r["text"]} for r in secrets])
    untouched = run_lines([args.warden, "redact"], [{"text": r["text"]} for r in clean])

    def removed(text: str, out: str, secret: str) -> bool:
        context = text.replace(secret, " ")
        bare = out
        while "[REDACTED:" in bare:
            i = bare.index("[REDACTED:")
            j = bare.find("]", i)
            bare = bare[:i] + " " + (bare[j + 1:] if j >= 0 else "")
        w = min(8, len(secret))
        return all(secret[i:i + w] not in bare or secret[i:i + w] in context for i in range(len(secret) - w + 1))

    out += ["", "## Redaction (mcp-warden)", "", "| split | formats fully removed | benign strings touched |",
            "|---|---|---|"]
    for split in [None, "heldout"]:
        k = lambda r: split is None or r.get("split") == split
        ok = sum(removed(r["text"], g["text"], r["secret"]) for r, g in zip(secrets, red) if k(r))
        touched = sum(g["text"] != r["text"] for r, g in zip(clean, untouched) if k(r))
        out.append(f"| {split or 'whole'} | {pct(ok, sum(map(k, secrets)))} | {pct(touched, sum(map(k, clean)))} |")
    missed = [r["kind"] + ": " + r["why"] for r, g in zip(secrets, red) if not removed(r["text"], g["text"], r["secret"])]
    out += ["", f"Formats not fully removed ({len(missed)}): " + "; ".join(missed), ""]

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"detectors-{args.label}.md"
    path.write_text("\n".join(out))
    detail = {s: [{"set": name, "id": r.get("id") or f"{r['source']}:{r['tool'].get('name')}",
                   "class": r.get("class"), "split": r.get("split"), **g}
                  for name, rows in sets for r, g in zip(rows, sliced[s][name])] for s in scanners}
    (args.out / f"detectors-{args.label}.json").write_text(json.dumps({"notes": notes, "results": detail}, indent=0))
    print("\n".join(out))
    print(f"bench-detectors: wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
