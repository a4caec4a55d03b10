#!/usr/bin/env bash
# Process execution and signing, one run:
#  1. inside a throw-away MariaDB: 2,000 calls of sys_exec('/bin/true') vs
#     sys_exec_fast('/bin/true') and sys_eval('echo hello') vs
#     sys_eval_fast('echo', 'hello'), on one connection and on 4 (500 each);
#  2. without a database: system()/popen() vs posix_spawnp, 1 and 4 threads;
#  3. tokens per second: the signer component over HTTP vs the library natively,
#     on one thread and behind the same kind of HTTP server (hyper, 2 threads).
#
#   make bench-udf
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
EDGE="$CARGO_TARGET_DIR/release/edge"
command -v mariadbd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null; }
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

mkdir -p "$work/plugins" "$work/tmp"
printf 'hs256 billing %s\n' "$(head -c 32 /dev/urandom | base64 -w0)" > "$work/keys"
mariadb-install-db --no-defaults --user=root --auth-root-authentication-method=normal --datadir="$work/data" --tmpdir="$work/tmp" >/dev/null
EDGE_UDF_KEY_FILE="$work/keys" mariadbd --no-defaults --user=root --skip-networking --datadir="$work/data" \
  --socket="$work/sock" --plugin-dir="$work/plugins" --tmpdir="$work/tmp" --pid-file="$work/pid" --log-error="$work/err.log" &
pids+=($!)
for _ in $(seq 100); do mariadb --socket="$work/sock" -u root -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
"$EDGE" udf install --with-shell --process-can-read-keys --socket "$work/sock" >/dev/null 2>&1
mariadb --socket="$work/sock" -u root -e 'CREATE DATABASE b'
sql() { mariadb --socket="$work/sock" -u root -D b -N -B -e "$1" >/dev/null; }
now() { date +%s%N; }

per_call() { # expr connections -> µs per call over 2,000 calls in total
  local per=$((2000 / $2)) start end
  start=$(now)
  for _ in $(seq "$2"); do sql "SELECT SUM(LENGTH($1)) FROM seq_1_to_$per" & done
  wait
  end=$(now)
  echo "scale=1; ($end - $start) / 1000 / 2000" | bc
}

echo "1. inside MariaDB $(mariadbd --version | awk '{print $3}'): µs per call, 2,000 calls"
printf '| %-36s | %12s | %14s |\n' call "1 connection" "4 connections"
printf '|%s|%s|%s|\n' -------------------------------------- -------------- ----------------
for pair in "sys_exec('/bin/true')|sys_exec_fast('/bin/true')" "sys_eval('echo hello')|sys_eval_fast('echo', 'hello')" "sys_eval('/bin/echo hello')|sys_eval_fast('/bin/echo', 'hello')"; do
  shell=${pair%|*} fast=${pair#*|}
  s1=$(per_call "$shell" 1); s4=$(per_call "$shell" 4)
  f1=$(per_call "$fast" 1); f4=$(per_call "$fast" 4)
  printf '| %-36s | %12s | %14s |\n' "$shell" "$s1" "$s4"
  printf '| %-36s | %12s | %14s |\n' "$fast" "$f1" "$f4"
  printf '| %-36s | %11.2fx | %13.2fx |\n' "  ratio" "$(echo "$s1 / $f1" | bc -l)" "$(echo "$s4 / $f4" | bc -l)"
done

echo
echo "2. without a database:"
cargo run --release -q -p edge-spawn --example spawn_bench 2000

echo
echo "3. tokens per second"
cargo run --release -q -p signing --example sign_bench
# shellcheck source=bench/signer-app.sh
. bench/signer-app.sh
write_signer_app "$work" "$PWD/build/components/signer.wasm" 18280
EDGE_LOG=error "$EDGE" serve --config "$work/edge.toml" >/dev/null &
pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18280/signer/.well-known/jwks.json && break; sleep 0.1; done
cat > "$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"room":"standup","user":{"id":"u1","name":"Ada"}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $SIGNER_BENCH_KEY"
LUA
curl -s -H "Authorization: Bearer $SIGNER_BENCH_KEY" -d '{"room":"standup","user":{"id":"u1","name":"Ada"}}' http://127.0.0.1:18280/signer/tokens | grep -q '"token"'
# The same signing natively behind HTTP: what the sandbox costs, HTTP being equal.
CARGO_TARGET_DIR="$CARGO_TARGET_DIR" cargo build --release -q -p signing --example sign_server
"$CARGO_TARGET_DIR/release/examples/sign_server" 127.0.0.1:18291 2>/dev/null &
pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null -d '{}' http://127.0.0.1:18291/tokens && break; sleep 0.1; done
curl -s -d '{"room":"standup","user":{"id":"u1","name":"Ada"}}' http://127.0.0.1:18291/tokens | grep -q '"token"'
# tokens_per_s URL: wrk -t2 -c16 for 5 s after 1 s of warm-up.
tokens_per_s() {
  wrk -t2 -c16 -d1s -s "$work/post.lua" "$1" >/dev/null
  wrk -t2 -c16 -d5s -s "$work/post.lua" "$1" | awk '/Requests\/sec/ {print $2}'
}
# Three alternated rounds: tokens/s here swing ±10% from one 5 s run to
# the next, so the ratio is taken per round and the median reported.
echo "| round | component on edge (EdDSA, POST /signer/tokens) | library behind hyper (2 threads, POST /tokens) | ratio |"
echo "|---|---|---|---|"
ratios=()
for round in 1 2 3; do
  c=$(tokens_per_s http://127.0.0.1:18280/signer/tokens)
  n=$(tokens_per_s http://127.0.0.1:18291/tokens)
  r=$(echo "$c / $n" | bc -l)
  ratios+=("$r")
  printf '| %d | %.0f tokens/s | %.0f tokens/s | %.2fx |\n' "$round" "$c" "$n" "$r"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -g | sed -n 2p)
printf 'component / library behind hyper (wrk -t2 -c16, 2 cores), median of 3 rounds: %.2fx\n' "$median"
