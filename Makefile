# gapstream — top-level entry points.
#   make test    everything CI runs: host tests, rv32 builds of the no_std crates, QEMU runs
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

test: SETUP_FOR = test
test: setup
	@$(MAKE) --no-print-directory test-host test-rv32-build $(TEST_TARGETS)
	@echo "make test: all passed"

## make make-check    make help lists each target once in one column, make demo says it builds
##                    before compiling, set-up modes (the demo installs no browsers)
.PHONY: make-check
TEST_TARGETS += make-check
make-check:
	@scripts/check_make.sh
# What cargo sees from make (for make-check).
.PHONY: print-test-env
print-test-env:
	@env | grep -E '^(CARGO_TERM_COLOR|CARGO_TERM_QUIET|NO_COLOR)=' | sort

test-host:
	$(CARGO) test --locked --quiet

test-rv32-build:
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) $(addprefix -p ,$(RV32_CRATES))
