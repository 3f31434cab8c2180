"""Approved host egress through the egress proxy, on the node.

The node has neither Cilium nor Calico, so the operator (the chart's default
`egressEngine: auto`) enforces approved host names with the namespace's
egress proxy (`mcp-warden-egress`, docs/egress-proxy.md). In a namespace of
its own this module runs:

- a stand-in package index as a pod (tests/node/pypi_index.py: a PEP 503
  "simple" index of the wheels tests/pods/.wheels holds, the ones the uv
  stand-in image carries), behind TLS with a CA the test makes, its
  certificate for `pypi.<ns>.internal`, behind a Service;
- the `stdio-server` example's `git` server, `uvx mcp-server-git==…`, on the
  uv image *without* pre-installed wheels (build-node-images.py's
  `ghcr.io/astral-sh/uv:<uv>-python3.12-bookworm`), its `uvx` told the index
  (`UV_INDEX_URL`) and the CA (`SSL_CERT_FILE`; the CA is a file of its
  workspace). Its SandboxProfile names the index host on 443
  and, since the name resolves to the Service's (private) address, that
  address as approved egress: adding it changes the digest, and `bob`
  approves the new one as the tour says;
- a second server (`clock`, the `mcp/time` stand-in) with host egress of its
  own, so with a proxy credential of its own.

What it shows: the `HostEgress` condition names the proxy; the `git` pod
becomes Ready only by fetching its package, and the proxy's audit has the
allowed CONNECTs of `<ns>/git` to the index while the index's access log
has every request coming from the proxy pod's address, none from the server
pod's; a real client (the official Python SDK, tests/node/node_client.py)
lists and calls its tools through its Service; from the `clock` pod, its own
credential gets `403 host_not_approved` for the index (audited as
`<ns>/clock`) and no credential gets `407` (audited with no client).

The node's CNI (the bridge plugin) does not enforce NetworkPolicy: whether a
server pod that ignores the proxy variables reaches nothing is the CNI's to
enforce, not something this node can show. The policies the operator made
(the server's: to the proxy only, and its approved block; the proxy's: in
from the servers it serves, out on the approved ports) are read from the API
server, checked, and validated against the Kubernetes schema
(kubernetes-validate, as tests/operator does for rendered objects).

The node has no cluster DNS: the proxy resolves names itself, from its
/etc/hosts first, so the test gives the proxy's Deployment the index's name
as a host alias (a field the operator does not set), as test_gateway_node.py
does for the gateway.
"""
from __future__ import annotations

import base64
import datetime
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from k8s_cluster import wait_for  # noqa: E402
from k8s_node import Node  # noqa: E402
from node_fixtures import NONROOT, POLICY_BLOCKED, load, pods_of, tour  # noqa: E402
from warden_helpers import check_egress_record  # noqa: E402 - tests/e2e, on sys.path (node_fixtures)

NS = "team-egress"
INDEX_HOST = f"pypi.{NS}.internal"
INDEX_IMAGE = "ghcr.io/astral-sh/uv:python3.12-bookworm"  # the stand-in with /opt/wheels
GIT_VERSION = "2026.10.19"
PROXY = "mcp-warden-egress"
APPROVE = (f"kubectl -n {NS} annotate mcpserver {{name}} --overwrite mcpwarden.dev/approve="
           f"$(kubectl -n {NS} get mcpserver {{name}} -o jsonpath='{{{{.status.capabilityDigest}}}}')")
RESTRICTED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]}}


def plain_uv_image(images: dict[str, str]) -> str:
    refs = [r for r in images if re.fullmatch(r"ghcr\.io/astral-sh/uv:\d[^:]*-python3\.12-bookworm", r)]
    assert len(refs) == 1, sorted(images)
    return refs[0]


def by_digest(ref: str, archive: str) -> str:
    """`repository@sha256:…` of a loaded archive (node.load tags it so): a
    server named by digest is not pinned by the operator (one rollout less)."""
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))
    repository = ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else ref
    return f"{repository}@{index['manifests'][0]['digest']}"


