#!/usr/bin/env bash
# Installs what building and testing need, once: the Rust toolchain's
# wasm32-wasip2 target and clippy/rustfmt, and the Debian packages tests use
# (PyJWT as the independent JWT implementation, MariaDB for the UDFs and
# Spin's MySQL interface, PostgreSQL, Redis and Mosquitto for Spin's others,
# opus-tools as the reference Opus implementation, chromium and Node for the
# browser tests, with playwright-core from npm). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
# Debian packages the tests need, by a file each provides.
missing=()
[ -e /usr/lib/python3/dist-packages/jwt/__init__.py ] || missing+=(python3-jwt)
[ -e /usr/lib/python3/dist-packages/cryptography/__init__.py ] || missing+=(python3-cryptography)
/usr/bin/python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)  # hints-data.sh, the Python Spin app
command -v cc >/dev/null || missing+=(build-essential)
command -v mariadbd >/dev/null || missing+=(mariadb-server)
command -v docker-registry >/dev/null || missing+=(docker-registry)  # the control plane's OCI artifact store
command -v opusdec >/dev/null || missing+=(opus-tools)
# Spin compatibility: the services Spin apps reach (tests/spin-apps).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null || missing+=(redis-server)
command -v mosquitto >/dev/null || missing+=(mosquitto)
command -v mosquitto_sub >/dev/null || missing+=(mosquitto-clients)
command -v pgrep >/dev/null || missing+=(procps)
# Key-value disk-fault tests: a tmpfs, an ext4 image on a loop device,
# fsfreeze; the sidecar's other-user test runs its client under setpriv.
command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
command -v losetup >/dev/null || missing+=(mount)
for tool in fsfreeze setpriv; do command -v "$tool" >/dev/null || { missing+=(util-linux); break; }; done
command -v chromium >/dev/null || missing+=(chromium)
command -v npm >/dev/null || missing+=(nodejs npm)
command -v curl >/dev/null || missing+=(curl)  # make run's scripts (billing deploy and seeding)
command -v openssl >/dev/null || missing+=(openssl)  # a private CA for the CLI's https test
if [ ${#missing[@]} -gt 0 ]; then
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v cargo >/dev/null; then
  if ! command -v curl >/dev/null; then
    as_root apt-get update -qq && as_root apt-get install -y -qq curl ca-certificates build-essential
  fi
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  source "$HOME/.cargo/env"
fi
installed=$(rustup target list --installed)
grep -qx wasm32-wasip2 <<<"$installed" || rustup target add wasm32-wasip2
# Spin's older SDKs build for preview 1 (tests/spin-apps).
grep -qx wasm32-wasip1 <<<"$installed" || rustup target add wasm32-wasip1
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
# The Workers toolchain (vite 7 under vitest, miniflare) needs Node.js 20.19+.
node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' || {
  echo "setup: Node.js $(node --version) is too old: workers/ needs 20.19 or later" >&2
  exit 1
}
# playwright-core drives the Debian chromium (it downloads no browser).
if [ ! -d tests/browser/node_modules/playwright-core ]; then
  npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error >/dev/null
fi
# rustc's incremental caches (the release profile keeps them, for edits
# between runs): a directory per crate and build of it (each checkout's
# path, tests or not), which neither rustc nor cargo removes. They had
# grown to 52 GB and filled the disk; one no build has written for a day
# goes (that crate compiles whole once if it is built again).
incremental="${CARGO_TARGET_DIR:-target}/release/incremental"
if [ -d "$incremental" ]; then
  find "$incremental" -mindepth 1 -maxdepth 1 -type d -mmin +1440 -exec rm -rf {} +
fi
