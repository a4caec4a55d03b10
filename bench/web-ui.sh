#!/usr/bin/env bash
# Web UI benchmark (issue 37), one host on loopback, the billing app as a
# tenant deploys it (`edge deploy build/billing/spin.toml`), seeded with
# the full demo data (100,000 clients, 1,000,000 signed payments) through
# its own /api/seed, once on Spin's SQLite and once on MariaDB:
#  1. the dealer clients API with 50 dealers at work (wrk, 50 connections,
#     one dealer's browser each, DURATION s; bench/web-ui/clients.lua):
#     each opens a view (no filter, a tariff, a month, a search as typed,
#     a search and a tariff; a sort), then its page 2, then another sort,
#     pausing 200-400 ms (THINK_MS=300 on average: the workspace's search
#     debounce) between requests: p50/p95/p99 (target: p95 <= 30 ms);
#     then the same with no pause (closed loop: the app's capacity);
#  2. inline edits (PATCH with the row's version) one after another on a
#     kept-alive connection, EDITS of them: p95 (target <= 50 ms);
#  3. the JavaScript a first visit transfers, compressed, in chromium with
#     an empty cache: the console's login page and the page after login,
#     and the billing workspace's (target <= 200 KB).
#
#   make bench-web-ui     (DURATION=20 EDITS=300 THINK_MS=300 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
export CARGO_TARGET_DIR
DURATION=${DURATION:-20}
EDITS=${EDITS:-300}
PORT=18781 CONTROL=18791 MYSQL_PORT=18792
edge="$CARGO_TARGET_DIR/release/edge"
command -v wrk >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
password="bench password 2026"
seed_token="bench-seed-token"
row_key=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')

. bench/lib.sh
bench_workdir

# MariaDB for the app's second run.
mkdir -p "$work/mysql" "$work/mysql-tmp"
mariadb-install-db --no-defaults --user=root --auth-root-authentication-method=normal --datadir="$work/mysql" --tmpdir="$work/mysql-tmp" >/dev/null
mariadbd --no-defaults --user=root --datadir="$work/mysql" --tmpdir="$work/mysql-tmp" --socket="$work/mysql.sock" \
  --bind-address=127.0.0.1 --port=$MYSQL_PORT --innodb-buffer-pool-size=512M --max-connections=500 >"$work/mysql.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do mariadb --socket="$work/mysql.sock" -u root -e 'SELECT 1' >/dev/null 2>&1 && break; sleep 0.1; done
mariadb --socket="$work/mysql.sock" -u root -e "CREATE DATABASE billing; CREATE USER 'billing'@'127.0.0.1' IDENTIFIED BY 'pw'; GRANT ALL ON billing.* TO 'billing'@'127.0.0.1'"

