#!/usr/bin/env bash
# Workers: the same module Workers on edge (scripts on the Workers engine,
# and hello also as a --snapshot component; served as isolates) and on
# workerd (npm), one run, same machine, same load: hello
# (wrk -t2 -c100 -d10s, keep-alive) and an HTMLRewriter Worker streaming a
# 71 KiB page (-c8; its output checked equal on both); then what each additional deployed
# Worker costs edge in memory (N distinct hello Workers, each answered once)
# and how many fit in 8 GiB at that rate; and `edge deploy worker.js` to the
# Worker's first answer through the control plane.
#
#   make bench-workers        (DURATION=10s CONNECTIONS=100 WORKERS=8 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-100}
HTML_CONNECTIONS=${HTML_CONNECTIONS:-8}
WORKERS=${WORKERS:-8}
EDGE_PORT=18280 WORKERD_PORT=18281 MANY_PORT=18282 WORKERD_HTML_PORT=18283

need_apt() { command -v "$1" >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2"; }; }
need_apt wrk wrk
./scripts/workers.sh >/dev/null
WORKERD=workers/node_modules/@cloudflare/workerd-linux-64/bin/workerd

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; return 1; }
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# The hello and HTMLRewriter Workers, built for edge.
node workers/build.mjs --config bench/workers/hello/wrangler.toml --out "$work/hello.wasm" 2>/dev/null
node workers/build.mjs --snapshot --config bench/workers/hello/wrangler.toml --out "$work/hello-snapshot.wasm" 2>/dev/null
node workers/build.mjs --config bench/workers/html/wrangler.toml --out "$work/html.wasm" 2>/dev/null
cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "bench-workers"
[[trigger.http]]
route = "/snapshot/..."
component = "snapshot"
[component.snapshot]
source = "hello-snapshot.wasm"
[[trigger.http]]
route = "/html/..."
component = "html"
[component.html]
source = "html.wasm"
[[trigger.http]]
route = "/..."
component = "hello"
[component.hello]
source = "hello.wasm"
TOML
cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$EDGE_PORT"
admin_listen = "127.0.0.1:0"
data_dir = "data"
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
TOML
EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" serve --config "$work/edge.toml" >/dev/null &
pids+=($!)

cp bench/workers/hello/worker.js "$work/hello.js"
cp bench/workers/html/worker.js "$work/html.js"
cat > "$work/workerd.capnp" <<CAPNP
using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [(name = "hello", worker = .hello), (name = "html", worker = .html)],
  sockets = [
    (name = "hello", address = "127.0.0.1:$WORKERD_PORT", http = (), service = "hello"),
    (name = "html", address = "127.0.0.1:$WORKERD_HTML_PORT", http = (), service = "html"),
  ],
);
const hello :Workerd.Worker = (modules = [(name = "worker.js", esModule = embed "hello.js")], compatibilityDate = "2024-09-23");
const html :Workerd.Worker = (modules = [(name = "worker.js", esModule = embed "html.js")], compatibilityDate = "2024-09-23");
CAPNP
"$WORKERD" serve "$work/workerd.capnp" >/dev/null 2>&1 &
pids+=($!)
for p in $EDGE_PORT $WORKERD_PORT; do
  wait_port "$p"
  body=$(curl -s "http://127.0.0.1:$p/")
  [ "$body" = "Hello World!" ] || { echo "port $p answered '$body'" >&2; exit 1; }
done
wait_port "$WORKERD_HTML_PORT"
curl -s "http://127.0.0.1:$EDGE_PORT/html/" > "$work/html-edge"
curl -s "http://127.0.0.1:$WORKERD_HTML_PORT/html/" > "$work/html-workerd"
cmp -s "$work/html-edge" "$work/html-workerd" || { echo "the HTMLRewriter Worker's pages differ between edge and workerd" >&2; exit 1; }
page_bytes=$(stat -c %s "$work/html-edge")