def make_tls() -> dict[str, bytes]:
    """A CA of the test's own and a certificate for the index's name."""
    from cryptography import x509  # noqa: PLC0415
    from cryptography.hazmat.primitives import hashes, serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415
    from cryptography.x509.oid import NameOID  # noqa: PLC0415

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcp-warden node test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, INDEX_HOST)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(INDEX_HOST)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return {"ca.pem": ca.public_bytes(pem), "tls.crt": cert.public_bytes(pem),
            "tls.key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())}


def index_objects(tls: dict[str, bytes]) -> list[dict]:
    labels = {"app": "pypi"}
    pod = {"automountServiceAccountToken": False, "enableServiceLinks": False,
           "terminationGracePeriodSeconds": 2,
           "securityContext": {"runAsNonRoot": True, "runAsUser": NONROOT, "runAsGroup": NONROOT,
                               "seccompProfile": {"type": "RuntimeDefault"}},
           "containers": [{"name": "index", "image": INDEX_IMAGE, "imagePullPolicy": "IfNotPresent",
                           "command": ["python3", "/index/pypi_index.py", "/opt/wheels", "/tls/tls.crt",
                                       "/tls/tls.key", "8443"],
                           "ports": [{"containerPort": 8443}],
                           "readinessProbe": {"tcpSocket": {"port": 8443}, "periodSeconds": 2},
                           "securityContext": RESTRICTED_CONTAINER,
                           "volumeMounts": [{"name": "script", "mountPath": "/index", "readOnly": True},
                                            {"name": "tls", "mountPath": "/tls", "readOnly": True}]}],
           "volumes": [{"name": "script", "configMap": {"name": "pypi-index"}},
                       {"name": "tls", "secret": {"secretName": "pypi-tls", "defaultMode": 0o444}}]}
    return [
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pypi-tls", "namespace": NS},
         "type": "kubernetes.io/tls",
         "data": {k: base64.b64encode(tls[k]).decode() for k in ("tls.crt", "tls.key")}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pypi-index", "namespace": NS},
         "data": {"pypi_index.py": (HERE / "pypi_index.py").read_text()}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "pypi", "namespace": NS},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pypi", "namespace": NS},
         "spec": {"selector": labels, "ports": [{"name": "https", "port": 443, "targetPort": 8443}]}},
    ]


def workspace(node: Node, tls: dict[str, bytes]) -> list[dict]:
    """The git server's workspace: a repository, and the test CA (its
    SSL_CERT_FILE), on a static volume owned by the pods' user."""
    path = node.dir / "volumes" / f"{NS}-repos"
    repo = path / "demo"
    repo.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README.md").write_text("demo\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "README.md"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    (path / "ca.pem").write_bytes(tls["ca.pem"])
    subprocess.run(["chown", "-R", f"{NONROOT}:{NONROOT}", str(path)], check=True)
    return [{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{NS}-repos"},
             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                      "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": NS, "name": "repos"},
                      "hostPath": {"path": str(path), "type": "Directory"}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "repos", "namespace": NS},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": f"{NS}-repos",
                      "resources": {"requests": {"storage": "1Gi"}}}}]


def warden(kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": kind, "metadata": {"name": name, "namespace": NS},
            "spec": spec}


