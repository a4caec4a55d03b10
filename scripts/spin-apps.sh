#!/usr/bin/env bash
# Builds the Spin apps under tests/spin-apps as `spin build` would: each
# component's `[component.X.build] command`, run in its `workdir` (or the
# app's directory). Rust apps share one target directory (each app's
# `target` is a link to it), so the SDKs compile once for all apps;
# JavaScript apps install afresh each time, without a lockfile: Spin's
# @spinframework/build-tools 1.0.7 imports @bytecodealliance/preview2-shim
# without declaring it, and only a fresh `npm install` puts the copy it
# needs (0.25, an optional peer of jco-std) at the top; npm 11 leaves it
# out of the lockfile, so an install from a lockfile (or a second install
# into the same node_modules) drops it and the build fails. Python apps
# build in a virtual environment with their pinned requirements, as Spin's
# Python templates say (`python3 -m venv venv`, `pip install -r
# requirements.txt`).
set -euo pipefail
cd "$(dirname "$0")/.."
# One target directory per checkout: two checkouts sharing one would each
# find the other's build of an app under the same output name.
SPIN_TARGET="${SPIN_TARGET:-$HOME/.cache/edge/spin-target/$(pwd | sha256sum | cut -c1-12)}"
mkdir -p "$SPIN_TARGET"
for manifest in tests/spin-apps/*/spin.toml; do
    app=$(dirname "$manifest")
    if [ -f "$app/Cargo.toml" ]; then
        ln -sfn "$SPIN_TARGET" "$app/target"
    fi
    if [ -f "$app/requirements.txt" ]; then
        [ -x "$app/venv/bin/pip" ] || python3 -m venv "$app/venv"
        "$app/venv/bin/pip" install -q --disable-pip-version-check -r "$app/requirements.txt"
        export PATH="$PWD/$app/venv/bin:$PATH"
    fi
    if [ -f "$app/package.json" ]; then
        rm -rf "$app/node_modules"
        export npm_config_package_lock=false
    else
        unset npm_config_package_lock
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
        # A command, or a list of commands run in order (Spin's two forms).
        commands = build["command"]
        if isinstance(commands, str):
            commands = [commands]
        for command in commands:
            print(os.path.join(app, build.get("workdir", ".")), command, sep="\t")
PY
        echo "spin-apps: ($workdir) $command"
        (cd "$workdir" && unset CARGO_TARGET_DIR && bash -c "$command")
    done
done
