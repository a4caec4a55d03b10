#!/usr/bin/env bash
# Instructions per token, through the real servers: the signer component on
# `edge serve` and the signing library natively behind hyper
# (`sign_server`), each run under callgrind while a keep-alive client asks
# for N tokens (EdDSA, Jitsi claims, the body `make bench-udf` sends).
# Counting starts after start-up and warm-up (`callgrind_control -i on`),
# so what is counted is the serving of the N tokens: user-space
# instructions of every thread, Wasmtime's compiled guest code included,
# named from its perf map. Repeatable on a noisy machine, unlike tokens/s;
# kernel time (loopback TCP, wake-ups) is not in it.
#
#   bench/signer-instructions.sh [N] [FUNCTIONS]
#   SIGNER_WASM=path/to/signer.wasm bench/signer-instructions.sh [N] [FUNCTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
n=${1:-1000}
top=${2:-25}
command -v valgrind >/dev/null || sudo apt-get install -y valgrind
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT

cargo build -q --release -p edge
cargo build -q --release -p signing --example sign_server
# A build with symbols, so the profile names guest functions; or the
# signer in SIGNER_WASM (another revision's, to tell the guest's share of a
# change from the host's).
wasm=${SIGNER_WASM:-}
if [ -z "$wasm" ]; then
  CARGO_PROFILE_WASM_STRIP=false cargo --config components/signer/wide-arithmetic.toml \
    build -q --profile wasm --target wasm32-wasip2 \
    -p signer --target-dir "$CARGO_TARGET_DIR/symbols"
  wasm=$CARGO_TARGET_DIR/symbols/wasm32-wasip2/wasm/signer.wasm
fi

cat > "$work/client.py" <<'PY'
import http.client, os, sys, threading
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
body = b'{"room":"standup","user":{"id":"u1","name":"Ada"}}'
headers = {"Content-Type": "application/json",
           "Authorization": "Bearer " + os.environ["SIGNER_BENCH_KEY"]}
failed = []
def run(k):
    c = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(k):
        c.request("POST", path, body, headers)
        r = c.getresponse()
        if b'"token"' not in r.read():
            failed.append(r.status)
threads = [threading.Thread(target=run, args=(n // 4,)) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
sys.exit(f"{len(failed)} requests failed: {failed[:5]}" if failed else 0)
PY

# measure NAME PORT PATH COMMAND...: instructions per token of COMMAND.
measure() {
  local name=$1 port=$2 path=$3
  shift 3
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/$name.out" \
    "$@" >"$work/$name.log" 2>&1 &
  pids+=($!)
  local pid=$!
  for _ in $(seq 600); do
    curl -s -o /dev/null -d '{}' "http://127.0.0.1:$port$path" && break
    sleep 0.2
  done
  python3 "$work/client.py" "$port" "$path" 20
  callgrind_control -i on "$pid" >/dev/null
  python3 "$work/client.py" "$port" "$path" "$n"
  callgrind_control -d "$pid" >/dev/null
  callgrind_control -i off "$pid" >/dev/null
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  local ir
  ir=$(grep -h '^totals:' "$work/$name.out".* | awk '{s += $2} END {print s}')
  echo "$name: $((ir / n)) instructions per token ($n tokens)"
  local map=/tmp/perf-$pid.map
  [ -f "$map" ] || map=/dev/null # native code is named by its symbols
  python3 bench/hints/callgrind-names.py "$(ls "$work/$name.out".* | head -1)" "$map" "$top" |
    tail -n +2
  rm -f "/tmp/perf-$pid.map"
}

# A small pool: valgrind cannot reserve the default pool's address space.
# All of it the one tenant's, so its four session instances fit (a
# tenant's share is half the pool by default, its sessions half that).
# shellcheck source=bench/signer-app.sh
. bench/signer-app.sh
export SIGNER_BENCH_KEY
write_signer_app "$work" "$wasm" 18282 $'[pool]\ntotal_component_instances = 6\nsession_instances = 6\n[limits]\nmax_instances = 6\nmax_sessions = 6'
EDGE_LOG=error EDGE_PERFMAP=1 measure component 18282 /signer/tokens \
  "$CARGO_TARGET_DIR/release/edge" serve --config "$work/edge.toml"
measure native 18292 /tokens "$CARGO_TARGET_DIR/release/examples/sign_server" 127.0.0.1:18292
