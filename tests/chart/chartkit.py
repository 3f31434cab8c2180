"""Shared helpers for the Helm chart tests (import: ``from chartkit import ...``).

    CHART, VALUE_SETS            the chart directory; {name: values dict} — `default`, and
                                 every file under charts/mcp-warden/ci/ (`all-on`, `secret-tls`)
    render(values, name=RELEASE, namespace=NAMESPACE) -> dict[path, text]
                                 Helm v4's own engine (PyPI helm-python-sdk), offline
    objects(values) -> list[dict] every rendered Kubernetes object, in template order
    find(objs, kind, name=None)  the one object of that kind (and name)
    operator_pod(objs)           the operator Deployment's pod template spec
"""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import helm_python as helm
import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "mcp-warden"
RELEASE = "mcp-warden"
NAMESPACE = "mcp-warden-system"


def _ci_values() -> dict[str, dict]:
    return {p.name.removesuffix("-values.yaml"): yaml.safe_load(p.read_text())
            for p in sorted((CHART / "ci").glob("*-values.yaml"))}


VALUE_SETS: dict[str, dict | None] = {"default": None, **_ci_values()}


@functools.lru_cache(maxsize=None)
def _chart() -> helm.Chart:
    return helm.Chart.load(CHART)


@functools.lru_cache(maxsize=64)
def _render_cached(values_json: str, name: str, namespace: str) -> dict[str, str]:
    values = json.loads(values_json)
    return _chart().render(values, name=name, namespace=namespace, is_install=True)


def render(values: dict | None = None, name: str = RELEASE, namespace: str = NAMESPACE) -> dict[str, str]:
    """Template path -> rendered text (NOTES.txt included)."""
    return dict(_render_cached(json.dumps(values), name, namespace))


@functools.lru_cache(maxsize=64)
def _objects_cached(values_json: str, name: str, namespace: str) -> list[dict]:
    out = _render_cached(values_json, name, namespace)
    docs: list[dict] = []
    for path in sorted(out):
        if path.endswith(".yaml"):
            docs += [d for d in yaml.load_all(out[path], Loader=_Loader) if d]
    return docs


def objects(values: dict | None = None, name: str = RELEASE, namespace: str = NAMESPACE) -> list[dict]:
    """Every rendered object (a fresh copy: tests may change it)."""
    return copy.deepcopy(_objects_cached(json.dumps(values), name, namespace))


def find(objs: list[dict], kind: str, name: str | None = None) -> dict:
    hits = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in hits]}"
    return hits[0]


def operator_deployment(objs: list[dict]) -> dict:
    return find(objs, "Deployment")


def operator_pod(objs: list[dict]) -> dict:
    return operator_deployment(objs)["spec"]["template"]
