#!/usr/bin/env bash
# One idempotent set-up step for `make test` and `make demo`.
# Installs only what is missing, so a second run takes a second or two.
#   scripts/setup.sh [run|test|all]     (default: all; `make demo` uses run, `make test` test)
#   apt, every mode: qemu-system-misc (qemu-system-riscv32), gcc/binutils-riscv64-unknown-elf
#                    (rv32 C + objdump), picolibc-riscv64-unknown-elf (C headers for rv32 C
#                    programs), pkg-config, and each scripts/setup.d/NAME.apt (fonts for the plots)
#   apt, test / all: each scripts/setup.d/NAME.test.apt as well (chromium and firefox-esr for the
#                    viewer's browser tests: the demo does not need them)
#   rustup:          target riscv32imc-unknown-none-elf; in test / all also the rustfmt and clippy
#                    components (the lint step of `make test`)
#   pip:             each scripts/setup.d/NAME.pip
#   scripts/setup.sh --list MODE        prints the apt needs of MODE ("probe:package" lines), installs nothing
# Set GAPSTREAM_SETUP_SKIP=1 to skip (for example on a machine managed another way).
set -euo pipefail

list_only=0
if [ "${1:-}" = --list ]; then list_only=1; shift; fi
mode="${1:-all}"
case "$mode" in run|test|all) ;; *) echo "setup: unknown mode '$mode' (run, test or all)" >&2; exit 2 ;; esac

[ "$list_only" = 0 ] && [ "${GAPSTREAM_SETUP_SKIP:-0}" = 1 ] && { echo "setup: skipped (GAPSTREAM_SETUP_SKIP=1)"; exit 0; }

say() { printf 'setup: %s\n' "$*"; }

# --- apt packages --------------------------------------------------------------------------------
# Each entry is "command-or-path-that-proves-it-is-installed:debian-package".
APT_NEEDS=(
  "qemu-system-riscv32:qemu-system-misc"
  "riscv64-unknown-elf-gcc:gcc-riscv64-unknown-elf"
  "riscv64-unknown-elf-objdump:binutils-riscv64-unknown-elf"
  "/usr/lib/picolibc/riscv64-unknown-elf/include/stdio.h:picolibc-riscv64-unknown-elf"
  "pkg-config:pkg-config"
)
# Extra needs registered by parts of the project (one "probe:package" per line); NAME.test.apt
# only for the tests.
for f in "$(dirname "$0")"/setup.d/*.apt; do
  [ -e "$f" ] || continue
  [[ "$f" == *.test.apt && "$mode" == run ]] && continue
  while IFS= read -r line; do
    line="${line%%#*}"; line="$(echo "$line" | xargs)"
    [ -n "$line" ] && APT_NEEDS+=("$line")
  done < "$f"
done

if [ "$list_only" = 1 ]; then printf '%s\n' "${APT_NEEDS[@]}"; exit 0; fi

missing=()
for entry in "${APT_NEEDS[@]}"; do
  probe="${entry%%:*}"; pkg="${entry##*:}"
  if [[ "$probe" == /* ]]; then [ -e "$probe" ] && continue
  else command -v "$probe" >/dev/null 2>&1 && continue; fi
  missing+=("$pkg")
done

if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  say "installing apt packages: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- Rust ----------------------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"
  else
    say "installing rustup (stable)"
    curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal >/dev/null
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
fi
if command -v rustup >/dev/null 2>&1; then
  if ! rustup target list --installed 2>/dev/null | grep -qx riscv32imc-unknown-none-elf; then
    say "adding rustup target riscv32imc-unknown-none-elf"
    rustup target add riscv32imc-unknown-none-elf >/dev/null
  fi
  if [ "$mode" != run ]; then
    for c in rustfmt clippy; do
      if ! rustup component list --installed 2>/dev/null | grep -q "^$c"; then
        say "adding rustup component $c"
        rustup component add "$c" >/dev/null
      fi
    done
  fi
fi

# --- Python packages registered by parts of the project (plots) ----------------------------------
for f in "$(dirname "$0")"/setup.d/*.pip; do
  [ -e "$f" ] || continue
  while IFS= read -r line; do
    line="${line%%#*}"; line="$(echo "$line" | xargs)"; [ -n "$line" ] || continue
    mod="${line%%:*}"; pkg="${line##*:}"
    python3 -c "import $mod" >/dev/null 2>&1 && continue
    say "installing python package $pkg"
    python3 -m pip install -q "$pkg" >/dev/null 2>&1 || python3 -m pip install -q --break-system-packages "$pkg" >/dev/null
  done < "$f"
done

say "ok"