def servers(git_image: str, clock_image: str) -> list[dict]:
    """`git` as the stdio-server example has it (its index and CA given),
    and `clock`, whose approved host is not the index."""
    viewer = [{"role": "viewer", "serviceAccounts": [f"{NS}/coding-agent"]}]
    path_arg = [{"name": "repo_path", "kind": "path", "root": "/workspace", "allow": ["/workspace/**"]}]
    git_tools = [{"name": "git_log", "alias": "log", "risk": "low", "requiredRole": "viewer", "arguments": path_arg},
                 {"name": "git_status", "risk": "low", "requiredRole": "viewer", "arguments": path_arg}]
    git_env = [{"name": "UV_INDEX_URL", "value": f"https://{INDEX_HOST}/simple"},
               # uv 0.13 takes the bundle as its trust store (UV_NATIVE_TLS,
               # now UV_SYSTEM_CERTS, is not needed for that).
               {"name": "SSL_CERT_FILE", "value": "/workspace/ca.pem"}]
    return [
        warden("SandboxProfile", "index", {"network": {"egress": {"hosts": [{"name": INDEX_HOST, "ports": [443]}]}}}),
        warden("ToolProfile", "git-readonly", {"defaultAction": "deny", "roles": viewer, "tools": git_tools}),
        warden("MCPServer", "git", {
            "image": git_image, "imagePullPolicy": "IfNotPresent", "command": ["uvx", f"mcp-server-git=={GIT_VERSION}"],
            "transport": "stdio", "protocolEra": "modern", "env": git_env,
            "toolProfileRef": {"name": "git-readonly"}, "sandboxProfileRef": {"name": "index"},
            "workspace": {"mountPath": "/workspace", "persistentVolumeClaim": {"claimName": "repos"}}}),
        warden("SandboxProfile", "elsewhere",
               {"network": {"egress": {"hosts": [{"name": "time.example.org", "ports": [443]}]}}}),
        warden("ToolProfile", "clock", {"tools": [{"name": "get_current_time", "risk": "low"}], "roles": viewer}),
        warden("MCPServer", "clock", {
            "image": clock_image, "imagePullPolicy": "IfNotPresent", "command": ["mcp-server-time"],
            "toolProfileRef": {"name": "clock"}, "sandboxProfileRef": {"name": "elsewhere"}}),
    ]


def status_of(node: Node, name: str) -> dict:
    return (node.get("mcpserver", name, NS) or {}).get("status", {})


def condition(node: Node, name: str, kind: str) -> dict:
    return {c["type"]: c for c in status_of(node, name).get("conditions", [])}.get(kind, {})


def pending_digest(node: Node, name: str, not_this: str | None = None) -> str:
    def waiting():
        status = status_of(node, name)
        digest = status.get("capabilityDigest")
        return (condition(node, name, "CapabilitiesApproved").get("status") == "False" and digest
                and digest != not_this and digest)
    return wait_for(f"{name}'s capabilities waiting for approval", waiting, timeout=120)


def rollout(node: Node, name: str, what: str = "deployment") -> None:
    out = node.kubectl("-n", NS, "rollout", "status", f"{what}/{name}", "--timeout=240s", check=False, timeout=260)
    if out.code != 0:
        logs = node.kubectl("-n", NS, "logs", f"deployment/{name}", "--all-containers", "--tail=40",
                            check=False).stdout
        proxy = node.kubectl("-n", NS, "logs", f"deployment/{PROXY}", "--tail=20", check=False).stdout
        raise AssertionError(f"{name} not rolled out: {out.stderr}\n{logs}\n--- the proxy:\n{proxy}\n"
                             f"{node.kubectl('-n', NS, 'get', 'pods', '-o', 'wide', check=False).stdout}")


