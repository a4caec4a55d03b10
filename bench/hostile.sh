#!/usr/bin/env bash
# Hostile tenants beside a healthy one (issue 33), one run, one host:
#  - the healthy tenant (echo, its own host) gets a fixed-rate open-loop
#    load (RATE req/s, latency from the scheduled send time), first alone
#    (its baseline), then beside TENANTS hostile tenants (phase "all"), and
#    with PER_CLASS=1 beside each behaviour's tenants alone as well (phase
#    named after it). Each phase on a fresh host, baseline included, so no
#    phase inherits another's sessions or memory;
#  - hostile tenant i plays behaviour i mod 8 in a closed loop on its own
#    host: trap (/fixtures/trap), spin (/fixtures/loop until the deadline),
#    memory bomb (/fixtures/hog?mb=1024 against a 64 MiB cap), fields bomb
#    (/fixtures/fields-bomb?n=100000), slow stream (256 MiB read at
#    ~10 KiB/s through a 4 KiB receive buffer), outbound flood (16 fetches
#    at once per tenant to an origin on 127.0.0.1 that holds each answer
#    1 s, all in step: ORIGIN_SPREAD_MS=1000 spreads the holds over
#    0.5-1.5 s; only these tenants may reach 127.0.0.1), session flood (4 at once
#    per tenant, a new session key every request), SQLite hog (a recursive
#    statement that counts until the deadline stops it, one at a time per
#    tenant: the host's blocking threads, not the guest, do the work; the
#    rust-features Spin app, from `make spin-apps`);
#  - pass: the healthy tenant has 0 errors in every phase, its p99 beside
#    all hostiles is within 1.2x of the baseline's, and the host process is
#    the one started (same pid and start time) and answers /health. Each
#    phase's p99 is also shown over the floor's (below): the host's own
#    share of what the hostile load costs;
#  - the healthy load is sent on time to within tens of microseconds
#    (bench/hostile-load/src/pacer.rs); how late the generator's sends
#    went is shown, the part of a p99 that is the machine's, not the host's.
# Loopback only. bench/hostile-load is the generator (both sides).
#
#   make bench-hostile   (RATE=500 DURATION_S=20 TENANTS=100 PER_CLASS=1 FLOOR=1 PHASES=
#                         MAX_INSTANCES= HOSTILE_PRIORITY=idle ORIGIN_SPREAD_MS=0 KEEP=0 EDGE_LOG=warn
#                         EDGE_BIN=path/to/edge, to compare builds;
#                         SLOW_LOG=file SLOW_MS=10: each slower healthy request and
#                         when it was due, to line up with bench/sched-waits.sh
#                         or EDGE_LOG=warn,edge::lanes=debug)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
# Exported: cargo must build hostile-load where this script runs it from.
export CARGO_TARGET_DIR
RATE=${RATE:-500}
DURATION_S=${DURATION_S:-20}
TENANTS=${TENANTS:-100}
PER_CLASS=${PER_CLASS:-1}
FLOOR=${FLOOR:-1}
DEADLINE_MS=${DEADLINE_MS:-10000}
# The hostile clients' threads: idle (SCHED_IDLE, as if they ran on other
# machines) or normal (competing with the host for these cores).
HOSTILE_PRIORITY=${HOSTILE_PRIORITY:-idle}
PORT=18580 ADMIN=18589
edge=${EDGE_BIN:-$CARGO_TARGET_DIR/release/edge}
load="$CARGO_TARGET_DIR/release/hostile-load"

cargo build --release -q -p hostile-load
# KEEP=1 keeps the configs, the host's log and the metrics in $work.
. bench/lib.sh
bench_workdir

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
[[trigger.http]]
route = "/sql"
component = "sqlhog"
[component.sqlhog]
source = "$PWD/tests/spin-apps/rust-features/target/wasm32-wasip2/release/rust_features.wasm"
sqlite_databases = ["default"]
TOML

