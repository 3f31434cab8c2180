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
    assert {"stdio-server", "http-server", "with-secrets", "with-workspace", "with-egress", "replicated"} <= names
    assert len(CRDS) == 4


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_rendered_objects_are_valid(example: Path, version: str):
    objects = render(example)
    kinds = [o["kind"] for o in objects]
    replicas = next(o for o in objects if o["kind"] == "Deployment")["spec"]["replicas"]
    if replicas > 1:
        assert kinds == [
            "ServiceAccount", "ConfigMap", "Deployment", "Service", "Service", "ConfigMap", "NetworkPolicy",
            "PodDisruptionBudget",
        ]
    else:
        expose = [k for k in kinds if k in ("Ingress", "HTTPRoute")]  # what `spec.expose` asks for
        assert kinds == ["ServiceAccount", "ConfigMap", "Deployment", "Service", "ConfigMap", "NetworkPolicy", *expose]
    for obj in objects:
        if obj["kind"] == "HTTPRoute":  # a CRD of the Gateway API, not in the Kubernetes schemas
            continue
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


def test_replicated_example_has_the_scale_out_objects():
    """Scale-out: headless Service, facade-to-facade rule, PDB, drain settings."""
    objects = render(REPO / "examples/replicated.yaml")
    by_kind = {}
    for o in objects:
        by_kind.setdefault(o["kind"], []).append(o)
    peers = next(s for s in by_kind["Service"] if s["metadata"]["name"] == "memory-peers")
    assert peers["spec"]["clusterIP"] == "None"
    assert peers["spec"]["publishNotReadyAddresses"] is True
    assert [p["port"] for p in peers["spec"]["ports"]] == [8080]
    np = by_kind["NetworkPolicy"][0]["spec"]
    same = {"podSelector": {"matchLabels": {"mcpwarden.dev/server": "memory"}}}
    assert {"from": [same], "ports": [{"port": 8080, "protocol": "TCP"}]} in np["ingress"]
    assert np["egress"] == [{"to": [same], "ports": [{"port": 8080, "protocol": "TCP"}]}]
    pdb = by_kind["PodDisruptionBudget"][0]["spec"]
    assert pdb == {"maxUnavailable": 1, "selector": {"matchLabels": {"mcpwarden.dev/server": "memory"}}}
    deployment = by_kind["Deployment"][0]["spec"]
    assert deployment["replicas"] == 3
    assert deployment["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pod = deployment["template"]["spec"]
    facade = next(c for c in pod["containers"] if c["name"] == "facade")
    env = {e["name"]: e for e in facade["env"]}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["MCP_WARDEN_ADVERTISE_ADDR"]["value"] == "$(POD_IP):8080"
    # Which replica counts a caller's calls: the facades read every replica's
    # address from the operator's ConfigMap (DNS is closed to the pod).
    assert env["MCP_WARDEN_PEERS_FILE"]["value"] == "/etc/mcp-warden/peers/peers"
    volume = next(v for v in pod["volumes"] if v["name"] == "peers")
    assert volume["configMap"] == {"name": "memory-peers", "optional": True}
    listing = next(c for c in by_kind["ConfigMap"] if c["metadata"]["name"] == "memory-peers")
    assert list(listing["data"]) == ["peers"]
    assert env["MCP_WARDEN_PEER_KEY_FILE"]["value"] == "/etc/mcp-warden/peer/peer.key"
    assert list(env)[0] == "POD_IP", "dependent env vars must come after POD_IP"
    drain = int(facade["args"][facade["args"].index("--drain-timeout-secs") + 1])
    pre_stop = facade["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pod["terminationGracePeriodSeconds"] > pre_stop + drain
    assert facade["readinessProbe"]["httpGet"]["path"] == "/readyz"
    peer_volume = next(v for v in pod["volumes"] if v["name"] == "peer-key")
    assert peer_volume["secret"]["secretName"] == "memory-peer-key"


ALL_CAPABILITIES = """\
apiVersion: mcpwarden.dev/v1alpha1
kind: SandboxProfile
metadata: {name: wide, namespace: team-a}
spec:
  workspaceAccess: readWrite
  automountServiceAccountToken: true
  network: {egress: {dns: true, rules: [{cidr: 10.0.0.0/8, ports: [443, 80]}]}}
---
apiVersion: mcpwarden.dev/v1alpha1
kind: ToolProfile
metadata: {name: tp, namespace: team-a}
spec:
  tools: [{name: write_file, risk: high}, {name: read_file, risk: low}]
---
apiVersion: mcpwarden.dev/v1alpha1
kind: MCPServer
metadata:
  name: wide
  namespace: team-a
  annotations: {ANNOTATIONS}
spec:
  image: img
  command: [srv]
  replicas: 2
  workspace: {persistentVolumeClaim: {claimName: data}}
  toolProfileRef: {name: tp}
  sandboxProfileRef: {name: wide}
"""


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_every_capability_approved_is_valid(tmp_path: Path, version: str):
    """Approval changes the objects (egress rules, RW workspace, projected token): still valid."""
    pending = tmp_path / "pending.yaml"
    pending.write_text(ALL_CAPABILITIES.replace("{ANNOTATIONS}", "{}"))
    text = subprocess.run(
        [str(operator()), "render", "-f", str(pending)], capture_output=True, text=True, check=True
    ).stdout
    digest = next(l.split(": ", 1)[1] for l in text.splitlines() if l.startswith("#   capabilityDigest: "))
    approved = tmp_path / "approved.yaml"
    approved.write_text(ALL_CAPABILITIES.replace("{ANNOTATIONS}", f'{{mcpwarden.dev/approve: "{digest}"}}'))
    objects = render(approved)
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    np = next(o for o in objects if o["kind"] == "NetworkPolicy")["spec"]
    assert {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 443, "protocol": "TCP"}]} in np["egress"]
    pod = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    server = next(c for c in pod["containers"] if c["name"] == "server")
    mounts = {m["name"]: m for m in server["volumeMounts"]}
    assert "readOnly" not in mounts["workspace"]
    assert mounts["sa-token"]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"
    facade = next(c for c in pod["containers"] if c["name"] == "facade")
    assert "sa-token" not in {m["name"] for m in facade["volumeMounts"]}
    policy = yaml.safe_load(next(o for o in objects if o["kind"] == "ConfigMap")["data"]["policy.yaml"])
    assert policy["approvedTools"] == ["write_file"]
    assert policy["sandbox"]["writeAllowed"] is True


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_remote_server_approved_is_valid(tmp_path: Path, version: str):
    """A remote server, its egress approved: the facade alone, egress to public addresses on 443."""
    example = (REPO / "examples/remote-server.yaml").read_text()
    text = subprocess.run(
        [str(operator()), "render", "-f", str(REPO / "examples/remote-server.yaml")],
        capture_output=True, text=True, check=True,
    ).stdout
    digest = next(l.split(": ", 1)[1] for l in text.splitlines() if l.startswith("#   capabilityDigest: "))
    approved = tmp_path / "approved.yaml"
    approved.write_text(example.replace(
        "  name: tracker\n  namespace: team-a\nspec:\n  toolProfileRef:",
        f'  name: tracker\n  namespace: team-a\n  annotations: {{mcpwarden.dev/approve: "{digest}"}}\nspec:\n  toolProfileRef:',
    ))
    objects = render(approved)
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    pod = next(o for o in objects if o["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["facade"]
    np = next(o for o in objects if o["kind"] == "NetworkPolicy")["spec"]
    assert len(np["egress"]) == 2, np["egress"]
    assert [p["port"] for p in np["egress"][0]["ports"]] == [53, 53]
    public = np["egress"][1]
    assert public["ports"] == [{"port": 443, "protocol": "TCP"}]
    assert [t["ipBlock"]["cidr"] for t in public["to"]] == ["0.0.0.0/0", "::/0"]
    assert "10.0.0.0/8" in public["to"][0]["ipBlock"]["except"]


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_broad_egress_approved_is_valid(tmp_path: Path, version: str):
    """`0.0.0.0/0` approved on a cluster whose ranges are known: a valid NetworkPolicy
    whose ipBlock excepts those ranges (each inside the block, as the API server requires)."""
    source = (REPO / "operator/tests/fixtures/broad-egress.yaml").read_text()
    env = {
        **os.environ,
        "MCP_WARDEN_CLUSTER_POD_CIDRS": "10.244.0.0/16",
        "MCP_WARDEN_CLUSTER_SERVICE_CIDRS": "10.96.0.0/12",
        "MCP_WARDEN_CLUSTER_NODE_CIDRS": "192.168.49.0/24",
    }
    pending = tmp_path / "pending.yaml"
    pending.write_text(source.replace("{ANNOTATIONS}", "{}"))
    text = subprocess.run(
        [str(operator()), "render", "-f", str(pending)], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert "network.egress.internet:0.0.0.0/0:443  (pending)" in text
    digest = next(l.split(": ", 1)[1] for l in text.splitlines() if l.startswith("#   capabilityDigest: "))
    approved = tmp_path / "approved.yaml"
    approved.write_text(source.replace("{ANNOTATIONS}", f'{{mcpwarden.dev/approve: "{digest}"}}'))
    out = subprocess.run(
        [str(operator()), "render", "-f", str(approved)], capture_output=True, text=True, check=True, env=env
    ).stdout
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    np = next(o for o in objects if o["kind"] == "NetworkPolicy")["spec"]
    blocks = {t["ipBlock"]["cidr"]: t["ipBlock"].get("except") for r in np["egress"] for t in r["to"]}
    assert blocks["0.0.0.0/0"] == ["10.96.0.0/12", "10.244.0.0/16", "169.254.0.0/16", "192.168.49.0/24"]
    assert blocks["10.96.40.0/24"] is None, "an approved cluster block is not excepted from itself"


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_egress_proxy_objects_are_valid(version: str, tmp_path: Path):
    """An approved host-egress example under the proxy engine: the server's
    objects with the proxy variables and the namespace's proxy Deployment,
    Service and NetworkPolicy, all valid."""
    source = (REPO / "examples" / "with-egress.yaml").read_text()
    pending = subprocess.run([str(operator()), "render", "-f", str(REPO / "examples" / "with-egress.yaml")],
                             capture_output=True, text=True, timeout=60)
    digest = next(line.split(": ", 1)[1] for line in pending.stdout.splitlines()
                  if line.startswith("#   capabilityDigest: "))
    head = "kind: MCPServer\nmetadata:\n  name: fetch\n  namespace: team-a\n"
    approved = source.replace(head, head + f"  annotations: {{mcpwarden.dev/approve: \"{digest}\"}}\n", 1)
    assert approved != source
    (tmp_path / "approved.yaml").write_text(approved)
    out = subprocess.run([str(operator()), "render", "--egress-engine", "proxy", "-f", str(tmp_path / "approved.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    objects = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert ("Deployment", "mcp-warden-egress") in names and ("Service", "mcp-warden-egress") in names
    assert ("NetworkPolicy", "mcp-warden-egress") in names
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_egress_proxy_objects_of_the_server_scope_are_valid(version: str, tmp_path: Path):
    """The same example under `--egress-proxy-scope server`: the server's own
    proxy (named after it, its own credential), no namespace proxy, all valid."""
    source = (REPO / "examples" / "with-egress.yaml").read_text()
    pending = subprocess.run([str(operator()), "render", "-f", str(REPO / "examples" / "with-egress.yaml")],
                             capture_output=True, text=True, timeout=60)
    digest = next(line.split(": ", 1)[1] for line in pending.stdout.splitlines()
                  if line.startswith("#   capabilityDigest: "))
    head = "kind: MCPServer\nmetadata:\n  name: fetch\n  namespace: team-a\n"
    approved = source.replace(head, head + f"  annotations: {{mcpwarden.dev/approve: \"{digest}\"}}\n", 1)
    (tmp_path / "approved.yaml").write_text(approved)
    out = subprocess.run([str(operator()), "render", "--egress-engine", "proxy", "--egress-proxy-scope", "server",
                          "-f", str(tmp_path / "approved.yaml")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    objects = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    names = [(o["kind"], o["metadata"]["name"]) for o in objects]
    for kind in ("Deployment", "Service", "NetworkPolicy"):
        assert (kind, "fetch-egress-proxy") in names, names
        assert (kind, "mcp-warden-egress") not in names, names
    deployment = next(o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "fetch")
    env = deployment["spec"]["template"]["spec"]["containers"]
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for c in env for e in c.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {}) and e["name"] == "HTTPS_PROXY"}
    assert refs == {"fetch-egress-proxy-credential"}
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
