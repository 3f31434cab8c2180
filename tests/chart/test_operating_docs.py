"""docs/operating.md stays true to the code: its troubleshooting table names
every condition reason the operator can set, its configuration table every
top-level chart value, and its relative links resolve.
"""
from __future__ import annotations

import re

import yaml

from chartkit import CHART, REPO

DOC = (REPO / "docs" / "operating.md").read_text()
# Where the operator decides a condition's (status, reason).
REASON_SOURCES = ["reconcile/status.rs", "reconcile/egress_proxy.rs", "capabilities.rs", "plan.rs", "validate.rs"]


def operator_reasons() -> set[str]:
    found: set[str] = set()
    for name in REASON_SOURCES:
        path = REPO / "operator" / "src" / name
        if not path.exists():
            continue
        text = path.read_text().split("#[cfg(test)]")[0]
        found |= set(re.findall(r'"(?:True|False|Unknown)",\s*"([A-Z][A-Za-z]+)"', text))
        found |= set(re.findall(r'=>\s*\{?\s*"([A-Z][A-Za-z]+)"', text))
        # reasons named by a constant (`pub const HOLD_REASON: &str = "ApprovalPending";`)
        found |= set(re.findall(r'_REASON: &str = "([A-Z][A-Za-z]+)"', text))
    return found


def section(title: str) -> str:
    return DOC.split(f"## {title}", 1)[1].split("\n## ", 1)[0]


def test_troubleshooting_covers_every_condition_reason():
    reasons = operator_reasons()
    assert {"ToolProfileNotFound", "PendingApproval", "Available"} <= reasons  # the scan is not vacuous
    table = section("Troubleshooting by condition reason")
    documented = {m for row in table.splitlines() if row.startswith("|")
                  for m in re.findall(r"`([A-Z][A-Za-z]+)`", row.split("|")[3])}
    assert reasons - documented == set(), f"reasons without a troubleshooting row: {sorted(reasons - documented)}"


def test_configuration_reference_covers_every_value():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    table = section("Configuration reference")
    missing = [k for k in values if k != "global" and f"`{k}" not in table]
    assert missing == []


def test_relative_links_resolve():
    for doc in (REPO / "docs" / "operating.md", REPO / "README.md"):
        for target in re.findall(r"\]\((?!https?:|#)([^)#]+)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which does not exist"
    assert "docs/operating.md" in (REPO / "README.md").read_text()
