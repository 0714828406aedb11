# Bare-metal GAP8 programs on the GVSOC model (gvsoc/ crate, gap_rust_sdk's bare backend).
## make gvsoc-check   cluster engine on the GAP8 model (1/2/4/8 cores, 128 KiB in L2), needs the GAP SDK env
## make gvsoc-hello   hello from all 8 cluster cores on the GAP8 model
.PHONY: gvsoc-check gvsoc-hello gvsoc-build
RV32_GVSOC := --target $(RV32_TARGET) --profile rv32 -p gvsoc

gvsoc-check:
	@gvsoc/check.sh

gvsoc-hello:
	@if ! command -v gapy >/dev/null 2>&1; then echo "gvsoc-hello: skipped: gapy is not on PATH (load the GAP SDK environment)"; exit 0; fi; \
	$(CARGO) build --locked --quiet $(RV32_GVSOC) --bin gvsoc_hello && \
	gvsoc/run.sh target/$(RV32_TARGET)/rv32/gvsoc_hello target/gvsoc/hello

# The GAP8 programs must keep building (no simulator needed): part of make test.
TEST_TARGETS += gvsoc-build
gvsoc-build:
	$(CARGO) build --locked --quiet $(RV32_GVSOC) --features pulp --bins

## make gvsoc-bench   cycle-level sweep on the GAP8 model: kernels x cores x payloads x L1 buffers
##                    (+ no-DMA, fixed rounds, the frame), every run verified, each point the median
##                    of 3, about 13 minutes; target/bench/gvsoc.csv + summary (QUICK=1: 64 points,
##                    single runs, ~15 s; GVSOC_BENCH_ARGS: other xtask options)
## make bench-report  PNG plots and target/bench/report.md from target/bench/gvsoc.csv (CSV=path: from another CSV)
.PHONY: gvsoc-bench bench-report
gvsoc-bench:
	@$(CARGO) xtask gvsoc-bench $(if $(QUICK),--quick,--repeat 3) $(GVSOC_BENCH_ARGS)

bench-report: setup
	@$(CARGO) xtask bench-report $(if $(CSV),--csv $(CSV))
