"""The Helm chart, rendered by Helm v4's own engine (PyPI helm-python-sdk):
with default values and with every option on (charts/mcp-warden/ci/*-values.yaml),
linted strictly, every object validated against the official Kubernetes OpenAPI
schemas offline (kubernetes-validate, strict: unknown fields are errors), the
operator's pod checked against Pod Security "restricted", and the pieces the
operator relies on (webhook contract, probes, labels, NetworkPolicy) checked
against operator/RBAC.md.
"""
from __future__ import annotations

import copy
import json
import re

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

from chartkit import CHART, NAMESPACE, REPO, VALUE_SETS, find, objects, operator_deployment, operator_pod, render
from pss import RULES, violations

K8S_VERSIONS = ["1.33.0", kubernetes_validate.latest_version()]
VARIANTS = list(VALUE_SETS)

# Kinds from other projects' CRDs (cert-manager, Prometheus Operator) are not in
# the Kubernetes OpenAPI document: the fields the chart uses are checked here.
_str = {"type": "string", "minLength": 1}
_labels = {"type": "object", "additionalProperties": {"type": "string"}}
_selector = {"type": "object", "additionalProperties": False,
             "properties": {"matchLabels": _labels, "matchExpressions": {"type": "array"}}}
_endpoint = {"type": "object", "additionalProperties": False, "required": ["port"], "properties": {
    "port": _str, "path": _str, "interval": _str, "scrapeTimeout": _str,
    "relabelings": {"type": "array", "items": {"type": "object", "additionalProperties": False, "properties": {
        "sourceLabels": {"type": "array", "items": _str}, "targetLabel": _str}}}}}
_ns_selector = {"type": "object", "additionalProperties": False,
                "properties": {"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": _str}}}


def _crd_kind(spec: dict) -> dict:
    return {"type": "object", "required": ["apiVersion", "kind", "metadata", "spec"], "additionalProperties": False,
            "properties": {"apiVersion": _str, "kind": _str,
                           "metadata": {"type": "object", "required": ["name", "namespace"]}, "spec": spec}}


FOREIGN_KINDS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _crd_kind({
        "type": "object", "additionalProperties": False, "required": ["selector", "endpoints"], "properties": {
            "selector": _selector, "namespaceSelector": _ns_selector,
            "endpoints": {"type": "array", "minItems": 1, "items": _endpoint}}}),
    ("monitoring.coreos.com/v1", "PodMonitor"): _crd_kind({
        "type": "object", "additionalProperties": False, "required": ["selector", "podMetricsEndpoints"],
        "properties": {"selector": _selector, "namespaceSelector": _ns_selector,
                       "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": _endpoint}}}),
    ("cert-manager.io/v1", "Issuer"): _crd_kind({
        "type": "object", "additionalProperties": False, "properties": {"selfSigned": {"type": "object"}}}),
    ("cert-manager.io/v1", "Certificate"): _crd_kind({
        "type": "object", "additionalProperties": False, "required": ["secretName", "issuerRef", "dnsNames"],
        "properties": {
            "secretName": _str, "duration": _str, "renewBefore": _str, "commonName": _str,
            "dnsNames": {"type": "array", "minItems": 1, "items": _str},
            "privateKey": {"type": "object", "additionalProperties": False, "properties": {
                "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]}, "size": {"type": "integer"},
                "rotationPolicy": {"enum": ["Never", "Always"]}}},
            "issuerRef": {"type": "object", "additionalProperties": False, "required": ["name"], "properties": {
                "name": _str, "kind": _str, "group": _str}}}}),
}


def validate(obj: dict, version: str) -> None:
    schema = FOREIGN_KINDS.get((obj["apiVersion"], obj["kind"]))
    if schema is not None:
        jsonschema.validate(obj, schema)
    else:
        kubernetes_validate.validate(obj, version, strict=True)


# ---------------------------------------------------------------------------
# Render and lint
# ---------------------------------------------------------------------------
EXPECTED_KINDS = {
    "default": {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment",
                "Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "NetworkPolicy",
                "ConfigMap"},
}
EXPECTED_KINDS["all-on"] = EXPECTED_KINDS["default"] | {"PodDisruptionBudget", "ServiceMonitor", "PodMonitor",
                                                        "Issuer", "Certificate"}
EXPECTED_KINDS["secret-tls"] = EXPECTED_KINDS["default"]


