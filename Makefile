# edge: two commands on a fresh Debian machine.
#   make run   build everything and serve the default app on localhost
#   make test  run every test
SHELL := /bin/bash
export CARGO_TARGET_DIR ?= $(HOME)/.cache/edge/target
CARGO ?= cargo
COMPONENTS := echo fixtures probe rewriter signer codec
WASM_DIR := $(CARGO_TARGET_DIR)/wasm32-wasip2/wasm

.PHONY: run test setup components host lint bench-host bench-rewrite-engine bench-rewriter bench-udf bench-codec clean

setup:
	@./scripts/setup.sh

components: setup
	$(CARGO) build --profile wasm --target wasm32-wasip2 $(addprefix -p ,$(COMPONENTS))
	@mkdir -p build/components
	@for c in $(COMPONENTS); do cp -f $(WASM_DIR)/$$c.wasm build/components/$$c.wasm; done

host: setup
	$(CARGO) build --release -p edge -p edge-udf -p edge-sidecar

run: components host
	$(CARGO_TARGET_DIR)/release/edge serve --config edge-config/default.toml

test: components host
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets --exclude echo --exclude fixtures --exclude probe --exclude rewriter --exclude signer --exclude codec --exclude guest-http -- -D warnings
	$(CARGO) clippy --release --target wasm32-wasip2 -p echo -p fixtures -p probe -p rewriter -p signer -p codec -p guest-http -- -D warnings
	EDGE_BIN=$(CARGO_TARGET_DIR)/release/edge $(CARGO) test --release --workspace --exclude echo --exclude fixtures --exclude probe --exclude rewriter --exclude signer --exclude codec --exclude guest-http

bench-host: components host
	./bench/host.sh

bench-rewrite-engine: host
	./bench/rewrite-engine.sh

bench-rewriter: components host
	./bench/rewriter.sh

bench-udf: components host
	./bench/udf.sh

bench-codec: components host
	./bench/codec.sh

clean:
	rm -rf build .edge-data
