# gapstream — top-level entry points.
#   make test    everything CI runs: host tests, rv32 builds of the no_std crates, QEMU runs
#   make demo    the simulated drone -> ESP32 bridge -> receiver stream, viewer on localhost
# Each starts with the one idempotent set-up step (scripts/setup.sh).
#
# Parts of the project add their own targets in mk/*.mk:
#   TEST_TARGETS += ...   steps of `make test` (run in order after the host tests)
#   RV32_CRATES  += ...   no_std crates that must build for riscv32imc-unknown-none-elf
SHELL := /bin/bash
.DEFAULT_GOAL := help
export PATH := $(HOME)/.cargo/bin:$(PATH)

CARGO       ?= cargo
RV32_TARGET := riscv32imc-unknown-none-elf
TEST_TARGETS :=
RV32_CRATES  := gap_rust_cipher_s gap_rust_sdk gap_rust_wrapper gapstream_protocol

include $(sort $(wildcard mk/*.mk))

.PHONY: help setup test test-host test-rv32-build demo
help:
	@echo "make test    # set up, then run every test CI runs"
	@echo "make demo    # set up, then run the simulated encrypted stream with the live viewer"
	@grep -h '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

setup:
	@scripts/setup.sh

test: setup
	@$(MAKE) --no-print-directory test-host test-rv32-build $(TEST_TARGETS)
	@echo "make test: all passed"

test-host:
	$(CARGO) test --locked --quiet

test-rv32-build:
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) $(addprefix -p ,$(RV32_CRATES))
