"""values.yaml and values.schema.json: every value documented and typed, the
schema closed (`additionalProperties: false`) everywhere, and Helm rejecting a
misspelled, unknown or mistyped value before anything renders.
"""
from __future__ import annotations

import json
import re

import helm_python as helm
import pytest
import yaml

from chartkit import CHART, VALUE_SETS, render

SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALUES_TEXT = (CHART / "values.yaml").read_text()
# Objects whose insides are Kubernetes' own structures, validated by the API
# server (and by tests/chart's kubernetes-validate run), or reserved by Helm.
OPEN_OBJECTS = {"global", "affinity.nodeAffinity", "affinity.podAffinity", "affinity.podAntiAffinity"}


def _walk_schema(node: dict, path: str = ""):
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _walk_schema(sub, f"{path}.{name}".lstrip("."))
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _walk_schema(node[key], f"{path}[]")
    for sub in node.get("patternProperties", {}).values():
        yield from _walk_schema(sub, f"{path}[]")
    for sub in node.get("anyOf", []):
        yield from _walk_schema(sub, path)


def test_schema_is_closed_everywhere():
    objects = [(p, n) for p, n in _walk_schema(SCHEMA) if n.get("type") == "object"]
    assert len(objects) > 40
    for path, node in objects:
        if path in OPEN_OBJECTS:
            continue
        if "properties" in node or "patternProperties" in node:
            assert node.get("additionalProperties") is False, f"{path or '<root>'} accepts unknown keys"
        else:  # a map: its values are typed
            assert isinstance(node.get("additionalProperties"), dict), f"{path} is an untyped object"


def _leaf_paths(value, path: tuple[str, ...] = ()):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaf_paths(v, (*path, k))
    else:
        yield path


def _schema_at(path: tuple[str, ...]) -> dict | None:
    node = SCHEMA
    for part in path:
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        elif node.get("patternProperties"):
            node = next((s for pat, s in node["patternProperties"].items() if re.match(pat, part)), None)
            if node is None:
                return None
        else:
            return None
    return node


def test_every_value_is_in_the_schema_and_every_schema_key_in_values_yaml():
    defaults = yaml.safe_load(VALUES_TEXT)
    for path in _leaf_paths(defaults):
        assert _schema_at(path) is not None, f"values.yaml has {path}, the schema does not"
    assert set(SCHEMA["properties"]) == set(defaults)
    def undescribed(node: dict, path: str = ""):
        for name, sub in node.get("properties", {}).items():
            if "description" not in sub:
                yield f"{path}{name}"
            yield from undescribed(sub, f"{path}{name}.")
            if isinstance(sub.get("items"), dict):
                yield from undescribed(sub["items"], f"{path}{name}[].")
    assert list(undescribed(SCHEMA)) == []


def test_every_value_is_documented():
    """Each key in values.yaml has a comment right above it, or sits inside a value
    documented as a whole (`# -- …` above its parent, e.g. podSecurityContext)."""
    lines = VALUES_TEXT.splitlines()
    stack: list[tuple[int, bool]] = []  # (indent, documented as a whole)
    undocumented = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z_][\w./-]*):", line)
        if not m:
            continue
        indent = len(m.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        block = []  # the comment lines right above the key
        for j in range(i - 1, -1, -1):
            if not lines[j].strip().startswith("#"):
                break
            block.append(lines[j].strip())
        whole = any(c.startswith("# --") for c in block)
        if not (block or any(w for _, w in stack)):
            undocumented.append(m.group(2))
        stack.append((indent, whole))
    assert undocumented == []


@pytest.mark.parametrize("variant", list(VALUE_SETS))
def test_value_sets_pass_the_schema(variant):
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(VALUE_SETS[variant])


BAD_VALUES = {
    "misspelled top-level key": ({"replicaCont": 2}, "replicaCont"),
    "misspelled nested key": ({"networkPolicy": {"enabeld": False}}, "enabeld"),
    "misspelled deep key": ({"metrics": {"serviceMonitor": {"intervall": "10s"}}}, "intervall"),
    "misspelled resource name": ({"resources": {"limits": {"memroy": "1Gi"}}}, "memroy"),
    "unknown security context field": ({"containerSecurityContext": {"runAsRoot": True}}, "runAsRoot"),
    "wrong type": ({"replicaCount": "two"}, "replicaCount"),
    "bad enum": ({"webhook": {"tls": {"mode": "none"}}}, "mode"),
    "bad pull policy": ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    "bad duration": ({"metrics": {"podMonitor": {"interval": "often"}}}, "interval"),
    "bad digest": ({"image": {"digest": "latest"}}, "digest"),
    "zero replicas": ({"replicaCount": 0}, "replicaCount"),
    "privileged approver aggregation": ({"rbac": {"approver": {"aggregateTo": ["cluster-admin"]}}}, "aggregateTo"),
    "TLS collector (the facades send OTLP without TLS)": (
        {"observability": {"tracing": {"otlpEndpoint": "https://collector:4318"}}}, "otlpEndpoint"),
    "sampling above 1": ({"observability": {"tracing": {"sampling": 2}}}, "sampling"),
    "OTLP over JSON": ({"observability": {"tracing": {"protocol": "http/json"}}}, "protocol"),
    "audit store egress without a port": (
        {"observability": {"audit": {"egress": [{"cidr": "10.0.0.0/8"}]}}}, "port"),
}


@pytest.mark.parametrize("case", list(BAD_VALUES))
def test_schema_rejects(case):
    values, word = BAD_VALUES[case]
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError, match=word):
            chart.validate_schema(values)
    # `helm install`/`template` refuse them too, before rendering anything.
    with pytest.raises(helm.HelmValuesError):
        render(values)
