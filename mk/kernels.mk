# Cipher kernels (gap_rust_cipher_s, asm_macros).
## make pulp-disasm   build the PULP ChaCha20 kernel for riscv32imc, check its disassembly for the PULP words
.PHONY: pulp-disasm
TEST_TARGETS += pulp-disasm
pulp-disasm:
	$(CARGO) xtask pulp-disasm
