#!/usr/bin/env bash
# make gvsoc-check: builds gvsoc_engine_check (with the PULP ChaCha20 kernel) and runs it on the GAP8
# GVSOC model: the cluster engine over 128 KiB in L2 on 1, 2, 4 and 8 cores per kernel, checked
# against a digest computed on the host. Skips (exit 0) with one line when gapy is not on PATH.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v gapy >/dev/null 2>&1; then
    echo "gvsoc-check: skipped: the GAP8 GVSOC simulator is not set up (run: make gvsoc-setup; or load a GAP SDK environment with gapy on PATH)"
    exit 0
fi
TARGET=riscv32imc-unknown-none-elf
cargo build --locked --quiet -p gvsoc --features pulp --target $TARGET --profile rv32 --bin gvsoc_engine_check || exit 1
mkdir -p target/gvsoc
log=target/gvsoc/engine_check.log
gvsoc/run.sh target/$TARGET/rv32/gvsoc_engine_check target/gvsoc/engine_check >"$log" 2>&1
status=$?
grep -E '^gvsoc ' "$log"
runs=$(grep -cE '^gvsoc kernel=.* ok$' "$log")
fails=$(grep -cE '^gvsoc .*FAIL' "$log")
if [ "$status" -ne 0 ] || [ "$fails" -ne 0 ] || [ "$runs" -lt 12 ]; then
    tail -n 20 "$log"
    echo "gvsoc-check: FAIL (status $status, $runs runs ok, $fails failed; log $log)"
    exit 1
fi
echo "gvsoc-check: $runs passed, 0 failed"
