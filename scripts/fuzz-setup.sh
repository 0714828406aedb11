#!/usr/bin/env bash
# Idempotent set-up for `make fuzz` (not needed by `make test`): a nightly toolchain (libFuzzer's
# sanitizer flags need it; the project itself builds on stable) and cargo-fuzz from crates.io.
# Installs only what is missing, so a second run takes about a second.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
say() { printf 'fuzz-setup: %s\n' "$*"; }

command -v rustup >/dev/null 2>&1 || { echo "fuzz-setup: rustup is needed (run scripts/setup.sh first)" >&2; exit 1; }

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  say "installing the nightly toolchain (fuzzing only)"
  rustup toolchain install nightly --profile minimal >/dev/null
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi
say "ok ($(rustup run nightly rustc --version), $(cargo fuzz --version))"
