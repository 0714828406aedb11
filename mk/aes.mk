# AES-128-CTR kernels (gap_rust_cipher_s/src/aes). The QEMU checks (aes_vectors) run in qemu-test.
## make aes-asm-check   the checked-in assembly kernels match their generator (aes/asm/gen.py)
## make bench-aes       instructions/byte of every AES-128-CTR variant on QEMU
.PHONY: aes-asm-check bench-aes
TEST_TARGETS += aes-asm-check
aes-asm-check:
	python3 gap_rust_cipher_s/src/aes/asm/gen.py --check
bench-aes: setup
	$(CARGO) xtask bench-qemu aes
