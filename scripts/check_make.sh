#!/usr/bin/env bash
# Checks what the Makefiles promise a new user (part of `make test`, mk/lint.mk):
#  - `make help` lists every target once, each description starting in the same column;
#  - `make demo` prints a line before cargo compiles (the first release build takes minutes);
#  - the set-up step's modes: `make demo` (run) installs no browser, `make test` does, and
#    `make test` gets the rustfmt/clippy components its lint step needs;
#  - the QUICK=1 time of make help agrees with README.md and docs/bench.md.
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "make-check: $*" >&2; exit 1; }

help=$(make --no-print-directory -s help)
names=$(grep -E '^  make ' <<<"$help" | awk '{print $2}')
dups=$(sort <<<"$names" | uniq -d)
[ -z "$dups" ] || fail "make help lists these targets more than once: $dups"
for t in test demo setup lint; do grep -qx "$t" <<<"$names" || fail "make help does not list $t"; done
cols=$(grep -E '^  make ' <<<"$help" | while IFS= read -r l; do
  rest=${l#  make }; name=${rest%% *}; after=${rest#"$name"}; pad=${after%%[! ]*}
  echo $(( 7 + ${#name} + ${#pad} )); done | sort -u)
[ "$(wc -l <<<"$cols")" = 1 ] || fail "make help descriptions start in different columns: $(tr '\n' ' ' <<<"$cols")"
cont=$(grep -E '^ {3,}[^ ]' <<<"$help" | awk '{ match($0, /[^ ]/); print RSTART - 1 }' | sort -u)
[ -z "$cont" ] || [ "$cont" = "$cols" ] || fail "make help continuation lines start at column $cont, not $cols"

dry=$(GAPSTREAM_SETUP_SKIP=1 make --no-print-directory -n demo)
echo_at=$(grep -n 'echo "make demo: building' <<<"$dry" | head -1 | cut -d: -f1)
cargo_at=$(grep -n 'cargo run' <<<"$dry" | head -1 | cut -d: -f1)
[ -n "$echo_at" ] && [ -n "$cargo_at" ] && [ "$echo_at" -lt "$cargo_at" ] \
  || fail "make demo does not announce the build before cargo runs:\n$dry"
grep -q 'scripts/setup.sh run' <<<"$dry" || fail "make demo does not run the set-up step in run mode"
grep -q 'scripts/setup.sh test' <<<"$(GAPSTREAM_SETUP_SKIP=1 make --no-print-directory -n test)" \
  || fail "make test does not run the set-up step in test mode"

run_needs=$(scripts/setup.sh --list run)
test_needs=$(scripts/setup.sh --list test)
for b in chromium firefox-esr; do
  grep -q ":$b\$" <<<"$run_needs" && fail "make demo's set-up would install $b"
  grep -q ":$b\$" <<<"$test_needs" || fail "make test's set-up does not install $b"
done
grep -q 'rustup component add' scripts/setup.sh || fail "setup.sh does not install rustfmt/clippy"

grep -q 'QUICK=1: 64 points, *$\|QUICK=1: 64 points,' <<<"$help" || fail "make help's QUICK=1 line changed"
grep -q '~15 s' <<<"$help" || fail "make help does not give the QUICK=1 time"
grep -q 'QUICK=1` runs a subset (64 points, single runs, ~15 s)' README.md || fail "README's QUICK=1 time differs from make help"
grep -q 'QUICK=1 .*64 points, single runs, ~15 seconds' docs/bench.md || fail "docs/bench.md's QUICK=1 time differs from make help"
# Test output without colour escapes or cargo status lines (trybuild starts cargo and colours its
# own report): the asm_macros tests as make runs them.
out=$(make --no-print-directory -s print-test-env 2>&1)
for kv in CARGO_TERM_COLOR=never CARGO_TERM_QUIET=true NO_COLOR=1; do
  grep -qx "$kv" <<<"$out" || fail "make does not export $kv for cargo (got: $out)"
done

echo "make-check: ok (help: $(wc -l <<<"$names") targets, one column; demo announces its build; demo installs no browser)"
