# Fuzzing (docs/fuzzing.md): cargo-fuzz targets in fuzz/ (own workspace, nightly + libFuzzer), bodies
# in fuzz_targets/ (their seed corpus run on stable is part of `make test`, through test-host).
## make fuzz          every fuzz target for FUZZ_SECONDS (default 60) each; prints execs and crashes per
##                    target, fails on a crash (installs nightly + cargo-fuzz once: scripts/fuzz-setup.sh)
## make fuzz-corpus   rewrite the committed seed corpus fuzz/corpus/*/seed-* from the current protocol
## make fuzz-lock-check  fails when fuzz/Cargo.lock is stale (part of make test; stable cargo, no build)
.PHONY: fuzz fuzz-setup fuzz-corpus fuzz-lock-check
FUZZ_SECONDS ?= 60

fuzz: SETUP_FOR = run
fuzz: setup fuzz-setup
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

fuzz-setup:
	@scripts/fuzz-setup.sh

fuzz-corpus:
	$(CARGO) run --locked --quiet -p gapstream_fuzz_targets --bin fuzz-corpus -- fuzz/corpus

# The fuzz workspace (fuzz/, outside the main workspace) is built from its committed lock file: a
# path dependency that gains a crate must update fuzz/Cargo.lock in the same commit.
TEST_TARGETS += fuzz-lock-check
fuzz-lock-check:
	@$(CARGO) metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null \
	  || { echo "fuzz-lock-check: fuzz/Cargo.lock is stale: cargo update --workspace --manifest-path fuzz/Cargo.toml, then commit it" >&2; exit 1; }
	@echo "fuzz-lock-check: fuzz/Cargo.lock is current"
