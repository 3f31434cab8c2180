"""Fixtures of the real-API-server suite (tests/apiserver), a pytest plugin that
tests/conftest.py loads (`pytest_plugins`): a conftest.py here would shadow the
root one for the modules that `from conftest import ...`.

    cluster            session: a kube-apiserver + kube-controller-manager on loopback, started
                       with $MCP_WARDEN_K8S_BIN_DIR/control-plane.sh (default: a `shared/k8s`
                       folder beside the checkout) into a temp dir and stopped at the end. Every test here SKIPS,
                       saying what is missing, when the binaries or etcd are absent.
    installed          session: the chart's objects (rendered by Helm's engine, chart defaults,
                       release mcp-warden in mcp-warden-system) applied, with the webhook
                       Service made selector-less and its EndpointSlice pointed at this host
    operator_kubeconfig  session: a kubeconfig holding a token of the chart's operator
                       ServiceAccount (`kubectl create token`): the operator runs with exactly
                       the chart's RBAC
    controller         session: `mcp-warden-operator run --mode controller` as that account
    webhook            session: `mcp-warden-operator run --mode webhook` as that account, on
                       this host's address (Endpoints may not point at 127.0.0.0/8); .stop() and
                       .start() for tests that need it down
    examples_applied   session: every examples/*.yaml applied into `team-a`, a namespace that
                       enforces Pod Security "restricted" (with the webhook up: creating an
                       MCPServer passes it, and it fails closed)

Objects the tests write into their own namespaces (plain functions):

    role_binding(ns, name, cluster_role, user)   a RoleBinding of one user to a ClusterRole
    approver_binding(ns, user="bob")             `<user>-approves`: the chart's approver ClusterRole
    npm_sandbox(ns, **egress)                    SandboxProfile `npm`: egress by the npm preset (+ extras)
    people_roles(cluster, ns, carol_approves=)   bob approves, carol edits; waits for the aggregation
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

TESTS = Path(__file__).resolve().parents[1]
for _p in (TESTS / "chart", Path(__file__).resolve().parent):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from chartkit import NAMESPACE, RELEASE, objects as chart_objects  # noqa: E402
from conftest import REPO_ROOT, _spawn, free_port, wait_http_ok  # noqa: E402
from k8s_cluster import ControlPlane, missing_prerequisites, wait_for  # noqa: E402

EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
EXAMPLE_NAMESPACE = "team-a"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted",
              "pod-security.kubernetes.io/enforce-version": "latest"}
WEBHOOK_SERVICE = f"{RELEASE}-webhook"
# The order `helm install` creates kinds in (Helm's InstallOrder, the kinds this chart has):
# a Deployment before its ServiceAccount would get FailedCreate until the account exists.
HELM_INSTALL_ORDER = ["Namespace", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "ConfigMap",
                      "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment",
                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def k8s_bin_dir() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_K8S_BIN_DIR", REPO_ROOT.parent / "shared" / "k8s"))
    return p if p.is_absolute() else (REPO_ROOT / p).resolve()


def operator_binary() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_OPERATOR", "target/debug/mcp-warden-operator"))
    return p if p.is_absolute() else REPO_ROOT / p


def host_address() -> str | None:
    """An IPv4 address of this host outside 127.0.0.0/8 (the API server refuses
    Endpoints there), where the webhook can listen and the API server can dial."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=5).stdout
        for addr in re.findall(r"inet (\d+\.\d+\.\d+\.\d+)/", out):
            if not addr.startswith(("127.", "169.254.")):
                return addr
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            addr = info[4][0]
            if not addr.startswith(("127.", "169.254.")):
                return addr
    return None


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    bin_dir = k8s_bin_dir()
    why = missing_prerequisites(bin_dir)
    if why:
        pytest.skip(f"skipped: {why}")
    work = tmp_path_factory.mktemp("k8s")
    started = time.monotonic()
    cp = ControlPlane.start(bin_dir, work)
    print(f"control plane ready in {time.monotonic() - started:.1f}s at {cp.url}")
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def installed(cluster):
    """The chart's objects, as `helm install` would create them (CRDs first)."""
    cluster.namespace(NAMESPACE, RESTRICTED)
    cluster.kubectl("apply", "--server-side", "-f", REPO_ROOT / "charts" / "mcp-warden" / "crds")
    cluster.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    objs = sorted(chart_objects(), key=lambda o: HELM_INSTALL_ORDER.index(o["kind"])
                  if o["kind"] in HELM_INSTALL_ORDER else len(HELM_INSTALL_ORDER))
    for o in objs:
        if o["kind"] == "Service" and o["metadata"]["name"] == WEBHOOK_SERVICE:
            # No operator pod runs: the webhook process runs on this host instead.
            o["spec"].pop("selector")
    cluster.apply(objs)
    return objs


@pytest.fixture(scope="session")
def operator_kubeconfig(cluster, installed, tmp_path_factory) -> Path:
    sa = next(o for o in installed if o["kind"] == "ServiceAccount")["metadata"]["name"]
    token = cluster.kubectl("create", "token", sa, "-n", NAMESPACE, "--duration=6h").stdout.strip()
    return cluster.kubeconfig_for_token(token, tmp_path_factory.mktemp("operator") / "kubeconfig", sa)


