"""Run a rendered pod's containers on this machine, under the pod's constraints,
with bubblewrap: no cluster, no container engine, no image pulls.

    Pod(deployment, configmaps, secrets, images, work) ... with pod: pod.start(); pod.client(...)

What is the pod's, as `mcp-warden-operator render` wrote it:
- one network (and IPC, UTS) namespace for all containers: a holder process
  (`unshare --net --ipc --uts`, loopback up, nothing else: no route out) that every
  container and the test's client join with `nsenter`. The approved egress is
  checked on the rendered objects (NetworkPolicy, CiliumNetworkPolicy), not
  exercised: this machine has no internet to reach. A test may stand in for
  the internet inside the namespace (Pod(network=...), called once it is up:
  tests/pods/internet.py) and name a cluster DNS (Pod(dns=...)), which each
  container's /etc/resolv.conf then names as the kubelet's would;
- per container: `bwrap --unshare-user --uid U --gid G` (runAsUser/runAsGroup),
  its own PID namespace, no capabilities (bwrap drops them all for a non-root
  user: `capabilities.drop: [ALL]`) and no_new_privs (`allowPrivilegeEscalation:
  false`); a read-only root (`readOnlyRootFilesystem: true`: the root is a tmpfs
  remounted read-only after the binds); the pod's volumes at their mount paths,
  read-only where the mount says so; the environment exactly as rendered plus
  the image's own variables (`PATH`…) and `$(VAR)` expansion as the kubelet does;
  command and args as rendered, else the image's entrypoint; init containers to
  completion first.
- volumes: an emptyDir, a PersistentVolumeClaim and the projected Secret and
  ConfigMap volumes are directories under one temp dir, shared by the containers
  that mount them (as in a pod). ConfigMaps hold the data of the rendered (or
  the example's own) ConfigMap;
  the JWKS ConfigMap (which the operator publishes from the API server) holds
  the test's key set; the peer-key and admin-token Secrets hold fresh random bytes;
  a Secret volume that names its keys (`items`: credentials someone created)
  holds the test's values for them.

What stands in for what a real node would have (say so in each test's docstring):
- images: the host's files. Every container sees the host's /usr and /etc
  read-only (libc, git, CA certificates), and each image stand-in (IMAGES in
  test_pods.py) binds the few host files the image would hold where the image
  holds them: the sidecar binary from target/debug, Node 22 from tests/node_modules,
  the host's npm, Python packages from .venv…;
- what `npx -y`/`uvx` would download through the approved egress: the packages
  tests/setup.sh installed, bound where the runner finds them without a network
  (npx: a project `/node_modules` beside the working directory `/`; uvx: a
  find-links directory named by a system uv.toml);
- not enforced: seccomp `RuntimeDefault`, emptyDir size limits, fsGroup (bwrap
  cannot set supplementary groups in a user namespace), resource limits.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# Host paths never shown to a container (the node's own, or the test's).
HIDDEN = {"/proc", "/sys", "/dev", "/tmp", "/run", "/root", "/home", "/work", "/old_root", "/mnt", "/media",
          "/srv", "/opt", "/boot", "/lost+found", "/farm", "/var"}
POD_IP = "127.0.0.1"  # the pod's only address: loopback


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot run a pod here, or None."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap; .ci/run installs it)"
    for tool in ("unshare", "nsenter", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux, iproute2)"
    probe = subprocess.run(["bwrap", "--unshare-all", "--unshare-user", "--uid", "65532", "--ro-bind", "/", "/",
                            "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"bwrap cannot create namespaces here: {probe.stderr.strip()}"
    if os.geteuid() != 0:
        return "joining the pod's network namespace with nsenter needs root"
    return None


@dataclass
class Image:
    """What stands in for an image: host files bound at image paths, the
    image's environment, working directory and entrypoint."""
    binds: dict[str, Path] = field(default_factory=dict)   # image path -> host path (read-only)
    symlinks: dict[str, str] = field(default_factory=dict)  # image path -> link target
    owned: tuple[str, ...] = ()  # image directories that hide the host's (e.g. /usr/local)
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    entrypoint: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # image path -> content (a config file; `#!` ones executable)


