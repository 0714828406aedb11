# The stream on one machine: simulated drone, ESP32 bridge, receiver with live viewer.
## make demo          simulated drone -> ESP32 bridge -> receiver, live viewer on localhost (Ctrl-C stops;
##                    several receivers: make demo DEMO_ARGS="--listeners 3 --listeners-leave-after 15";
##                    options: make demo DEMO_ARGS="--duration 10 --transport udp", see gapstream demo --help)
## make bench-stream  fps, goodput, latency per suite and transport on localhost; writes target/bench/stream.csv
.PHONY: bench-stream
RV32_CRATES += gapstream_drone
DEMO_ARGS ?=
BENCH_STREAM_ARGS ?=

# The first build compiles the release binary for a few minutes with --quiet: say so first.
demo bench-stream: SETUP_FOR = run
demo: setup
	@echo "make demo: building gapstream (release; the first build takes a few minutes), then starting the demo"
	$(CARGO) run --locked --release --quiet -p gapstream -- demo $(DEMO_ARGS)

bench-stream: setup
	$(CARGO) run --locked --release --quiet -p gapstream -- bench $(BENCH_STREAM_ARGS)
