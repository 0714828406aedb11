# Cluster engine: gap_rust_sdk (pmsis / bare / host backends), gap_rust_sdk_w (C shims),
# gap_rust_wrapper (the engine), C entry points of gap_rust_cipher_s.
## make engine-test   cluster engine host tests with backend features + C header sync check
## make capi-test     C entry points as a staticlib (host backend) + the C test program tests/capi_test.c
## make engine-rv32   riscv32imc builds of the pmsis and bare backends and of the C entry points
.PHONY: engine-test capi-test engine-rv32
TEST_TARGETS += engine-test capi-test engine-rv32

CAPI_CC ?= cc

# The engine's fault-injection tests (a skipped DMA wait must fail the check) and the C header-sync
# and length tests, by name, with the features the host tests build them with (`cargo test`
# unifies them across the default members; named here so that the step says what it needs). The
# default members selected (no -p) and every lib and test target: the test binaries of test-host
# are reused, not compiled again with another feature set. The step fails unless all of them ran.
ENGINE_FEATURES := --features gap_rust_sdk/host,gap_rust_sdk/fault-injection,gap_rust_cipher_s/host
ENGINE_TESTS := engine::tests::fault_injection_skipped_wait_fails_the_gcm_tag \
  aead::tests::fault_injection_skipped_wait_fails_the_tag fault_injection_skipped_wait_is_caught \
  constants_match prototypes_match finding6_capi_refuses_lengths_above_isize_max
engine-test:
	@echo "$(CARGO) test --locked --quiet --no-fail-fast $(ENGINE_FEATURES) --lib --tests -- --exact <$(words $(ENGINE_TESTS)) tests>"
	@out=$$($(CARGO) test --locked --quiet --no-fail-fast $(ENGINE_FEATURES) --lib --tests -- --exact $(ENGINE_TESTS) 2>&1); \
	status=$$?; echo "$$out" | grep -v -e '^running 0 tests$$' -e '^$$' -e 'test result: ok. 0 passed'; \
	ran=$$(echo "$$out" | awk '/^test result:/ { n += $$4 } END { print n + 0 }'); \
	echo "engine-test: $$ran of $(words $(ENGINE_TESTS)) tests passed"; \
	[ "$$status" = 0 ] && [ "$$ran" = $(words $(ENGINE_TESTS)) ]

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
