# Cluster engine: gap_rust_sdk (pmsis / bare / host backends), gap_rust_sdk_w (C shims),
# gap_rust_wrapper (the engine), C entry points of gap_rust_cipher_s.
## make engine-test   cluster engine host tests with backend features + C header sync check
## make capi-test     C entry points as a staticlib (host backend) + the C test program tests/capi_test.c
## make engine-rv32   riscv32imc builds of the pmsis and bare backends and of the C entry points
.PHONY: engine-test capi-test engine-rv32
TEST_TARGETS += engine-test capi-test engine-rv32

CAPI_CC ?= cc

engine-test:
	$(CARGO) test --locked --quiet --no-fail-fast -p gap_rust_sdk --features host,fault-injection
	$(CARGO) test --locked --quiet --no-fail-fast -p gap_rust_cipher_s --features host --test capi_header --test capi_lengths

capi-test:
	$(CARGO) rustc --locked --quiet -p gap_rust_cipher_s --features host --crate-type staticlib
	$(CAPI_CC) -std=c11 -O1 -Wall -Wextra -Werror -I gap_rust_cipher_s/include \
		gap_rust_cipher_s/tests/capi_test.c target/debug/libgap_rust_cipher_s.a \
		-lpthread -ldl -lm -o target/debug/capi_test
	target/debug/capi_test

# Without GAP_SDK_HOME the pmsis build compile-checks the Rust side only (gap_rust_sdk_w says so).
engine-rv32:
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gap_rust_sdk --features pmsis
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gap_rust_cipher_s --features pmsis
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gap_rust_sdk --features bare
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gap_rust_cipher_s --features bare
