# Shared by the benchmarks that start their own node (source it after
# `cd` to the repository root and setting CARGO_TARGET_DIR).

# A temporary directory in $work; the processes whose pids are added to
# `pids` are stopped at exit, and the directory removed (KEEP=1 keeps it).
bench_workdir() {
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}

# echo_app FILE NAME: a Spin manifest, app NAME, serving the echo
# component (build/components/echo.wasm) on every path.
echo_app() {
  cat > "$1" <<TOML
spin_manifest_version = 2
[application]
name = "$2"
[[trigger.http]]
route = "/..."
component = "echo"
[component.echo]
source = "$PWD/build/components/echo.wasm"
TOML
}

# control_node PORT CONTROL [SERVER_TOML] [CONTROL_TOML] [MORE_TOML]: edge
# serving the echo app on PORT and its control plane on CONTROL, data in
# $work/data, log in $work/edge.log; the optional TOML lines go into its
# [server] and [control] tables and after them. Waits for the API, sets
# node_pid (also added to pids) and exports EDGE_API_URL and
# EDGE_API_TOKEN_FILE (the operator's token).
control_node() {
  echo_app "$work/spin.toml" operator
  cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$1"
data_dir = "$work/data"
watch_interval_ms = 0
${3:-}
[control]
listen = "127.0.0.1:$2"
${4:-}
${5:-}
[[tenant]]
name = "operator"
hosts = ["operator.test"]
components = ["*"]
TOML
  EDGE_LOG=warn "$CARGO_TARGET_DIR/release/edge" serve --config "$work/edge.toml" >/dev/null 2>"$work/edge.log" &
  node_pid=$!
  pids+=("$node_pid")
  for _ in $(seq 300); do
    [ -s "$work/data/control/operator.token" ] && curl -s -o /dev/null "http://127.0.0.1:$2/v1/openapi.json" && break
    sleep 0.1
  done
  export EDGE_API_URL="http://127.0.0.1:$2" EDGE_API_TOKEN_FILE="$work/data/control/operator.token"
}
