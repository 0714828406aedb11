#!/usr/bin/env bash
# The receiver's CPU time with the live viewer open in headless Chromium, for a JPEG stream sent to
# the page as the verified JPEG file (pass-through, the default) and as the receiver's decoded
# samples (`--viewer-pixels`), one run after the other on the same machine: prints each run's CPU
# seconds per thread group of the `gapstream demo` process (read from /proc/PID/task/*/stat), the
# browser's (all its processes) and the ratios. Timing on a shared machine is noisy; compare the two rows of one run of this script.
#   scripts/viewer_cpu.sh                       20 s per mode, demo defaults (30 fps, quality 75)
#   SECS=30 DEMO_ARGS="--fps 60 --wifi-mbps 30" scripts/viewer_cpu.sh
# Thread groups: `receiver` is the receiving thread (verification, AEAD, JPEG decoding, the bus),
# `viewer` the viewer's output thread and its server (building and sending the WebSocket messages),
# `drone` the simulated drone's coder, `bridge` the ESP32 stand-in.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${GAPSTREAM:-target/release/gapstream}
secs=${SECS:-20}
out=${OUT:-target/viewer-cpu}
[ -x "$bin" ] || { echo "viewer_cpu: $bin missing (cargo build --release -p gapstream)" >&2; exit 1; }
command -v chromium >/dev/null || { echo "viewer_cpu: Debian's chromium is needed (scripts/setup.sh)" >&2; exit 1; }
mkdir -p "$out"
tck=$(getconf CLK_TCK)

# CPU ticks per thread group of process $1: "receiver viewer drone bridge total".
ticks() {
  local r=0 v=0 d=0 b=0 t=0 comm n
  for task in /proc/"$1"/task/*; do
    comm=$(cat "$task/comm" 2>/dev/null) || continue
    # utime + stime: fields 14 and 15 after the command name (which may hold spaces).
    n=$(sed 's/^.*) //' "$task/stat" 2>/dev/null | awk '{print $12 + $13}') || continue
    [ -n "$n" ] || continue
    case "$comm" in
      gapstream-viewe* | out:viewer) v=$((v + n)) ;;
      drone | cluster-core-*) d=$((d + n)) ;;
      esp32-bridge*) b=$((b + n)) ;;
      *) r=$((r + n)) ;;
    esac
    t=$((t + n))
  done
  echo "$r $v $d $b $t"
}

# CPU ticks of process $1 and all its descendants (the browser's processes).
tree_ticks() {
  local all
  all=$(ps -e -o pid=,ppid= | awk -v root="$1" '
    { parent[$1] = $2 }
    END { for (p in parent) { q = p; while (q != "" && q != 0 && q != root) q = parent[q]; if (q == root) print p } }')
  for p in $all; do sed 's/^.*) //' /proc/"$p"/stat 2>/dev/null | awk '{print $12 + $13}'; done |
    awk '{ s += $1 } END { print s + 0 }'
}

run() { # $1: label, then demo options
  local label=$1; shift
  local log="$out/$label.log" url pid last frames
  # shellcheck disable=SC2086
  "$bin" demo --codec jpeg --viewer 127.0.0.1:0 --duration "$((secs + 8))" ${DEMO_ARGS:-} "$@" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    url=$(sed -n 's/^  viewer   \(http[^ ]*\).*/\1/p' "$log")
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { echo "viewer_cpu: the demo printed no viewer address ($log)" >&2; kill "$pid"; exit 1; }
  rm -rf "$out/profile-$label"
  chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$out/profile-$label" \
    --remote-debugging-port=0 "$url" >"$out/chromium-$label.log" 2>&1 &
  local browser=$!
  sleep 3 # the page loads and its WebSocket opens
  local start
  start="$(ticks "$pid") $(tree_ticks "$browser")"
  local port=${url##*:}; port=${port%/}
  if ! ss -tn state established "( sport = :$port )" | grep -q 127.0.0.1; then
    echo "viewer_cpu: no page is connected to $url" >&2; kill "$browser" "$pid"; exit 1
  fi
  sleep "$secs"
  last="$(ticks "$pid") $(tree_ticks "$browser")"
  kill "$browser" 2>/dev/null || true
  wait "$pid" || true
  frames=$(sed -n 's/^gapstream: \([0-9]*\) frames in .*/\1/p' "$log")
  read -r r0 v0 d0 b0 t0 w0 <<<"$start"
  read -r r1 v1 d1 b1 t1 w1 <<<"$last"
  echo "$label $((r1 - r0)) $((v1 - v0)) $((d1 - d0)) $((b1 - b0)) $((t1 - t0)) ${frames:-0} $((w1 - w0))"
}

a=$(run passthrough)
b=$(run pixels --viewer-pixels)
echo "viewer_cpu: gapstream demo --codec jpeg ${DEMO_ARGS:-}, headless Chromium on the viewer, ${secs} s measured per mode"
printf '%s\n%s\n' "$a" "$b" | awk -v tck="$tck" '
  { l[NR] = $1; for (i = 2; i <= 8; i++) v[NR, i] = $i }
  END {
    printf "%-12s %10s %10s %10s %10s %10s %8s %10s\n", "mode", "receiver_s", "viewer_s", "drone_s", "bridge_s", "process_s", "frames", "browser_s"
    for (n = 1; n <= 2; n++)
      printf "%-12s %10.2f %10.2f %10.2f %10.2f %10.2f %8d %10.2f\n", l[n], v[n,2]/tck, v[n,3]/tck, v[n,4]/tck, v[n,5]/tck, v[n,6]/tck, v[n,7], v[n,8]/tck
    rv = v[2,2] + v[2,3]; vv = v[2,3]
    bw = v[2,8]
    printf "viewer_cpu: pass-through / decoded samples, CPU of the receiver + viewer threads: %.3f; viewer threads alone: %.3f; the browser: %.3f\n",
      (v[1,2] + v[1,3]) / (rv ? rv : 1), v[1,3] / (vv ? vv : 1), v[1,8] / (bw ? bw : 1)
  }'
