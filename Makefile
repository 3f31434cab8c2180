# mcp-warden — build, test, lint, generate, demo, bench.
# `make demo` and `make test` are the two commands a newcomer runs (README).

CARGO    ?= cargo
VENV     ?= .venv
PYTHON   ?= $(VENV)/bin/python
# Where cargo builds: $CARGO_TARGET_DIR when set (so a second checkout can test with a
# first one's build, as .ci/run does from a clone under /tmp), else target/.
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
SIDECAR  := $(TARGET_DIR)/debug/mcp-warden-sidecar
OPERATOR := $(TARGET_DIR)/debug/mcp-warden-operator
# A folder with the Kubernetes test binaries: control-plane.sh (a kube-apiserver and
# kube-controller-manager on loopback) and node.sh (a one-node cluster whose pods run),
# with the binaries they start. tests/apiserver and tests/node skip, saying so, without it.
# Default: $MCP_WARDEN_K8S_BIN_DIR, else a `shared/k8s` folder beside the checkout.
K8S_BIN_DIR ?= $(or $(MCP_WARDEN_K8S_BIN_DIR),$(abspath ..)/shared/k8s)

.PHONY: all build test test-rust test-e2e test-apiserver test-pods test-node node-images lint fmt generate check-generated demo setup bench bench-detectors clean

all: build

## build: compile every crate (debug)
build:
	$(CARGO) build --workspace --all-targets

## setup: install the Node and Python packages the tests and demo use (idempotent)
setup:
	bash tests/setup.sh

## test: unit + snapshot tests, generated-file freshness, then end-to-end tests against real MCP peers,
## a real API server, every example's pod under bubblewrap and, on a one-node cluster whose pods run,
## the chart, the operator and every example from images of static builds of the same code
test: setup build node-binaries check-generated test-rust test-e2e

test-rust:
	$(CARGO) test --workspace

# What every pytest run is told: the binaries under test and the Kubernetes binaries' directory.
TEST_ENV = MCP_WARDEN_SIDECAR=$(abspath $(SIDECAR)) MCP_WARDEN_OPERATOR=$(abspath $(OPERATOR)) \
	MCP_WARDEN_K8S_BIN_DIR=$(abspath $(K8S_BIN_DIR)) \
	MCP_WARDEN_STATIC_SIDECAR=$(abspath $(NODE_STATIC_DIR)/mcp-warden-sidecar) \
	MCP_WARDEN_STATIC_OPERATOR=$(abspath $(NODE_STATIC_DIR)/mcp-warden-operator)

# Two lanes, both waited for: the real-API-server suite and then the one-node suite, which
# mostly wait on an API server, a kubelet and their pods, run beside the rest; on two cores
# the whole run then takes about as long as the longer lane (the lanes are balanced by
# their durations). The second lane's output is printed when both are done; any suite
# failing fails the target.
NODE_LOG ?= $(TARGET_DIR)/test-node.log
test-e2e:
	@trap 'kill $$lane 2>/dev/null' INT TERM; \
	{ $(TEST_ENV) $(PYTHON) -m pytest -q --durations=15 tests/apiserver; api=$$?; \
	  $(TEST_ENV) $(PYTHON) -m pytest -q --durations=15 tests/node; nodes=$$?; \
	  echo "tests/apiserver exit $$api, tests/node exit $$nodes"; \
	  test $$api -eq 0 && test $$nodes -eq 0; } >$(NODE_LOG) 2>&1 & lane=$$!; \
	$(TEST_ENV) $(PYTHON) -m pytest -q --durations=15 tests --ignore=tests/node --ignore=tests/apiserver; rest=$$?; \
	wait $$lane; beside=$$?; \
	echo "---- tests/apiserver and tests/node (ran beside the rest; exit $$beside) ----"; cat $(NODE_LOG); \
	test $$rest -eq 0 && test $$beside -eq 0

## test-pods: only the pod suite (every example's rendered pod under bubblewrap); builds nothing
test-pods:
	$(TEST_ENV) $(PYTHON) -m pytest -q tests/pods

## test-node: only the one-node-cluster suite (the chart, the operator and every example as real pods);
## builds nothing but the images (cached): run `make build node-binaries` first
test-node:
	$(TEST_ENV) $(PYTHON) -m pytest -q tests/node

## node-images: the operator, sidecar and server stand-in images as OCI archives, without a container
## engine (images/build-node-images.py; cached by a hash of their inputs, printed as JSON)
node-images:
	$(PYTHON) images/build-node-images.py --static-dir $(abspath $(NODE_STATIC_DIR)) --k8s-bin-dir $(abspath $(K8S_BIN_DIR))

