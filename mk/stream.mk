# The stream on one machine (issue 6): simulated drone, ESP32 bridge, receiver with live viewer.
## make demo          simulated drone -> ESP32 bridge -> receiver, live viewer on localhost (Ctrl-C stops)
## make bench-stream  fps, goodput, latency per suite and transport; writes target/bench/stream.csv
.PHONY: bench-stream
RV32_CRATES += gapstream_drone
