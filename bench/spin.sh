#!/usr/bin/env bash
# Spin apps: Spin's http-rust template on spin-sdk 7.0.0 (a WASI 0.3
# component) on `edge up` vs `wasmtime serve` (Spin's own binary does not
# install from the registries here), and the key-value app on `edge up`;
# one run, same machine, same load (wrk -t2 -c100 -d10s, keep-alive).
#
#   make bench-spin            (DURATION=10s CONNECTIONS=100 to change the load)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-100}
WASMTIME_VERSION=48.0.8
HELLO_PORT=18180 WT_PORT=18181 KV_PORT=18182

need_apt() { command -v "$1" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; }; }
need_apt wrk wrk
if ! wasmtime --version 2>/dev/null | grep -q "$WASMTIME_VERSION"; then
  echo "installing wasmtime-cli $WASMTIME_VERSION (takes ~25 minutes the first time)..." >&2
  cargo install wasmtime-cli --version "$WASMTIME_VERSION" --locked >&2
fi
./scripts/spin-apps.sh >/dev/null

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; return 1; }

hello=tests/spin-apps/rust-hello
EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" up -f "$hello/spin.toml" --listen "127.0.0.1:$HELLO_PORT" --state-dir "$work/hello" >/dev/null &
pids+=($!)
wasmtime serve -O pooling-allocator -S cli --addr "127.0.0.1:$WT_PORT" "$hello/target/wasm32-wasip2/release/rust_hello.wasm" >/dev/null 2>&1 &
pids+=($!)
SPIN_VARIABLE_API_TOKEN=bench EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" up -f tests/spin-apps/rust-features/spin.toml --listen "127.0.0.1:$KV_PORT" --state-dir "$work/kv" >/dev/null &
pids+=($!)
for p in $HELLO_PORT $WT_PORT $KV_PORT; do wait_port "$p"; done
for p in $HELLO_PORT $WT_PORT; do
  body=$(curl -s "http://127.0.0.1:$p/check")
  [ "$body" = "Hello World!" ] || { echo "port $p answered '$body'" >&2; exit 1; }
done
curl -s -X PUT --data "value" "http://127.0.0.1:$KV_PORT/kv/bench" >/dev/null
[ "$(curl -s "http://127.0.0.1:$KV_PORT/kv/bench")" = "value" ] || { echo "the key-value app did not answer" >&2; exit 1; }

run_wrk() { # url -> "req/s p50 p99 errors"
  wrk -t1 -c10 -d1s "$1" >/dev/null # warm-up
  wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$1" > "$work/wrk"
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk")
  p50=$(awk '$1=="50%" {print $2}' "$work/wrk")
  p99=$(awk '$1=="99%" {print $2}' "$work/wrk")
  errors=$(awk '/Non-2xx|Socket errors/ {print}' "$work/wrk" | tr '\n' ' ')
  echo "$rps $p50 $p99 ${errors:-}"
}
read -r h_rps h_p50 h_p99 h_err <<<"$(run_wrk "http://127.0.0.1:$HELLO_PORT/hello")"
read -r w_rps w_p50 w_p99 w_err <<<"$(run_wrk "http://127.0.0.1:$WT_PORT/hello")"
read -r k_rps k_p50 k_p99 k_err <<<"$(run_wrk "http://127.0.0.1:$KV_PORT/kv/bench")"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
echo
echo "Spin apps over HTTP, wrk -t2 -c$CONNECTIONS -d$DURATION (keep-alive), $(nproc) cores"
printf '| %-52s | %10s | %8s | %8s | %-12s |\n' "app and server" "req/s" p50 p99 "edge ratio"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------------------------------" "------------" "----------" "----------" "--------------"
printf '| %-52s | %10s | %8s | %8s | %-12s |\n' "hello (spin-sdk 7, WASI 0.3) on edge up" "$h_rps" "$h_p50" "$h_p99" "1.00x"
printf '| %-52s | %10s | %8s | %8s | %-12s |\n' "hello (spin-sdk 7, WASI 0.3) on wasmtime serve" "$w_rps" "$w_p50" "$w_p99" "$(ratio "$h_rps" "$w_rps") of it"
printf '| %-52s | %10s | %8s | %8s | %-12s |\n' "key-value GET (spin-sdk 7) on edge up" "$k_rps" "$k_p50" "$k_p99" "-"
for e in "$h_err" "$w_err" "$k_err"; do [ -n "${e// }" ] && echo "errors: $e"; done
