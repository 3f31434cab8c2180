"""The session fixtures and helpers of tests/node (test_node.py's docstring
says what the suite checks): the node, the images, the chart installed, the
examples applied and approved, and the commands a user types. The fixtures are
a plugin (tests/conftest.py's pytest_plugins), made once per run for every
module: one node, whichever modules run.

    node       session: node.sh started in a temp dir of its own (stopped at the end;
               MCP_WARDEN_NODE_KEEP=1 leaves it running); skips, saying what is missing
    images     session: {reference: archive} from images/build-node-images.py (cached)
    chart      session: the chart's default objects installed, the operator Ready as a pod
    examples   session: every example (but the remote one) applied and approved, Ready
    tour(node, command, user)  a command as a user types it (recorded in TOUR_LOG)
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
for p in (TESTS, TESTS / "chart", TESTS / "apiserver", TESTS / "e2e", HERE):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from chartkit import NAMESPACE, RELEASE, objects as chart_objects  # noqa: E402
from conftest import REPO_ROOT  # noqa: E402
from k8s_cluster import wait_for  # noqa: E402
from k8s_fixtures import HELM_INSTALL_ORDER, RESTRICTED, k8s_bin_dir  # noqa: E402
from k8s_node import Node, node_problem  # noqa: E402

NS = "team-a"
EXAMPLES = sorted(p for p in (REPO_ROOT / "examples").glob("*.yaml") if p.stem != "remote-server")
NONROOT = 65532
POLICY_BLOCKED, PERMISSION_DENIED = -32004, -32003
# What each example's profile promises its caller (as tests/pods), one call that
# must work, and one the caller was not given (a tool its server has, where the
# profile hides one; else a name outside the profile), refused with POLICY_BLOCKED
# (or the code given: a tool the profile keeps for a higher role).
PROMISES = {
    "stdio-server": ("coding-agent", {"log", "git_status"},
                     ("git_status", {"repo_path": "/workspace/demo"}, "On branch"),
                     ("git_commit", {"repo_path": "/workspace/demo", "message": "x"})),
    "with-workspace": ("coding-agent", {"read_text", "list_directory"},
                       ("list_directory", {"path": "/workspace"}, "README.md"),
                       ("write_file", {"path": "/workspace/x", "content": "x"}, PERMISSION_DENIED)),
    "http-server": ("coding-agent", {"echo", "add_numbers"}, ("echo", {"message": "hi from the node"},
                                                              "hi from the node"), ("delete_everything", {})),
    "replicated": ("coding-agent", {"read_graph", "search_nodes"}, ("read_graph", {}, "entities"),
                   ("delete_entities", {"entityNames": ["x"]})),
    "with-secrets": ("coding-agent", {"whoami", "get_block_children", "get_page"}, None, ("delete_everything", {})),
    "with-egress": ("research-agent", {"fetch"}, None, ("delete_everything", {})),
    "with-auth": ("coding-agent", {"now", "convert_time"}, ("now", {"timezone": "UTC"}, "UTC"),
                  ("delete_everything", {})),
}


def static_dir() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_STATIC_OPERATOR",
                            REPO_ROOT / "target/static-debug/mcp-warden-operator"))
    return p.parent


def operator_binary() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_OPERATOR", "target/debug/mcp-warden-operator"))
    return p if p.is_absolute() else REPO_ROOT / p


# ---------------------------------------------------------------------------
# Session fixtures: the node, its images, the chart, the examples
# ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def node():
    why = node_problem(k8s_bin_dir())
    if why:
        pytest.skip(f"skipped: {why}")
    for binary in ("mcp-warden-operator", "mcp-warden-sidecar"):
        if not (static_dir() / binary).exists():
            pytest.skip(f"skipped: {static_dir() / binary} is missing "
                        "(make node-binaries builds the images' binaries)")
    started = time.monotonic()
    # Not under pytest's basetemp: pytest removes all but the newest three of those,
    # and another pytest session on this machine must not remove a running node's state.
    work = Path(tempfile.mkdtemp(prefix="mcp-warden-node-"))
    n = Node.start(k8s_bin_dir(), work)
    n.hold_pause()
    print(f"node ready in {time.monotonic() - started:.1f}s")
    try:
        yield n
    finally:
        if os.environ.get("MCP_WARDEN_NODE_KEEP") == "1":  # to look at it after a failure
            print(f"the node is left running: KUBECONFIG={n.kubeconfig()}; node.sh stop {n.dir}")
        else:
            n.stop()
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def images(node) -> dict[str, str]:
    """Every image built (or taken from the cache): {reference: archive}."""
    out = subprocess.run([sys.executable, str(REPO_ROOT / "images" / "build-node-images.py"),
                          "--static-dir", str(static_dir()), "--k8s-bin-dir", str(k8s_bin_dir())],
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def load(node: Node, images: dict[str, str], *prefixes: str) -> None:
    """Load images into the node just before pods use them: the kubelet's image
    garbage collection (on a disk fuller than 85%) removes an image nothing has
    used for two minutes, and the sandbox image (Node.keep_pause)."""
    node.keep_pause()
    for ref, archive in images.items():
        if ref.startswith(prefixes):
            node.load(Path(archive))


@pytest.fixture(scope="session")
def chart(node, images):
    """The chart's default objects, as `helm install -n mcp-warden-system` creates them."""
    node.namespace(NAMESPACE, RESTRICTED)
    node.kubectl("apply", "--server-side", "-f", REPO_ROOT / "charts" / "mcp-warden" / "crds")
    node.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    objs = sorted(chart_objects(), key=lambda o: HELM_INSTALL_ORDER.index(o["kind"])
                  if o["kind"] in HELM_INSTALL_ORDER else len(HELM_INSTALL_ORDER))
    load(node, images, "ghcr.io/mcp-warden/")
    node.apply(objs)
    rollout = node.kubectl("-n", NAMESPACE, "rollout", "status", f"deployment/{RELEASE}-operator", "--timeout=180s",
                           check=False, timeout=200)
    assert rollout.code == 0, rollout.stderr + node.kubectl("-n", NAMESPACE, "describe", "pods", check=False).stdout

    def ca_written():
        return all((node.get(kind, RELEASE) or {}).get("webhooks", [{}])[0].get("clientConfig", {}).get("caBundle")
                   for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"))
    wait_for("the operator to write the webhooks' caBundle", ca_written, timeout=60)
    node.kubectl("create", "clusterrolebinding", "tour-approvers", "--clusterrole=mcp-warden-approver", "--user=bob")
    return objs


def pods_of(node: Node, name: str, namespace: str = NS) -> list[dict]:
    """The live pods of a Deployment (by its selector)."""
    deployment = node.get("deployment", name, namespace)
    selector = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"]["matchLabels"].items())
    return [p for p in node.list("pods", namespace, selector) if not p["metadata"].get("deletionTimestamp")]


def static_volumes(node: Node, docs: list[dict]) -> None:
    """A PersistentVolume for each of the example's claims, holding what the claim
    would (a git repository; a document), owned by the pods' user."""
    for claim in (d for d in docs if d["kind"] == "PersistentVolumeClaim"):
        name = claim["metadata"]["name"]
        path = node.dir / "volumes" / name
        path.mkdir(parents=True, exist_ok=True)
        if name == "git-repos":
            repo = path / "demo"
            subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
            (repo / "README.md").write_text("demo\n")
            git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
            subprocess.run([*git, "add", "README.md"], check=True)
            subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
        else:
            (path / "README.md").write_text("team-a docs\n")
        subprocess.run(["chown", "-R", f"{NONROOT}:{NONROOT}", str(path)], check=True)
        node.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{NS}-{name}"},
                    "spec": {"capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
                             "accessModes": claim["spec"]["accessModes"], "storageClassName": "",
                             "persistentVolumeReclaimPolicy": "Retain",
                             "claimRef": {"namespace": NS, "name": name},
                             "hostPath": {"path": str(path), "type": "Directory"}}})


