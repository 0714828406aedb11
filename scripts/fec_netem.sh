#!/usr/bin/env bash
# One run of the UDP stream with FEC through the kernel: a network namespace made here, a veth
# pair, loss on the bridge's side of it (tc netem; where the kernel has no netem, an nftables rule
# dropping at random, `numgen random`), the bridge and the simulated drone in the main namespace,
# the receiver in the new one. Passes when the receiver lost at most 1 % of the frames and rebuilt
# lost packets from parity. Skipped, with one line saying why, where namespaces cannot be made.
#   scripts/fec_netem.sh [BIN_DIR]        (BIN_DIR: where gapstream and esp32-bridge are; default target/debug)
set -u
BIN="${1:-target/debug}"
LOSS="${FEC_NETEM_LOSS:-5}"
SECS="${FEC_NETEM_SECONDS:-15}"
ns="gsfec$$"
a="gsfa$$"; b="gsfb$$"
net="10.$(( ($$ >> 8) % 200 + 20 )).$(( $$ % 250 ))"
tmp="$(mktemp -d)"
pids=()
nft_table=""

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  [ -n "$nft_table" ] && nft delete table inet "$nft_table" 2>/dev/null
  ip link del "$a" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

skip() { echo "fec-netem: skipped: $*"; exit 0; }

command -v ip >/dev/null || skip "no ip command (iproute2)"
err="$(ip netns add "$ns" 2>&1)" || skip "cannot create a network namespace here (${err})"
ip link add "$a" type veth peer name "$b" 2>/dev/null || skip "cannot create a veth pair here"
ip link set "$b" netns "$ns"
ip addr add "$net.1/30" dev "$a"
ip link set "$a" up
ip -n "$ns" addr add "$net.2/30" dev "$b"
ip -n "$ns" link set "$b" up
ip -n "$ns" link set lo up

# Loss on what the bridge sends into the namespace.
how=""
if tc qdisc add dev "$a" root netem loss "${LOSS}%" 2>/dev/null; then
  how="tc netem loss ${LOSS}% on the bridge's side of the veth pair"
elif command -v nft >/dev/null; then
  nft_table="gsfec$$"
  if nft add table inet "$nft_table" 2>/dev/null &&
     nft add chain inet "$nft_table" out '{ type filter hook output priority 0; }' 2>/dev/null &&
     nft add rule inet "$nft_table" out oifname "$a" udp sport 5000 numgen random mod 100 lt "$LOSS" drop 2>/dev/null; then
    how="nftables numgen random drop of ${LOSS}% of the bridge's UDP datagrams into the veth pair (this kernel has no netem)"
  else
    skip "the kernel has neither the netem qdisc nor nftables numgen"
  fi
else
  skip "the kernel has no netem qdisc and nft is not installed"
fi
echo "fec-netem: namespace $ns, veth $a ($net.1) <-> $b ($net.2); $how"

"$BIN/gapstream" pair --dir "$tmp/keys" >/dev/null || exit 1
spi="127.0.0.1:$(( 20000 + $$ % 20000 ))"
"$BIN/esp32-bridge" --spi-listen "$spi" --tcp "$net.1:5000" --udp "$net.1:5000" --wifi-mbps 20 \
  >"$tmp/bridge.log" 2>&1 &
pids+=($!)
sleep 0.5
"$BIN/gapstream" node --bridge "$spi" --keys "$tmp/keys/drone.key" --fps 10 --spi-hz 0 \
  --duration $((SECS + 10)) >"$tmp/node.log" 2>&1 &
pids+=($!)
ip netns exec "$ns" "$BIN/gapstream" view --connect "$net.1:5000" --keys "$tmp/keys/receiver.key" \
  --transport udp --fec --viewer none --duration "$SECS" >"$tmp/view.log" 2>&1
rc=$?
summary="$(grep -E '^gapstream: [0-9]+ frames in' "$tmp/view.log" | tail -1)"
if [ "$rc" != 0 ] || [ -z "$summary" ]; then
  echo "fec-netem: FAILED: the receiver exited with status $rc"
  tail -5 "$tmp/view.log" "$tmp/bridge.log" "$tmp/node.log"
  exit 1
fi
echo "$summary"
frames="$(sed -E 's/^gapstream: ([0-9]+) frames.*/\1/' <<<"$summary")"
lost="$(sed -E 's/.*; lost ([0-9]+),.*/\1/' <<<"$summary")"
rebuilt="$(sed -nE 's/.*FEC: ([0-9]+) packets rebuilt.*/\1/p' <<<"$summary")"
if [ "${frames:-0}" -lt 50 ] || [ -z "$rebuilt" ] || [ "$rebuilt" -eq 0 ] || [ $((lost * 100)) -gt "$frames" ]; then
  echo "fec-netem: FAILED: $frames frames, $lost lost, ${rebuilt:-no} packets rebuilt (want >= 50 frames, <= 1 % lost, packets rebuilt)"
  exit 1
fi
echo "fec-netem: ok ($frames frames through the kernel with ${LOSS} % loss: $lost lost, $rebuilt packets rebuilt from parity)"
