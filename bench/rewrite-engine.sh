#!/usr/bin/env bash
# Rewrite engine alone (no HTTP): throughput on the shared page with 1, 10,
# 50 and 200 nginx subs_filter rules, and input-size scaling of
# pathological patterns (linear time means flat MB/s as input grows).
#   make bench-rewrite-engine
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:=$HOME/.cache/edge/target}"
EDGE="$CARGO_TARGET_DIR/release/edge"
SHARED="${SHARED:-$(cd .. && pwd)/shared/bench/rewriter}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mbps() { "$EDGE" rules test --rules "$1" < "$2" 2>&1 >/dev/null | sed -E 's/.* ([0-9.]+) MB\/s/\1/'; }

if [ -d "$SHARED" ] && [ -f /usr/share/doc/python3.11/html/library/os.html ]; then
  lib=/usr/share/doc/python3.11/html/library
  for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$lib/os.html" "$lib/stdtypes.html"; done > "$work/page10"
  page=$(( $(wc -c < "$work/page10") / 10 ))
  echo "shared page ($page bytes) x10, 64 KiB chunks, one core"
  printf '| %-6s | %8s | %14s |\n' rules "MB/s" "pages/s (1 core)"
  for n in 1 10 50 200; do
    m=$(mbps "$SHARED/rules-$n.conf" "$work/page10")
    printf '| %-6s | %8s | %14.0f |\n' "$n" "$m" "$(echo "$m * 1000000 / $page" | bc -l)"
  done
else
  echo "(shared page or python3.11-doc missing: skipping the page table)"
fi

echo
echo "pathological patterns: MB/s by input size (flat = linear time)"
printf "[[rule]]\npattern = '(a|aa)*b'\nreplacement = 'X'\n[[rule]]\npattern = '(x+x+)+y'\nreplacement = 'Y'\n" > "$work/patho.toml"
printf '| %-10s | %8s |\n' input "MB/s"
for mb in 1 10 100; do
  python3 -c "import sys; sys.stdout.write(('a'*4095+'x'*4096+'\n')*($mb*128))" > "$work/in"
  printf '| %-10s | %8s |\n' "${mb} MB" "$(mbps "$work/patho.toml" "$work/in")"
done
