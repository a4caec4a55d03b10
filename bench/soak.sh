#!/usr/bin/env bash
# Soak (issue 33): one host serving mixed routes at 70 % of its measured
# capacity for a bounded time, reloaded every minute (RELOAD_S), with its RSS and the
# p99 reported per window.
#  - routes, in turn: echo; a 64 KiB streamed body (fixtures); a pinned
#    session counter over 50 keys (fixtures, session mode); the rewriter
#    proxying this host's own echo through a site with two rules; the
#    signer's JWKS (session mode, keys parsed once per instance); a
#    key-value increment over 50 keys (probe, redb);
#  - capacity: closed loop, 32 connections, 10 s, the same mix; the soak
#    then runs open loop at 70 % of it (latency from the scheduled send
#    time);
#  - every RELOAD_S seconds (60) the site's rule changes (A <-> B) and the host gets
#    SIGHUP: a reload that replaces the rewriter's session pool;
#  - pass: no errors, the host never restarted, and its RSS stays within
#    10 % of its RSS at the first window after the first reload (warm pool
#    and caches) for the rest of the run.
# Loopback only. bench/hostile-load is the generator.
#
#   bench/soak.sh [MINUTES]   (default 30; make soak SOAK_MIN=30)
#   WINDOW_S=30 FRACTION=0.7 CONCURRENCY=32 RELOAD_S=60 to change the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
MINUTES=${1:-30}
WINDOW_S=${WINDOW_S:-30}
FRACTION=${FRACTION:-0.7}
CONCURRENCY=${CONCURRENCY:-32}
RELOAD_S=${RELOAD_S:-60}
PORT=18680 ADMIN=18689
edge="$CARGO_TARGET_DIR/release/edge"
load="$CARGO_TARGET_DIR/release/hostile-load"

cargo build --release -q -p hostile-load
# KEEP=1 keeps the configs, the host's log and the windows in $work.
. bench/lib.sh
bench_workdir

cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "soak"
[variables]
signer_keys = { required = true, secret = true }
[[trigger.http]]
route = "/..."
component = "echo"
[[trigger.http]]
route = "/fixtures/..."
component = "fixtures"
[[trigger.http]]
route = "/counter/..."
component = "counter"
[[trigger.http]]
route = "/signer/..."
component = "signer"
[[trigger.http]]
route = "/probe/..."
component = "probe"
[component.echo]
source = "$PWD/build/components/echo.wasm"
[component.fixtures]
source = "$PWD/build/components/fixtures.wasm"
[component.counter]
source = "$PWD/build/components/fixtures.wasm"
[component.rewriter]
source = "$PWD/build/components/rewriter.wasm"
[component.signer]
source = "$PWD/build/components/signer.wasm"
[component.signer.variables]
keys = "{{ signer_keys }}"
[component.probe]
source = "$PWD/build/components/probe.wasm"
key_value_stores = ["default"]
[component.probe.variables]
greeting = "hello"
TOML

# A rule whose replacement the reloads flip between A and B.
write_config() {
  cat > "$work/edge.toml.new" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$PORT"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$work/data"
watch_interval_ms = 0
# The soak's tenant is alone on the host: the whole pool is its share.
[limits]
request_deadline_ms = 10000
max_instances = 1000
[outbound]
allow_ranges = ["127.0.0.1/32"]
[[tenant]]
name = "soak"
hosts = ["*"]
components = ["*"]
[tenant.secrets]
signer_keys = { generate = "ed25519" }
[[tenant.site]]
name = "site"
hosts = ["site.soak"]
origin = "http://127.0.0.1:$PORT"
[[tenant.site.rules]]
pattern = 'hello from (\w+)'
replacement = 'rewritten-$1 by \${1}'
[[tenant.site.rules]]
pattern = 'world'
replacement = 'WORLD'
flags = "i"
[component.counter]
instance = "session"
session_key = "path:2"
idle_timeout_ms = 600000
[component.rewriter]
instance = "session"
session_key = "host"
instances_per_key = 4
max_queued_per_session = 1024
idle_timeout_ms = 600000
[component.signer]
instance = "session"
session_key = "host"
instances_per_key = 4
TOML
  mv "$work/edge.toml.new" "$work/edge.toml"
}
write_config A

EDGE_LOG=${EDGE_LOG:-warn} "$edge" serve --config "$work/edge.toml" >/dev/null 2>"$work/edge.log" &
epid=$!
pids+=($epid)
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$PORT/hello" && break; sleep 0.1; done
started=$(awk '{print $22}' "/proc/$epid/stat")
for probe in "site.soak /world" "soak.test /signer/.well-known/jwks.json"; do
  set -- $probe
  code=$(curl -s -o "$work/probe.out" -w '%{http_code}' -H "host: $1" "http://127.0.0.1:$PORT$2")
  [ "$code" = 200 ] || { echo "$1$2 answers $code: $(head -c 300 "$work/probe.out")" >&2; exit 1; }
done
echo "edge pid $epid up; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

routes=(
  --route 'soak.test,/hello'
  --route 'soak.test,/fixtures/stream?bytes=65536'
  --route 'soak.test,/counter/k{n}/count'
  --route 'site.soak,/world'
  --route 'soak.test,/signer/.well-known/jwks.json'
  --route 'POST soak.test,/probe/kv/default/k{n}/incr?by=1'
)
"$load" capacity --addr "127.0.0.1:$PORT" "${routes[@]}" --concurrency "$CONCURRENCY" --duration-s 10 > "$work/capacity.json"
rate=$(/usr/bin/python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['req_per_s'] * $FRACTION))" "$work/capacity.json")
echo "soak: $MINUTES min at $rate req/s ($FRACTION of capacity), a reload every $RELOAD_S s" >&2

