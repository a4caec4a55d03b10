#!/usr/bin/env bash
# Hostile tenants beside a healthy one (issue 33), one run, one host:
#  - the healthy tenant (echo, its own host) gets a fixed-rate open-loop
#    load (RATE req/s, latency from the scheduled send time), first alone
#    ("baseline"), then beside TENANTS hostile tenants ("all"), and with
#    PER_CLASS=1 beside each behaviour's tenants alone as well;
#  - hostile tenant i plays behaviour i mod 7 in a closed loop on its own
#    host: trap (/fixtures/trap), spin (/fixtures/loop until the deadline),
#    memory bomb (/fixtures/hog?mb=1024 against a 64 MiB cap), fields bomb
#    (/fixtures/fields-bomb?n=100000), slow stream (256 MiB read at
#    ~10 KiB/s through a 4 KiB receive buffer), outbound flood (16 fetches
#    at once per tenant to an origin on 127.0.0.1 that holds each answer
#    1 s; only these tenants may reach 127.0.0.1), session flood (4 at once
#    per tenant, a new session key every request);
#  - pass: the healthy tenant has 0 errors in every phase, its p99 beside
#    all hostiles is within 1.2x of the baseline's, and the host process is
#    the one started (same pid and start time) and answers /health.
# Loopback only. bench/hostile-load is the generator (both sides).
#
#   make bench-hostile   (RATE=500 DURATION_S=20 TENANTS=100 PER_CLASS=1)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
# Exported: cargo must build hostile-load where this script runs it from.
export CARGO_TARGET_DIR
RATE=${RATE:-500}
DURATION_S=${DURATION_S:-20}
TENANTS=${TENANTS:-100}
PER_CLASS=${PER_CLASS:-1}
DEADLINE_MS=${DEADLINE_MS:-10000}
PORT=18580 ADMIN=18589
edge="$CARGO_TARGET_DIR/release/edge"
load="$CARGO_TARGET_DIR/release/hostile-load"

cargo build --release -q -p hostile-load
work=$(mktemp -d)
pids=()
# KEEP=1 keeps the configs, the host's log and the metrics in $work.
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "hostile"
[[trigger.http]]
route = "/..."
component = "echo"
[[trigger.http]]
route = "/fixtures/..."
component = "fixtures"
[[trigger.http]]
route = "/flood/..."
component = "flood"
[[trigger.http]]
route = "/probe/..."
component = "probe"
[component.echo]
source = "$PWD/build/components/echo.wasm"
[component.fixtures]
source = "$PWD/build/components/fixtures.wasm"
[component.flood]
source = "$PWD/build/components/fixtures.wasm"
[component.probe]
source = "$PWD/build/components/probe.wasm"
allowed_outbound_hosts = ["http://127.0.0.1:*"]
key_value_stores = ["default"]
[component.probe.variables]
greeting = "hello"
TOML

# The host's defaults (pool of 1000, each tenant's share half of it) and
# the default config's deadline; only the session-flood route is a session.
{
  cat <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$PORT"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$work/data"
watch_interval_ms = 0
[limits]
request_deadline_ms = $DEADLINE_MS
[[tenant]]
name = "healthy"
hosts = ["healthy.test"]
components = ["echo"]
[component.flood]
instance = "session"
session_key = "path:2"
idle_timeout_ms = 60000
TOML
  for i in $(seq 0 $((TENANTS - 1))); do
    printf '[[tenant]]\nname = "hostile-%d"\nhosts = ["h%d.hostile"]\ncomponents = ["fixtures", "flood", "probe"]\n' "$i" "$i"
    # Behaviour 5 (outbound flood): this tenant alone may reach the origin.
    if [ $((i % 7)) -eq 5 ]; then printf '[tenant.outbound]\nallow_ranges = ["127.0.0.1/32"]\n'; fi
  done
} > "$work/edge.toml"

EDGE_LOG=warn "$edge" serve --config "$work/edge.toml" >/dev/null 2>"$work/edge.log" &
epid=$!
pids+=($epid)
for _ in $(seq 300); do curl -s -o /dev/null -H 'host: healthy.test' "http://127.0.0.1:$PORT/hello" && break; sleep 0.1; done
started=$(awk '{print $22}' "/proc/$epid/stat")
rss_before=$(awk '/VmRSS/{print $2}' "/proc/$epid/status")
echo "edge pid $epid up; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

