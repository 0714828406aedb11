# Forward error correction over UDP (gapstream_fec; the bridge side in esp32_bridge::fec).
RV32_CRATES += gapstream_fec
## make fec-netem     the UDP stream with FEC through the kernel: a network namespace and veth pair made
##                    for the run, 5 % loss by tc netem (nftables where the kernel has no netem);
##                    skipped with a reason where namespaces cannot be made
.PHONY: fec-netem
TEST_TARGETS += fec-netem
fec-netem:
	$(HOST_BINS)
	@scripts/fec_netem.sh $(or $(CARGO_TARGET_DIR),target)/debug