## test-apiserver: only the real-API-server suite (CRDs, examples, chart, operator, webhook, RBAC)
test-apiserver:
	MCP_WARDEN_OPERATOR=$(abspath $(OPERATOR)) MCP_WARDEN_K8S_BIN_DIR=$(abspath $(K8S_BIN_DIR)) \
		$(PYTHON) -m pytest -q tests/apiserver

## lint: clippy with warnings as errors, rustfmt check
lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) fmt --all -- --check

fmt:
	$(CARGO) fmt --all

## generate: regenerate committed files (CRD YAML, chart CRDs)
generate:
	$(CARGO) run -q -p mcp-warden-operator -- crdgen --out-dir crds
	$(MAKE) -s chart-crds

## check-generated: fail when committed generated files are stale
check-generated:
	$(CARGO) run -q -p mcp-warden-operator -- crdgen --check --out-dir crds
	$(MAKE) -s check-chart-crds

## demo: the facade in front of @modelcontextprotocol/server-everything, a few real calls through it
demo: setup
	$(CARGO) build -q -p mcp-warden-sidecar
	MCP_WARDEN_SIDECAR=$(abspath $(SIDECAR)) $(PYTHON) tests/demo/demo.py

# ---------------------------------------------------------------------------
# bench: performance benchmarks. NOT part of `make test` (nothing is timed in
# tests); see bench/README.md. Release builds go to $(BENCH_TARGET_DIR).
# On a shared machine: make bench CARGO="flock /tmp/cargo-build.lock cargo"
# ---------------------------------------------------------------------------
BENCH_TARGET_DIR ?= /tmp/target-bench
BENCH_ARGS       ?=

## bench: facade vs direct vs peer proxies, facade RSS, criterion, operator scale (one run, < 10 min)
bench: setup
	bash bench/setup.sh
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) $(CARGO) build --release -p mcp-warden-sidecar
	CARGO_TARGET_DIR=$(BENCH_TARGET_DIR) $(CARGO) build --release --manifest-path bench/Cargo.toml
	bench/.venv/bin/python bench/run_bench.py \
		--sidecar $(BENCH_TARGET_DIR)/release/mcp-warden-sidecar --bin-dir $(BENCH_TARGET_DIR)/release \
		--target-dir $(BENCH_TARGET_DIR) --cargo "$(CARGO)" $(BENCH_ARGS)

## bench-detectors: the poisoning scan and redaction vs pyatr, cisco-ai-mcp-scanner (YARA), tool-scan on tests/corpora (bench/results/detectors-$(DETECTORS_LABEL).md)
DETECTORS_LABEL ?= run
bench-detectors:
	test -x bench/.venv-detectors/bin/python || python3 -m venv bench/.venv-detectors
	bench/.venv-detectors/bin/pip install -q -r bench/requirements-detectors.txt
	$(CARGO) build --release -p mcp-warden-policy --example detectors
	python3 bench/detectors.py --warden $(TARGET_DIR)/release/examples/detectors \
		--peer-python bench/.venv-detectors/bin/python --label $(DETECTORS_LABEL)

clean:
	$(CARGO) clean

# ---- Helm chart and container images (charts/, images/) --------------------
# The chart's CRDs are copies of crds/*.yaml (`make generate` refreshes them,
# `make check-generated` fails when they are stale); the dashboard JSON is
# written by its generator (tests/chart checks it is fresh).

CHART        := charts/mcp-warden
IMAGE_REPO   ?= ghcr.io/mcp-warden
VERSION      := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
# docker, podman or buildah: the first one whose daemon/runtime answers (override: make images ENGINE=podman).
ENGINE       ?= $(firstword $(foreach e,docker podman buildah,$(shell command -v $(e) >/dev/null 2>&1 && $(e) info >/dev/null 2>&1 && echo $(e))))
STATIC_FLAGS := -C target-feature=+crt-static
STATIC_DIR   := $(TARGET_DIR)/x86_64-unknown-linux-gnu/release
# The binaries the tests put in the one-node suite's images. `debug` (the default): the
# operator and sidecar of `make build`, relinked with glibc static: `cargo rustc` gives the
# flags to the two binaries alone and reuses the debug build's objects (all but tokio's tree,
# whose features `make build` unifies with test-only ones: built once more), so this takes
# about three minutes where a static release build of every dependency takes about twelve
# on two cores; the code, the static linking and the images are the same, only the
# optimisation differs (and debug assertions stay on). `release`: the ones images/Dockerfile
# builds (`make static-binaries`).
NODE_BINARIES ?= debug
NODE_STATIC_DIR := $(if $(filter release,$(NODE_BINARIES)),$(STATIC_DIR),$(TARGET_DIR)/static-debug)

.PHONY: chart-crds check-chart-crds chart-dashboard images static-binaries static-sidecar node-binaries

