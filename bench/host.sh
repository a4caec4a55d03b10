#!/usr/bin/env bash
# Host benchmark: echo over HTTP on edge vs `wasmtime serve` vs nginx, one
# run, same machine, same load (wrk -t2 -c400 -d10s, keep-alive); then the
# per-request instantiate+handle+drop cost on one core.
#
#   make bench-host            (DURATION=10s CONNECTIONS=400 to change the load)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-400}
WASMTIME_VERSION=48.0.8
EDGE_PORT=18080 WT_PORT=18081 NGINX_PORT=18082

need_apt() { command -v "$1" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; }; }
need_apt wrk wrk
need_apt nginx nginx-light
if ! wasmtime --version 2>/dev/null | grep -q "$WASMTIME_VERSION"; then
  echo "installing wasmtime-cli $WASMTIME_VERSION (takes ~25 minutes the first time)..." >&2
  cargo install wasmtime-cli --version "$WASMTIME_VERSION" --locked >&2
fi

. bench/lib.sh
bench_workdir
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; return 1; }

# edge: the echo component alone, admin off.
echo_app "$work/spin.toml" bench
cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$EDGE_PORT"
admin_listen = "127.0.0.1:18089"
data_dir = "$HOME/.cache/edge/bench-data"
watch_interval_ms = 0
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
TOML
EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" serve --config "$work/edge.toml" >/dev/null &
pids+=($!)

# wasmtime serve: same component, pooling allocator.
wasmtime serve -O pooling-allocator -S cli --addr "127.0.0.1:$WT_PORT" build/components/echo.wasm >/dev/null 2>&1 &
pids+=($!)

# nginx: the same body from a return directive.
mkdir -p "$work/nginx"
cat > "$work/nginx/nginx.conf" <<CONF
worker_processes auto;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx;
  proxy_temp_path $work/nginx;
  fastcgi_temp_path $work/nginx;
  uwsgi_temp_path $work/nginx;
  scgi_temp_path $work/nginx;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    default_type "text/plain; charset=utf-8";
    location / { return 200 "hello from edge: \$request_uri\n"; }
  }
}
CONF
nginx -c "$work/nginx/nginx.conf" &
pids+=($!)

for p in $EDGE_PORT $WT_PORT $NGINX_PORT; do wait_port "$p"; done
for p in $EDGE_PORT $WT_PORT $NGINX_PORT; do
  body=$(curl -s "http://127.0.0.1:$p/check")
  [ "$body" = "hello from edge: /check" ] || { echo "port $p answered '$body'" >&2; exit 1; }
done

run_wrk() { # port -> "req/s p50 p99"
  wrk -t1 -c10 -d1s "http://127.0.0.1:$1/warm" >/dev/null # warm-up
  wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$1/bench" > "$work/wrk.$1"
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk.$1")
  p50=$(awk '$1=="50%" {print $2}' "$work/wrk.$1")
  p99=$(awk '$1=="99%" {print $2}' "$work/wrk.$1")
  local errors; errors=$(awk '/Non-2xx|Socket errors/ {print}' "$work/wrk.$1" | tr '\n' ' ')
  echo "$rps $p50 $p99 ${errors:-}"
}
read -r e_rps e_p50 e_p99 e_err <<<"$(run_wrk $EDGE_PORT)"
read -r w_rps w_p50 w_p99 w_err <<<"$(run_wrk $WT_PORT)"
read -r n_rps n_p50 n_p99 n_err <<<"$(run_wrk $NGINX_PORT)"
cleanup_servers() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
cleanup_servers

per_request=$(cargo bench -q -p edge --bench instantiate 2>/dev/null | awk '/instantiate\+handle\+drop/ {print $2}')

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
echo
echo "echo over HTTP, wrk -t2 -c$CONNECTIONS -d$DURATION (keep-alive), $(nproc) cores"
printf '| %-34s | %10s | %8s | %8s | %-14s |\n' server "req/s" p50 p99 "edge ratio"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------------" "------------" "----------" "----------" "----------------"
printf '| %-34s | %10s | %8s | %8s | %-14s |\n' "edge serve (per-request instances)" "$e_rps" "$e_p50" "$e_p99" "1.00x"
printf '| %-34s | %10s | %8s | %8s | %-14s |\n' "wasmtime serve -O pooling-allocator" "$w_rps" "$w_p50" "$w_p99" "$(ratio "$e_rps" "$w_rps") of it"
printf '| %-34s | %10s | %8s | %8s | %-14s |\n' "nginx return 200" "$n_rps" "$n_p50" "$n_p99" "$(ratio "$e_rps" "$n_rps") of it"
for e in "$e_err" "$w_err" "$n_err"; do [ -n "${e// }" ] && echo "errors: $e"; done
echo
echo "instantiate + handle + drop, one core, 10,000 requests: ${per_request} µs/request (target <= 5)"
