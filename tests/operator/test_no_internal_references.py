"""The repository stands alone: what users and contributors read — code and
its comments, docs, schemas, examples, the chart, the Makefile and the tests
— names nothing that only exists in the project's own tracker or notes: no
source documents by number, no issue numbers, no design file that is not in
the repository, no folder outside the checkout.

Left out, each for its reason: the conformance suite's reference server
(tests/conformance/reference/, a third party's files copied unchanged), the
fuzzers' corpora (inputs, not prose), lock files, and .ci/ (the CI harness,
which describes the machine CI runs on, where the Kubernetes test binaries
sit beside the clone).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TEXT = re.compile(r"\.(rs|py|md|json|ya?ml|toml|sh|mjs|js|ts|tpl|txt)$|(^|/)Makefile$|(^|/)Dockerfile$")
LEFT_OUT = re.compile(r"^(tests/conformance/reference/|fuzz/corpus/|\.ci/)|\.lock$|(^|/)package-lock\.json$")
INTERNAL = re.compile(
    r"\bseeds?\s+\d{3}\b|\bissue\s+#?\d+\b|\bseeds/|\.\./shared\b|(?-i:\bDESIGN(\.md)?\b)", re.I)
SELF = Path(__file__).resolve()


def tracked() -> list[Path]:
    """The repository's text files: git's list, or every file where this is no checkout."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
        names = out.splitlines()
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file()]
    return sorted(REPO / n for n in names
                  if TEXT.search(n) and not LEFT_OUT.search(n) and "node_modules" not in n
                  and (REPO / n).resolve() != SELF)


FILES = tracked()


def test_the_scan_covers_the_files():
    names = {str(p.relative_to(REPO)) for p in FILES}
    for must in ("Makefile", "README.md", "docs/operating.md", "docs/audit-record.v1.schema.json",
                 "sidecar/src/lib.rs", "operator/src/capabilities.rs", "crds/mcpserver.yaml"):
        assert must in names, must
    assert len(FILES) > 300
    assert INTERNAL.search("Roles (seed 004: VIEWER)") and INTERNAL.search("(issue 10)")
    assert INTERNAL.search("see DESIGN.md §3") and INTERNAL.search("K8S ?= ../shared/k8s")
    assert not INTERNAL.search("designated issuer") and not INTERNAL.search("public by design")


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_internal_references(path: Path):
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        pytest.skip("not text")
    hits = [f"{i}: {line.strip()}" for i, line in enumerate(text.splitlines(), 1) if INTERNAL.search(line)]
    assert hits == [], f"{path.relative_to(REPO)} cites internal references:\n" + "\n".join(hits)
