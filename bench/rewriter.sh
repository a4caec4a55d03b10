#!/usr/bin/env bash
# Rewriter over HTTP: edge's rewriter component vs nginx + subs_filter, both
# proxying the same local origin (nginx serving the shared page from disk),
# with the shared rule files (1, 10, 50, 200 rules; nginx includes them,
# edge reads the same files). One worker each, `wrk -t1 -c2` as in
# ../shared/bench/rewriter/README.md. Then edge's peak RSS while streaming a
# 1 MB and a 1 GB body through the rewriter.
#
#   make bench-rewriter            (DURATION=6s to change the run length,
#                                   RULES="1 50" for fewer rule files,
#                                   EDGE_BIN=path for another edge build)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
DURATION=${DURATION:-6s}
RULES=${RULES:-1 10 50 200}
EDGE_BIN=${EDGE_BIN:-$CARGO_TARGET_DIR/release/edge}
SHARED="${SHARED:-$(cd .. && pwd)/shared/bench/rewriter}"
ORIGIN_PORT=18180 EDGE_PORT=18181 NGINX_PORT=18182

need_apt() { [ -e "$1" ] || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null; }; }
need_apt /usr/bin/wrk wrk
need_apt /usr/sbin/nginx nginx-light
need_apt /usr/lib/nginx/modules/ngx_http_subs_filter_module.so libnginx-mod-http-subs-filter
need_apt /usr/share/doc/python3.11/html/library/os.html python3.11-doc

work=$(mktemp -d)
chmod 755 "$work" # nginx workers run as an unprivileged user
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 did not open" >&2; return 1; }
for port in $ORIGIN_PORT $EDGE_PORT $NGINX_PORT; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "port $port is in use; stop what holds it" >&2; exit 1; fi
done

# A benchmark of error pages measures nothing: check each side rewrites.
check_rewrites() { # url host
  local out
  out=$(curl -s -H "Host: $2" "$1")
  if [ "${#out}" -lt $((page / 2)) ] || [ "$out" = "$(cat "$work/www/page.html")" ]; then
    echo "$1 (Host: $2) did not answer the rewritten page (${#out} bytes)" >&2
    exit 1
  fi
}
reqs() { wrk -t1 -c2 -d"$DURATION" -H "Host: $2" "$1" | awk '/Requests\/sec/ {print $2}'; }

# The origin: the shared page (and a 1 GB body made of it) from disk.
mkdir -p "$work/www" "$work/origin"
lib=/usr/share/doc/python3.11/html/library
cat "$lib/os.html" "$lib/stdtypes.html" > "$work/www/page.html"
page=$(wc -c < "$work/www/page.html")
dd if="$work/www/page.html" of="$work/www/1mb.html" bs=1048576 count=1 status=none
for _ in $(seq 735); do cat "$work/www/page.html"; done > "$work/www/1gb.html" # 1.07 GB
cat > "$work/origin/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $work/origin/nginx.pid;
error_log $work/origin/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  include /etc/nginx/mime.types;
  client_body_temp_path $work/origin;
  proxy_temp_path $work/origin;
  fastcgi_temp_path $work/origin;
  uwsgi_temp_path $work/origin;
  scgi_temp_path $work/origin;
  server { listen 127.0.0.1:$ORIGIN_PORT; root $work/www; }
}
CONF
nginx -c "$work/origin/nginx.conf" -p "$work/origin" &
pids+=($!)

run_nginx() { # rules file
  mkdir -p "$work/subs"
  cat > "$work/subs/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_http_subs_filter_module.so;
worker_processes 1;
daemon off;
pid $work/subs/nginx.pid;
error_log $work/subs/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $work/subs;
  proxy_temp_path $work/subs;
  fastcgi_temp_path $work/subs;
  uwsgi_temp_path $work/subs;
  scgi_temp_path $work/subs;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location / {
      proxy_pass http://127.0.0.1:$ORIGIN_PORT;
      proxy_set_header Accept-Encoding "";
      include $1;
    }
  }
}
CONF
  nginx -c "$work/subs/nginx.conf" -p "$work/subs" &
  nginx_pid=$!
  pids+=("$nginx_pid")
  wait_port "$NGINX_PORT"
  check_rewrites "http://127.0.0.1:$NGINX_PORT/page.html" localhost
}