@pytest.fixture(scope="module")
def egress(node, chart, images):
    """The namespace set up, both servers approved and Ready; removed afterwards."""
    started = time.monotonic()
    git_image = plain_uv_image(images)
    load(node, images, "ghcr.io/astral-sh/", "mcp/time", "ghcr.io/mcp-warden/sidecar")
    git_image = by_digest(git_image, images[git_image])
    clock_image = by_digest("mcp/time:latest", images["mcp/time:latest"])
    tls = make_tls()
    try:
        tour(node, f"kubectl create namespace {NS}")
        tour(node, f"kubectl label namespace {NS} pod-security.kubernetes.io/enforce=restricted "
                   "pod-security.kubernetes.io/enforce-version=latest")
        tour(node, f"kubectl -n {NS} create serviceaccount coding-agent")
        node.apply([*index_objects(tls), *workspace(node, tls)])
        index_ip = node.get("service", "pypi", NS)["spec"]["clusterIP"]
        node.apply(servers(git_image, clock_image))
        # The index host alone first: then its address block, which changes the digest.
        hosts_only = pending_digest(node, "git")
        block = {"spec": {"network": {"egress": {"rules": [{"cidr": f"{index_ip}/32", "ports": [443]}]}}}}
        node.kubectl("-n", NS, "patch", "sandboxprofile", "index", "--type=merge", "-p", json.dumps(block))
        with_block = pending_digest(node, "git", not_this=hosts_only)
        requested = status_of(node, "git")["requestedCapabilities"]
        # clock first: the namespace's proxy starts for it. It resolves the
        # index's name from its /etc/hosts (no cluster DNS here).
        tour(node, APPROVE.format(name="clock"), user="bob")
        wait_for("the proxy's Deployment", lambda: node.get("deployment", PROXY, NS), timeout=120)
        aliases = [{"ip": index_ip, "hostnames": [INDEX_HOST]}]
        node.kubectl("-n", NS, "patch", "deployment", PROXY, "--type=strategic",
                     "-p", json.dumps({"spec": {"template": {"spec": {"hostAliases": aliases}}}}))
        for name in ("pypi", PROXY, "clock"):
            rollout(node, name)
        # Then git, with the proxy running: its credential reaches the
        # running proxy through the clients file.
        approved = time.monotonic()
        tour(node, APPROVE.format(name="git"), user="bob")
        rollout(node, "git")
        git_ready_after = time.monotonic() - approved
        print(f"egress module set up in {time.monotonic() - started:.1f}s (git Ready {git_ready_after:.1f}s "
              "after its approval)")
        yield {"index_ip": index_ip, "digests": (hosts_only, with_block), "requested": requested,
               "git_ready_after": git_ready_after}
    finally:
        cleanup_started = time.monotonic()
        node.kubectl("-n", NS, "delete", "mcpserver", "--all", "--wait=true", check=False, timeout=180)
        node.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=150s", check=False, timeout=170)
        node.kubectl("delete", "pv", f"{NS}-repos", "--wait=false", check=False)
        shutil.rmtree(node.dir / "volumes" / f"{NS}-repos", ignore_errors=True)
        print(f"egress module cleaned up in {time.monotonic() - cleanup_started:.1f}s")


def proxy_audit(node: Node) -> list[dict]:
    out = node.kubectl("-n", NS, "logs", f"deployment/{PROXY}", "--tail=-1")
    return [json.loads(line) for line in out.stdout.splitlines()
            if line.startswith("{") and '"event":"egress_' in line]


def index_log(node: Node) -> list[dict]:
    out = node.kubectl("-n", NS, "logs", "deployment/pypi", "--tail=-1")
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"client"')]


def test_auto_picks_the_proxy_and_the_condition_names_it(node, egress):
    """Neither Cilium's nor Calico's policy is served here: `auto` runs the
    proxy; both servers say so; the index's block changed the digest."""
    hosts_only, with_block = egress["digests"]
    assert hosts_only != with_block
    assert f"network.egress.host:{INDEX_HOST}:443" in egress["requested"], egress["requested"]
    assert any(f"{egress['index_ip']}/32:443" in c for c in egress["requested"]), egress["requested"]
    for name in ("git", "clock"):
        status = status_of(node, name)
        assert status["approvedDigest"] == status["capabilityDigest"], status
        host_egress = condition(node, name, "HostEgress")
        assert host_egress.get("status") == "True" and host_egress.get("reason") == "EgressProxy", status
        assert node.get("mcpserver", name, NS)["metadata"]["annotations"]["mcpwarden.dev/approved-by"] == "bob"
    env = {e["name"]: e for c in node.get("deployment", "git", NS)["spec"]["template"]["spec"]["containers"]
           if c["name"] == "server" for e in c.get("env", [])}
    assert env["HTTPS_PROXY"]["valueFrom"]["secretKeyRef"]["name"] == "git-egress-proxy", env
    assert egress["index_ip"] in env["NO_PROXY"]["value"], env


