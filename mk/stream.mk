# The stream on one machine: simulated drone, ESP32 bridge, receiver with live viewer.
## make demo          simulated drone -> ESP32 bridge -> receiver, live viewer on localhost (Ctrl-C stops;
##                    several receivers: make demo DEMO_ARGS="--listeners 3 --listeners-leave-after 15";
##                    a swarm: make demo DEMO_ARGS="--drones 8" (a bridge and keys each, one ground station);
##                    options: make demo DEMO_ARGS="--duration 10 --transport udp", see gapstream demo --help)
## make bench-stream  fps, goodput, latency per suite and transport on localhost; writes target/bench/stream.csv
## make bench-swarm   a ground station with 1, 4, 8, 16, 32 simulated drones at 30 fps (the drones in another
##                    process): slowest fps, loss, p95 above the link, its CPU and memory; target/bench/swarm.csv
.PHONY: bench-stream bench-swarm
BENCH_SWARM_ARGS ?=
RV32_CRATES += gapstream_drone
DEMO_ARGS ?=
BENCH_STREAM_ARGS ?=

# The first build compiles the release binary for a few minutes with --quiet: say so first.
demo bench-stream bench-swarm: SETUP_FOR = run
demo: setup
	@echo "make demo: building gapstream (release; the first build takes a few minutes), then starting the demo"
	$(CARGO) run --locked --release --quiet -p gapstream -- demo $(DEMO_ARGS)

bench-stream: setup
	$(CARGO) run --locked --release --quiet -p gapstream -- bench $(BENCH_STREAM_ARGS)

bench-swarm: setup
	$(CARGO) run --locked --release --quiet -p gapstream -- bench-swarm $(BENCH_SWARM_ARGS)

# Timing tests on a busy machine: the loopback and stock-viewer test binaries (debug, as `make test`
# builds them, four test threads as make test runs them), each run 10 times while scripts/under_load.sh keeps every core busy with a CPU hog.
## make loopback-under-load  the loopback tests 10 times and the stock-viewer tests 10 times with every core
##                    kept busy by a CPU hog: `loopback under load: 10/10 passed` (UNDER_LOAD_RUNS=N)
.PHONY: loopback-under-load
UNDER_LOAD_RUNS ?= 10
loopback-under-load:
	@$(CARGO) test --locked --quiet -p gapstream --test loopback --test stock_viewer --no-run
	@exe() { $(CARGO) test --locked --quiet -p gapstream --test $$1 --no-run --message-format=json \
	    | grep "\"kind\":\[\"test\"\]" | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p'; }; \
	export RUST_TEST_THREADS=$${RUST_TEST_THREADS:-4}; \
	loopback=$$(exe loopback) && stock=$$(exe stock_viewer) && \
	scripts/under_load.sh loopback $(UNDER_LOAD_RUNS) -- "$$loopback" && \
	scripts/under_load.sh stock-viewer $(UNDER_LOAD_RUNS) -- "$$stock"