# The host's defaults (pool of 1000, each tenant's share half of it) and
# the default config's deadline; only the session-flood route is a session.
# MAX_INSTANCES=N sets every tenant's share ([limits] max_instances; its
# sessions are half of it), e.g. 9 so that 101 shares fit in the pool.
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
${MAX_INSTANCES:+max_instances = $MAX_INSTANCES}
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
    printf '[[tenant]]\nname = "hostile-%d"\nhosts = ["h%d.hostile"]\ncomponents = ["fixtures", "flood", "probe", "sqlhog"]\n' "$i" "$i"
    # Behaviour 5 (outbound flood): this tenant alone may reach the origin.
    if [ $((i % 8)) -eq 5 ]; then printf '[tenant.outbound]\nallow_ranges = ["127.0.0.1/32"]\n'; fi
  done
} > "$work/edge.toml"

# One fresh host per phase: hostile state (sessions idle for a minute,
# memory) must not leak into the next phase. Each run measures the healthy
# tenant alone first (its baseline on that host), then beside the phase's
# hostile tenants.
phases=(all)
# "floor": the same hostile load on a second host process at SCHED_IDLE,
# the healthy tenant alone on the first: what sharing the machine (its
# cores, kernel and memory, with the load generator on them too) costs
# the healthy tenant whatever one host does.
[ "$FLOOR" = 1 ] && phases+=(floor)
[ "$PER_CLASS" = 1 ] && phases+=(trap spin hog fields slow-stream outbound session-flood sqlite)
# PHASES="hog outbound" runs only those.
[ -n "${PHASES:-}" ] && read -r -a phases <<< "$PHASES"
: > "$work/phases.jsonl"
: > "$work/hosts.txt"
# Files are named by the run's number: a phase may be run more than once.
n=0
for phase in "${phases[@]}"; do
  n=$((n + 1))
  rm -rf "$work/data"
  EDGE_LOG=${EDGE_LOG:-warn} "$edge" serve --config "$work/edge.toml" >/dev/null 2>"$work/edge-$n-$phase.log" &
  epid=$!
  pids+=($epid)
  for _ in $(seq 300); do curl -s -o /dev/null -H 'host: healthy.test' "http://127.0.0.1:$PORT/hello" && break; sleep 0.1; done
  started=$(awk '{print $22}' "/proc/$epid/stat")
  rss_before=$(awk '/VmRSS/{print $2}' "/proc/$epid/status")
  echo "$phase: edge pid $epid up; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  classes=$(case $phase in all|floor) echo trap,spin,hog,fields,slow-stream,outbound,session-flood,sqlite;; *) echo "$phase";; esac)
  hostile_addr=127.0.0.1:$PORT
  if [ "$phase" = floor ]; then
    rm -rf "$work/data2"
    sed -e "s/:$PORT\"/:$((PORT + 100))\"/; s/:$ADMIN\"/:$((ADMIN + 100))\"/; s|/data\"|/data2\"|" "$work/edge.toml" > "$work/edge-floor.toml"
    EDGE_LOG=${EDGE_LOG:-warn} chrt --idle 0 "$edge" serve --config "$work/edge-floor.toml" >/dev/null 2>"$work/edge-$n-floor-hostile.log" &
    fpid=$!
    pids+=($fpid)
    hostile_addr=127.0.0.1:$((PORT + 100))
    for _ in $(seq 300); do curl -s -o /dev/null -H 'host: healthy.test' "http://$hostile_addr/hello" && break; sleep 0.1; done
  fi
  "$load" hostile --addr "127.0.0.1:$PORT" --hostile-addr "$hostile_addr" --healthy-host healthy.test --healthy-path /hello \
    --rate "$RATE" --duration-s "$DURATION_S" --warmup-s 3 --settle-s $((DEADLINE_MS / 1000 + 1)) \
    --tenants "$TENANTS" --classes "$classes" --name "$phase" \
    --hostile-priority "$HOSTILE_PRIORITY" --origin-spread-ms "${ORIGIN_SPREAD_MS:-0}" > "$work/phase.jsonl"
  alive=no
  if kill -0 "$epid" 2>/dev/null && [ "$(awk '{print $22}' "/proc/$epid/stat")" = "$started" ] \
    && curl -sf -o /dev/null "http://127.0.0.1:$ADMIN/health"; then alive=yes; fi
  rss_after=$(awk '/VmRSS/{print $2}' "/proc/$epid/status" 2>/dev/null || echo 0)
  curl -s -o "$work/metrics-$n.txt" "http://127.0.0.1:$ADMIN/metrics" || : > "$work/metrics-$n.txt"
  panics=$(grep -ci 'panic' "$work/edge-$n-$phase.log" || true)
  cat "$work/phase.jsonl" >> "$work/phases.jsonl"
  echo "$phase $alive $rss_before $rss_after $panics" >> "$work/hosts.txt"
  kill "$epid" 2>/dev/null || true
  wait "$epid" 2>/dev/null || true
  if [ "$phase" = floor ]; then kill "$fpid" 2>/dev/null || true; wait "$fpid" 2>/dev/null || true; fi