# Reloads: every RELOAD_S flip the rule and SIGHUP the host.
(
  flip=B
  while sleep "$RELOAD_S"; do
    write_config "$flip"
    kill -HUP "$epid" 2>/dev/null || exit 0
    flip=$([ "$flip" = A ] && echo B || echo A)
  done
) &
pids+=($!)

"$load" soak --addr "127.0.0.1:$PORT" "${routes[@]}" --rate "$rate" \
  --duration-s $((MINUTES * 60)) --window-s "$WINDOW_S" --pid "$epid" > "$work/windows.jsonl" || true

alive=no
if kill -0 "$epid" 2>/dev/null && [ "$(awk '{print $22}' "/proc/$epid/stat")" = "$started" ] \
  && curl -sf -o /dev/null "http://127.0.0.1:$ADMIN/health"; then alive=yes; fi
curl -s -o "$work/metrics.txt" "http://127.0.0.1:$ADMIN/metrics" || : > "$work/metrics.txt"
reloads=$(awk '/^edge_reloads_total/{s+=$2} END{print s+0}' "$work/metrics.txt")
# Where the RSS is: the heap (mimalloc's arena) against the pool's free
# slots that stay warm (what bursts of concurrency left behind).
heap_kib=$(awk '/^[0-9a-f]+-[0-9a-f]+ /{anon=($6 == "")} /^Size:/{big=(anon && $2 == 1048576)} big && /^Rss:/{s+=$2} END{print s+0}' "/proc/$epid/smaps" 2>/dev/null || echo 0)
echo "heap (mimalloc arena) resident: $((heap_kib / 1024)) MiB; the pool's free slots: $(awk '/^edge_pool_unused_warm_slots\{kind="memories"\}/{w=$2} /^edge_pool_unused_resident_bytes\{kind="memories"\}/{r=$2} END{printf "%d warm memories keeping %.0f MiB", w, r/1048576}' "$work/metrics.txt")" >&2
refused=$(grep -c 'reload refused\|reload failed' "$work/edge.log" || true)
panics=$(grep -ci 'panic' "$work/edge.log" || true)

/usr/bin/python3 - "$work" "$alive" "$reloads" "$refused" "$panics" "$rate" "$RELOAD_S" <<'PY'
import json, sys
w, alive, reloads, refused, panics, rate, reload_s = sys.argv[1:8]
reload_s = float(reload_s)
cap = json.load(open(f"{w}/capacity.json"))
rows = [json.loads(l) for l in open(f"{w}/windows.jsonl") if l.startswith("{")]
print()
print(f"capacity (closed loop, {cap['concurrency']} connections): {cap['req_per_s']:.0f} req/s, p99 {cap['p99_us']/1000:.1f} ms, {cap['errors']} errors; soak at {rate} req/s")
print()
print("| t (s) | RSS MiB | sent/s | p50 ms | p99 ms | max ms | errors |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    rss = f"{r['rss_kib']/1024:.0f}" if r["rss_kib"] else "gone"
    errs = r["errors"] if not r["error_kinds"] else f"{r['errors']} {r['error_kinds']}"
    span = rows[0]["t_s"] if r is rows[0] else r["t_s"] - rows[rows.index(r) - 1]["t_s"]
    print(f"| {r['t_s']} | {rss} | {r['sent'] / span:.0f} | {r['p50_us']/1000:.2f} | {r['p99_us']/1000:.2f} | {r['max_us']/1000:.1f} | {errs} |")
warm = [r for r in rows if r["t_s"] > reload_s and r["rss_kib"]]
errors = sum(r["errors"] for r in rows)
ok = []
if warm:
    base = warm[0]["rss_kib"]
    top = max(r["rss_kib"] for r in warm)
    last = warm[-1]["rss_kib"]
    growth = (top - base) / base
    print(f"\nRSS after the first reload (t={warm[0]['t_s']} s): {base/1024:.0f} MiB; highest later {top/1024:.0f} MiB ({growth:+.1%}); last {last/1024:.0f} MiB ({(last-base)/base:+.1%})")
    ok.append((f"RSS flat within 10 % after warm-up ({growth:+.1%} at most)", growth <= 0.10))
    # Informative, not judged: RSS also holds queued requests, so windows
    # where the host fell behind (other load on the machine) sit higher.
    calm = [r for r in warm if r["p99_us"] < 50_000]
    if len(calm) >= 2:
        print(f"RSS in calm windows only (p99 < 50 ms; {len(calm)} of {len(warm)}): first {calm[0]['rss_kib']/1024:.0f} MiB at {calm[0]['t_s']} s, last {calm[-1]['rss_kib']/1024:.0f} MiB at {calm[-1]['t_s']} s ({(calm[-1]['rss_kib']-calm[0]['rss_kib'])/calm[0]['rss_kib']:+.1%})")
else:
    ok.append(("RSS flat: the run was too short to judge (no window after the first reload)", False))
print(f"reloads applied: {reloads}, refused: {refused}; panics in the host's log: {panics}")
ok.append((f"no errors ({errors})", errors == 0))
ok.append(("host never restarted (same pid and start time, /health answers)", alive == "yes"))
for what, good in ok:
    print(f'{"PASS" if good else "FAIL"}: {what}')
sys.exit(0 if all(g for _, g in ok) else 1)
PY
