#!/usr/bin/env bash
# The rewrite engine in wasm without HTTP: the shared page through each
# shared rule file (1, 10, 50, 200 rules) by a bare wasm build of the
# engine (bench/rewriter/wasm-replay) that Wasmtime runs with the server's
# settings and the component's target features (components/rewriter/
# relaxed-simd.toml), best of PASSES (default 40) after the first. Beside it the
# same code natively: what the sandbox costs. Both are steadier than
# req/s through HTTP, which swings ±10% here between identical runs. `PERF=N` instead records `perf` of N rules
# with guest functions named (the module is built with symbols).
#
#   bench/rewriter/wasm-replay.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
SHARED="${SHARED:-$(cd .. && pwd)/shared/bench/rewriter}"
PASSES=${PASSES:-40}
lib=/usr/share/doc/python3.11/html/library
[ -f "$lib/os.html" ] || sudo apt-get install -y python3.11-doc
rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat "$lib/os.html" "$lib/stdtypes.html" > "$work/page.html"
page=$(wc -c < "$work/page.html")
cargo build -q --release -p edge --example wasm_replay
replay=$CARGO_TARGET_DIR/release/examples/wasm_replay

build() { # rules file [native]
  if [ -n "${2:-}" ]; then
    REPLAY_PAGE=$work/page.html REPLAY_RULES=$1 cargo build -q --release \
      --manifest-path bench/rewriter/wasm-replay/Cargo.toml --target-dir "$CARGO_TARGET_DIR/wasm-replay"
    echo "$CARGO_TARGET_DIR/wasm-replay/release/rewriter-wasm-replay"
    return
  fi
  REPLAY_PAGE=$work/page.html REPLAY_RULES=$1 RUSTFLAGS="-C target-feature=+simd128,+relaxed-simd" \
    cargo build -q --release --lib --target wasm32-unknown-unknown \
    --manifest-path bench/rewriter/wasm-replay/Cargo.toml --target-dir "$CARGO_TARGET_DIR/wasm-replay"
  echo "$CARGO_TARGET_DIR/wasm-replay/wasm32-unknown-unknown/release/rewriter_wasm_replay.wasm"
}
best() { "$@" $((PASSES + 1)) | tail -n +2 | awk '{print $3}' | sort -g | head -1; }

if [ -n "${PERF:-}" ]; then
  module=$(build "$SHARED/rules-$PERF.conf")
  EDGE_PERFMAP=1 perf record -F 4000 -g -o "${PERF_OUT:-perf.data}" "$replay" "$module" 400 >/dev/null
  exit
fi

echo "shared page ($page bytes), 32 KiB chunks (as components/rewriter/src/body.rs feeds it), one core, best of $PASSES passes"
printf '| %-5s | %10s | %10s | %11s |\n' rules "wasm MB/s" "native MB/s" "wasm/native"
printf '|%s|%s|%s|%s|\n' ------- ------------ ------------ -------------
for n in 1 10 50 200; do
  wasm=$(echo "$page / $(best "$replay" "$(build "$SHARED/rules-$n.conf")") / 1000000" | bc -l)
  native=$(echo "$page / $(best "$(build "$SHARED/rules-$n.conf" native)") / 1000000" | bc -l)
  printf '| %-5s | %10.0f | %10.0f | %10.2fx |\n' "$n" "$wasm" "$native" "$(echo "$wasm / $native" | bc -l)"
done
