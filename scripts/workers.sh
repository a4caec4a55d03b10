#!/bin/bash
# Installs the Workers toolchain (workers/, from its lockfile) and builds
# the test Workers (tests/workers/corpus/*/wrangler.toml) into
# build/workers/NAME.wasm, each only when its sources or the toolchain
# changed. Builds run two at a time (each is mostly one core).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -f workers/node_modules/.package-lock.json ] || [ workers/package-lock.json -nt workers/node_modules/.package-lock.json ]; then
  npm ci --prefix workers --no-audit --no-fund --loglevel=error >/dev/null
fi

mkdir -p build/workers
toolchain=$(find workers/build.mjs workers/runtime workers/wit workers/package-lock.json -type f -newer build/workers/.stamp 2>/dev/null | head -1 || true)
[ -f build/workers/.stamp ] || toolchain=new
pids=()
for dir in tests/workers/corpus/*/; do
  name=$(basename "$dir")
  out=build/workers/$name.wasm
  if [ -z "$toolchain" ] && [ -f "$out" ] && [ -z "$(find "$dir" -type f -newer "$out" | head -1)" ]; then
    continue
  fi
  node workers/build.mjs --config "$dir/wrangler.toml" --out "$out" &
  pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
touch build/workers/.stamp
