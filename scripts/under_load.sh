#!/usr/bin/env bash
# Runs timing-dependent test binaries with every core kept busy by a CPU hog this script starts
# (one busy shell loop per core, at the same priority as the tests) and stops again.
#
#   scripts/under_load.sh NAME RUNS -- COMMAND...
#
# runs COMMAND RUNS times under the hog, one line per run, then `NAME under load: K/RUNS passed`;
# exits non-zero unless every run passed. The output of a failed run is kept in
# target/under-load/NAME-RUN.log (and its last lines are printed).
set -u
name=$1 runs=$2
shift 2
[ "${1:-}" = "--" ] && shift
out=target/under-load
mkdir -p "$out"

cores=$(nproc)
hogs=()
stop_hogs() {
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT TERM
for _ in $(seq "$cores"); do
    bash -c 'while :; do :; done' &
    hogs+=("$!")
done
echo "$name under load: $cores CPU hog(s) started (pids ${hogs[*]}), $runs runs of: $*"

passed=0
for k in $(seq "$runs"); do
    log="$out/$name-$k.log"
    t0=$(date +%s%N)
    if "$@" >"$log" 2>&1; then
        ok=passed
        passed=$((passed + 1))
        rm -f "$log"
    else
        ok="FAILED (log: $log)"
    fi
    t1=$(date +%s%N)
    ds=$(((t1 - t0) / 100000000))
    printf '%s under load: run %2d/%d %s in %d.%d s (load average %s)\n' "$name" "$k" "$runs" "$ok" \
        $((ds / 10)) $((ds % 10)) "$(cut -d' ' -f1-3 /proc/loadavg)"
    if [ "$ok" != passed ]; then
        grep -E 'panicked|assert|FAILED|failures:' "$log" | head -8 | sed 's/^/    /'
    fi
done
stop_hogs
echo "$name under load: $passed/$runs passed"
[ "$passed" -eq "$runs" ]
