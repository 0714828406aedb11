#!/usr/bin/env bash
# The build-flags stamp (firmware/Makefile, FLAGS_STAMP) must be written on a fresh tree, where its
# build directory does not exist yet: `$(file >...)` is expanded before any recipe line runs.
# Runs firmware/Makefile against a stub of the SDK's pmsis_rules.mk (no GAP SDK needed) and asks
# only for the stamp, in a build directory that does not exist.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/pmsis_rules.mk" <<'MK'
# Stub of the GAP SDK's pmsis_rules.mk: only the variables firmware/Makefile reads.
BUILDDIR ?= $(STUB_BUILD)
BIN      := $(BUILDDIR)/gapstream
OBJS     :=
MK
build="$tmp/fresh/BUILD/GAP8_V2/GCC_RISCV_FREERTOS"
stamp="$build/gapstream-build-flags.txt"
if ! out=$(make -s -C . GAP_SDK_HOME="$tmp" RULES_DIR="$tmp" STUB_BUILD="$build" "$stamp" 2>&1); then
  echo "flags_stamp: make failed on a fresh build directory:"; echo "$out"; exit 1
fi
[ -f "$stamp" ] || { echo "flags_stamp: $stamp was not written"; echo "$out"; exit 1; }
grep -q 'MAIN_STACK_SIZE=' "$stamp" || { echo "flags_stamp: unexpected content:"; cat "$stamp"; exit 1; }
# A second run with the same flags leaves the stamp alone (no .tmp left behind).
make -s -C . GAP_SDK_HOME="$tmp" RULES_DIR="$tmp" STUB_BUILD="$build" "$stamp" >/dev/null
[ ! -e "$stamp.tmp" ] || { echo "flags_stamp: $stamp.tmp left behind"; exit 1; }
echo "flags_stamp: ok (stamp written into a fresh build directory)"