def test_the_server_fetched_its_package_through_the_proxy(node, egress):
    """The image has no wheels: the pod is Ready because `uvx` fetched them
    from the index, through the proxy. The proxy's audit has `<ns>/git`'s
    tunnels to the index; the index saw only the proxy pod's address."""
    tunnels = [r for r in proxy_audit(node) if r["event"] == "egress_tunnel" and r["client"] == f"{NS}/git"]
    assert tunnels, proxy_audit(node)
    for r in tunnels:
        check_egress_record(r)
        assert (r["host"], r["port"], r["status"], r["address"]) == (INDEX_HOST, 443, 200, egress["index_ip"]), r
    assert sum(r["bytes_down"] for r in tunnels) > 100_000, tunnels
    requests = index_log(node)
    wheels = [r for r in requests if r["path"].startswith("/files/")]
    assert any(r["path"].startswith(f"/files/mcp_server_git-{GIT_VERSION}-") for r in wheels), requests
    proxy_ips = {p["status"]["podIP"] for p in pods_of(node, PROXY, NS)}
    server_ips = {p["status"]["podIP"] for p in pods_of(node, "git", NS)}
    assert {r["client"] for r in requests} <= proxy_ips, (proxy_ips, requests)
    assert not server_ips & {r["client"] for r in requests}, (server_ips, requests)


def test_a_server_approved_while_the_proxy_runs_is_served_at_once(node, egress):
    """git was approved with the proxy already running (for clock): the
    operator wrote the clients file and put its hash on the proxy's pods,
    which makes the kubelet refresh their copy at once (else on its periodic
    sync, up to a minute or more, while the new server's fetches get 407)."""
    import hashlib  # noqa: PLC0415
    clients = node.get("configmap", "mcp-warden-egress-clients", NS)["data"]["clients.json"]
    assert f'"{NS}/git"' in clients and f'"{NS}/clock"' in clients, clients
    want = "sha256:" + hashlib.sha256(clients.encode()).hexdigest()
    for pod in pods_of(node, PROXY, NS):
        assert pod["metadata"].get("annotations", {}).get("mcpwarden.dev/egress-clients") == want, pod["metadata"]
    logs = node.kubectl("-n", NS, "logs", f"deployment/{PROXY}", "--tail=-1").stdout
    assert re.search(r"clients file reloaded.*clients\S*=\S*2", logs), logs[-3000:]
    assert egress["git_ready_after"] < 60, egress["git_ready_after"]