per_class=()
[ "$PER_CLASS" = 1 ] && per_class=(--per-class)
"$load" hostile --addr "127.0.0.1:$PORT" --healthy-host healthy.test --healthy-path /hello \
  --rate "$RATE" --duration-s "$DURATION_S" --warmup-s 3 --settle-s $((DEADLINE_MS / 1000 + 1)) \
  --tenants "$TENANTS" "${per_class[@]}" > "$work/phases.jsonl"

alive=no
if kill -0 "$epid" 2>/dev/null && [ "$(awk '{print $22}' "/proc/$epid/stat")" = "$started" ] \
  && curl -sf -o /dev/null "http://127.0.0.1:$ADMIN/health"; then alive=yes; fi
rss_after=$(awk '/VmRSS/{print $2}' "/proc/$epid/status" 2>/dev/null || echo 0)
curl -s "http://127.0.0.1:$ADMIN/metrics" > "$work/metrics.txt" || true
panics=$(grep -ci 'panic' "$work/edge.log" || true)

/usr/bin/python3 - "$work" "$alive" "$rss_before" "$rss_after" "$panics" <<'PY'
import json, sys, re, collections
w, alive, rss0, rss1, panics = sys.argv[1], sys.argv[2], int(sys.argv[3] or 0), int(sys.argv[4] or 0), int(sys.argv[5])
phases = [json.loads(l) for l in open(f"{w}/phases.jsonl") if l.startswith("{")]
base = phases[0]
print()
print("| phase | hostile tenants | healthy sent | healthy errors | p50 ms | p99 ms | p99.9 ms | max ms | p99 / baseline |")
print("|---|---|---|---|---|---|---|---|---|")
for p in phases:
    ratio = p["p99_us"] / base["p99_us"] if base["p99_us"] else float("nan")
    errs = p["errors"] if not p["error_kinds"] else f'{p["errors"]} {p["error_kinds"]}'
    print(f'| {p["phase"]} | {p["hostile_tenants"]} | {p["sent"]} | {errs} | {p["p50_us"]/1000:.2f} | {p["p99_us"]/1000:.2f} | {p["p999_us"]/1000:.2f} | {p["max_us"]/1000:.1f} | {ratio:.2f}x |')
print()
print("What the hostile tenants got (\"all\" phase; status or how the stream ended: count):")
for c, t in phases[-1]["hostile"].items():
    print(f"  {c:14} {', '.join(f'{k}: {v}' for k, v in t.items())}")
print(f'  outbound origin: {phases[-1]["origin_accepted"]} connections in all, at most {phases[-1]["origin_most_open"]} open at once')
sums = collections.Counter()
for line in open(f"{w}/metrics.txt"):
    m = re.match(r'(edge_(?:share_refusals|deadline_kills|memory_cap_kills|traps|sessions_rejected|outbound_refused|body_timeouts)_total)\{([^}]*)\} ([0-9.e+]+)', line)
    if m:
        label = re.search(r'(limit|reason)="([^"]*)"', m.group(2))
        sums[m.group(1) + (f'{{{label.group(1)}="{label.group(2)}"}}' if label else "")] += float(m.group(3))
print("Host counters at the end (summed over tenants):")
for k, v in sorted(sums.items()):
    print(f"  {k} {v:.0f}")
print(f"Host RSS: {rss0 // 1024} MiB before, {rss1 // 1024} MiB after; panics in its log: {panics}")
errors = sum(p["errors"] for p in phases)
r_all = phases[-1]["p99_us"] / base["p99_us"] if base["p99_us"] else float("inf")
ok = [("healthy tenant errors 0 in every phase", errors == 0),
      (f"healthy p99 beside all hostiles within 1.2x of baseline ({r_all:.2f}x)", r_all <= 1.2),
      ("host never restarted (same pid and start time, /health answers)", alive == "yes")]
for what, good in ok:
    print(f'{"PASS" if good else "FAIL"}: {what}')
sys.exit(0 if all(g for _, g in ok) else 1)
PY