run_wrk() { # url [connections] -> "req/s p50 p99 errors"
  wrk -t1 -c10 -d2s "$1" >/dev/null # warm-up (isolates and JIT)
  wrk -t2 -c"${2:-$CONNECTIONS}" -d"$DURATION" --timeout 10s --latency "$1" > "$work/wrk"
  local rps p50 p99 errors
  rps=$(awk '/Requests\/sec/ {print $2}' "$work/wrk")
  p50=$(awk '$1=="50%" {print $2}' "$work/wrk")
  p99=$(awk '$1=="99%" {print $2}' "$work/wrk")
  errors=$(awk '/Non-2xx|Socket errors/ {print}' "$work/wrk" | tr '\n' ' ')
  echo "$rps $p50 $p99 ${errors:-}"
}
read -r e_rps e_p50 e_p99 e_err <<<"$(run_wrk "http://127.0.0.1:$EDGE_PORT/")"
read -r es_rps es_p50 es_p99 es_err <<<"$(run_wrk "http://127.0.0.1:$EDGE_PORT/snapshot/")"
read -r w_rps w_p50 w_p99 w_err <<<"$(run_wrk "http://127.0.0.1:$WORKERD_PORT/")"
read -r eh_rps eh_p50 eh_p99 eh_err <<<"$(run_wrk "http://127.0.0.1:$EDGE_PORT/html/" "$HTML_CONNECTIONS")"
read -r wh_rps wh_p50 wh_p99 wh_err <<<"$(run_wrk "http://127.0.0.1:$WORKERD_HTML_PORT/html/" "$HTML_CONNECTIONS")"
kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; pids=()

# Memory per additional Worker: N distinct hello Workers (each its own
# script on the one engine), each answered once, RSS of edge against the
# same edge serving one.
mkdir -p "$work/many"
{
  echo 'spin_manifest_version = 2'
  echo '[application]'
  echo 'name = "many"'
  for i in $(seq "$WORKERS"); do
    mkdir -p "$work/many/w$i"
    sed "s/Hello World!/Hello World $i!/" bench/workers/hello/worker.js > "$work/many/w$i/worker.js"
    printf 'name = "w%s"\nmain = "worker.js"\n' "$i" > "$work/many/w$i/wrangler.toml"
    printf '[[trigger.http]]\nroute = "/w%s/..."\ncomponent = "w%s"\n[component.w%s]\nsource = "w%s.wasm"\n' "$i" "$i" "$i" "$i"
  done
} > "$work/many/spin.toml"
for i in $(seq "$WORKERS"); do
  node workers/build.mjs --config "$work/many/w$i/wrangler.toml" --out "$work/many/w$i.wasm" 2>/dev/null &
  (( i % 2 == 0 )) && wait
