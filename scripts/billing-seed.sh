#!/usr/bin/env bash
# Seeds the billing app with its deterministic demo data, through the app
# itself: POST /api/seed {part: N} for every part in order (part 0: the
# tariffs, dealers and users; then the clients and their payments). A part
# already inserted is skipped, so a run that stopped can be run again.
#
#   scripts/billing-seed.sh URL HOST TOKEN
#   scripts/billing-seed.sh http://127.0.0.1:8080 billing.localhost "$SEED_TOKEN"
#
# URL is the node's application listener, HOST the app's hostname, TOKEN
# the app's seed_token variable.
set -euo pipefail
if [ $# -ne 3 ]; then
    echo "usage: $0 URL HOST TOKEN" >&2
    exit 2
fi
url=${1%/}
host=$2
token=$3
part() {
    curl -sS --fail-with-body -X POST "$url/api/seed" \
        -H "host: $host" -H "authorization: Bearer $token" \
        -H 'content-type: application/json' --data "{\"part\":$1}"
}
field() {
    sed -n "s/.*\"$1\":\([0-9a-z]*\).*/\1/p"
}
answer=$(part 0) || { echo "part 0 failed: $answer" >&2; exit 1; }
parts=$(printf '%s' "$answer" | field parts)
echo "billing-seed: part 0/$((parts - 1)): tariffs, dealers, users ($(printf '%s' "$answer" | field skipped | sed 's/true/already there/;s/false/inserted/'))"
start=$(date +%s)
clients=0
payments=0
for ((n = 1; n < parts; n++)); do
    answer=$(part "$n") || { echo "part $n failed: $answer" >&2; exit 1; }
    clients=$((clients + $(printf '%s' "$answer" | field clients)))
    payments=$((payments + $(printf '%s' "$answer" | field payments)))
    if [ $((n % 10)) -eq 0 ] || [ "$n" -eq $((parts - 1)) ]; then
        echo "billing-seed: part $n/$((parts - 1)): $clients clients, $payments payments inserted, $(($(date +%s) - start)) s"
    fi
done
echo "billing-seed: done"
