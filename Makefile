# gapstream — top-level entry points.
#   make test    everything CI runs: host tests, rv32 builds of the no_std crates, QEMU runs; every
#                step runs even when one fails, and a table of the steps (passed / FAILED, time)
#                ends it (scripts/test_steps.sh); the exit status is non-zero if any step failed
#   make demo    the simulated drone -> ESP32 bridge -> receiver stream, viewer on localhost
# Each starts with the one idempotent set-up step (scripts/setup.sh; SETUP_FOR says for what:
# `make test` installs the test-only tools such as the viewer tests' browsers, `make demo` not).
#
# Parts of the project add their own targets in mk/*.mk:
#   TEST_TARGETS += ...   steps of `make test` (run in order after the host tests)
#   RV32_CRATES  += ...   no_std crates that must build for riscv32imc-unknown-none-elf
#   ## make NAME  text    a line of `make help` (more `##` lines continue it)
SHELL := /bin/bash
.DEFAULT_GOAL := help
export PATH := $(HOME)/.cargo/bin:$(PATH)
# Plain, quiet cargo output in `make test` logs: no colour escapes, no `Compiling` lines, also from
# the cargo runs that trybuild (asm_macros' compile-fail tests) starts itself and from its own
# report (termcolor: NO_COLOR). Override on the command line, e.g. CARGO_TERM_COLOR=always.
export CARGO_TERM_COLOR ?= never
export CARGO_TERM_QUIET ?= true
export NO_COLOR ?= 1

CARGO       ?= cargo
# The host binaries (gapstream, esp32-bridge) for the steps that run them: `cargo test` builds every
# bin of the default members into target/debug, so after test-host this is a no-op, where `cargo
# build -p gapstream` would compile the dependencies again with another feature set.
HOST_BINS = $(CARGO) test --locked --quiet --no-run
RV32_TARGET := riscv32imc-unknown-none-elf
TEST_TARGETS :=
RV32_CRATES  := gap_rust_cipher_s gap_rust_sdk gap_rust_wrapper gapstream_protocol gapstream_jpeg gapstream_jpegls

include $(sort $(wildcard mk/*.mk))

SETUP_FOR ?= all

## make test          set up, then run every test CI runs
## make setup         only the set-up step (SETUP_FOR=run: without the test-only tools)
.PHONY: help setup test test-host test-rv32-build demo
# Every `## make NAME  text` line of the Makefiles, one per target, text aligned in one column.
help:
	@awk '/^## make / { n = $$3; sub(/^## make [^ ]+ */, ""); printf "  make %-19s %s\n", n, $$0; next } \
	     /^##  +/ { sub(/^## +/, ""); printf "  %-24s %s\n", "", $$0 }' $(MAKEFILE_LIST)

setup:
	@scripts/setup.sh $(SETUP_FOR)

# The steps of `make test`, in order. Each runs as `make STEP`; scripts/test_steps.sh runs them all,
# failed or not, and prints the table. TEST_STEPS="a b" on the command line runs only those.
TEST_STEPS ?= test-host test-rv32-build $(TEST_TARGETS)
test: SETUP_FOR = test
test: setup
	@MAKE="$(MAKE)" scripts/test_steps.sh $(TEST_STEPS)

# `cargo test`, with its test binaries run three at a time and four test threads each
# (scripts/run_tests.py): the stream tests mostly wait on paced frames and sockets, and cargo
# runs the binaries one after the other (a fresh clone on a quiet 2-core machine: 106 s instead of
# 163 s). They hold on a machine busier than this (make loopback-under-load). Every binary runs
# even when another failed; TEST_JOBS=1 RUST_TEST_THREADS=2 runs them as cargo test would.
test-host:
	RUST_TEST_THREADS=$${RUST_TEST_THREADS:-4} TEST_JOBS=$${TEST_JOBS:-3} CARGO="$(CARGO)" scripts/run_tests.py --locked --no-fail-fast

test-rv32-build:
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) $(addprefix -p ,$(RV32_CRATES))
