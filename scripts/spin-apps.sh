#!/usr/bin/env bash
# Builds the Spin apps under tests/spin-apps as `spin build` would: each
# component's `[component.X.build] command`, run in its `workdir` (or the
# app's directory). Rust apps share one target directory (each app's
# `target` is a link to it), so the SDKs compile once for all apps.
set -euo pipefail
cd "$(dirname "$0")/.."
SPIN_TARGET="${SPIN_TARGET:-$HOME/.cache/edge/spin-target}"
mkdir -p "$SPIN_TARGET"
for manifest in tests/spin-apps/*/spin.toml; do
    app=$(dirname "$manifest")
    if [ -f "$app/Cargo.toml" ] && [ ! -e "$app/target" ]; then
        ln -s "$SPIN_TARGET" "$app/target"
    fi
    python3 - "$manifest" <<'PY' | while IFS=$'\t' read -r workdir command; do
import sys, tomllib, os
manifest = sys.argv[1]
app = os.path.dirname(manifest)
with open(manifest, "rb") as f:
    m = tomllib.load(f)
for name, c in m.get("component", {}).items():
    build = c.get("build")
    if build:
        print(os.path.join(app, build.get("workdir", ".")), build["command"], sep="\t")
PY
        echo "spin-apps: ($workdir) $command"
        (cd "$workdir" && unset CARGO_TARGET_DIR && bash -c "$command")
    done
done
