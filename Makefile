# mcp-warden — build, test, lint, generate, demo, bench.
# `make demo` and `make test` are the two commands a newcomer runs (README).

CARGO    ?= cargo
VENV     ?= .venv
PYTHON   ?= $(VENV)/bin/python
SIDECAR  := target/debug/mcp-warden-sidecar
OPERATOR := target/debug/mcp-warden-operator

.PHONY: all build test test-rust test-e2e lint fmt generate check-generated demo setup bench clean

all: build

## build: compile every crate (debug)
build:
	$(CARGO) build --workspace --all-targets

## setup: install the Node and Python packages the tests and demo use (idempotent)
setup:
	bash tests/setup.sh

## test: unit + snapshot tests, generated-file freshness, then end-to-end tests against real MCP peers
test: setup build check-generated test-rust test-e2e

test-rust:
	$(CARGO) test --workspace

test-e2e:
	MCP_WARDEN_SIDECAR=$(abspath $(SIDECAR)) MCP_WARDEN_OPERATOR=$(abspath $(OPERATOR)) \
		$(PYTHON) -m pytest -q tests

## lint: clippy with warnings as errors, rustfmt check
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) fmt --all -- --check

fmt:
	$(CARGO) fmt --all

## generate: regenerate committed files (CRD YAML, chart CRDs)
generate:
	$(CARGO) run -q -p mcp-warden-operator -- crdgen --out-dir crds

## check-generated: fail when committed generated files are stale
check-generated:
	$(CARGO) run -q -p mcp-warden-operator -- crdgen --check --out-dir crds

## demo: the facade in front of @modelcontextprotocol/server-everything, a few real calls through it
demo: setup
	$(CARGO) build -q -p mcp-warden-sidecar
	MCP_WARDEN_SIDECAR=$(abspath $(SIDECAR)) $(PYTHON) tests/demo/demo.py

clean:
	$(CARGO) clean