@pytest.mark.parametrize("variant", VARIANTS)
def test_renders_with_helm(variant):
    objs = objects(VALUE_SETS[variant])
    assert {o["kind"] for o in objs} == EXPECTED_KINDS[variant]
    names = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(names) == len(set(names)), "two objects with the same kind, namespace and name"
    for o in objs:
        namespaced = o["kind"] not in {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                                       "ValidatingWebhookConfiguration"}
        assert ("namespace" in o["metadata"]) == namespaced, o["metadata"]["name"]
        assert o["metadata"]["labels"]["app.kubernetes.io/instance"] == "mcp-warden"


@pytest.mark.parametrize("variant", VARIANTS)
def test_lint_strict(variant):
    report = helm.lint(CHART, VALUE_SETS[variant], strict=True, namespace=NAMESPACE, kube_version="v1.33.0")
    assert report["total_charts_linted"] == 1
    assert report["errors"] == [], report
    # Severity 1 is INFO (only "icon is recommended"); warnings (2) and errors (3) fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def test_lint_catches_a_broken_template(tmp_path):
    """Guard against a vacuous pass: the same lint rejects a template that does not render."""
    broken = tmp_path / "mcp-warden"
    with helm.Chart.load(CHART) as chart:
        chart.save_dir(tmp_path)
    (broken / "templates" / "broken.yaml").write_text("kind: ConfigMap\nmetadata: {{ .Values.nope.deeper }}\n")
    report = helm.lint(broken, None, strict=True, namespace=NAMESPACE)
    assert report["errors"] or any(m["severity"] >= 2 for m in report["messages"]), report


@pytest.mark.parametrize("variant, version", [(v, K8S_VERSIONS[0]) for v in VARIANTS]
                         + [("all-on", K8S_VERSIONS[1])])
def test_every_object_is_valid(variant, version):
    for obj in objects(VALUE_SETS[variant]):
        validate(obj, version)