@dataclass
class OperatorProcess:
    args: list[str]
    env: dict
    admin_port: int
    proc: object = None
    logs: list = field(default_factory=list)  # one per start; removed at the end of the session

    def start(self) -> None:
        assert self.proc is None or not self.proc.alive(), "already running"
        binary = operator_binary()
        self.proc = _spawn([str(binary), "run", *self.args, "--admin-listen", f"127.0.0.1:{self.admin_port}"],
                           env=self.env)
        self.logs.append(self.proc.log_path)
        wait_http_ok(f"http://127.0.0.1:{self.admin_port}/readyz", proc=self.proc)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def finish(self) -> None:
        self.stop()
        for log in self.logs:
            log.unlink(missing_ok=True)

    def log(self) -> str:
        return self.proc.stderr_text() if self.proc else ""

    def metrics(self) -> str:
        return httpx.get(f"http://127.0.0.1:{self.admin_port}/metrics", timeout=5).text


def _operator(request, kubeconfig: Path, *args: str) -> OperatorProcess:
    if not operator_binary().exists():
        pytest.skip(f"operator binary not built: {operator_binary()} (cargo build -p mcp-warden-operator)")
    env = {"KUBECONFIG": str(kubeconfig), "POD_NAMESPACE": NAMESPACE, "RUST_LOG": "info"}
    op = OperatorProcess(list(args), env, free_port())
    op.start()
    request.addfinalizer(op.finish)
    return op


@pytest.fixture(scope="session")
def controller(request, operator_kubeconfig):
    return _operator(request, operator_kubeconfig, "--mode", "controller", "--identity", "operator-0")


@dataclass
class Webhook:
    process: OperatorProcess
    address: str
    port: int

    def stop(self) -> None:
        self.process.stop()

    def start(self) -> None:
        self.process.start()
        self.wait_listening()

    def wait_listening(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((self.address, self.port)) == 0:
                    return
            time.sleep(0.1)
        raise AssertionError(f"the webhook does not listen on {self.address}:{self.port}")


@pytest.fixture(scope="session")
def webhook(request, cluster, installed, operator_kubeconfig, tmp_path_factory):
    address = host_address()
    if address is None:
        pytest.skip("skipped: this host has no IPv4 address outside 127.0.0.0/8 for the webhook's "
                    "EndpointSlice (the API server refuses loopback endpoints)")
    port = free_port()
    cluster.apply({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": f"{WEBHOOK_SERVICE}-test", "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": WEBHOOK_SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    })
    service = cluster.get("service", WEBHOOK_SERVICE, NAMESPACE)
    service["spec"]["ports"][0]["targetPort"] = port
    cluster.apply({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": WEBHOOK_SERVICE, "namespace": NAMESPACE},
                   "spec": {"ports": service["spec"]["ports"]}})
    cert_dir = tmp_path_factory.mktemp("no-cert")  # empty: the operator generates its certificate
    process = _operator(request, operator_kubeconfig, "--mode", "webhook", "--webhook-listen", f"{address}:{port}",
                        "--webhook-cert-dir", str(cert_dir))
    hook = Webhook(process, address, port)
    hook.wait_listening()

    def ca_written():
        return all((cluster.get(kind, RELEASE) or {}).get("webhooks", [{}])[0].get("clientConfig", {}).get("caBundle")
                   for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"))
    wait_for("the operator to write the webhooks' caBundle", ca_written, timeout=30)
    return hook


@pytest.fixture(scope="session")
def examples_applied(cluster, installed, webhook):
    # Creating an MCPServer passes the webhook (it records who made it), which fails closed.
    cluster.namespace(EXAMPLE_NAMESPACE, RESTRICTED)
    results = {}
    for path in EXAMPLES:
        results[path.stem] = cluster.kubectl("apply", "--server-side", "--field-manager=mcp-warden-tests",
                                             "-f", path, check=False)
    return results


def role_binding(ns: str, name: str, cluster_role: str, user: str) -> dict:
    """RoleBinding `name` in `ns` granting ClusterRole `cluster_role` to user `user`."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


def approver_binding(ns: str, user: str = "bob") -> dict:
    """`<user>-approves`: `user` (bob, who made none of the objects) bound to the
    chart's approver ClusterRole in `ns`, and to nothing else."""
    return role_binding(ns, f"{user}-approves", f"{RELEASE}-approver", user)


def npm_sandbox(ns: str, **egress) -> dict:
    """SandboxProfile `npm` in `ns`: egress to the npm registry by its preset (a
    named-egress capability to approve), with any further `network.egress`
    fields given (e.g. `hosts=[...]` for a change that asks for more)."""
    return {"apiVersion": "mcpwarden.dev/v1alpha1", "kind": "SandboxProfile",
            "metadata": {"name": "npm", "namespace": ns},
            "spec": {"network": {"egress": {"presets": ["npm"], **egress}}}}


def people_roles(cluster, ns: str, *, carol_approves: bool = False) -> None:
    """The two people of the approval tests in `ns`: bob bound to the chart's
    approver ClusterRole only, carol to the built-in `edit` (and to the
    approver role too with `carol_approves`, so that separation of duties,
    not RBAC, is what stops her approving her own change). Returns once the
    controller manager has aggregated the chart's rules into `edit`."""
    bindings = [approver_binding(ns), role_binding(ns, "carol-edits", "edit", "carol")]
    if carol_approves:
        bindings.append(approver_binding(ns, "carol"))
    cluster.apply(bindings)
    wait_for("carol (edit) to be able to patch MCPServers", lambda: cluster.kubectl(
        "auth", "can-i", "patch", "mcpservers.mcpwarden.dev", "-n", ns, user="carol",
        check=False).stdout.strip() == "yes", timeout=30)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the operator's log to a failing test of this suite."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and rep.when in ("setup", "call"):
        for name in ("controller", "webhook"):
            value = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            process = getattr(value, "process", value)
            if isinstance(process, OperatorProcess):
                with contextlib.suppress(Exception):
                    rep.sections.append((f"{name} log", process.log()[-20000:]))
