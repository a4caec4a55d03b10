#!/bin/bash
# Installs the Workers toolchain (workers/, from its lockfile), builds the
# Workers engine (build/workers/engine.wasm: the runtime every Worker
# script runs on) and the test Workers (tests/workers/corpus/*/wrangler.toml)
# into build/workers/NAME.wasm as scripts, plus one as a snapshot of its
# own (basics-snapshot.wasm), each only when its sources or the toolchain
# changed. --engine-only: the toolchain and the engine.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f workers/node_modules/.package-lock.json ] || [ workers/package-lock.json -nt workers/node_modules/.package-lock.json ]; then
  npm ci --prefix workers --no-audit --no-fund --loglevel=error >/dev/null
fi

mkdir -p build/workers
toolchain=$(find workers/build.mjs workers/runtime workers/wit workers/package-lock.json -type f -newer build/workers/.stamp 2>/dev/null | head -1 || true)
[ -f build/workers/.stamp ] || toolchain=new

# Whether $1 must be rebuilt from the files under $2.
stale() {
  [ -n "$toolchain" ] || [ ! -f "$1" ] || [ -n "$(find "$2" -type f -newer "$1" | head -1)" ]
}

pids=()
if stale build/workers/engine.wasm workers/runtime; then
  node workers/build.mjs --engine --out build/workers/engine.wasm &
  pids+=($!)
fi
if [ "${1:-}" = --engine-only ]; then
  for pid in "${pids[@]}"; do wait "$pid"; done
  exit 0
fi
if stale build/workers/basics-snapshot.wasm tests/workers/corpus/basics; then
  node workers/build.mjs --snapshot --config tests/workers/corpus/basics/wrangler.toml --out build/workers/basics-snapshot.wasm &
  pids+=($!)
fi
for dir in tests/workers/corpus/*/; do
  name=$(basename "$dir")
  if stale "build/workers/$name.wasm" "$dir"; then
    node workers/build.mjs --config "$dir/wrangler.toml" --out "build/workers/$name.wasm"
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
touch build/workers/.stamp
