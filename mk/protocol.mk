# gapstream_protocol: the wire protocol (spec: docs/protocol.md). Its host tests run in `test-host`
# (they include the docs/protocol.md vectors), its rv32 build with alloc in `test-rv32-build`
# (RV32_CRATES), its QEMU program protocol_handshake in `qemu-test`.
## make protocol-test    host tests of gapstream_protocol only
## make bench-protocol   instructions for the drone's handshake per mode and per-frame sealing (QEMU; target/bench/qemu-bench_protocol.csv)
.PHONY: protocol-test protocol-nostd bench-protocol
TEST_TARGETS += protocol-nostd
# The allocation-free part (CPX codec, frame sealing, replay window) must build without `alloc`.
protocol-nostd:
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gapstream_protocol --no-default-features
protocol-test:
	$(CARGO) test --locked --no-fail-fast -p gapstream_protocol
bench-protocol: setup
	$(CARGO) xtask bench-qemu bench_protocol