## chart-crds: copy the generated CRDs into the chart (part of `make generate`)
chart-crds:
	rm -f $(CHART)/crds/*.yaml
	cp crds/*.yaml $(CHART)/crds/

## check-chart-crds: fail when the chart's CRDs differ from crds/*.yaml (part of `make check-generated`)
check-chart-crds:
	@for f in crds/*.yaml; do \
	  cmp -s "$$f" "$(CHART)/crds/$$(basename $$f)" || { echo "$(CHART)/crds/$$(basename $$f) is stale: run make generate" >&2; exit 1; }; \
	done
	@for f in $(CHART)/crds/*.yaml; do \
	  [ -f "crds/$$(basename $$f)" ] || { echo "$$f has no source in crds/: run make generate" >&2; exit 1; }; \
	done

## chart-dashboard: regenerate the Grafana dashboard JSON (Grafana's typed builders, in .venv)
chart-dashboard: setup
	$(PYTHON) $(CHART)/dashboards/generate.py

## images: build the operator and sidecar images (images/Dockerfile) with docker, podman or buildah
images:
	@if [ -z "$(ENGINE)" ]; then \
	  echo "images: no working container engine (docker, podman or buildah answering \`info\`) on this machine, so no image was built." >&2; \
	  echo "images: \`make static-binaries\` builds the same static binaries without one." >&2; \
	  exit 1; \
	fi
	DOCKER_BUILDKIT=1 $(ENGINE) build -f images/Dockerfile --target operator -t $(IMAGE_REPO)/operator:$(VERSION) .
	DOCKER_BUILDKIT=1 $(ENGINE) build -f images/Dockerfile --target sidecar -t $(IMAGE_REPO)/sidecar:$(VERSION) .

## static-sidecar: the sidecar image's binary alone (static, release), as images/Dockerfile builds it
static-sidecar:
	RUSTFLAGS="$(STATIC_FLAGS)" $(CARGO) build --release --locked --target x86_64-unknown-linux-gnu -p mcp-warden-sidecar

## node-binaries: the binaries the one-node suite's images hold (NODE_BINARIES: debug or release)
ifeq ($(NODE_BINARIES),release)
node-binaries: static-binaries
else
node-binaries:
	@mkdir -p $(NODE_STATIC_DIR)
	@for p in operator sidecar; do \
	  $(CARGO) rustc --locked -q -p mcp-warden-$$p --bin mcp-warden-$$p -- $(STATIC_FLAGS) -C strip=debuginfo && \
	  cp $(TARGET_DIR)/debug/mcp-warden-$$p $(NODE_STATIC_DIR)/ || exit 1; \
	done
	@# The relinked binaries took the debug ones' place in $(TARGET_DIR)/debug; cargo keeps
	@# both, so `make build` again only puts the dynamic ones back.
	$(CARGO) build --workspace --all-targets -q
	@for b in $(NODE_STATIC_DIR)/mcp-warden-operator $(NODE_STATIC_DIR)/mcp-warden-sidecar; do \
	  if ldd "$$b" 2>/dev/null | grep -q '=>'; then echo "$$b is dynamically linked" >&2; exit 1; fi; \
	  echo "static: $$b"; \
	done
endif

## static-binaries: the images' statically linked release binaries, built on this machine
static-binaries:
	RUSTFLAGS="$(STATIC_FLAGS)" $(CARGO) build --release --locked --target x86_64-unknown-linux-gnu \
		-p mcp-warden-operator -p mcp-warden-sidecar
	@for b in $(STATIC_DIR)/mcp-warden-operator $(STATIC_DIR)/mcp-warden-sidecar; do \
	  if ldd "$$b" 2>/dev/null | grep -q '=>'; then echo "$$b is dynamically linked" >&2; exit 1; fi; \
	  echo "static: $$b"; \
	done

# ---------------------------------------------------------------------------
# Hardening: fuzzing and the soak test. Not part of `make test`.
# ---------------------------------------------------------------------------
FUZZ_SECONDS ?= 60
SOAK_SECONDS ?= 600

.PHONY: fuzz fuzz-regress soak

## fuzz: run every cargo-fuzz target (nightly + cargo-fuzz) for FUZZ_SECONDS each; prints executions and crashes
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh

## fuzz-regress: run the inputs of bugs the fuzzers found (fuzz/regressions): each must pass
fuzz-regress:
	bash fuzz/run.sh regress

## soak: SOAK_SECONDS of mixed load through the facade with upstream kills; reports requests, errors, lost responses, RSS
soak: setup
	$(CARGO) build -q -p mcp-warden-sidecar
	MCP_WARDEN_SIDECAR=$(abspath $(SIDECAR)) $(PYTHON) tests/soak/soak.py --seconds $(SOAK_SECONDS)
