#!/usr/bin/env bash
# `make run`: serves edge on its embedded defaults (edge-config/default.toml)
# and, as a tenant of that node would, deploys the billing app
# (build/billing) on billing.localhost through the control plane and seeds
# its demo data (100,000 clients, 1,000,000 signed payments) through its
# own API in the background. Its secrets are made once and kept in
# .edge-data/billing/ (mode 0600). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
edge="$CARGO_TARGET_DIR/release/edge"
data=.edge-data
api=http://127.0.0.1:8790
app=http://127.0.0.1:8080
host=billing.localhost

"$edge" serve --config edge-config/default.toml &
node=$!
seeder=
stop() {
  [ -n "$seeder" ] && kill "$seeder" 2>/dev/null
  kill "$node" 2>/dev/null
  wait "$node" 2>/dev/null
}
trap stop INT TERM EXIT

for _ in $(seq 600); do
  [ -s "$data/control/operator.token" ] && curl -s -o /dev/null "$api/v1/openapi.json" && break
  kill -0 "$node" 2>/dev/null || exit 1
  sleep 0.1
done
export EDGE_API_URL=$api EDGE_API_TOKEN_FILE=$data/control/operator.token

# The billing app's secrets: random, made once.
mkdir -p "$data/billing" && chmod 700 "$data/billing"
secret() {
  local file="$data/billing/$1"
  [ -s "$file" ] || (umask 077 && head -c "$2" /dev/urandom | od -An -tx1 | tr -d ' \n' > "$file")
  cat "$file"
}
row_key=$(secret row-key 32)
seed_token=$(secret seed-token 24)
password=$(secret demo-password 12)

if ! "$edge" tenants list 2>/dev/null | grep -qw conf; then
  "$edge" tenants create conf --host "$host" >/dev/null
fi
# A new version only when the app changed since the last deployment.
stamp="$data/billing/deployed.sha256"
built=$(cat build/billing/billing.wasm build/billing/spin.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$built" ]; then
  "$edge" deploy build/billing/spin.toml --tenant conf --app billing \
    --secret "row_key=$row_key" --secret "seed_token=$seed_token" --secret "demo_password=$password" >/dev/null
  echo "$built" > "$stamp"
fi
./scripts/billing-seed.sh "$app" "$host" "$seed_token" > "$data/billing/seed.log" 2>&1 &
seeder=$!

cat <<TEXT

  edge serves on $app (admin on http://127.0.0.1:9080)
  web console:        $api/   (make a user: edge users create you@example.com <<< 'a long password')
  billing workspace:  http://$host:8080/billing/   (dealer1@billing.test ... dealer5@billing.test, admin@billing.test;
                      password in $data/billing/demo-password; demo data seeding: $data/billing/seed.log)

TEXT
wait "$node"
