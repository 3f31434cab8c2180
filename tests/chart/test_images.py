"""images/Dockerfile and `make images`, checked without a container engine:
static binaries on a minimal base, a non-root user, the paths the operator
expects (its init container runs `/usr/local/bin/mcp-warden-sidecar
install-bridge`), and the chart's default image references equal to the ones
the operator and the workspace version name.
"""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
import yaml

from chartkit import CHART, REPO

DOCKERFILE = (REPO / "images" / "Dockerfile").read_text()


def stages(text: str) -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out: dict[str, list[str]] = {}
    current = None
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I):
            current = m.group(2) or m.group(1)
            out[current] = [line]
        elif current:
            out[current].append(line)
    return out


def _arg(name: str) -> str:
    return re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE, re.M).group(1)


def test_build_stage_links_statically():
    build = " ".join(stages(DOCKERFILE)["build"])
    assert 'RUSTFLAGS="-C target-feature=+crt-static"' in build
    assert '--target "$triple"' in build and "--locked" in build
    # multi-arch: the Rust target follows BuildKit's TARGETARCH
    assert "ARG TARGETARCH" in build
    assert "amd64|x86_64) triple=x86_64-unknown-linux-gnu" in build
    assert "arm64|aarch64) triple=aarch64-unknown-linux-gnu" in build
    assert "-p mcp-warden-operator -p mcp-warden-sidecar" in build
    assert "dynamically linked" in build  # the build fails if a binary is not static


@pytest.mark.parametrize("target, binary", [("operator", "mcp-warden-operator"), ("sidecar", "mcp-warden-sidecar")])
def test_final_images_are_minimal_and_non_root(target, binary):
    instructions = stages(DOCKERFILE)[target]
    assert instructions[0] == f"FROM ${{BASE_IMAGE}} AS {target}"
    assert _arg("BASE_IMAGE") == "gcr.io/distroless/static-debian12:nonroot"
    copies = [i for i in instructions if i.startswith("COPY")]
    assert copies == [f"COPY --from=build --chmod=0555 /out/{binary} /usr/local/bin/{binary}"]
    (user,) = [i.split()[1] for i in instructions if i.startswith("USER")]
    uid, gid = user.split(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0  # numeric: runAsNonRoot can verify it
    assert any(i == f'ENTRYPOINT ["/usr/local/bin/{binary}"]' for i in instructions)
    assert not any(i.startswith(("RUN", "ADD")) for i in instructions)


def test_paths_and_users_match_the_operator_and_the_chart():
    names_rs = (REPO / "operator" / "src" / "names.rs").read_text()
    assert 'SIDECAR_BIN: &str = "/usr/local/bin/mcp-warden-sidecar"' in names_rs
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    uid = int(re.search(r"^USER (\d+):", DOCKERFILE, re.M).group(1))
    assert values["podSecurityContext"]["runAsUser"] == uid


def test_chart_images_default_to_the_workspace_version():
    version = re.search(r'^version = "([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M).group(1)
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    sidecar = values["sidecarImage"]
    # The operator's built-in default (`ghcr.io/mcp-warden/sidecar:<version>`) and the chart agree.
    config_rs = (REPO / "operator" / "src" / "config.rs").read_text()
    assert f'"{sidecar["registry"]}/{sidecar["repository"]}:{{}}"' in config_rs
    assert f'{values["image"]["registry"]}/{values["image"]["repository"]}' == "ghcr.io/mcp-warden/operator"


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_images_says_so_without_a_container_engine():
    out = subprocess.run(["make", "-s", "images", "ENGINE="], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "no working container engine" in out.stderr and "no image was built" in out.stderr
