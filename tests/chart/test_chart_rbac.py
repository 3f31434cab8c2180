"""The chart's RBAC against the operator's API calls, as operator/RBAC.md lists
them (the operator's own test keeps that table equal to the calls its code
makes): no verb more, none missing, per API group and resource; nothing
wildcarded; the narrowing by `resourceNames` the table asks for; and the
separate approver ClusterRole.
"""
from __future__ import annotations

import copy
import re

import pytest

from chartkit import NAMESPACE, REPO, VALUE_SETS, find, objects, operator_pod

RBAC_MD = REPO / "operator" / "RBAC.md"
WEBHOOK_CONFIGS = {"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}

Grant = tuple[str, str, str]  # (apiGroup, resource or nonResourceURL, verb)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _codes(cell: str) -> list[str]:
    return re.findall(r"`([^`]*)`", cell)


def _tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every markdown table of the file: (the paragraph before it, header cells, rows of cells)."""
    tables, current, paragraph, before, blank = [], [], [], "", False
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("|"):
            if not current:
                before = " ".join(paragraph)
            current.append(_cells(line))
            continue
        if current:
            tables.append((before, current[0], current[2:]))
            current, paragraph = [], []
        if not line.strip():
            blank = True
        elif line.startswith("#"):
            paragraph, blank = [], False
        else:
            paragraph, blank = ([line.strip()] if blank else [*paragraph, line.strip()]), False
    return tables


def _grants(rows: list[list[str]]) -> set[Grant]:
    out = set()
    for group_cell, resource_cell, verbs_cell, *_ in rows:
        (group,) = _codes(group_cell)
        out |= {(group, r, v.strip()) for r in _codes(resource_cell) for v in verbs_cell.split(",")}
    return out


def people_roles(text: str) -> dict[str, set[Grant]]:
    """§5: {"Approver" | "Editor" | "Viewer": grants}, by the word that opens the table's paragraph."""
    roles = {}
    for before, header, rows in _tables(text.split("## 5.", 1)[1]):
        if header[:3] == ["apiGroup", "resource", "verbs"]:
            roles[before.split(":", 1)[0]] = _grants(rows)
    return roles


def parse_rbac_md(text: str) -> tuple[set[Grant], dict[str, list[str]], set[Grant]]:
    """-> (operator grants, {resource: resourceNames}, approver grants)."""
    tables = [rows for _, header, rows in _tables(text) if header[:3] == ["apiGroup", "resource", "verbs"]]
    # §1, the operator's calls (the one table with a `why` column); §5, people's roles.
    (api_table,) = [rows for rows in tables if len(rows[0]) == 4]
    grants: set[Grant] = set()
    names: dict[str, list[str]] = {}
    for group_cell, resource_cell, verbs_cell, *why in api_table:
        verbs = [v.strip() for v in verbs_cell.split(",") if v.strip()]
        if group_cell == "nonResourceURLs":
            grants |= {("", url, verb) for url in _codes(resource_cell) for verb in verbs}
            continue
        (group,) = _codes(group_cell)
        group = group.strip('"')
        for resource in _codes(resource_cell):
            grants |= {(group, resource, verb) for verb in verbs}
            m = re.search(r"resourceNames: \[([^\]]*)\]", " ".join(why))
            if m:
                names[resource] = [n.strip() for n in m.group(1).split(",")]
    return grants, names, people_roles(text)["Approver"]


def grants_of(rules: list[dict]) -> set[Grant]:
    out: set[Grant] = set()
    for rule in rules:
        for verb in rule["verbs"]:
            if "nonResourceURLs" in rule:
                out |= {("", url, verb) for url in rule["nonResourceURLs"]}
            else:
                out |= {(g, r, verb) for g in rule["apiGroups"] for r in rule["resources"]}
    return out


def operator_rules(objs: list[dict]) -> list[dict]:
    cluster = find(objs, "ClusterRole", "mcp-warden-operator")["rules"]
    role = find(objs, "Role", "mcp-warden-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    return cluster + role["rules"]


def diff(expected: set[Grant], actual: set[Grant]) -> str:
    more, missing = sorted(actual - expected), sorted(expected - actual)
    return (f"granted but not in RBAC.md: {more}\n" if more else "") + (
        f"in RBAC.md but not granted: {missing}" if missing else "")


@pytest.fixture(scope="module")
def contract():
    return parse_rbac_md(RBAC_MD.read_text())


def test_rbac_md_parses(contract):
    grants, names, approver = contract
    # A few rows every version of the operator has: the parse is not vacuous.
    assert {("mcpwarden.dev", "mcpservers", "watch"), ("mcpwarden.dev", "mcpservers/status", "patch"),
            ("apps", "deployments", "patch"), ("coordination.k8s.io", "leases", "update"),
            ("events.k8s.io", "events", "create")} <= grants
    assert names.get("validatingwebhookconfigurations") == ["mcp-warden"]
    assert approver == {("mcpwarden.dev", "mcpservers/approval", "approve"),
                        ("mcpwarden.dev", "mcpservers", "get"), ("mcpwarden.dev", "mcpservers", "patch")}
    roles = people_roles(RBAC_MD.read_text())
    assert set(roles) == {"Approver", "Editor", "Viewer"}
    assert ("mcpwarden.dev", "toolprofiles", "create") in roles["Editor"]
    assert ("mcpwarden.dev", "mcpservers", "update") not in approver, "approvers must not get update"


@pytest.mark.parametrize("variant", ["default", "secret-tls"])
def test_operator_rbac_matches_its_api_calls(contract, variant):
    grants, _, _ = contract
    objs = objects(VALUE_SETS[variant])
    expected = grants if variant == "default" else {g for g in grants if g[1] not in WEBHOOK_CONFIGS}
    actual = grants_of(operator_rules(objs))
    assert actual == expected, diff(expected, actual)


def test_cert_manager_mode_drops_the_webhook_configuration_grants(contract):
    """With a mounted certificate the operator never writes caBundle, so it gets no
    access to the webhook configurations at all; everything else is unchanged."""
    grants, _, _ = contract
    actual = grants_of(operator_rules(objects(VALUE_SETS["all-on"])))
    expected = {g for g in grants if g[1] not in WEBHOOK_CONFIGS}
    assert actual == expected, diff(expected, actual)


def test_the_comparison_can_fail(contract):
    """A rule with one verb more, or one missing, is caught."""
    grants, _, _ = contract
    rules = copy.deepcopy(operator_rules(objects()))
    rules[0]["verbs"].append("delete")
    assert grants_of(rules) != grants and "granted but not in RBAC.md" in diff(grants, grants_of(rules))
    rules = copy.deepcopy(operator_rules(objects()))
    rules[-1]["verbs"].remove("update")
    assert "in RBAC.md but not granted" in diff(grants, grants_of(rules))


@pytest.mark.parametrize("variant", list(VALUE_SETS))
def test_no_wildcards_and_narrowed_names(contract, variant):
    _, names, _ = contract
    objs = objects(VALUE_SETS[variant])
    for rule in operator_rules(objs):
        for key in ("apiGroups", "resources", "verbs", "nonResourceURLs", "resourceNames"):
            assert "*" not in rule.get(key, []), rule
        for resource in rule.get("resources", []):
            if resource in names:
                # The release's webhook configurations (named after the release: `mcp-warden` here).
                assert rule.get("resourceNames") == names[resource], rule
    # Lease reads and renewals are narrowed to the operator's one Lease; `create` cannot be.
    leases = [r for r in find(objs, "Role")["rules"] if "leases" in r["resources"]]
    assert all(r.get("resourceNames") == ["mcp-warden-operator"] for r in leases if set(r["verbs"]) - {"create"})


@pytest.mark.parametrize("variant", list(VALUE_SETS))
def test_bindings_name_the_operators_service_account(variant):
    objs = objects(VALUE_SETS[variant])
    sa = operator_pod(objs)["spec"]["serviceAccountName"]
    for kind, role_kind, name in [("ClusterRoleBinding", "ClusterRole", "mcp-warden-operator"),
                                  ("RoleBinding", "Role", "mcp-warden-leader-election")]:
        binding = find(objs, kind, name)
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]


@pytest.mark.parametrize("variant", list(VALUE_SETS))
def test_approver_cluster_role(contract, variant):
    _, _, approver = contract
    objs = objects(VALUE_SETS[variant])
    role = find(objs, "ClusterRole", "mcp-warden-approver")
    assert grants_of(role["rules"]) == approver
    aggregate = {k for k in role["metadata"]["labels"] if k.startswith("rbac.authorization.k8s.io/aggregate-to-")}
    if variant == "all-on":
        assert aggregate == {"rbac.authorization.k8s.io/aggregate-to-admin"}
        binding = find(objs, "ClusterRoleBinding", "mcp-warden-approver")
        assert binding["roleRef"]["name"] == "mcp-warden-approver"
        assert binding["subjects"] == [{"kind": "Group", "name": "platform-admins",
                                        "apiGroup": "rbac.authorization.k8s.io"}]
    else:
        assert aggregate == set()  # approving is not handed to namespace admins by default
        assert not [o for o in objs if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"].endswith("approver")]


@pytest.mark.parametrize("variant", list(VALUE_SETS))
def test_edit_and_view_roles_aggregate_into_the_built_in_ones(variant):
    roles = people_roles(RBAC_MD.read_text())
    objs = objects(VALUE_SETS[variant])
    for role, name, aggregate in [("Editor", "mcp-warden-edit", {"edit", "admin"}),
                                  ("Viewer", "mcp-warden-view", {"view"})]:
        rendered = find(objs, "ClusterRole", name)
        assert grants_of(rendered["rules"]) == roles[role], diff(roles[role], grants_of(rendered["rules"]))
        labels = rendered["metadata"]["labels"]
        assert {k.rsplit("-", 1)[1] for k in labels if k.startswith("rbac.authorization.k8s.io/aggregate-to-")} \
            == aggregate
        assert not any(r.get("resources") == ["mcpservers/approval"] for r in rendered["rules"])
    assert not [o for o in objects({"rbac": {"aggregatedRoles": {"create": False}}})
                if o["metadata"]["name"] in {"mcp-warden-edit", "mcp-warden-view"}]


def test_rbac_can_be_left_to_the_cluster_admin():
    objs = objects({"rbac": {"create": False, "approver": {"create": False}, "aggregatedRoles": {"create": False}}})
    assert not [o for o in objs if o["kind"] in {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}]
