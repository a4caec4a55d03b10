#!/usr/bin/env bash
# The address engine's instructions in wasm, without HTTP: one pass over a
# query log by a bare wasm build of the engine (bench/hints/wasm-replay)
# that Wasmtime runs with the server's settings (epoch checks, pooling),
# counted by callgrind and named from Wasmtime's perf map. Repeatable on a
# noisy machine, unlike time; `NO_EPOCH=1` shows what the epoch checks
# (the deadlines) cost.
#
#   bench/hints/wasm-instructions.sh INDEX LOG [FUNCTIONS]
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
index=$(realpath "$1")
log=$(realpath "$2")
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
command -v valgrind >/dev/null || sudo apt-get install -y valgrind
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
REPLAY_INDEX=$index REPLAY_LOG=$log RUSTFLAGS="-C target-feature=+simd128" \
  cargo build -q --release --target wasm32-unknown-unknown \
  --manifest-path bench/hints/wasm-replay/Cargo.toml --target-dir "$CARGO_TARGET_DIR/wasm-replay"
cargo build -q --release -p edge --example wasm_replay
replay=$CARGO_TARGET_DIR/release/examples/wasm_replay
SAVE=$work/replay.cwasm "$replay" "$CARGO_TARGET_DIR/wasm-replay/wasm32-unknown-unknown/release/wasm_replay.wasm"
EDGE_PERFMAP=1 valgrind --tool=callgrind --callgrind-out-file="$work/cg.out" "$replay" "$work/replay.cwasm" 1 2>"$work/vg.err"
grep -E 'refs' "$work/vg.err"
pid=$(grep -o '^==[0-9]*==' "$work/vg.err" | head -1 | tr -d =)
python3 bench/hints/callgrind-names.py "$work/cg.out" "/tmp/perf-$pid.map" "${3:-15}"
rm -f "/tmp/perf-$pid.map"
