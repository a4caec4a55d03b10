#!/usr/bin/env bash
# Codec worker under N simulated singers (bench/codec-load): one request per
# singer per second carrying 1 s of Opus audio, each waiting for its
# answer; prints, per N, how many answers missed the real-time deadline.
#
#   make bench-codec            (DURATION_S=10 SINGERS="50 100 200 400")
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
# Exported: cargo must build codec-load where this script runs it from.
export CARGO_TARGET_DIR
SECONDS_PER_RUN=${DURATION_S:-10}
SINGERS=${SINGERS:-"50 100 200 400"}
cargo build --release -q -p codec-load
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "bench"
[[trigger.http]]
route = "/codec/..."
component = "codec"
[component.codec]
source = "$PWD/build/components/codec.wasm"
[component.codec.variables]
join_keys = '''
$("$CARGO_TARGET_DIR/release/codec-load" public-key)'''
join_issuer = "bench"
TOML
cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:18380"
admin_listen = "127.0.0.1:18389"
data_dir = "$HOME/.cache/edge/bench-data"
watch_interval_ms = 0
[pool]
total_component_instances = 2000
[limits]
max_instances = 2000
max_sessions = 2000
session_rate = 10000
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
[component.codec]
instance = "session"
session_key = "bearer"
max_sessions = 2000
idle_timeout_ms = 5000
TOML
EDGE_LOG=error "$CARGO_TARGET_DIR/release/edge" serve --config "$work/edge.toml" >/dev/null &
pids+=($!)
for _ in $(seq 100); do curl -s -o /dev/null http://127.0.0.1:18389/health && break; sleep 0.1; done
echo "codec worker, $SECONDS_PER_RUN s per run, 1 request per singer per second (1 s of 48 kHz mono Opus in, 1 s of mix out), 2 cores shared with the load generator"
"$CARGO_TARGET_DIR/release/codec-load" http://127.0.0.1:18380 "$SECONDS_PER_RUN" $SINGERS

# The peer: libopus (opus-tools) encoding and decoding 60 s of the same
# kind of audio at the same settings, one core; per second of audio.
command -v opusenc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq opus-tools >/dev/null; }
/usr/bin/python3 - "$work/in.wav" <<'PY'
import math, random, struct, sys, wave
random.seed(7)
with wave.open(sys.argv[1], "wb") as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(48000)
    frames = bytearray()
    for i in range(48000 * 60):
        t = i / 48000
        s = 0.2 * math.sin(2 * math.pi * 196 * t) + 0.1 * math.sin(2 * math.pi * 293.7 * t) + 0.02 * (random.random() - 0.5)
        frames += struct.pack("<h", int(s * 32767))
    w.writeframes(bytes(frames))
PY
now() { date +%s%N; }
t0=$(now); opusenc --quiet --bitrate 64 --comp 4 --framesize 20 "$work/in.wav" "$work/out.opus"; t1=$(now)
opusdec --quiet "$work/out.opus" "$work/out.wav"; t2=$(now)
enc=$(echo "scale=1; ($t1 - $t0) / 1000 / 60" | bc); dec=$(echo "scale=1; ($t2 - $t1) / 1000 / 60" | bc)
echo
echo "libopus (opus-tools, native, complexity 4, 20 ms, 64 kb/s): encode $enc µs + decode $dec µs per second of audio (file I/O included)"
echo "the codec worker's p50 at 50 singers above is decode + encode + mixing + HTTP for one second of audio, in wasm"