def test_a_client_lists_and_calls_the_server_through_its_service(node, egress):
    text = tour(node, f"mcp-warden-operator client-config git -n {NS}")
    url = re.search(r"^#\s+in the cluster: (\S+)$", text, re.M) or re.search(r"^# URL: (\S+)$", text, re.M)
    url = url.group(1)
    command = re.search(r"^#\s+(kubectl -n \S+ create token <service-account> --audience \S+)$", text, re.M).group(1)
    token = tour(node, command.replace("<service-account>", "coding-agent")).strip()
    host = url.split("//", 1)[1].split(":", 1)[0].split("/", 1)[0]
    out = node.in_node([sys.executable, str(HERE / "node_client.py"), url,
                        "--call", "git_status", json.dumps({"repo_path": "/workspace/demo"}),
                        "--refused", "git_commit", json.dumps({"repo_path": "/workspace/demo", "message": "x"})],
                       {host: node.get("service", "git", NS)["spec"]["clusterIP"]}, env={"MCP_WARDEN_TOKEN": token})
    assert out.returncode == 0, out.stderr[-4000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(seen["tools"]) == {"log", "git_status"}, seen
    assert "On branch" in (seen["call"] or ""), seen
    assert seen["refused"]["code"] == POLICY_BLOCKED, seen


# Run in the clock server's container: its own proxy URL (HTTPS_PROXY, the
# operator's), then no credential; then Python's urllib as a server would use it.
PROBE = r"""
import base64, json, os, socket, sys, urllib.parse, urllib.request
host = sys.argv[1]
proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
def connect(credential):
    s = socket.create_connection((proxy.hostname, proxy.port), timeout=10)
    head = f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n"
    if credential:
        head += "Proxy-Authorization: Basic " + base64.b64encode(credential.encode()).decode() + "\r\n"
    s.sendall((head + "\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    s.close()
    return int(data.split(b" ", 2)[1])
own = urllib.parse.unquote(proxy.username) + ":" + proxy.password
try:
    urllib.request.urlopen(f"https://{host}/simple/", timeout=10)
    through_env = "fetched"
except OSError as e:
    through_env = str(e)
print(json.dumps({"own": connect(own), "none": connect(None), "env": through_env}))
"""


def test_another_servers_pod_cannot_use_the_proxy_for_the_index(node, egress):
    """From the clock pod: its own credential is refused for the index (403,
    audited as `<ns>/clock`), no credential gets 407 (audited, client null);
    urllib with the pod's HTTPS_PROXY fails at the tunnel."""
    since = len(proxy_audit(node))
    out = node.kubectl("-n", NS, "exec", "deployment/clock", "-c", "server", "--",
                       "python3", "-c", PROBE, INDEX_HOST, timeout=60)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["own"] == 403 and seen["none"] == 407, seen
    assert "403" in seen["env"], seen
    clock_ip = pods_of(node, "clock", NS)[0]["status"]["podIP"]

    def refusals():
        fresh = [r for r in proxy_audit(node)[since:] if r["event"] == "egress_refused" and r["host"] == INDEX_HOST]
        return len(fresh) >= 3 and fresh
    fresh = wait_for("the refusals audited", refusals, timeout=20)
    for r in fresh:
        check_egress_record(r)
    assert sum(1 for r in fresh if r["client"] == f"{NS}/clock" and r["outcome"] == "host_not_approved"
               and r["status"] == 403) == 2, fresh
    assert any(r["client"] is None and r["outcome"] == "unauthenticated" and r["status"] == 407 for r in fresh), fresh
    assert not [r for r in index_log(node) if r["client"] == clock_ip]


def test_the_policies_are_valid_and_point_at_the_proxy(node, egress):
    """The NetworkPolicies the operator made, as the API server holds them:
    valid against the Kubernetes schema, the server's egress to the proxy
    pods (and its approved block), the proxy's from the servers it serves
    and out on the approved port. The bridge CNI does not enforce them."""
    import kubernetes_validate  # noqa: PLC0415
    policies = {p["metadata"]["name"]: p for p in node.list("networkpolicies", NS)}
    assert {"git", "clock", PROXY} <= set(policies), sorted(policies)
    for policy in policies.values():
        obj = {k: policy[k] for k in ("apiVersion", "kind", "spec")}
        obj["metadata"] = {k: policy["metadata"][k] for k in ("name", "namespace", "labels") if k in policy["metadata"]}
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)
    to_proxy = {"podSelector": {"matchLabels": {"app.kubernetes.io/name": PROXY}}}
    for name in ("git", "clock"):
        rules = policies[name]["spec"]["egress"]
        assert {"ports": [{"port": 3128, "protocol": "TCP"}], "to": [to_proxy]} in rules, rules
    git_blocks = [peer["ipBlock"]["cidr"] for r in policies["git"]["spec"]["egress"] for peer in r.get("to", [])
                  if "ipBlock" in peer]
    assert git_blocks == [f"{egress['index_ip']}/32"], policies["git"]["spec"]["egress"]
    proxy = policies[PROXY]["spec"]
    served = proxy["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0]["values"]
    assert sorted(served) == ["clock", "git"], proxy["ingress"]
    out_443 = [r for r in proxy["egress"] if {"port": 443, "protocol": "TCP"} in r.get("ports", [])]
    blocks = {peer["ipBlock"]["cidr"] for r in out_443 for peer in r["to"]}
    assert {"0.0.0.0/0", f"{egress['index_ip']}/32"} <= blocks, proxy["egress"]
