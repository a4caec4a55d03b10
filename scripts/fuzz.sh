#!/usr/bin/env bash
# Property-based fuzzing, bounded in time: runs the fuzz property tests
# with fresh random seeds, batch after batch, until SECONDS are up.
# cargo-fuzz needs a nightly toolchain and libFuzzer, which the CI does not
# have and must not download; these are proptest targets instead, and run
# (with their default case counts) in `make test` too. The HTTP front end's
# target starts the real edge: it needs the host and the components built
# (`make components host`).
#
#   scripts/fuzz.sh [SECONDS] [CASES_PER_BATCH]    (default 60, 5000)
#
# A failing case is shrunk and saved by proptest in the target's
# `*.proptest-regressions` file beside it: check that file in, and every
# later run (this script and `make test`) replays it first.
# Nothing is downloaded (`--offline`); build first (`make test` or
# `cargo build`) on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/edge/target}"
SECS="${1:-60}"
CASES="${2:-5000}"
# package directory:test target[:cases per batch[:grace seconds]]. A
# target's own case count replaces CASES (the HTTP front end's cases cost
# a connection each); a target with a grace stops itself at FUZZ_DEADLINE
# (it started a server, which a kill would leave running), and `timeout`
# only stops it that many seconds later.
TARGETS=(
    components/rewrite-engine:import_fuzz
    host/edge-config:load_fuzz
    components/hints-engine:query_fuzz
    host/edge-mysql:server_answers_fuzz:200
    host/edge-redis:server_answers_fuzz:200
    host/edge-postgres:server_answers_fuzz:200
    tests:http_fuzz:500:30
)
# Build every target first, so the time goes to cases; then run the test
# binaries themselves (from their package directory, as cargo does), so
# the deadline stops them and not only cargo.
BINS=()
for t in "${TARGETS[@]}"; do
    IFS=: read -r dir name cases grace <<<"$t"
    bin=$(cargo test --offline --release --manifest-path "$dir/Cargo.toml" --test "$name" --no-run \
        --message-format=json | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
    [[ -x "$bin" ]] || { echo "fuzz: no test binary for $t" >&2; exit 1; }
    BINS+=("$dir:$bin:${cases:-$CASES}:${grace:-0}")
done
end=$((SECONDS + SECS))
export FUZZ_DEADLINE=$(($(date +%s) + SECS))
batches=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
while ((SECONDS < end)); do
    for b in "${BINS[@]}"; do
        left=$((end - SECONDS))
        ((left > 0)) || break
        IFS=: read -r dir bin cases grace <<<"$b"
        # A batch cut short by the deadline is no failure (exit 124).
        status=0
        (cd "$dir" && PROPTEST_CASES="$cases" timeout "$((left + grace))" "$bin" -q) >"$log" 2>&1 || status=$?
        if ((status != 0 && status != 124)); then
            cat "$log"
            echo "fuzz: $dir ($bin) failed after ${batches} batches; the case is saved in its .proptest-regressions file" >&2
            exit 1
        fi
    done
    batches=$((batches + 1))
done
echo "fuzz: ${#TARGETS[@]} target(s), ${batches} batch(es) of ${CASES} cases per test (or the target's own count), no failure in ${SECS}s"
