"""Every object `mcp-warden-operator render` prints for the examples is valid
against the official Kubernetes OpenAPI schemas (PyPI kubernetes-validate,
offline, strict: unknown fields are errors), and so are the generated CRDs.

The binary comes from $MCP_WARDEN_OPERATOR (set by `make test`), else
target/debug/mcp-warden-operator.
"""
from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CRDS = sorted((REPO / "crds").glob("*.yaml"))
# The oldest version the operator targets (k8s-openapi v1_33) and the newest the validator knows.
K8S_VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]


def operator() -> Path:
    path = Path(os.environ.get("MCP_WARDEN_OPERATOR", REPO / "target/debug/mcp-warden-operator"))
    if not path.exists():
        pytest.skip(f"operator binary not built: {path}")
    return path


def render(*files: Path) -> list[dict]:
    out = subprocess.run(
        [str(operator()), "render", "-f", *map(str, files)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def test_examples_exist():
    names = {p.stem for p in EXAMPLES}
    assert {"stdio-server", "http-server", "with-secrets", "with-workspace", "with-egress"} <= names
    assert len(CRDS) == 3


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_objects_are_valid(example: Path, version: str):
    objects = render(example)
    kinds = [o["kind"] for o in objects]
    assert kinds == ["ServiceAccount", "ConfigMap", "Deployment", "Service", "NetworkPolicy"]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("crd", CRDS, ids=lambda p: p.stem)
def test_generated_crds_are_valid(crd: Path):
    doc = yaml.safe_load(crd.read_text())
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


def test_validator_catches_a_broken_object():
    """Guard against a vacuous pass: the same validation rejects a broken Deployment."""
    deployment = next(o for o in render(EXAMPLES[0]) if o["kind"] == "Deployment")
    broken = copy.deepcopy(deployment)
    broken["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[0], strict=True)
    unknown = copy.deepcopy(deployment)
    unknown["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, K8S_VERSIONS[0], strict=True)
