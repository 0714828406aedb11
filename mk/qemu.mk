# rv32 programs on QEMU (rv32_qemu + xtask).
## make qemu-test     run the rv32 test programs on qemu-system-riscv32
## make bench-qemu    instruction counts per kernel (QEMU -icount), writes target/bench/qemu.csv
.PHONY: qemu-test bench-qemu
TEST_TARGETS += qemu-test
qemu-test:
	$(CARGO) xtask qemu-test
bench-qemu: setup
	$(CARGO) xtask bench-qemu