def test_validation_catches_broken_objects():
    objs = objects(VALUE_SETS["all-on"])
    deployment = copy.deepcopy(operator_deployment(objs))
    deployment["spec"]["template"]["spec"]["containers"][0]["securityContex"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(deployment, K8S_VERSIONS[0])
    monitor = copy.deepcopy(find(objs, "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["intervall"] = "5s"
    with pytest.raises(jsonschema.ValidationError):
        validate(monitor, K8S_VERSIONS[0])


def test_crds_ship_in_the_crds_dir_and_match_the_generated_ones():
    """CRDs live in crds/ (installed before the templates, never upgraded or deleted by Helm:
    `helm uninstall` keeps them and every MCPServer) and are the generated ones (`make generate`)."""
    generated = sorted((REPO / "crds").glob("*.yaml"))
    assert [p.name for p in generated] == sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    for p in generated:
        assert (CHART / "crds" / p.name).read_text() == p.read_text(), f"charts/mcp-warden/crds/{p.name} is stale"
    with helm.Chart.load(CHART) as chart:
        assert sorted(c["name"] for c in chart.crds) == sorted(f"crds/{p.name}" for p in generated)
    for variant in VARIANTS:
        assert all(o["kind"] != "CustomResourceDefinition" for o in objects(VALUE_SETS[variant]))


@pytest.mark.parametrize("version", K8S_VERSIONS[:1])
def test_chart_crds_are_valid(version):
    with helm.Chart.load(CHART) as chart:
        for crd in chart.crds:
            kubernetes_validate.validate(yaml.safe_load(crd["data"]), version, strict=True)


# ---------------------------------------------------------------------------
# The operator's pod
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_operator_pod_is_pod_security_restricted(variant):
    pod = operator_pod(objects(VALUE_SETS[variant]))
    assert violations(pod) == []


def _break(pod: dict, rule: str) -> dict:
    pod = copy.deepcopy(pod)
    spec = pod["spec"]
    c = spec["containers"][0]
    sc = c["securityContext"]
    match rule:
        case "HostProcess":
            spec["securityContext"]["windowsOptions"] = {"hostProcess": True}
        case "HostNamespaces":
            spec["hostNetwork"] = True
        case "Privileged":
            sc["privileged"] = True
        case "Capabilities":
            sc["capabilities"] = {"add": ["SYS_ADMIN"], "drop": ["ALL"]}
        case "HostPathVolumes":
            spec["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
        case "HostPorts":
            c["ports"][0]["hostPort"] = 8081
        case "AppArmor":
            sc["appArmorProfile"] = {"type": "Unconfined"}
        case "SeLinux":
            sc["seLinuxOptions"] = {"type": "spc_t"}
        case "ProcMount":
            sc["procMount"] = "Unmasked"
        case "Seccomp":
            sc["seccompProfile"] = {"type": "Unconfined"}
        case "Sysctls":
            spec["securityContext"]["sysctls"] = [{"name": "kernel.msgmax", "value": "1"}]
        case "VolumeTypes":
            spec["volumes"].append({"name": "nfs", "nfs": {"server": "x", "path": "/"}})
        case "PrivilegeEscalation":
            del sc["allowPrivilegeEscalation"]
        case "RunAsNonRoot":
            del sc["runAsNonRoot"]
            del spec["securityContext"]["runAsNonRoot"]
        case "RunAsUser":
            sc["runAsUser"] = 0
    return pod


@pytest.mark.parametrize("rule", RULES)
def test_pod_security_checker_catches_each_rule(rule):
    pod = operator_pod(objects())
    assert rule in {r for r, _ in violations(_break(pod, rule))}


@pytest.mark.parametrize("variant", VARIANTS)
def test_operator_deployment(variant):
    values = VALUE_SETS[variant] or {}
    objs = objects(values)
    deployment = operator_deployment(objs)
    pod = deployment["spec"]["template"]
    (c,) = pod["spec"]["containers"]
    assert deployment["spec"]["replicas"] == values.get("replicaCount", 1)
    # Contract (operator/RBAC.md §2): the facades' NetworkPolicy admits the operator by these labels.
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == "mcp-warden-operator"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    env_labels = next(e["value"] for e in c["env"] if e["name"] == "MCP_WARDEN_OPERATOR_POD_LABELS")
    assert dict(kv.split("=", 1) for kv in env_labels.split(",")) == selector
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"admin": 8081, "webhook": 8443}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "admin"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}
    assert {"requests", "limits"} <= c["resources"].keys() and "memory" in c["resources"]["limits"]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["MCP_WARDEN_ADMIN_LISTEN"] == "0.0.0.0:8081"
    assert env["MCP_WARDEN_WEBHOOK_LISTEN"] == "0.0.0.0:8443"
    assert env["MCP_WARDEN_WEBHOOK_SERVICE"] == find(objs, "Service", "mcp-warden-webhook")["metadata"]["name"]
    assert env["MCP_WARDEN_WEBHOOK_CONFIG_NAME"] == "mcp-warden"
    sa = pod["spec"]["serviceAccountName"]
    assert find(objs, "ServiceAccount", sa)
    if variant == "all-on":
        assert c["image"].startswith("registry.example.com/mirror/mcp-warden-operator:0.1.0@sha256:")
        assert env["MCP_WARDEN_SIDECAR_IMAGE"].startswith("registry.example.com/mirror/mcp-warden-sidecar:0.1.0@sha256:")
        assert env["MCP_WARDEN_METRICS_NAMESPACE_LABELS"] == "kubernetes.io/metadata.name=observability"
        assert find(objs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector
        assert pod["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == selector
        assert pod["metadata"]["labels"]["team"] == "platform"
    else:
        assert c["image"] == "ghcr.io/mcp-warden/operator:0.1.0"
        assert env["MCP_WARDEN_SIDECAR_IMAGE"] == "ghcr.io/mcp-warden/sidecar:0.1.0"


# ---------------------------------------------------------------------------
# The webhook (operator/RBAC.md §4)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_webhook_contract(variant):
    values = VALUE_SETS[variant] or {}
    mode = values.get("webhook", {}).get("tls", {}).get("mode", "self-generated")
    objs = objects(values)
    svc = find(objs, "Service", "mcp-warden-webhook")
    (port,) = svc["spec"]["ports"]
    pod = operator_pod(objs)
    container_ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert port["port"] == 443 and container_ports[port["targetPort"]] == 8443
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    for kind, hook, path in [("ValidatingWebhookConfiguration", "validate.mcpservers.mcpwarden.dev", "/validate-mcpserver"),
                             ("MutatingWebhookConfiguration", "mutate.mcpservers.mcpwarden.dev", "/mutate-mcpserver")]:
        config = find(objs, kind, "mcp-warden")
        wh = config["webhooks"][0]
        assert wh["name"] == hook
        assert wh["failurePolicy"] == "Fail" and wh["sideEffects"] == "None"
        assert wh["admissionReviewVersions"] == ["v1"]
        assert wh["clientConfig"]["service"] == {"name": "mcp-warden-webhook", "namespace": NAMESPACE, "port": 443,
                                                 "path": path}
        assert wh["rules"] == [{"apiGroups": ["mcpwarden.dev"], "apiVersions": ["v1alpha1"],
                                "operations": ["CREATE", "UPDATE"], "resources": ["mcpservers"],
                                "scope": "Namespaced"}]
        # What the expression decides is tested on a real API server (tests/apiserver).
        assert [m["name"] for m in wh["matchConditions"]] == [
            "approval-or-covered-change-or-no-update-right"]
        expression = wh["matchConditions"][0]["expression"]
        assert "mcpwarden.dev/approve" in expression and "check('update')" in expression
        assert "mcpwarden.dev/changed-by" in expression and "request.operation == 'CREATE'" in expression
        # Every spec field an approval covers sends the write to the webhook (it records who made
        # it): all of the CRD's spec but `replicas` and who may reach the server (`expose`,
        # `onlyThroughGateway`), which no approval covers.
        crd = yaml.safe_load((REPO / "crds" / "mcpserver.yaml").read_text())
        spec_fields = set(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])
        listed = set(re.search(r"\[('image'.*?)\]\.exists\(f,", expression, re.S).group(1)
                     .replace("'", "").replace(" ", "").replace("\n", "").split(","))
        reach = {"replicas", "expose", "onlyThroughGateway"}
        assert listed == spec_fields - reach, listed ^ (spec_fields - reach)
        if kind == "MutatingWebhookConfiguration":
            assert wh["reinvocationPolicy"] == "Never"
        annotations = config["metadata"].get("annotations", {})
        # self-generated: the operator writes caBundle, so the chart must not own the field.
        assert ("caBundle" in wh["clientConfig"]) == (mode == "secret")
        assert ("cert-manager.io/inject-ca-from" in annotations) == (mode == "cert-manager")
    # The profiles' webhook: the facade loader refuses what it would refuse, and a profile in use is
    # not deleted; only spec writes and deletions come.
    validating = find(objs, "ValidatingWebhookConfiguration", "mcp-warden")
    assert len(validating["webhooks"]) == 3
    assert len(find(objs, "MutatingWebhookConfiguration", "mcp-warden")["webhooks"]) == 1
    profiles = validating["webhooks"][1]
    assert profiles["name"] == "validate.profiles.mcpwarden.dev"
    assert profiles["failurePolicy"] == "Fail" and profiles["sideEffects"] == "None"
    assert profiles["clientConfig"]["service"] == {"name": "mcp-warden-webhook", "namespace": NAMESPACE,
                                                   "port": 443, "path": "/validate-profile"}
    assert profiles["rules"][0]["resources"] == ["toolprofiles", "sandboxprofiles"]
    assert profiles["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert ("caBundle" in profiles["clientConfig"]) == (mode == "secret")
    assert "object.spec != oldObject.spec" in profiles["matchConditions"][0]["expression"]
    # The gateways' webhook: a gateway the operator could never build is refused; only spec writes come.
    gateways = validating["webhooks"][2]
    assert gateways["name"] == "validate.gateways.mcpwarden.dev"
    assert gateways["failurePolicy"] == "Fail" and gateways["sideEffects"] == "None"
    assert gateways["clientConfig"]["service"] == {"name": "mcp-warden-webhook", "namespace": NAMESPACE,
                                                   "port": 443, "path": "/validate-gateway"}
    assert gateways["rules"][0]["resources"] == ["mcpgateways"]
    assert gateways["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert ("caBundle" in gateways["clientConfig"]) == (mode == "secret")
    assert "object.spec != oldObject.spec" in gateways["matchConditions"][0]["expression"]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    mounts = {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    cert_dir = env["MCP_WARDEN_WEBHOOK_CERT_DIR"]
    if mode == "self-generated":
        assert cert_dir not in mounts  # files absent: the operator generates and keeps them in the Secret
        assert env["MCP_WARDEN_WEBHOOK_CERT_SECRET"] == "mcp-warden-webhook-tls"
    else:
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == mounts[cert_dir])
        assert volume["secret"]["secretName"] == env["MCP_WARDEN_WEBHOOK_CERT_SECRET"]
    if mode == "cert-manager":
        cert = find(objs, "Certificate")
        assert cert["spec"]["secretName"] == env["MCP_WARDEN_WEBHOOK_CERT_SECRET"]
        assert f"mcp-warden-webhook.{NAMESPACE}.svc" in cert["spec"]["dnsNames"]


def test_secret_mode_needs_a_secret_and_a_ca():
    with pytest.raises(helm.HelmError, match="secretName"):
        render({"webhook": {"tls": {"mode": "secret"}}})


# ---------------------------------------------------------------------------
# NetworkPolicy, metrics, dashboard, NOTES
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_operator_network_policy(variant):
    objs = objects(VALUE_SETS[variant])
    np = find(objs, "NetworkPolicy")
    assert np["spec"]["podSelector"]["matchLabels"].items() <= operator_pod(objs)["metadata"]["labels"].items()
    assert sorted(np["spec"]["policyTypes"]) == ["Egress", "Ingress"]
    ingress_ports = sorted(p["port"] for rule in np["spec"]["ingress"] for p in rule["ports"])
    assert ingress_ports == [8081, 8443]
    egress_ports = {p["port"] for rule in np["spec"]["egress"] for p in rule["ports"]}
    if variant == "all-on":  # tracing on: its collector, not the facades' audit store
        assert egress_ports == {53, 443, 6443, 9090, 4317}
        assert {"to": [{"ipBlock": {"cidr": "10.96.0.0/12"}}], "ports": [{"port": 4317, "protocol": "TCP"}]} in np["spec"]["egress"]
    else:
        assert egress_ports == {53, 443, 6443, 9090}
    facades = next(r for r in np["spec"]["egress"] if r["ports"] == [{"port": 9090, "protocol": "TCP"}])
    assert facades["to"][0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/managed-by": "mcp-warden-operator"}


def test_network_policy_can_be_turned_off():
    assert all(o["kind"] != "NetworkPolicy" for o in objects({"networkPolicy": {"enabled": False}}))


def test_monitors_scrape_the_admin_port():
    objs = objects(VALUE_SETS["all-on"])
    monitor = find(objs, "ServiceMonitor")
    metrics_svc = find(objs, "Service", "mcp-warden-metrics")
    assert monitor["spec"]["endpoints"][0]["port"] == metrics_svc["spec"]["ports"][0]["name"]
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    facades = find(objs, "PodMonitor", "mcp-warden-facades")
    assert facades["spec"]["namespaceSelector"] == {"any": True}
    assert facades["spec"]["podMetricsEndpoints"][0]["port"] == "admin"  # the facade container's :9090
    operator_monitor = find(objs, "PodMonitor", "mcp-warden-operator")
    assert operator_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "admin"


@pytest.mark.parametrize("variant", VARIANTS)
def test_dashboard_config_map(variant):
    values = VALUE_SETS[variant] or {}
    cm = find(objects(values), "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == (values.get("dashboard", {}).get("namespace") or NAMESPACE)
    assert json.loads(cm["data"]["mcp-warden.json"]) == json.loads(
        (CHART / "dashboards" / "mcp-warden.json").read_text())
    assert all(o["kind"] != "ConfigMap" for o in objects({"dashboard": {"enabled": False}}))


@pytest.mark.parametrize("variant", VARIANTS)
def test_notes_tell_the_next_command(variant):
    notes = render(VALUE_SETS[variant])["mcp-warden/templates/NOTES.txt"]
    assert f"kubectl -n {NAMESPACE} rollout status deployment/mcp-warden-operator" in notes
    assert "kubectl apply -f examples/" in notes
    assert "mcpwarden.dev/approve=$(kubectl get mcpserver" in notes and "{.status.capabilityDigest}" in notes
    assert "--clusterrole=mcp-warden-approver" in notes


def test_release_name_and_namespace_flow_through():
    objs = objects(None, name="warden-prod", namespace="platform")
    svc = find(objs, "Service", "warden-prod-mcp-warden-webhook")
    config = find(objs, "ValidatingWebhookConfiguration", "warden-prod-mcp-warden")
    assert config["webhooks"][0]["clientConfig"]["service"]["name"] == svc["metadata"]["name"]
    assert config["webhooks"][0]["clientConfig"]["service"]["namespace"] == "platform"
    env = {e["name"]: e.get("value") for e in operator_pod(objs)["spec"]["containers"][0]["env"]}
    assert env["MCP_WARDEN_WEBHOOK_SERVICE"] == "warden-prod-mcp-warden-webhook"
    assert env["MCP_WARDEN_WEBHOOK_CONFIG_NAME"] == "warden-prod-mcp-warden"
    assert find(objs, "ClusterRole", "warden-prod-mcp-warden-approver")


def test_labels_follow_name_override():
    """`nameOverride` renames the `app.kubernetes.io/name` of every object; the
    operator is told its own pod labels, so the facades still admit it."""
    objs = objects({"nameOverride": "warden"})
    deployment = operator_deployment(objs)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["app.kubernetes.io/name"] == "warden-operator"
    assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "warden-operator"
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "app.kubernetes.io/name=warden-operator" in env["MCP_WARDEN_OPERATOR_POD_LABELS"].split(",")
    for o in objs:
        name = o["metadata"]["labels"]["app.kubernetes.io/name"]
        assert name in {"warden", "warden-operator"}, (o["kind"], o["metadata"]["name"], name)
        assert o["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mcp-warden"