done
wait
sed "s/$EDGE_PORT/$MANY_PORT/; s/data_dir = \"data\"/data_dir = \"..\/data\"/" "$work/edge.toml" > "$work/many/edge.toml"
# Two configs over one compile cache: all N Workers, and only the first.
# A first start compiles them all, so both measured starts only load
# artifacts (compiling leaves the allocator holding its arenas).
{
  head -3 "$work/many/spin.toml"
  printf '[[trigger.http]]\nroute = "/w1/..."\ncomponent = "w1"\n[component.w1]\nsource = "w1.wasm"\n'
} > "$work/many/one.toml"
sed 's/app = "spin.toml"/app = "one.toml"/' "$work/many/edge.toml" > "$work/many/edge-one.toml"
start_edge() { # config -> pid, serving on MANY_PORT
  EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" serve --config "$1" >/dev/null &
  local pid=$!
  pids+=($pid)
  wait_port "$MANY_PORT"
  echo "$pid"
}
stop_edge() { kill "$1"; while kill -0 "$1" 2>/dev/null; do sleep 0.1; done; }
answer_all() { # count
  for i in $(seq "$1"); do
    [ "$(curl -s "http://127.0.0.1:$MANY_PORT/w$i/")" = "Hello World $i!" ] || { echo "w$i did not answer" >&2; exit 1; }
  done
  sleep 1
}
pid=$(start_edge "$work/many/edge.toml"); stop_edge "$pid"   # compiles
pid=$(start_edge "$work/many/edge-one.toml"); answer_all 1; rss_one=$(rss_kib "$pid"); stop_edge "$pid"
pid=$(start_edge "$work/many/edge.toml"); answer_all "$WORKERS"; rss_all=$(rss_kib "$pid"); stop_edge "$pid"
per_worker=$(( (rss_all - rss_one) / (WORKERS - 1) ))
engine_artifact=$(stat -c %s "$work/data/cache/"*.cwasm | sort -n | tail -1)
script=$(stat -c %s "$work/many/w1.wasm")

# Deploy to first answer: `edge deploy` of the hello Worker (build on the
# CLI, upload, compile, activate) through a node's control plane, until the
# new version answers; DEPLOYS times, each a distinct Worker (new bytes).
DEPLOYS=${DEPLOYS:-3}
CONTROL_PORT=18284 DEPLOY_PORT=18285
mkdir -p "$work/deploy"
cat > "$work/deploy/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "operator"
[[trigger.http]]
route = "/..."
component = "hello"
[component.hello]
source = "../hello.wasm"
TOML
cat > "$work/deploy/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$DEPLOY_PORT"
admin_listen = "127.0.0.1:0"
data_dir = "data"
watch_interval_ms = 0
[control]
listen = "127.0.0.1:$CONTROL_PORT"
[[tenant]]
name = "operator"
hosts = ["operator.test"]
components = ["*"]
TOML
EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" serve --config "$work/deploy/edge.toml" >/dev/null 2>"$work/deploy/edge.log" &
pids+=($!)
for _ in $(seq 300); do [ -s "$work/deploy/data/control/operator.token" ] && curl -s -o /dev/null "http://127.0.0.1:$CONTROL_PORT/v1/openapi.json" && break; sleep 0.1; done
export EDGE_API_URL="http://127.0.0.1:$CONTROL_PORT" EDGE_API_TOKEN_FILE="$work/deploy/data/control/operator.token"
"$CARGO_TARGET_DIR/release/edge" tenants create bench --host bench.test >/dev/null
deploy_ms=()
for i in $(seq "$DEPLOYS"); do
  mkdir -p "$work/deploy/w$i"
  sed "s/Hello World!/Deployed $i!/" bench/workers/hello/worker.js > "$work/deploy/w$i/worker.js"
  start=$(date +%s%N)
  "$CARGO_TARGET_DIR/release/edge" deploy "$work/deploy/w$i/worker.js" --app hello --tenant bench --workers-dir workers >/dev/null 2>&1
  until [ "$(curl -s -H 'Host: bench.test' "http://127.0.0.1:$DEPLOY_PORT/")" = "Deployed $i!" ]; do sleep 0.02; done
  deploy_ms+=($(( ($(date +%s%N) - start) / 1000000 )))
done
unset EDGE_API_URL EDGE_API_TOKEN_FILE
deploys=$(printf '%s ms, ' "${deploy_ms[@]}")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
echo
echo "Workers over HTTP, wrk -t2 -d$DURATION (keep-alive; hello -c$CONNECTIONS, HTMLRewriter -c$HTML_CONNECTIONS), $(nproc) cores"
printf '| %-40s | %10s | %8s | %8s | %-14s |\n' "Worker and server" "req/s" p50 p99 "edge ratio"
printf '|%s|%s|%s|%s|%s|\n' "------------------------------------------" "------------" "----------" "----------" "----------------"
printf '| %-40s | %10s | %8s | %8s | %-14s |\n' "hello on edge (script on the engine)" "$e_rps" "$e_p50" "$e_p99" "1.00x"
printf '| %-40s | %10s | %8s | %8s | %-14s |\n' "hello on edge (--snapshot component)" "$es_rps" "$es_p50" "$es_p99" "$(ratio "$es_rps" "$e_rps")"
printf '| %-40s | %10s | %8s | %8s | %-14s |\n' "hello on workerd $("$WORKERD" --version | awk '{print $2}')" "$w_rps" "$w_p50" "$w_p99" "$(ratio "$e_rps" "$w_rps") of it"
printf '| %-40s | %10s | %8s | %8s | %-14s |\n' "HTMLRewriter ($((page_bytes / 1024)) KiB page) on edge" "$eh_rps" "$eh_p50" "$eh_p99" "1.00x"
printf '| %-40s | %10s | %8s | %8s | %-14s |\n' "HTMLRewriter ($((page_bytes / 1024)) KiB page) on workerd" "$wh_rps" "$wh_p50" "$wh_p99" "$(ratio "$eh_rps" "$wh_rps") of it"
for row in "hello on edge:$e_err" "hello --snapshot on edge:$es_err" "hello on workerd:$w_err" "HTMLRewriter on edge:$eh_err" "HTMLRewriter on workerd:$wh_err"; do
  errors=${row#*:}
  [ -n "${errors// }" ] && echo "errors, ${row%%:*}: $errors"
done
echo
echo "Deploy to first answer (edge deploy worker.js: build, upload, compile, activate): ${deploys%, }"
echo
echo "Memory per additional deployed Worker on edge ($WORKERS hello Workers, each answered once)"
echo "  Worker script $((script / 1024)) KiB; the Workers engine's compiled artifact (shared by all) $((engine_artifact / 1024)) KiB"
echo "  RSS with 1: $((rss_one / 1024)) MiB, with $WORKERS: $((rss_all / 1024)) MiB: $((per_worker / 1024)) MiB per Worker,"
echo "  $(( 8 * 1024 * 1024 / (per_worker > 0 ? per_worker : 1) )) Workers in 8 GiB at that rate"