run_edge() { # rules file
  cat > "$work/spin.toml" <<TOML
spin_manifest_version = 2
[application]
name = "bench"
[[trigger.http]]
route = "/rewriter/..."
component = "rewriter"
[component.rewriter]
source = "$PWD/build/components/rewriter.wasm"
TOML
  cat > "$work/edge.toml" <<TOML
app = "spin.toml"
[server]
listen = "127.0.0.1:$EDGE_PORT"
admin_listen = "127.0.0.1:18189"
data_dir = "$HOME/.cache/edge/bench-data"
watch_interval_ms = 0
workers = 1
[limits]
request_deadline_ms = 600000
# The origin listens on loopback, which guests reach only if allowed.
[outbound]
allow_ranges = ["127.0.0.1/32"]
[[tenant]]
name = "bench"
hosts = ["*"]
components = ["*"]
[[tenant.site]]
name = "clone"
hosts = ["clone.test"]
origin = "http://127.0.0.1:$ORIGIN_PORT"
rules_file = "$1"
[component.rewriter]
instance = "session"
session_key = "host"
instances_per_key = 2
TOML
  EDGE_LOG=warn "$EDGE_BIN" serve --config "$work/edge.toml" >/dev/null &
  edge_pid=$!
  pids+=("$edge_pid")
  wait_port "$EDGE_PORT"
  # Warm: the first request compiles the rules in the instance.
  check_rewrites "http://127.0.0.1:$EDGE_PORT/page.html" clone.test
  check_rewrites "http://127.0.0.1:$EDGE_PORT/page.html" clone.test
}

wait_port "$ORIGIN_PORT"
static=$(reqs "http://127.0.0.1:$ORIGIN_PORT/page.html" origin)
echo "page: $page bytes; origin static: $static req/s; wrk -t1 -c2 -d$DURATION; one worker each"
echo
printf '| %-5s | %12s | %10s | %12s | %10s | %7s |\n' rules "edge req/s" "edge MB/s" "nginx req/s" "nginx MB/s" ratio
printf '|%s|%s|%s|%s|%s|%s|\n' ------- -------------- ------------ -------------- ------------ ---------
for n in $RULES; do
  rules="$SHARED/rules-$n.conf"
  run_edge "$rules"
  e=$(reqs "http://127.0.0.1:$EDGE_PORT/page.html" clone.test)
  kill "$edge_pid"; wait "$edge_pid" 2>/dev/null || true
  run_nginx "$rules"
  x=$(reqs "http://127.0.0.1:$NGINX_PORT/page.html" localhost)
  kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true
  printf '| %-5s | %12s | %10.1f | %12s | %10.2f | %6.1fx |\n' "$n" "$e" \
    "$(echo "$e * $page / 1000000" | bc -l)" "$x" "$(echo "$x * $page / 1000000" | bc -l)" \
    "$(echo "$e / $x" | bc -l)"
done

echo
echo "edge peak RSS (VmHWM) streaming through the rewriter, 50 rules:"
run_edge "$SHARED/rules-50.conf"
hwm() { awk '/VmHWM/ {print $2}' "/proc/$edge_pid/status"; }
for body in 1mb 1gb; do
  start=$(date +%s.%N)
  bytes=$(curl -s -f -H "Host: clone.test" "http://127.0.0.1:$EDGE_PORT/$body.html" | wc -c)
  [ "$bytes" -gt 1000000 ] || { echo "the $body body did not come through ($bytes bytes)" >&2; exit 1; }
  secs=$(echo "$(date +%s.%N) - $start" | bc -l)
  printf '  %-4s body: %11d bytes out in %6.2f s (%6.1f MB/s), peak RSS %6d KiB\n' "$body" "$bytes" "$secs" \
    "$(echo "$bytes / $secs / 1000000" | bc -l)" "$(hwm)"
done
kill "$edge_pid"; wait "$edge_pid" 2>/dev/null || true
