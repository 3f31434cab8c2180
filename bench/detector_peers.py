#!/usr/bin/env python3
"""Run one open-source MCP scanner over tool definitions, one JSON line in
(`{"tool": {...}}`) and one out (`{"flagged": bool, "reasons": [...],
"micros": float}`), inside the scanners' own virtualenv
(bench/.venv-detectors, made by `make bench-detectors`).

    bench/.venv-detectors/bin/python bench/detector_peers.py pyatr < tools.jsonl

Each scanner is driven through its own Python API, the way its MCP tool
scan does, offline (no LLM, no remote API):
- pyatr: the Agent Threat Rules engine with the rules bundled in the
  package; the definition's text is the event's content, its description
  and name the tool fields the MCP-targeted rules read. Flagged: any match.
- cisco-yara: cisco-ai-mcp-scanner's YARA analyzer with its shipped rules,
  on the description and then on the rest of the definition as JSON, as its
  scanner's tool analysis does. Flagged: any finding. (Its API and LLM
  analyzers need a remote service and are not run.)
- tool-scan: tool_scan.SecurityScanner().scan(tool); flagged when it says
  the tool is not safe (a HIGH or CRITICAL threat, its default).
"""
from __future__ import annotations

import asyncio
import json
import sys
import time


def pyatr_scanner():
    from pyatr import AgentEvent, ATREngine

    engine = ATREngine()
    engine.load_default_rules()

    def scan(tool: dict) -> tuple[bool, list[str]]:
        text = json.dumps(tool, ensure_ascii=False)
        event = AgentEvent(content=text, event_type="llm_input",
                           fields={"tool_name": str(tool.get("name", "")),
                                   "tool_description": text, "user_input": text})
        matches = engine.evaluate(event)
        return bool(matches), [f"{m.rule_id}" for m in matches][:5]

    return scan


def cisco_yara_scanner():
    from mcpscanner.core.analyzers.yara_analyzer import YaraAnalyzer

    analyzer = YaraAnalyzer()
    loop = asyncio.new_event_loop()

    def scan(tool: dict) -> tuple[bool, list[str]]:
        name = str(tool.get("name", ""))
        rest = {k: v for k, v in tool.items() if k != "description"}
        findings = loop.run_until_complete(analyzer.analyze(
            str(tool.get("description") or ""), {"tool_name": name, "content_type": "description"}))
        findings += loop.run_until_complete(analyzer.analyze(
            json.dumps(rest), {"tool_name": name, "content_type": "parameters"}))
        return bool(findings), sorted({f.details["raw_response"]["rule"] for f in findings})[:5]

    return scan


def tool_scan_scanner():
    from tool_scan import SecurityScanner

    scanner = SecurityScanner()

    def scan(tool: dict) -> tuple[bool, list[str]]:
        result = scanner.scan(tool)
        return (not result.is_safe), [str(t) for t in result.threats][:5]

    return scan


SCANNERS = {"pyatr": pyatr_scanner, "cisco-yara": cisco_yara_scanner, "tool-scan": tool_scan_scanner}


def main() -> int:
    name = sys.argv[1]
    try:
        scan = SCANNERS[name]()
    except Exception as e:  # the harness records why a scanner could not run
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        return 0
    for line in sys.stdin:
        if not line.strip():
            continue
        tool = json.loads(line)["tool"]
        start = time.perf_counter()
        try:
            flagged, reasons = scan(tool)
        except Exception as e:  # one definition it cannot read counts as not flagged
            flagged, reasons = False, [f"error: {type(e).__name__}: {e}"]
        micros = (time.perf_counter() - start) * 1e6
        print(json.dumps({"flagged": flagged, "reasons": reasons, "micros": micros}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
