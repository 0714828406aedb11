#!/usr/bin/env bash
# Checks what the Makefiles promise a new user (part of `make test`, mk/lint.mk):
#  - `make help` lists every target once, each description starting in the same column;
#  - `make demo` prints a line before cargo compiles (the first release build takes minutes);
#  - the set-up step's modes: `make demo` (run) installs no browser, `make test` does, and
#    `make test` gets the rustfmt/clippy components its lint step needs;
#  - make help says what gvsoc-bench's QUICK=1 runs, and README.md and docs/bench.md agree on it;
#  - `make test` runs every step even after one fails and ends with the table of steps and a
#    non-zero exit: the real Makefile and step runner in a sandbox folder, with dummy steps (one
#    failing on purpose) in place of mk/*.mk and `true` in place of cargo.
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

# make gvsoc-bench's QUICK=1: make help says what it is (a subset: since the JPEG sweep joined the
# bench, help gives no time of its own), README and docs/bench.md give the same figures.
grep -q 'QUICK=1: a subset' <<<"$help" || fail "make help does not say what gvsoc-bench's QUICK=1 runs"
grep -q 'QUICK=1` runs a subset (64 points, single runs, ~15 s)' README.md || fail "README's QUICK=1 figures differ from docs/bench.md's"
grep -q 'QUICK=1 .*64 points, single runs, ~15 seconds' docs/bench.md || fail "docs/bench.md's QUICK=1 figures differ from README's"
# Test output without colour escapes or cargo status lines (trybuild starts cargo and colours its
# own report): the asm_macros tests as make runs them.
out=$(make --no-print-directory -s print-test-env 2>&1)
for kv in CARGO_TERM_COLOR=never CARGO_TERM_QUIET=true NO_COLOR=1; do
  grep -qx "$kv" <<<"$out" || fail "make does not export $kv for cargo (got: $out)"
done

# make test's step runner, sandboxed: the real Makefile and scripts, dummy steps.
sandbox=$(mktemp -d)
trap 'rm -rf "$sandbox"' EXIT
mkdir -p "$sandbox/scripts" "$sandbox/mk"
cp Makefile "$sandbox/"
cp scripts/test_steps.sh scripts/setup.sh scripts/run_tests.py "$sandbox/scripts/"
cat > "$sandbox/mk/dummy.mk" <<'MK'
TEST_TARGETS += dummy-first dummy-fails dummy-after
dummy-first:
	@touch ran-first
dummy-fails:
	@echo "dummy-fails: failing on purpose"; exit 3
dummy-after:
	@sleep 1; touch ran-after
MK
set +e
table=$(cd "$sandbox" && env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS GAPSTREAM_SETUP_SKIP=1 \
  make --no-print-directory test CARGO=true 2>&1)
rc=$?
set -e
[ "$rc" != 0 ] || fail "make test with a failing step exited 0:\n$table"
[ -e "$sandbox/ran-first" ] && [ -e "$sandbox/ran-after" ] \
  || fail "make test did not run every step after a failing one:\n$table"
grep -q 'dummy-fails: failing on purpose' "$sandbox/target/make-test/dummy-fails.log" \
  || fail "make test did not keep the failing step's log"
for row in 'test-host +passed' 'test-rv32-build +passed' 'dummy-first +passed' \
           'dummy-fails +FAILED .*(log: target/make-test/dummy-fails.log)' 'dummy-after +passed +0:0[1-9] ' \
           'total '; do
  grep -Eq "^  $row" <<<"$table" || fail "make test's table has no row '$row':\n$table"
done
grep -q '^make test: 1 of 5 steps FAILED (dummy-fails) in ' <<<"$table" \
  || fail "make test's last line does not name the failed step:\n$table"

echo "make-check: ok (help: $(wc -l <<<"$names") targets, one column; demo announces its build; demo installs no browser; make test runs every step after a failing one, table and exit status)"
