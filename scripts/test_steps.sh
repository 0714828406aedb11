#!/usr/bin/env bash
# Runs the steps of `make test` one after the other, each as `make STEP`, and keeps going when one
# fails: every step runs, and the run ends with a table of the steps (passed / FAILED, wall time,
# CPU time of the step's processes) and exits non-zero if any step failed.
#   scripts/test_steps.sh STEP...        (the Makefile's `test` target passes its steps)
# Each step's output is shown as it runs and also kept in $TEST_LOG_DIR/STEP.log (default
# target/make-test), so a failure far up a long log is easy to find again.
set -uo pipefail

make_cmd=${MAKE:-make}
# `make -n test`: make runs this script anyway (its line names $(MAKE)); then only show what each
# step would run, with no logs and no table.
flags=${MAKEFLAGS:-}; flags=${flags%% *}
if [[ "$flags" != -* && "$flags" == *n* ]]; then
  for step in "$@"; do "$make_cmd" --no-print-directory "$step"; done
  exit 0
fi
log_dir=${TEST_LOG_DIR:-target/make-test}
mkdir -p "$log_dir" || { echo "make test: cannot create $log_dir" >&2; exit 2; }
[ "$#" -gt 0 ] || { echo "make test: no steps given" >&2; exit 2; }

# Children's user + system CPU so far, in centiseconds, into $cpu_cs: bash's `times` (second line),
# run in this shell (in a $(...) subshell it would see the subshell's children only).
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
child_cpu_cs() {
  local line u s
  times > "$times_file"
  line=$(sed -n 2p "$times_file")
  u=${line%% *}; s=${line##* }
  cpu_cs=$(( $(to_cs "$u") + $(to_cs "$s") ))
}
# "1m2.345s" -> centiseconds.
to_cs() {
  local v=${1%s} m sec whole frac
  m=${v%%m*}; sec=${v#*m}
  whole=${sec%%.*}; frac=${sec#*.}; frac=${frac:0:2}
  [ "$frac" = "$sec" ] && frac=00
  echo $(( 10#$m * 6000 + 10#$whole * 100 + 10#${frac:-0} ))
}
# seconds -> "M:SS" (or "H:MM:SS").
clock() {
  local t=$1
  if [ "$t" -ge 3600 ]; then printf '%d:%02d:%02d' $((t / 3600)) $((t % 3600 / 60)) $((t % 60))
  else printf '%d:%02d' $((t / 60)) $((t % 60)); fi
}

trap 'echo; echo "make test: interrupted"; exit 130' INT TERM

names=() results=() walls=() cpus=()
failed=()
start_all=$SECONDS
for step in "$@"; do
  echo "==== make test: step $step"
  t0=$SECONDS; child_cpu_cs; c0=$cpu_cs
  "$make_cmd" --no-print-directory "$step" 2>&1 | tee "$log_dir/$step.log"
  rc=${PIPESTATUS[0]}
  child_cpu_cs; c1=$cpu_cs
  names+=("$step"); walls+=($((SECONDS - t0))); cpus+=($(((c1 - c0) / 100)))
  if [ "$rc" = 0 ]; then results+=(passed)
  else results+=(FAILED); failed+=("$step"); fi
done
total=$((SECONDS - start_all))

cpu_total=0
for c in "${cpus[@]}"; do cpu_total=$((cpu_total + c)); done
echo
echo "make test: summary (time: wall clock; cpu: user + system of the step's processes)"
# A compiler cache's server (sccache) runs the compilers itself, outside this process tree: their
# CPU time is then missing from the cpu column, which says so.
if [ -n "${RUSTC_WRAPPER:-}" ]; then
  echo "  (RUSTC_WRAPPER=${RUSTC_WRAPPER##*/}: compiles its server ran are not in the cpu column)"
fi
printf '  %-22s %-7s %8s %8s\n' step result time cpu
for i in "${!names[@]}"; do
  printf '  %-22s %-7s %8s %8s' "${names[$i]}" "${results[$i]}" "$(clock "${walls[$i]}")" "$(clock "${cpus[$i]}")"
  [ "${results[$i]}" = FAILED ] && printf '   (log: %s)' "$log_dir/${names[$i]}.log"
  echo
done
printf '  %-22s %-7s %8s %8s\n' total "" "$(clock "$total")" "$(clock "$cpu_total")"
if [ "${#failed[@]}" -eq 0 ]; then
  echo "make test: all ${#names[@]} steps passed in $(clock "$total")"
  exit 0
fi
echo "make test: ${#failed[@]} of ${#names[@]} steps FAILED (${failed[*]}) in $(clock "$total")"
exit 1
