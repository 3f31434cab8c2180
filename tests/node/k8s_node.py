"""A one-node Kubernetes cluster whose pods really run, for tests/node.

    node_problem(bin_dir) -> str | None      why the node cannot start here (the test skips with it)
    Node.start(bin_dir, work) -> Node         `node.sh start` ($MCP_WARDEN_K8S_BIN_DIR): the control
                                             plane, kube-scheduler, a kubelet, kube-proxy, containerd
                                             and runc, in a network namespace of their own
        .kubectl / .apply / .get / .list      as tests/apiserver's ControlPlane (admin, bob, carol)
        .load(archive)                        an OCI image archive into containerd (nothing is pulled)
        .keep_pause()                         the sandbox image imported again (see its docstring)
        .hold_pause()                         a pod running the sandbox image, so that the kubelet
                                             counts it as in use and never garbage-collects it
        .in_node(argv, hosts)                 a process of this host inside the node's network
                                             namespace, with `hosts` ({name: IP}) in a private
                                             /etc/hosts: the cluster DNS the node does not have
        .container_pid(ns, pod, container)    the PID (in this host's PID namespace) of a
                                             container's first process
        .stop()

What the node is and is not is node.sh's own description: pods under runc with
their securityContext enforced by the kernel, Services through kube-proxy
(iptables), no cluster DNS, no NetworkPolicy enforcement, no image pulls.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apiserver"))

from k8s_cluster import ControlPlane, etcd_binary, missing_prerequisites  # noqa: E402

NODE_TOOLS = ("containerd", "runc", "ctr", "iptables", "conntrack", "socat", "nsenter", "unshare", "ip", "mmdebstrap",
              "chroot")
PAUSE_IMAGE = "registry.k8s.io/pause:3.6"  # the sandbox image node.sh gives containerd
DEBIAN_PACKAGES = "containerd runc containernetworking-plugins iptables conntrack socat mmdebstrap"


def node_problem(bin_dir: Path) -> str | None:
    """A plain sentence naming what is missing, or None."""
    why = missing_prerequisites(bin_dir)
    if why:
        return why
    if not (bin_dir / "node.sh").exists() or not (bin_dir / "kubelet.gz").exists():
        return (f"no node.sh or kubelet in {bin_dir} (MCP_WARDEN_K8S_BIN_DIR names the folder holding "
                "control-plane.sh, node.sh and the Kubernetes binaries)")
    tools = [t for t in NODE_TOOLS if shutil.which(t) is None]
    if tools or not Path("/usr/lib/cni/bridge").exists():
        missing = ", ".join(tools or ["the CNI bridge plugin"])
        return f"the node needs {missing}: apt-get install {DEBIAN_PACKAGES} (.ci/run installs them)"
    if os.geteuid() != 0:
        return "the node (network namespaces, containerd, runc) needs root"
    return None


class Node(ControlPlane):
    @classmethod
    def start(cls, bin_dir: Path, work_dir: Path, timeout: float = 240) -> Node:
        script = bin_dir / "node.sh"
        env = {**os.environ, "PYTHON": sys.executable}
        if etcd_binary():
            env["ETCD"] = etcd_binary()
        started = subprocess.run(["bash", str(script), "start", str(work_dir)], env=env,
                                 capture_output=True, text=True, timeout=timeout)
        node = cls(script, work_dir, "", work_dir / "cp" / "pki" / "ca.crt")
        if started.returncode != 0:
            logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                             for p in sorted((work_dir / "logs").glob("*.log")))
            node.stop()
            raise RuntimeError(f"node.sh start failed ({started.returncode}):\n"
                               f"{started.stdout}\n{started.stderr}\n{logs}")
        return node

    def stop(self, grace: float = 10) -> None:
        subprocess.run(["bash", str(self.script), "stop", str(self.dir)], capture_output=True, timeout=120)

    def kubeconfig(self, user: str = "admin") -> Path:
        return self.dir / ("kubeconfig" if user == "admin" else f"kubeconfig-{user}")

    def load(self, archive: Path) -> None:
        """Import an image archive, and give each image the digest reference a
        registry pull leaves (`<repository>@sha256:<digest>`): the runtime then
        reports a repository digest for it (`imageID`), as for a pulled image,
        and a pod can ask for it by digest."""
        out = subprocess.run(["bash", str(self.script), "load", str(self.dir), str(archive)],
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, f"node.sh load {archive}: {out.stderr}{out.stdout}"
        for name, digest in re.findall(r"unpacking (\S+) \((sha256:[0-9a-f]{64})\)", out.stdout + out.stderr):
            repository = name.split("@", 1)[0]
            if ":" in repository.rsplit("/", 1)[-1]:
                repository = repository[:repository.rindex(":")]
            tag = subprocess.run(["ctr", "--address", str(self.dir / "containerd.sock"), "-n", "k8s.io", "images",
                                  "tag", "--force", name, f"{repository}@{digest}"],
                                 capture_output=True, text=True, timeout=60)
            assert tag.returncode == 0, f"ctr images tag {name}: {tag.stderr}"

    def keep_pause(self) -> None:
        """Import the pause image again (node.sh imports it once, at start). The
        kubelet's image garbage collection, which runs when the disk is fuller than
        85%, does not count the sandbox image as in use and removes it; then no new
        pod can start. Called before a test creates pods."""
        self.load(self.dir / "pause.tar")

    def hold_pause(self, timeout: float = 120) -> None:
        """Run a pod whose one container is the sandbox image. When the disk is
        fuller than 85% (on a machine whose disk is shared, as soon as a build and
        the images are on it) the kubelet removes every image no container uses,
        every five minutes; a container runtime that pins its sandbox image
        (containerd 1.7 and later) keeps it, but containerd 1.6 does not, and then
        no pod can start until the image is imported again. An image a running
        container uses is never removed, whatever the disk."""
        self.keep_pause()
        self.apply([{
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "sandbox-image-holder", "namespace": "kube-system"},
            "spec": {
                "containers": [{
                    "name": "pause", "image": PAUSE_IMAGE, "imagePullPolicy": "Never",
                    "resources": {"requests": {"cpu": "1m", "memory": "4Mi"}},
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65535, "allowPrivilegeEscalation": False,
                                        "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                }],
                "terminationGracePeriodSeconds": 0,
            },
        }])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pod = self.get("pod", "sandbox-image-holder", "kube-system") or {}
            if pod.get("status", {}).get("phase") == "Running":
                return
            time.sleep(1)
        raise AssertionError(f"the sandbox image's holder pod did not run: {pod.get('status')}")

    def in_node(self, argv: list[str], hosts: dict[str, str] | None = None, timeout: float = 120,
                env: dict | None = None) -> subprocess.CompletedProcess:
        table = self.dir / f"hosts-{os.getpid()}-{time.monotonic_ns()}"
        table.write_text("127.0.0.1 localhost\n" + "".join(f"{ip} {name}\n" for name, ip in (hosts or {}).items()))
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        cmd = ["bash", str(self.script), "exec", str(self.dir), "unshare", "--mount", "--propagation", "private",
               "--", "sh", "-c", script, str(table), *argv]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  env={**os.environ, **(env or {})})
        finally:
            table.unlink(missing_ok=True)

    def container_pid(self, namespace: str, pod: str, container: str) -> int:
        status = self.kubectl("get", "pod", pod, "-n", namespace, "-o", "json").json()["status"]
        cid = next(c["containerID"] for c in status["containerStatuses"] if c["name"] == container)
        cid = cid.split("://", 1)[1]
        out = subprocess.run(["ctr", "--address", str(self.dir / "containerd.sock"), "-n", "k8s.io", "tasks", "ls"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
        for line in out.splitlines()[1:]:
            task, pid, *_ = line.split()
            if task == cid:
                return int(pid)
        raise AssertionError(f"no running task for {namespace}/{pod} {container} ({cid})")


def process_security(pid: int) -> dict:
    """What the kernel enforces on a process, read from /proc: its uids and gids,
    capability sets, seccomp mode, no_new_privs, and whether its root is read-only."""
    status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if ":\t" in line)
    root_options = next(line.split()[5] for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                        if line.split()[4] == "/")
    return {
        "uids": set(status["Uid"].split()), "gids": set(status["Gid"].split()),
        "cap_eff": int(status["CapEff"], 16), "cap_prm": int(status["CapPrm"], 16),
        "cap_bnd": int(status["CapBnd"], 16), "cap_amb": int(status["CapAmb"], 16),
        "seccomp": int(status["Seccomp"].strip()), "no_new_privs": int(status["NoNewPrivs"].strip()),
        "root_read_only": "ro" in root_options.split(","),
    }
