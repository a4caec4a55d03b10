#!/usr/bin/env bash
# Instructions the edge server spends (wasm and host together) on the first
# N queries of a query log, counted by callgrind: repeatable to a fraction
# of a percent where wall-clock A/B runs on this machine swing by a third.
# Compare two builds of the hints component with it.
#
#   bench/hints/server-instructions.sh HINTS_WASM QUERY_LOG [N]
#
# HINTS_WASM: a hints component (build one with the bench's index:
#   EDGE_HINTS_DIR=DIR cargo build --profile wasm --target wasm32-wasip2 -p hints)
# QUERY_LOG: one query per line (bench/hints/quality.py querylog writes one).
# Needs valgrind and a release `edge` (CARGO_TARGET_DIR or ./target).
set -euo pipefail
wasm=$(realpath "$1")
log=$(realpath "$2")
n=${3:-1000}
edge=${EDGE_BIN:-${CARGO_TARGET_DIR:-target}/release/edge}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ -x "$edge" ] || { echo "no edge binary at $edge (cargo build --release -p edge)" >&2; exit 2; }

dir=$(mktemp -d)
trap 'pkill -f "serve --config $dir/edge.toml" 2>/dev/null || true; rm -rf "$dir"' EXIT
port=$((20000 + RANDOM % 20000))
cat > "$dir/spin.toml" <<EOF
spin_manifest_version = 2
[application]
name = "instructions"
[[trigger.http]]
route = "/hints/..."
component = "hints"
[component.hints]
source = "$wasm"
EOF
# One worker and one warm instance: every query runs the same code path.
cat > "$dir/edge.toml" <<EOF
app = "spin.toml"
[server]
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$((port + 1))"
data_dir = "$dir/data"
watch_interval_ms = 0
workers = 1
[pool]
total_component_instances = 8
total_memories = 8
total_tables = 8
total_stacks = 8
total_core_instances = 16
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
[component.hints]
memory_bytes = 134217728
instance = "session"
session_key = "host"
instances_per_key = 1
EOF
send() { # send COUNT: the first COUNT queries, one connection, in order
  python3 - "$1" "$port" "$log" <<'EOF'
import http.client, sys, urllib.parse
n, port, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
conn = http.client.HTTPConnection("127.0.0.1", port)
for q in [l.rstrip("\n") for l in open(log, encoding="utf-8")][:n]:
    conn.request("GET", "/hints/address?count=5&q=" + urllib.parse.quote(q))
    r = conn.getresponse()
    r.read()
    assert r.status == 200, (q, r.status)
EOF
}
EDGE_LOG=error valgrind --tool=callgrind --smc-check=all-non-file \
  --callgrind-out-file="$dir/cg.out" "$edge" serve --config "$dir/edge.toml" \
  >"$dir/server.log" 2>&1 &
for _ in $(seq 600); do
  curl -s -o /dev/null "http://127.0.0.1:$port/hints/address?q=a" && break
  sleep 0.5
done
send 200               # warm up: compiled code, the instance, its caches
callgrind_control -z >/dev/null 2>&1
send "$n"
callgrind_control -d >/dev/null 2>&1
total=$(grep -h '^summary' "$dir"/cg.out.* | tail -1 | cut -d' ' -f2)
echo "$(basename "$wasm"): $total instructions for $n queries ($((total / n)) per query)"
