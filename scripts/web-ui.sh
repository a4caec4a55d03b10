#!/bin/bash
# The web console (web-ui/): installs its packages from the lockfile and
# builds it into web-ui/build (which the host serves on the control
# listener) when its sources changed. --test: then its type check, linter
# and vitest (unit tests in node, component tests in Debian's chromium).
set -euo pipefail
cd "$(dirname "$0")/../web-ui"

if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error >/dev/null
fi

sources=(src static package-lock.json svelte.config.js vite.config.ts)
if [ ! -f build/index.html ] || [ -n "$(find "${sources[@]}" -type f -newer build/index.html | head -1)" ]; then
  npx vite build --logLevel error
  touch build/index.html
fi

if [ "${1:-}" = --test ]; then
  npx svelte-kit sync
  npx svelte-check --tsconfig ./tsconfig.json --fail-on-warnings --output machine | tail -1
  npx eslint .
  npx vitest run --reporter=dot
fi