done

/usr/bin/python3 - "$work" <<'PY'
import json, sys, re, collections
w = sys.argv[1]
lines = [json.loads(l) for l in open(f"{w}/phases.jsonl") if l.startswith("{")]
# One line per run, in order, as the runs' JSON lines are.
hosts = [l.split()[1:] for l in open(f"{w}/hosts.txt")]
# Pairs: each host's baseline, then its phase.
runs = [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 1, 2)]
print()
# The floor's p99 (the median of this run's floor phases, if any): what
# the same hostile load costs the healthy tenant from another process.
floors = sorted(p["p99_us"] for _, p in runs if p["phase"] == "floor")
floor = floors[len(floors) // 2] if floors else None
print("| phase | hostile tenants | healthy sent | healthy errors | p50 ms | p99 ms | p99.9 ms | max ms | baseline p99 ms (same host) | p99 / baseline | p99 / floor p99 | generator's sends late, p99 ms | host RSS before → after MiB |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
ok = []
for i, (base, p) in enumerate(runs):
    ratio = p["p99_us"] / base["p99_us"] if base["p99_us"] else float("inf")
    over_floor = f'{p["p99_us"] / floor:.2f}x' if floor and p["phase"] != "floor" else "–"
    errs = p["errors"] if not p["error_kinds"] else f'{p["errors"]} {p["error_kinds"]}'
    alive, rss0, rss1, panics = hosts[i]
    print(f'| {p["phase"]} | {p["hostile_tenants"]} | {p["sent"]} | {errs} | {p["p50_us"]/1000:.2f} | {p["p99_us"]/1000:.2f} | {p["p999_us"]/1000:.2f} | {p["max_us"]/1000:.1f} | {base["p99_us"]/1000:.2f} ({base["errors"]} errors) | {ratio:.2f}x | {over_floor} | {p["send_late_p99_us"]/1000:.2f} (baseline {base["send_late_p99_us"]/1000:.2f}) | {int(rss0)//1024} → {int(rss1 or 0)//1024} |')
    if p["phase"] != "floor":  # another host's doing: for comparison only
        ok.append((p["phase"], base["errors"] + p["errors"] == 0, ratio <= 1.2, alive == "yes" and panics == "0"))
for i, (base, p) in enumerate(runs):
    print(f'\nWhat the hostile tenants got ("{p["phase"]}"; status, or how the slow stream ended: count):')
    for c, t in p["hostile"].items():
        print(f"  {c:14} {', '.join(f'{k}: {v}' for k, v in t.items())}")
    if "outbound" in p["hostile"]:
        print(f'  outbound origin: {p["origin_accepted"]} connections in all, at most {p["origin_most_open"]} open at once')
    sums = collections.Counter()
    for line in open(f'{w}/metrics-{i + 1}.txt'):
        m = re.match(r'(edge_(?:share_refusals|deadline_kills|memory_cap_kills|traps|sessions_rejected|outbound_refused|body_timeouts)_total)\{([^}]*)\} ([0-9.e+]+)', line)
        if m:
            label = re.search(r'(limit|reason)="([^"]*)"', m.group(2))
            sums[m.group(1) + (f'{{{label.group(1)}="{label.group(2)}"}}' if label else "")] += float(m.group(3))
    print("  host counters (summed over tenants): " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(sums.items()) if v))
print()
for phase, no_errors, p99, alive in ok:
    print(f'{phase}: {"PASS" if no_errors else "FAIL"} healthy errors 0; {"PASS" if p99 else "FAIL"} p99 within 1.2x; {"PASS" if alive else "FAIL"} host never restarted (same pid and start time, /health answers, no panic logged)')
sys.exit(0 if all(all(x[1:]) for x in ok) else 1)
PY
