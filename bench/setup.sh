#!/usr/bin/env bash
# Install bench/requirements.txt into bench/.venv (idempotent; a stamp holds the
# hash of the requirements + interpreter version). Env: PYTHON (default python3).
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$BENCH/.venv"
PYTHON="${PYTHON:-python3}"
stamp="$VENV/.mcp-warden-bench"
hash="$( { cat "$BENCH/requirements.txt"; "$PYTHON" --version 2>&1; } | sha256sum | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$hash" && -x "$VENV/bin/python" ]]; then
  echo "bench setup: bench/.venv up to date" >&2
  exit 0
fi
"$VENV/bin/python" -c 'import sys' >/dev/null 2>&1 || { rm -rf "$VENV"; "$PYTHON" -m venv "$VENV"; }
"$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$BENCH/requirements.txt"
[[ -x "$VENV/bin/mcp-proxy" ]] || { echo "bench setup: mcp-proxy missing after install" >&2; exit 1; }
echo "$hash" > "$stamp"