control_node "$PORT" "$CONTROL" 'admin_listen = "127.0.0.1:0"' "console = \"$PWD/web-ui/build\"" '[outbound]
allow_ranges = ["127.0.0.1/32"]'
echo "$(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# The app twice: tenant billing-sqlite on sqlite.billing.localhost, tenant
# billing-mariadb on mariadb.billing.localhost.
results=()
for backend in sqlite mariadb; do
  host="$backend.billing.localhost"
  "$edge" tenants create "billing-$backend" --host "$host" >/dev/null
  extra=()
  [ "$backend" = mariadb ] && extra=(--secret "db_url=mysql://billing:pw@127.0.0.1:$MYSQL_PORT/billing")
  "$edge" deploy build/billing/spin.toml --tenant "billing-$backend" --app billing \
    --secret "row_key=$row_key" --secret "seed_token=$seed_token" --secret "demo_password=$password" "${extra[@]}" >/dev/null
  echo "$backend: seeding 100,000 clients and 1,000,000 payments..." >&2
  t0=$(date +%s)
  ./scripts/billing-seed.sh "http://127.0.0.1:$PORT" "$host" "$seed_token" | tail -1 >&2
  seed_s=$(( $(date +%s) - t0 ))
  # 50 dealers' sessions: ten logins of each of the five dealers.
  : > "$work/cookies-$backend"
  for i in $(seq 50); do
    d=$(( (i - 1) % 5 + 1 ))
    curl -s -D - -o "$work/login.json" -H "Host: $host" -H 'content-type: application/json' \
      --data "{\"login\":\"dealer$d@billing.test\",\"password\":\"$password\"}" "http://127.0.0.1:$PORT/api/login" \
      | sed -n 's/^set-cookie: \(billing_session=[^;]*\).*/\1/Ip' >> "$work/cookies-$backend"
  done
  [ "$(wc -l < "$work/cookies-$backend")" = 50 ] || { echo "logins failed: $(cat "$work/login.json")" >&2; exit 1; }
  csrf=$(sed -n 's/.*"csrf_token":"\([^"]*\)".*/\1/p' "$work/login.json")
  last_cookie=$(tail -1 "$work/cookies-$backend")
  # Warm: every query once.
  COOKIES="$work/cookies-$backend" HOST="$host" wrk -t5 -c5 -d2s -s bench/web-ui/clients.lua "http://127.0.0.1:$PORT" >/dev/null
  read_line=$(COOKIES="$work/cookies-$backend" HOST="$host" THINK_MS=${THINK_MS:-300} wrk -t50 -c50 -d"${DURATION}s" --timeout 10s -s bench/web-ui/clients.lua "http://127.0.0.1:$PORT" | grep '^RESULT')
  closed_line=$(COOKIES="$work/cookies-$backend" HOST="$host" THINK_MS=0 wrk -t50 -c50 -d"${DURATION}s" --timeout 10s -s bench/web-ui/clients.lua "http://127.0.0.1:$PORT" | grep '^RESULT' | sed 's/RESULT/CLOSED/; s/ \([a-z0-9]*\)=/ closed_\1=/g')
  edit_line=$(EDITS=$EDITS /usr/bin/python3 bench/web-ui/edits.py "$PORT" "$host" "$last_cookie" "$csrf" | grep '^RESULT')
  results+=("$backend seed=${seed_s}s $read_line $closed_line $edit_line")
  echo "$backend: $read_line; $closed_line; $edit_line" >&2
done

# The console's and the workspace's first load.
edge_user=ops@bench.test
printf '%s\n' "$password" | "$edge" users create "$edge_user" >/dev/null
load_line=$(cd web-ui && node scripts/first-load.mjs "http://127.0.0.1:$CONTROL" "$edge_user" "$password" \
  "http://sqlite.billing.localhost:$PORT" dealer1@billing.test "$password" | grep '^RESULT')

get() { sed -n "s/.* $1=\([0-9.]*\).*/\1/p" <<<"$2"; }
echo
echo "| database | seed (s) | 50 dealers: req/s | p50 ms | p95 ms (target ≤ 30) | p99 ms | closed loop: req/s | p50 ms | p95 ms | non-200 | inline edit p50 ms | p95 ms (target ≤ 50) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
for r in "${results[@]}"; do
  b=${r%% *}
  dealers=${r%%CLOSED*} edits="edits=${r#*edits=}"
  echo "| $b | $(sed -n 's/.*seed=\([0-9]*\)s.*/\1/p' <<<"$r") | $(get rps "$dealers") | $(get p50 "$dealers") | $(get p95 "$dealers") | $(get p99 "$dealers") | $(get closed_rps "$r") | $(get closed_p50 "$r") | $(get closed_p95 "$r") | $(( $(get non200 "$dealers") + $(get closed_non200 "$r") )) | $(get p50 "$edits") | $(get p95 "$edits") |"
done
kb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1024 }'; }
echo
echo "| first visit, empty cache | JS on the login page (KB, compressed) | JS to the first page after login (KB; target ≤ 200) | everything transferred (KB) |"
echo "|---|---|---|---|"
echo "| console | $(kb "$(get console_login_js "$load_line")") | $(kb "$(get console_js "$load_line")") | $(kb "$(get console_all "$load_line")") |"
echo "| billing workspace | $(kb "$(get billing_login_js "$load_line")") | $(kb "$(get billing_js "$load_line")") | $(kb "$(get billing_all "$load_line")") |"
