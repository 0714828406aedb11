# Bare-metal GAP8 programs on the GVSOC model (gvsoc/ crate, gap_rust_sdk's bare backend).
## make gvsoc-setup   the GAP8 GVSOC simulator from the GAP SDK, outside the repository (~15 min once, then
##                     seconds; GAP_SDK=<local git dir or URL>, default GreenWaves' public repository)
## make gvsoc-check   cluster engine on the GAP8 model (1/2/4/8 cores, 128 KiB in L2)
## make gvsoc-hello   hello from all 8 cluster cores on the GAP8 model
.PHONY: gvsoc-setup gvsoc-check gvsoc-hello gvsoc-build

# `make gvsoc-setup` writes .gvsoc/env.sh (git-ignored). Every gvsoc-* target's recipe shells load it
# by themselves (bash reads BASH_ENV before running a non-interactive command), so no manual
# `source`; without it the targets skip with one line. gvsoc-build, part of `make test`, needs no SDK.
GVSOC_ENV_FILE := $(CURDIR)/.gvsoc/env.sh
ifneq ($(wildcard $(GVSOC_ENV_FILE)),)
gvsoc-%: export BASH_ENV := $(GVSOC_ENV_FILE)
gvsoc-build: export BASH_ENV :=
endif
GVSOC_SKIP = skipped: the GAP8 GVSOC simulator is not set up (run: make gvsoc-setup; or load a GAP SDK environment with gapy on PATH)

gvsoc-setup:
	@scripts/gvsoc-setup.sh
RV32_GVSOC := --target $(RV32_TARGET) --profile rv32 -p gvsoc

gvsoc-check:
	@gvsoc/check.sh

gvsoc-hello:
	@if ! command -v gapy >/dev/null 2>&1; then echo "gvsoc-hello: $(GVSOC_SKIP)"; exit 0; fi; \
	$(CARGO) build --locked --quiet $(RV32_GVSOC) --bin gvsoc_hello && \
	gvsoc/run.sh target/$(RV32_TARGET)/rv32/gvsoc_hello target/gvsoc/hello

# The GAP8 programs must keep building (no simulator needed): part of make test.
TEST_TARGETS += gvsoc-build
gvsoc-build:
	$(CARGO) build --locked --quiet $(RV32_GVSOC) --features pulp --bins

## make gvsoc-bench   cycle-level sweep on the GAP8 model: kernels x cores x payloads x L1 buffers
##                    (+ no-DMA, fixed rounds, the frame), every run verified, each point the median
##                    of 3, about 13 minutes; target/bench/gvsoc.csv + summary; then JPEG over the
##                    frame set (qualities 50/75/90, pulp/portable, 1/2/4/8 cores, worst of 8 code
##                    layouts): target/bench/gvsoc-jpeg.csv (QUICK=1: a subset of both;
##                    GVSOC_BENCH_ARGS: other xtask options)
## make bench-report  PNG plots and target/bench/report.md from target/bench/gvsoc.csv (CSV=path: from another CSV)
.PHONY: gvsoc-bench bench-report
gvsoc-bench:
	@$(CARGO) xtask gvsoc-bench $(if $(QUICK),--quick,--repeat 3) $(GVSOC_BENCH_ARGS)

bench-report: setup
	@$(CARGO) xtask bench-report $(if $(CSV),--csv $(CSV))