def expand(value: str, env: dict[str, str]) -> str:
    """The kubelet's `$(VAR)` expansion (`$$` escapes; unknown names stay)."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), value)


def _split_args(host_dir: str, dests: set[str], owned: tuple[str, ...]) -> list[str]:
    """bwrap arguments that show host_dir read-only, except that paths leading
    to a mount destination become directories on the root tmpfs (so mount
    points can be made under a read-only tree) and `owned` dirs stay empty."""
    if host_dir in owned:
        return ["--dir", host_dir]
    below = [d for d in dests if d.startswith(host_dir.rstrip("/") + "/")]
    if host_dir in dests:
        return []  # the mount covers it
    if os.path.islink(host_dir):
        return ["--symlink", os.readlink(host_dir), host_dir]
    if not below or not os.path.isdir(host_dir):
        return ["--ro-bind", host_dir, host_dir]
    args = ["--dir", host_dir]
    for child in sorted(os.listdir(host_dir)):
        args += _split_args(os.path.join(host_dir, child), dests, owned)
    return args


class Container:
    def __init__(self, pod: Pod, spec: dict, image: Image):
        self.pod, self.spec, self.image = pod, spec, image
        self.name = spec["name"]
        self.proc: subprocess.Popen | None = None
        self.log = pod.work / f"{self.name}.log"

    def env(self) -> dict[str, str]:
        env = {"HOSTNAME": self.pod.name, **self.image.env}
        if "HOME" not in env:
            env["HOME"] = "/"  # what a runtime sets for a user without a passwd entry
        for e in self.spec.get("env", []):
            if "value" in e:
                env[e["name"]] = expand(e["value"], env)
            elif "valueFrom" in e:
                env[e["name"]] = self.pod.value_from(e["valueFrom"])
        return env

    def argv(self, env: dict[str, str]) -> list[str]:
        command = self.spec.get("command") or self.image.entrypoint
        args = self.spec.get("args", [])
        return [expand(a, env) for a in [*command, *args]]

    def bwrap(self) -> list[str]:
        ctx = self.spec.get("securityContext", {})
        pod_ctx = self.pod.spec.get("securityContext", {})
        uid = ctx.get("runAsUser", pod_ctx.get("runAsUser"))
        gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup", uid))
        assert uid not in (None, 0), f"{self.name}: the rendered pod would run as root"
        mounts = self.spec.get("volumeMounts", [])
        dests = {m["mountPath"] for m in mounts} | set(self.image.binds) | set(self.image.symlinks) \
            | set(self.image.files) | ({"/etc/resolv.conf"} if self.pod.dns else set())
        args = ["bwrap", "--unshare-user", "--uid", str(uid), "--gid", str(gid), "--unshare-pid",
                "--unshare-cgroup", "--die-with-parent", "--new-session", "--clearenv"]
        for top in sorted(os.listdir("/")):
            path = "/" + top
            if path in HIDDEN or (not os.path.isdir(path) and not os.path.islink(path)):
                continue
            args += _split_args(path, dests, self.image.owned)
        for owned in self.image.owned:
            if not os.path.exists(owned):
                args += ["--dir", owned]
        args += ["--proc", "/proc", "--dev", "/dev"]
        for dest, src in sorted(self.image.binds.items()):
            args += ["--ro-bind", str(src), dest]
        for dest, target in sorted(self.image.symlinks.items()):
            args += ["--symlink", target, dest]
        for dest, content in sorted(self.image.files.items()):
            path = self.pod.work / "image-files" / self.name / dest.lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            if content.startswith("#!"):
                path.chmod(0o755)  # a script the image runs (an entry point)
            args += ["--ro-bind", str(path), dest]
        if self.pod.dns:
            args += ["--ro-bind", str(self.pod.resolv_conf()), "/etc/resolv.conf"]
        for m in sorted(mounts, key=lambda m: m["mountPath"].count("/")):
            src = self.pod.volume_dir(m["name"])
            args += ["--ro-bind" if m.get("readOnly") else "--bind", str(src), m["mountPath"]]
        if ctx.get("readOnlyRootFilesystem", False):
            args += ["--remount-ro", "/"]
        env = self.env()
        for k, v in env.items():
            args += ["--setenv", k, v]
        args += ["--chdir", self.spec.get("workingDir") or self.image.workdir, "--", *self.argv(env)]
        return args

    def start(self) -> None:
        cmd = [*self.pod.enter(), *self.bwrap()]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log.open("w"),
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def run_to_completion(self, timeout: float = 60) -> None:
        self.start()
        code = self.proc.wait(timeout=timeout)
        assert code == 0, f"init container {self.name} exited {code}:\n{self.log.read_text()[-3000:]}"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


class Pod:
    """One replica of a rendered Deployment."""

    def __init__(self, deployment: dict, objects: list[dict], secrets_data: dict[tuple[str, str], str],
                 images: dict[str, Image], work: Path, jwks: str, prepare=None, network=None,
                 dns: str | None = None):
        self.deployment = deployment
        self.name = deployment["metadata"]["name"] + "-0"
        self.namespace = deployment["metadata"]["namespace"]
        self.spec = deployment["spec"]["template"]["spec"]
        self.objects = objects
        self.secrets_data = secrets_data
        self.images = images
        self.work = work
        self.jwks = jwks
        self.prepare = prepare  # fills volumes (what a claim would hold) before the containers start
        self.network = network  # called once the pod's network namespace is up, before any container
        self.dns = dns  # the cluster DNS's address: the kubelet's /etc/resolv.conf for each container
        self.holder: subprocess.Popen | None = None
        self.containers: list[Container] = []
        self.volumes = {v["name"]: v for v in self.spec.get("volumes", [])}

    # -- namespaces --------------------------------------------------------
    def enter(self) -> list[str]:
        pid = self.holder.pid
        return ["nsenter", f"--net=/proc/{pid}/ns/net", f"--ipc=/proc/{pid}/ns/ipc", f"--uts=/proc/{pid}/ns/uts", "--"]

    def start_namespaces(self) -> None:
        self.holder = subprocess.Popen(["unshare", "--net", "--ipc", "--uts", "--", "sleep", "600"],
                                       start_new_session=True)
        deadline = time.monotonic() + 5
        # Until unshare has exec'd, the holder is still in this host's namespace.
        while os.readlink(f"/proc/{self.holder.pid}/ns/net") == os.readlink("/proc/self/ns/net") \
                or Path(f"/proc/{self.holder.pid}/comm").read_text().strip() != "sleep":
            assert time.monotonic() < deadline, "the pod's network namespace did not appear"
            time.sleep(0.02)
        subprocess.run(["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "ip", "link", "set", "lo", "up"],
                       check=True)

    def resolv_conf(self) -> Path:
        """What the kubelet writes for `dnsPolicy: ClusterFirst`: the cluster DNS, the
        namespace's search path."""
        path = self.work / "resolv.conf"
        if not path.exists():
            ns = self.namespace
            path.write_text(f"nameserver {self.dns}\nsearch {ns}.svc.cluster.local svc.cluster.local "
                            "cluster.local\noptions ndots:5\n")
        return path

    # -- volumes -------------------------------------------------------------
    def volume_dir(self, name: str) -> Path:
        return self.work / "volumes" / name

    def _object(self, kind: str, name: str) -> dict | None:
        return next((o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name), None)

    def make_volumes(self) -> None:
        for name, v in self.volumes.items():
            d = self.volume_dir(name)
            d.mkdir(parents=True)
            if "configMap" in v:
                cm = self._object("ConfigMap", v["configMap"]["name"])
                if cm is not None:
                    data = cm.get("data", {})
                    # `items` picks keys and names their files, as the kubelet does.
                    items = v["configMap"].get("items") or [{"key": k, "path": k} for k in data]
                    for item in items:
                        if item["key"] in data:
                            (d / item["path"]).write_text(data[item["key"]])
                elif v["configMap"]["name"].endswith("-jwks"):
                    # Published by the operator from the API server's issuer; here the test's keys.
                    (d / "jwks.json").write_text(self.jwks)
            elif "secret" in v:
                secret = v["secret"]["secretName"]
                if v["secret"].get("items"):
                    # A Secret someone created (credentials): the test's values for its keys.
                    for item in v["secret"]["items"]:
                        value = self.secrets_data.get((secret, item["key"]))
                        assert value is not None, f"volume {name}: no test value for {secret}/{item['key']}"
                        (d / item["path"]).write_text(value)
                else:
                    # The operator's own (peer key, admin token): fresh random bytes.
                    key = "peer.key" if secret.endswith("-peer-key") else "token"
                    (d / key).write_text(secrets.token_hex(32))
            elif "projected" in v:
                raise AssertionError(f"volume {name}: projected volumes are not run here")

    def value_from(self, source: dict) -> str:
        if "fieldRef" in source:
            path = source["fieldRef"]["fieldPath"]
            return {"status.podIP": POD_IP, "metadata.name": self.name,
                    "metadata.namespace": self.namespace}[path]
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            return self.secrets_data.get((ref["name"], ref["key"]), "test-secret-value")
        raise AssertionError(f"unsupported valueFrom {source}")

    # -- lifecycle -------------------------------------------------------------
    def image(self, container: dict) -> Image:
        ref = container["image"]
        for prefix, image in self.images.items():
            if ref == prefix or ref.startswith(prefix + ":") or ref.startswith(prefix + "@"):
                return image
        raise AssertionError(f"no stand-in for image {ref}")

    def start(self) -> None:
        self.make_volumes()
        if self.prepare:
            self.prepare(self)
        self.start_namespaces()
        if self.network:
            self.network(self)
        for spec in self.spec.get("initContainers", []):
            Container(self, spec, self.image(spec)).run_to_completion()
        for spec in self.spec["containers"]:
            c = Container(self, spec, self.image(spec))
            c.start()
            self.containers.append(c)

    def logs(self) -> str:
        return "\n".join(f"--- {c.name}\n{c.log.read_text()[-4000:]}" for c in self.containers if c.log.exists())

    def run_in_network(self, argv: list[str], hosts: list[str], timeout: float = 60,
                       env: dict | None = None) -> subprocess.CompletedProcess:
        """A process of this host (the test's client) inside the pod's network
        namespace, resolving `hosts` to the pod's address: a private
        /etc/hosts (its own mount namespace) stands in for the cluster's DNS
        and the Service in front of the pod."""
        table = self.work / "client-hosts"
        table.write_text("127.0.0.1 localhost\n" + "".join(f"{POD_IP} {h}\n" for h in hosts))
        script = 'mount --bind "$0" /etc/hosts && exec "$@"'
        cmd = ["nsenter", f"--net=/proc/{self.holder.pid}/ns/net", "--", "unshare", "--mount", "--propagation",
               "private", "--", "sh", "-c", script, str(table), *argv]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})

    def stop(self) -> None:
        for c in reversed(self.containers):
            c.stop()
        if self.holder and self.holder.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.holder.pid, signal.SIGKILL)
            self.holder.wait(timeout=5)

    def __enter__(self) -> Pod:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
