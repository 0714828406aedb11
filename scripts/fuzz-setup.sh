#!/usr/bin/env bash
# Idempotent set-up for `make fuzz` (not needed by `make test`): a nightly toolchain (libFuzzer's
# sanitizer flags need it; the project itself builds on stable), cargo-fuzz from crates.io, and g++
# (apt) if no C++ compiler is there.
# Installs only what is missing, so a second run takes about a second.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
say() { printf 'fuzz-setup: %s\n' "$*"; }

command -v rustup >/dev/null 2>&1 || { echo "fuzz-setup: rustup is needed (run scripts/setup.sh first)" >&2; exit 1; }

# libfuzzer-sys compiles libFuzzer (C++) with the `cc` crate.
if ! command -v c++ >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "fuzz-setup: need root or sudo to install g++" >&2; exit 1; }
    SUDO="sudo"
  fi
  say "installing apt package g++ (libFuzzer is C++)"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ >/dev/null
fi

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
  say "installing the nightly toolchain (fuzzing only)"
  rustup toolchain install nightly --profile minimal >/dev/null
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  say "installing cargo-fuzz"
  cargo install cargo-fuzz --locked --quiet
fi
say "ok ($(rustup run nightly rustc --version), $(cargo fuzz --version))"
