#!/usr/bin/env bash
# Control plane benchmark (issue 34), one run, one host on loopback:
#  1. `edge deploy` of the echo component to its first 200 answer, p50 and
#     max over DEPLOYS deploys; every deploy uploads new bytes (the
#     component with a custom section of its own), so each is checked,
#     compiled by the bounded worker, stored, made a version and activated;
#  2. the same for a 10 MB component (echo padded with a custom section
#     to 10 MB: checking, hashing, storing and compiling at that size; the
#     code compiled is echo's, section 3 compares compiling real code);
#  3. compile time of `edge compile` (the worker deploys run) against
#     `wasmtime compile` of the same files, alternated, median of RUNS;
#  4. ACTIVATIONS activations (alternating two stored versions) while an
#     open-loop load of RATE requests/s runs on the app: requests lost (must
#     be 0) and p99 during them against p99 of the same load without.
# Prints a table; exit 1 if a request was lost.
#
#   make bench-deploy     (DEPLOYS=20 ACTIVATIONS=20 RATE=2000 RUNS=5 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
DEPLOYS=${DEPLOYS:-20}
ACTIVATIONS=${ACTIVATIONS:-20}
RATE=${RATE:-2000}
RUNS=${RUNS:-5}
WASMTIME_VERSION=48.0.8
PORT=18780 CONTROL=18790
edge="$CARGO_TARGET_DIR/release/edge"
load="$CARGO_TARGET_DIR/release/hostile-load"

if ! wasmtime --version 2>/dev/null | grep -q "$WASMTIME_VERSION"; then
  echo "installing wasmtime-cli $WASMTIME_VERSION (takes ~25 minutes the first time)..." >&2
  cargo install wasmtime-cli --version "$WASMTIME_VERSION" --locked >&2
fi
cargo build --release -q -p hostile-load

. bench/lib.sh
bench_workdir

control_node "$PORT" "$CONTROL"
epid=$node_pid
"$edge" tenants create bench --host bench.test >/dev/null
echo "edge pid $epid up; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# A copy of WASM with a custom section NAME holding PAD bytes (new bytes,
# same behaviour).
variant() {
  /usr/bin/python3 - "$1" "$2" "$3" "$4" <<'PY'
import sys
src, out, name, pad = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4])
def leb(n):
    b = bytearray()
    while True:
        byte, n = n & 0x7f, n >> 7
        b.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(b)
payload = leb(len(name)) + name + b"\0" * pad
open(out, "wb").write(open(src, "rb").read() + b"\0" + leb(len(payload)) + payload)
PY
}

# Seconds from `edge deploy` starting to the first 200 of the app after it.
deploy_to_200() {
  local file=$1 app=$2 route=$3
  /usr/bin/python3 - "$edge" "$file" "$app" "$PORT" "$route" <<'PY'
import subprocess, sys, time, urllib.request
edge, file, app, port, route = sys.argv[1:6]
t0 = time.perf_counter()
subprocess.run([edge, "deploy", file, "--app", app, "--tenant", "bench", "--route", route + "/..."], check=True, stdout=subprocess.DEVNULL)
while True:
    try:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{route}/x", headers={"Host": "bench.test"})
        if urllib.request.urlopen(req, timeout=5).status == 200:
            break
    except Exception:
        time.sleep(0.001)
print(f"{time.perf_counter() - t0:.4f}")
PY
}

stats() { sort -n | awk '{a[NR]=$1} END {printf "%.0f %.0f\n", a[int((NR+1)/2)]*1000, a[NR]*1000}'; }

echo "deploying echo $DEPLOYS times..." >&2
for i in $(seq "$DEPLOYS"); do
  variant build/components/echo.wasm "$work/echo-$i.wasm" "bench-$i" 0
  deploy_to_200 "$work/echo-$i.wasm" web /web
done > "$work/echo.times"
read -r echo_p50 echo_max < <(stats < "$work/echo.times")

echo "deploying a 10 MB component 5 times..." >&2
base=$(stat -c %s build/components/echo.wasm)
for i in $(seq 5); do
  variant build/components/echo.wasm "$work/big-$i.wasm" "bench-$i" $((10 * 1024 * 1024 - base - 32))
  deploy_to_200 "$work/big-$i.wasm" big /big
