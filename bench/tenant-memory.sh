#!/usr/bin/env bash
# What one tenant can make the host hold (issue 33): the host on its
# defaults (a pool of 1,000 instances, each tenant at most half of them,
# 64 MiB of linear memory each, and its share of the host's memory for
# guests: max_total_memory_bytes, half of pool.total_memory_bytes, three
# quarters of the machine's), one tenant whose client sends CONCURRENCY
# requests at once of each behaviour, each holding what it built for
# HOLD_MS before it answers:
#  - fields: 1,000 sets of 24 KiB of header fields (host memory);
#  - bodies: 300 outgoing bodies written and never sent (host memory);
#  - linear: 16 MiB allocated in the guest (its memory grows to ~31 MiB).
# Prints, per behaviour, how many were served and refused (503 naming
# max_total_memory_bytes), the host's RSS before and at its peak, and
# its share's gauge at the peak. Not part of `make test` (it takes up to
# the tenant's share of this machine's memory).
#
#   make bench-tenant-memory   (CONCURRENCY=400 HOLD_MS=6000 EDGE_BIN=path/to/edge KEEP=0)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
CONCURRENCY=${CONCURRENCY:-400}
HOLD_MS=${HOLD_MS:-6000}
PORT=18680 ADMIN=18689
edge=${EDGE_BIN:-$CARGO_TARGET_DIR/release/edge}
. bench/lib.sh
bench_workdir

cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "tenant-memory"
[[trigger.http]]
route = "/fixtures/..."
component = "fixtures"
[component.fixtures]
source = "$PWD/build/components/fixtures.wasm"
TOML
cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$PORT"
admin_listen = "127.0.0.1:$ADMIN"
data_dir = "$work/data"
[[tenant]]
name = "t"
hosts = ["*"]
components = ["*"]
TOML
# Each behaviour on a fresh host: the allocator gives back what a burst
# freed only as its threads allocate again, and the next behaviour's peak
# would include it.
measure() {
python3 - "$pid" "$PORT" "$ADMIN" "$CONCURRENCY" "$HOLD_MS" "$1" <<'PY'
import sys, threading, time, urllib.request, urllib.error
pid, port, admin, n, hold, only = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]

def rss_mib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024

def metric(name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{admin}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0

held = 'edge_share_held{tenant="t",kind="memory_bytes"}'
share = 'edge_guest_memory_bytes{state="max"}'
if only == "fields":
    print(f"tenant share: {metric(share) / 2 / 2**30:.2f} GiB (half of pool.total_memory_bytes)")
    print(f"{'behaviour':<8} {'served':>6} {'refused':>7} {'other':>5} {'RSS before':>10} {'RSS peak':>9} {'share held at peak':>19}")
for name, path in [
    ("fields", f"/fixtures/fields-bomb?n=1000&per=3&ms={hold}"),
    ("bodies", f"/fixtures/body-bomb?n=300&ms={hold}"),
    ("linear", f"/fixtures/hog?mb=16&ms={hold}"),
]:
    if name != only:
        continue
    outcomes = []
    def one():
        try:
            r = urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=120)
            outcomes.append((r.status, r.read()))
        except urllib.error.HTTPError as e:
            outcomes.append((e.code, e.read()))
        except Exception as e:
            outcomes.append((0, str(e).encode()))
    before = rss_mib()
    peak, peak_held = before, 0.0
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        r = rss_mib()
        if r > peak:
            peak, peak_held = r, metric(held)
        time.sleep(0.05)
    served = sum(1 for s, _ in outcomes if s == 200)
    refused = sum(1 for s, b in outcomes if s == 503 and b"max_total_memory_bytes" in b)
    other = len(outcomes) - served - refused
    print(f"{name:<8} {served:>6} {refused:>7} {other:>5} {before:>7} MiB {peak:>5} MiB {peak_held / 2**30:>15.2f} GiB")
PY
}

for behaviour in fields bodies linear; do
  EDGE_LOG=${EDGE_LOG:-error} "$edge" serve --config "$work/edge.toml" >/dev/null 2>"$work/edge.log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 600); do
    curl -sf "http://127.0.0.1:$ADMIN/health" >/dev/null && break
    sleep 0.1
  done
  measure "$behaviour"
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
