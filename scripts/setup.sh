#!/usr/bin/env bash
# Installs what building and testing need, once: the Rust toolchain's
# wasm32-wasip2 target and clippy/rustfmt. Safe to run again.
set -euo pipefail
if ! command -v cargo >/dev/null; then
  if ! command -v curl >/dev/null; then
    sudo_or_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
    sudo_or_root apt-get update -qq && sudo_or_root apt-get install -y -qq curl ca-certificates build-essential
  fi
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  # shellcheck disable=SC1091
  source "$HOME/.cargo/env"
fi
if ! command -v cc >/dev/null; then
  if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq build-essential; else sudo apt-get update -qq && sudo apt-get install -y -qq build-essential; fi
fi
installed=$(rustup target list --installed)
grep -qx wasm32-wasip2 <<<"$installed" || rustup target add wasm32-wasip2
rustup component list --installed | grep -q '^clippy' || rustup component add clippy
rustup component list --installed | grep -q '^rustfmt' || rustup component add rustfmt
