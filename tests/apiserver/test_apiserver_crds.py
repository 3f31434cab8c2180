"""The CRDs, the examples and the chart, judged by a real kube-apiserver: its
OpenAPI and CEL validation (with its CEL cost estimator, which no offline
check has), its warnings, and its own words for what it refuses.
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from chartkit import objects as chart_objects
from conftest import REPO_ROOT
from k8s_cluster import warnings
from k8s_fixtures import EXAMPLE_NAMESPACE, EXAMPLES, RESTRICTED

CRDS = sorted((REPO_ROOT / "crds").glob("*.yaml"))
CHART_CRDS = sorted((REPO_ROOT / "charts" / "mcp-warden" / "crds").glob("*.yaml"))
INVALID = sorted((REPO_ROOT / "examples" / "invalid").glob("*.yaml"))


def test_the_files_are_there():
    assert len(CRDS) == 4 and len(CHART_CRDS) == 4
    assert len(EXAMPLES) >= 6 and len(INVALID) >= 15


@pytest.mark.parametrize("crd", CRDS + CHART_CRDS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_crd_applies_without_warnings(cluster, crd: Path):
    out = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", crd, check=False)
    assert out.code == 0, out.stderr
    assert warnings(out.stderr) == [], out.stderr
    name = yaml.safe_load(crd.read_text())["metadata"]["name"]
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=30s")


def test_the_warning_check_can_fail(cluster):
    """A CRD with a format the server does not know makes kubectl print a warning
    that `warnings` finds (so an empty list above means none were sent)."""
    crd = yaml.safe_load((REPO_ROOT / "crds" / "toolprofile.yaml").read_text())
    limits = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["limits"]
    limits["properties"]["maxArgBytes"]["format"] = "uint64"
    out = cluster.apply(crd, dry_run=True)
    assert any('unrecognized format "uint64"' in w for w in warnings(out.stderr)), out.stderr


def test_the_cost_limit_is_enforced_here(cluster):
    """The budget the ToolProfile rules fit in is real: the same CRD with four
    times as many tools allowed is refused for its estimated CEL cost."""
    crd = yaml.safe_load((REPO_ROOT / "crds" / "toolprofile.yaml").read_text())
    tools = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["tools"]
    tools["maxItems"] *= 4
    out = cluster.apply(crd, dry_run=True, check=False)
    assert out.code != 0 and "estimated rule cost exceeds budget" in out.stderr, out.stderr


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_accepted(cluster, examples_applied, example: Path):
    out = examples_applied[example.stem]
    assert out.code == 0, out.stderr
    assert warnings(out.stderr) == [], out.stderr
    ns = cluster.get("namespace", EXAMPLE_NAMESPACE)
    assert RESTRICTED.items() <= ns["metadata"]["labels"].items()
    for doc in yaml.safe_load_all(example.read_text()):
        live = cluster.get(doc["kind"].lower(), doc["metadata"]["name"], EXAMPLE_NAMESPACE)
        assert live is not None, f"{doc['kind']} {doc['metadata']['name']} not created"


def expected_message(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# expect: "):
            return line.removeprefix("# expect: ")
    raise AssertionError(f"{path} has no `# expect:` line")


@pytest.mark.parametrize("sample", INVALID, ids=lambda p: p.stem)
def test_invalid_sample_is_refused_in_the_servers_words(cluster, examples_applied, sample: Path):
    doc = yaml.safe_load(sample.read_text())
    out = cluster.apply(doc, dry_run=True, check=False)
    assert out.code != 0, f"{sample.name} was accepted"
    assert "is invalid" in out.stderr, out.stderr
    expect = expected_message(sample)
    assert expect in out.stderr, f"{sample.name}: expected {expect!r} in the API server's answer:\n{out.stderr}"


def test_an_invalid_sample_without_its_defect_is_accepted(cluster, examples_applied):
    """The refusals above come from the defect each sample names, not from
    something they share: the port-clash sample with another port passes."""
    doc = yaml.safe_load((REPO_ROOT / "examples" / "invalid" / "port-clash.yaml").read_text())
    doc["spec"]["port"] = 3000
    out = cluster.apply(doc, dry_run=True, check=False)
    assert out.code == 0, out.stderr


def test_the_chart_passes_a_server_side_dry_run(cluster, installed):
    """Every object the chart renders (defaults, and every option on but the
    kinds from CRDs this cluster does not have) is valid for the API server."""
    from chartkit import VALUE_SETS

    for variant, values in VALUE_SETS.items():
        objs = [o for o in copy.deepcopy(chart_objects(values))
                if not o["apiVersion"].startswith(("cert-manager.io/", "monitoring.coreos.com/"))]
        assert len(objs) >= 10, variant
        for ns in {o["metadata"]["namespace"] for o in objs if "namespace" in o["metadata"]}:
            if cluster.get("namespace", ns) is None:
                cluster.namespace(ns)  # a dry run cannot create the namespaces it writes into
        out = cluster.apply(objs, dry_run=True, check=False)
        assert out.code == 0, f"{variant}:\n{out.stderr}"
        assert warnings(out.stderr) == [], f"{variant}:\n{out.stderr}"
        applied = re.findall(r"serverside-applied \(server dry run\)", out.stdout)
        assert len(applied) == len(objs), f"{variant}:\n{out.stdout}"


def test_categories_list_every_kind(cluster, examples_applied):
    """`kubectl get mcp` (and `mcp-warden`) lists servers and both profiles."""
    for category in ("mcp", "mcp-warden"):
        names = cluster.kubectl("get", category, "-n", EXAMPLE_NAMESPACE, "-o", "name").stdout.split()
        kinds = {n.split("/", 1)[0].split(".", 1)[0] for n in names}
        assert kinds == {"mcpserver", "toolprofile", "sandboxprofile"}, names
