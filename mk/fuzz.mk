# Fuzzing (docs/fuzzing.md): cargo-fuzz targets in fuzz/ (own workspace, nightly + libFuzzer), bodies
# in fuzz_targets/ (their seed corpus run on stable is part of `make test`, through test-host).
## make fuzz          every fuzz target for FUZZ_SECONDS (default 60) each; prints execs and crashes per
##                    target, fails on a crash (installs nightly + cargo-fuzz once: scripts/fuzz-setup.sh)
## make fuzz-corpus   rewrite the committed seed corpus fuzz/corpus/*/seed-* from the current protocol
.PHONY: fuzz fuzz-setup fuzz-corpus
FUZZ_SECONDS ?= 60

fuzz: SETUP_FOR = run
fuzz: setup fuzz-setup
	@FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz.sh

fuzz-setup:
	@scripts/fuzz-setup.sh

fuzz-corpus:
	$(CARGO) run --locked --quiet -p gapstream_fuzz_targets --bin fuzz-corpus -- fuzz/corpus