done > "$work/big.times"
read -r big_p50 big_max < <(stats < "$work/big.times")
big_mb=$(/usr/bin/python3 -c "import os; print(round(os.path.getsize('$work/big-1.wasm') / 1048576, 1))")

echo "compiling with edge compile and wasmtime compile, $RUNS runs each..." >&2
compile_rows=""
for c in echo rewriter codec signer; do
  f="build/components/$c.wasm"
  for r in $(seq "$RUNS"); do
    s=$(date +%s%N); "$edge" compile "$f" "$work/cache" >/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 )) >> "$work/edge-$c.ms"
    s=$(date +%s%N); wasmtime compile -W component-model=y,wide-arithmetic=y,epoch-interruption=y "$f" -o "$work/wt.cwasm"; e=$(date +%s%N); echo $(( (e - s) / 1000000 )) >> "$work/wt-$c.ms"
  done
  em=$(sort -n "$work/edge-$c.ms" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  wm=$(sort -n "$work/wt-$c.ms" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  kb=$(( $(stat -c %s "$f") / 1024 ))
  compile_rows+="| $c ($kb KiB) | $em | $wm | $(awk -v a="$wm" -v b="$em" 'BEGIN {printf "%.2f", a / b}')x |"$'\n'
done

echo "activations under load..." >&2
# Two stored versions of the app to switch between.
"$edge" deploy build/components/echo.wasm --app live --tenant bench --route '/live/...' >/dev/null
"$edge" deploy "$work/echo-1.wasm" --app live --tenant bench --route '/live/...' >/dev/null
window=$((ACTIVATIONS / 2 + 4))
"$load" soak --addr "127.0.0.1:$PORT" --route "bench.test,/live" --rate "$RATE" \
  --duration-s "$window" --window-s "$window" --pid "$epid" > "$work/quiet.jsonl" 2>/dev/null
"$load" soak --addr "127.0.0.1:$PORT" --route "bench.test,/live" --rate "$RATE" \
  --duration-s "$window" --window-s "$window" --pid "$epid" > "$work/busy.jsonl" 2>/dev/null &
lpid=$!
sleep 2
for i in $(seq "$ACTIVATIONS"); do
  s=$(date +%s%N)
  "$edge" rollback $(( i % 2 + 1 )) --app live --tenant bench >/dev/null
  e=$(date +%s%N); echo $(( (e - s) / 1000000 )) >> "$work/activate.ms"
  sleep 0.5
done
wait "$lpid"
read -r act_p50 act_max < <(sort -n "$work/activate.ms" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)], a[NR]}')

/usr/bin/python3 - "$work" "$RATE" "$ACTIVATIONS" <<PY
import json, sys
w, rate, n = sys.argv[1], sys.argv[2], sys.argv[3]
q = [json.loads(l) for l in open(f"{w}/quiet.jsonl") if l.startswith("{")][-1]
b = [json.loads(l) for l in open(f"{w}/busy.jsonl") if l.startswith("{")][-1]
print()
print("| deploy to first 200 | p50 ms | max ms |")
print("|---|---|---|")
print("| echo (50 KiB), $DEPLOYS deploys, new bytes each | $echo_p50 | $echo_max |")
print("| echo padded to $big_mb MB, 5 deploys, new bytes each | $big_p50 | $big_max |")
print()
print("| compile | edge compile ms | wasmtime compile ms | wasmtime / edge |")
print("|---|---|---|---|")
print("""$compile_rows""".rstrip())
print()
print(f"| {n} activations under {rate} req/s | sent | errors | p99 ms | max ms |")
print("|---|---|---|---|---|")
print(f"| without activations | {q['sent']} | {q['errors']} | {q['p99_us']/1000:.2f} | {q['max_us']/1000:.1f} |")
print(f"| during activations (each $act_p50 ms p50, $act_max ms max) | {b['sent']} | {b['errors']} | {b['p99_us']/1000:.2f} | {b['max_us']/1000:.1f} |")
print(f"\np99 during / without: {b['p99_us'] / max(q['p99_us'], 1):.2f}x")
ok = b["errors"] == 0
print(f'{"PASS" if ok else "FAIL"}: no request lost during activations ({b["errors"]} errors)')
sys.exit(0 if ok else 1)
PY
