# Sourced by bench scripts: writes_signer_app DIR WASM PORT [EXTRA] writes
# DIR/spin.toml and DIR/edge.toml serving the signer component from WASM on
# 127.0.0.1:PORT (admin on PORT+1) with a generated Ed25519 key and four
# session instances, the way `make bench-udf` measures it. EXTRA is
# appended to edge.toml (e.g. a `[pool]` table). Token requests send
# `Authorization: Bearer $SIGNER_BENCH_KEY` (the app's one caller).
SIGNER_BENCH_KEY=bench-signer-key-7f3e9a1c5b8d2e6f4a0c
write_signer_app() {
  local dir=$1 wasm=$2 port=$3 extra=${4:-}
  cat > "$dir/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "bench"
[variables]
signer_keys = { required = true, secret = true }
signer_clients = { required = true, secret = true }
[[trigger.http]]
route = "/signer/..."
component = "signer"
[component.signer]
source = "$wasm"
[component.signer.variables]
keys = "{{ signer_keys }}"
clients = "{{ signer_clients }}"
TOML
  cat > "$dir/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$((port + 1))"
data_dir = "$dir/edge-data"
watch_interval_ms = 0
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
[tenant.secrets]
signer_keys = { generate = "ed25519" }
signer_clients = "bench sha256:a3e18891db39fe6d63af8f9b3367f75ce64326ddb7d98fe3556f13401fc82857 moderator"
[component.signer]
instance = "session"
session_key = "host"
instances_per_key = 4
$extra
TOML
}
