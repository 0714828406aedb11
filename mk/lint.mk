# Lint: formatting and clippy with warnings as errors, a step of `make test` (rustfmt and clippy
# come from scripts/setup.sh, test mode).
## make lint          cargo fmt --check, then clippy with warnings as errors on every workspace member
.PHONY: lint
TEST_TARGETS += lint

# Clippy runs on every workspace member: on the host one invocation over every host crate (every
# target: libs, bins, tests, benches), the default members and gapstream_py, the Python package's
# extension, tested from Python (one feature resolution: the dependencies are checked once); the
# bare-metal program crates rv32_qemu and gvsoc build only for riscv32imc, so clippy checks them for
# that target (their binaries, with the features make test builds them with).
# Every command runs even when an earlier one fails (a formatting slip must not hide clippy's
# findings); the step fails if any did.
lint:
	@status=0; \
	for cmd in "$(CARGO) fmt --all --check" \
	  "$(CARGO) clippy --locked --quiet --all-targets --workspace --exclude rv32_qemu --exclude gvsoc -- -D warnings" \
	  "$(CARGO) clippy --locked --quiet --target $(RV32_TARGET) --profile rv32 -p rv32_qemu --bins -- -D warnings" \
	  "$(CARGO) clippy --locked --quiet --target $(RV32_TARGET) --profile rv32 -p gvsoc --features pulp --bins -- -D warnings"; do \
	  echo "$$cmd"; $$cmd || { echo "lint: FAILED: $$cmd"; status=1; }; \
	done; exit $$status