def apply_command(example: Path, images: dict[str, str]) -> str:
    """`kubectl apply -f examples/<name>.yaml`, as the tour says."""
    return f"kubectl apply -f examples/{example.name}"


TOUR_LOG: list[str] = []  # every command tour() ran: the docs' node section must be among them


def tour(node: Node, command: str, user: str = "admin") -> str:
    """A command as a user types it: bash in the repository, the kubeconfig of
    `user`, the operator's CLI on PATH."""
    TOUR_LOG.append(command)
    env = {**os.environ, "KUBECONFIG": str(node.kubeconfig(user)),
           "PATH": f"{operator_binary().parent}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-c", f"set -o pipefail; {command}"], cwd=REPO_ROOT, env=env,
                         capture_output=True, text=True, timeout=330)
    assert out.returncode == 0, f"{command}\n{out.stderr}{out.stdout}"
    return out.stdout


APPROVE = ("kubectl -n team-a annotate mcpserver {name} --overwrite mcpwarden.dev/approve="
           "$(kubectl -n team-a get mcpserver {name} -o jsonpath='{{.status.capabilityDigest}}')")


@pytest.fixture(scope="session")
def examples(node, chart, images) -> dict[str, list[dict]]:
    """Every example applied and approved as the tour says; each one's pods Ready."""
    tour(node, f"kubectl create namespace {NS}")
    tour(node, f"kubectl label namespace {NS} pod-security.kubernetes.io/enforce=restricted "
               "pod-security.kubernetes.io/enforce-version=latest")
    for sa in sorted({p[0] for p in PROMISES.values()}):
        tour(node, f"kubectl -n {NS} create serviceaccount {sa}")
    load(node, images, "node:", "ghcr.io/astral-sh/", "mcp/", "ghcr.io/mcp-warden/sidecar")
    applied = {}
    for example in EXAMPLES:
        docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
        static_volumes(node, docs)
        tour(node, apply_command(example, images))
        applied[example.stem] = docs
    for stem, docs in applied.items():
        name = server_name(docs)

        def decided():
            status = (node.get("mcpserver", name, NS) or {}).get("status", {})
            cond = {c["type"]: c for c in status.get("conditions", [])}.get("CapabilitiesApproved")
            return cond and cond["status"]
        try:
            state = wait_for(f"{name}'s capabilities decided", decided, timeout=180)
        except AssertionError as e:
            operator = node.kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", check=False).stdout + node.kubectl(
                "-n", NAMESPACE, "logs", f"deployment/{RELEASE}-operator", "--tail=60", check=False).stdout
            raise AssertionError(f"{e}\n--- the operator:\n{operator}") from None
        if state != "True":
            tour(node, APPROVE.format(name=name), user="bob")
    not_ready = {}
    for stem, docs in applied.items():
        name = server_name(docs)
        out = subprocess.run(["bash", "-c", f"kubectl -n {NS} rollout status deployment/{name} --timeout=300s"],
                             env={**os.environ, "KUBECONFIG": str(node.kubeconfig())}, capture_output=True,
                             text=True, timeout=330)
        TOUR_LOG.append(f"kubectl -n {NS} rollout status deployment/{name} --timeout=300s")
        if out.returncode != 0:
            logs = [node.kubectl("-n", NS, "logs", f"deployment/{name}", "-c", c, "--tail=30", check=False)
                    for c in ("facade", "server")]
            not_ready[stem] = out.stderr + "".join(f"\n--- {r.stdout}{r.stderr}" for r in logs)
    assert not not_ready, "\n".join(f"=== {k}: {v}" for k, v in not_ready.items())
    # An approved server's image is pinned to the digest its pod reported:
    # one more rollout, of the same content, which the tests must not race.
    for stem, docs in applied.items():
        name = server_name(docs)
        if not pin_expected(node, name):
            continue
        wait_for(f"{name}'s image pinned", lambda: "@sha256:" in server_image(node, name), timeout=120)
        tour(node, f"kubectl -n {NS} rollout status deployment/{name} --timeout=300s")
    return applied


def server_image(node, name: str) -> str:
    pod = node.get("deployment", name, NS)["spec"]["template"]["spec"]
    return next(c["image"] for c in pod["containers"] if c["name"] == "server")


def pin_expected(node, name: str) -> bool:
    """Whether the operator will pin `name`'s image: capabilities in force,
    a tag in the spec, and a pod whose runtime reported a repository digest."""
    server = node.get("mcpserver", name, NS)
    if not server["status"].get("approvedCapabilities") or "@" in server["spec"].get("image", "@"):
        return False
    statuses = [c for p in pods_of(node, name) for c in p.get("status", {}).get("containerStatuses", [])
                if c["name"] == "server"]
    return any(re.search(r".@sha256:[0-9a-f]{64}$", c.get("imageID", "")) for c in statuses)


def server_name(docs: list[dict]) -> str:
    return next(d for d in docs if d["kind"] == "MCPServer")["metadata"]["name"]


