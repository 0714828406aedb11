# The drone side for real: GAP8 firmware (firmware/: FreeRTOS/pmsis app + the Rust crate
# gapstream_firmware), the ESP32 bridge's C entry points and ESP-IDF glue (esp32_bridge/), and the
# end-to-end run on the GAP8 GVSOC model (gvsoc/e2e/). Hardware guide: docs/hardware.md.
## make firmware-test   host tests of the firmware logic, the ESP32 C entry points (+ C test), the PULP compat words
## make firmware-rv32   the firmware's Rust part (pmsis backend, PULP kernel) built for riscv32imc, with
##                      X25519 only (the default) and with every key-establishment mode (KEX=all)
## make gvsoc-e2e       firmware on the GVSOC AI-deck model: PGM frames -> camera -> cluster -> SPI -> ESP32
##                      stand-in -> receiver; byte-exact check, fps, cycles per stage, SPI clocks; ends
##                      with one `gvsoc-e2e summary` line (needs the GAP SDK env)
## make gvsoc-e2e-negative  the old 10 MHz bidirectional link: must fail on the stand-in's corrupted MISO
## make gvsoc-boot-twice  two boots of one firmware on the model, its HyperFlash kept: boot counters 1
##                      then 2, the second refuses the first session's replayed KEY_ACK
.PHONY: firmware-test firmware-rv32 esp32-capi-test gvsoc-e2e gvsoc-e2e-model gvsoc-e2e-sequential gvsoc-e2e-negative
TEST_TARGETS += firmware-test firmware-rv32
FW_CC  ?= cc
FW_TGT := $(or $(CARGO_TARGET_DIR),target)

# gapstream_firmware's tests on their own, where no other crate turns on the drone's P-256 / RSA
# modes (its refusal of them is tested); gvsoc_e2e's host tests run in test-host (a default member).
firmware-test: esp32-capi-test
	$(CARGO) test --locked --quiet --no-fail-fast -p gapstream_firmware
	$(CARGO) test --locked --quiet --no-fail-fast -p esp32_bridge --features capi --lib --test capi_header
	firmware/tests/compat_insn.sh
	firmware/tests/flags_stamp.sh

# The ESP32's C entry points as a host staticlib, and a C program against the header.
esp32-capi-test:
	$(CARGO) rustc --locked --quiet -p esp32_bridge --no-default-features --features capi,std --crate-type staticlib
	$(FW_CC) -std=c11 -O1 -Wall -Wextra -Werror -I esp32_bridge/include esp32_bridge/tests/capi_test.c \
		$(FW_TGT)/debug/libesp32_bridge.a -lpthread -ldl -lm -o $(FW_TGT)/debug/esp32_capi_test
	$(FW_TGT)/debug/esp32_capi_test

# Without GAP_SDK_HOME the pmsis C shims are not built (gap_rust_sdk_w says so); the Rust compiles.
firmware-rv32:
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gapstream_firmware --features pmsis,pulp
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gapstream_firmware --features pmsis,pulp,kex-p256,kex-rsa2048,codec-jpeg,codec-jpegls
	$(CARGO) build --locked --quiet --target $(RV32_TARGET) -p gapstream_firmware

# --- end-to-end on the GVSOC AI-deck model -----------------------------------------------------------
E2E_DIR        ?= target/gvsoc-e2e
# 32 for coded frames (E2E_CODEC).
E2E_FRAMES     ?= $(if $(filter raw,$(E2E_CODEC)),16,32)
# Input PGMs: a prime count, so that captures a multiple of 4 sensor frames apart never see the
# same image twice in a row (the check treats a repeat as a stale buffer).
E2E_INPUTS     ?= 13
# The model's Himax streams a frame every 4.28 ms (233 fps); the CPI drops 3 of every 4 so the
# sensor delivers one every 17.1 ms (58.4 fps), the real HM01B0's ~60 fps in QVGA.
E2E_FRAME_DROP ?= 3
# FC at 240 MHz: the SPI driver divides it by 8 for exactly 30 MHz (at 250 MHz it gives 25 MHz)
# and by 34 for 7.06 MHz upstream. docs/hardware.md, "The SPI link", has the link budget.
E2E_FC_HZ      ?= 240000000
E2E_CL_HZ      ?= 150000000
# 1: capture N+1 while N is coded, sealed and sent (two capture buffers in L2); 0: one capture
# buffer, each capture started when the drone loop waits for it, which leaves a frame's worth of
# L2 to the coded frame: the default for JPEG-LS, whose frames (up to 68 KB on the frame set)
# need more L2 than the double-buffered pipeline leaves (docs/hardware.md, "L2").
E2E_PIPELINE   ?= $(if $(filter jpegls,$(E2E_CODEC)),0,1)
E2E_SPI_UP_HZ  ?= 7200000
E2E_SPI_DOWN_HZ ?= 30000000
# The link task (LINK_SLOTS in firmware/Makefile) sends frame N while the loop seals frame N+1.
# Raw frames: the firmware's default 16, which cover the drone loop's own work per frame (capture
# hand-over, state record, seal, packetising) now that the STM32's state messages come in a few
# uDMA reads each and cost the loop little (docs/hardware.md, "The link task").
# Pipelined JPEG: 2 (the L2 they free holds the coded frame, E2E_CODED_BYTES); with one capture
# buffer (E2E_PIPELINE=0): 24, so that the loop queues most of a coded frame and goes on to the
# next capture instead of waiting for the SPI.
E2E_LINK_SLOTS ?= $(if $(filter raw,$(E2E_CODEC)),16,$(if $(filter 0,$(E2E_PIPELINE)),24,2))
E2E_HANDSHAKE_TIMEOUT_MS ?= 600000
E2E_PORT       ?= 5731
E2E_SUITE      ?= chacha20poly1305
E2E_KEX        ?= x25519
# Key establishment built into the firmware (firmware/Makefile KEX): by default the mode the receiver
# asks for (X25519 is always built); E2E_FW_KEX=all builds every mode (more code in L2).
E2E_FW_KEX     ?= $(E2E_KEX)
# The ESP32 stand-in's WiFi: drained at E2E_WIFI_MBPS of simulated time (10: the AI-deck's measured
# TCP rate; 20 / 30: Espressif's in-air TCP / UDP figures for the ESP32; 0: not limited), at most
# E2E_WIFI_QUEUE_BYTES held for it (one 324x244 frame, what the ESP-IDF glue queues), then no
# SPI transaction until it drains: the GAP8 waits on the ready line (docs/hardware.md §13).
E2E_WIFI_MBPS  ?= 10
E2E_WIFI_QUEUE_BYTES ?= 82000
# Compress, then seal: raw (the frames as captured), jpeg (the cluster JPEG encoder at
# E2E_QUALITY, one band per core joined by restart markers, then the AEAD over the coded bytes;
# the receiver checks every frame against the host encoder's file and decodes it with
# jpeg-decoder) or jpegls (lossless JPEG-LS on the cluster, 8 bands with restart markers; every
# frame must be the host encoder's stream and decode bit-exact to its input with gapstream_jpegls
# and, with the project venv, CharLS). Coded runs feed the camera model the frame set (`frameset`: scikit-image's
# photographs cut to 324x244 and the synthetic pattern, 11 pictures: a prime count, see
# E2E_INPUTS), which needs the project venv (scripts/setup.sh).
E2E_CODEC      ?= raw
E2E_QUALITY    ?= 75
ifeq ($(filter raw jpeg jpegls,$(E2E_CODEC)),)
$(error E2E_CODEC=$(E2E_CODEC): use raw, jpeg or jpegls)
endif
# Length-hiding padding of coded frames inside the AEAD (firmware PAD; padme as the simulated
# drone's default: the receiver prints how many frames came padded).
E2E_PAD        ?= padme
# E2E_SET_QUALITY=Q (jpeg): the receiver sends SET_QUALITY Q over the authenticated control
# channel after E2E_SET_QUALITY_AFTER frames; the frames after it must be the files at Q.
E2E_SET_QUALITY ?=
E2E_SET_QUALITY_AFTER ?= 8
# CharLS (imagecodecs in the project venv) decodes the JPEG-LS frames too, when the venv is there.
E2E_VENV_PY    ?= $(wildcard $(CURDIR)/.venv/bin/python)
E2E_PHOTOS     ?= $(if $(filter raw,$(E2E_CODEC)),0,1)
# The cipher engine's L1 buffer per round (3 per core... firmware/Makefile L1_BUFFER): halved for
# coded frames, whose payload is a fraction of a raw frame, so that the JPEG encoder's 18 KiB of
# strips and chunks fit the 64 KiB L1 next to the cluster stacks.
# JPEG-LS: 2048 (its job takes 30,240 bytes of L1 per frame: the context models, lines and code
# chunks of 8 cores).
E2E_L1_BUFFER  ?= $(if $(filter raw,$(E2E_CODEC)),8192,$(if $(filter jpegls,$(E2E_CODEC)),2048,4096))
# L2 for the coded frame and its padding: what is left next to the two capture buffers
# (firmware/Makefile CODED_BYTES; a frame that codes to more goes out raw, counted: coder_errors=).
# 28 KiB next to two capture buffers (JPEG quality 75 needs up to 27,648 B on the frame set with
# Padmé); 72 KiB with one (JPEG-LS needs up to 69,632 B padded, JPEG quality 90 45,058).
E2E_CODED_BYTES ?= $(if $(filter 0,$(E2E_PIPELINE)),73728,28672)
# The criteria: all frames byte-exact; >= 35 fps, or 95 % of what the WiFi carries when that is
# less; the GAP8 alone (the WiFi's hold-back taken out of the period) >= 35 fps at any WiFi rate;
# the link (with the WiFi behind it) the only limit (period <= 1.10 x send); MISO read at
# <= 7.2 MHz, frames sent at >= 20 MHz. E2E_CRITERIA="--min-frames 16" checks only the frames.
ifeq ($(E2E_CODEC),raw)
E2E_CRITERIA   ?= --min-frames $(E2E_FRAMES) --min-fps 35 --wifi-share 0.95 --min-gap8-fps 35 \
                  --max-period-over-send 1.10 --max-up-hz 7200000 --min-down-hz 20000000 \
                  --max-state-age-ms $(E2E_MAX_STATE_AGE_MS)
else ifeq ($(E2E_CODEC)-$(E2E_PIPELINE),jpeg-1)
# Coded frames: all frames verified, byte-identical to the host encoder's files and decoded;
# >= 55 fps (the sensor's ~58.4 the limit), or 95 % of what the WiFi carries when that is less.
E2E_CRITERIA   ?= --min-frames $(E2E_FRAMES) --min-coded $(E2E_FRAMES) --min-fps 55 --wifi-share 0.95 \
                  --max-state-age-ms $(E2E_MAX_STATE_AGE_MS)
else
# JPEG-LS, and JPEG with one capture buffer (E2E_PIPELINE=0, e.g. quality 90): every frame
# verified, coded and bit-exact after decoding (JPEG-LS) / the host encoder's file (JPEG); fps
# and ratio printed, no fps target.
E2E_CRITERIA   ?= --min-frames $(E2E_FRAMES) --min-coded $(E2E_FRAMES) \
                  --max-state-age-ms $(E2E_MAX_STATE_AGE_MS)
endif
E2E_RUN_ARGS   ?=
E2E_ELF        := firmware/BUILD/GAP8_V2/GCC_RISCV_FREERTOS_gvsoc/gapstream
E2E_MODEL      := $(E2E_DIR)/esp32_standin.so
# The STM32 stand-in on the GAP8's UART: the console, and the flight controller's state messages
# every E2E_STATE_PERIOD_US of simulated time (10000: NanoCockpit's 100 Hz); the criterion: the
# state's age at the end of every frame's exposure <= E2E_MAX_STATE_AGE_MS, and with it no byte
# lost by the firmware's UART ring once the stream runs (docs/hardware.md §13).
E2E_STM32_MODEL := $(E2E_DIR)/stm32_standin.so
E2E_STATE_PERIOD_US ?= 10000
E2E_MAX_STATE_AGE_MS ?= 12

gvsoc-e2e:
	@if ! command -v gapy >/dev/null 2>&1 || [ -z "$$GAP_SDK_HOME" ]; then \
	  echo "gvsoc-e2e: $(GVSOC_SKIP)"; exit 0; fi; \
	$(MAKE) --no-print-directory gvsoc-e2e-run

.PHONY: gvsoc-e2e-run gvsoc-e2e-prepare
gvsoc-e2e-run: gvsoc-e2e-prepare
	$(E2E_RUN) $(E2E_CRITERIA) $(E2E_RUN_ARGS)

# Fresh keys, the firmware built with them, the input frames, the ESP32 stand-in.
gvsoc-e2e-prepare: gvsoc-e2e-model
	@mkdir -p $(E2E_DIR)
	$(CARGO) build --locked --quiet -p gvsoc_e2e -p gapstream
	$(FW_TGT)/debug/gapstream pair --dir $(E2E_DIR)/keys --force
	nice $(MAKE) --no-print-directory -C firmware all platform=gvsoc KEYS=$(abspath $(E2E_DIR))/keys/drone.key \
	  FRAMES=$(E2E_FRAMES) FRAME_DROP=$(E2E_FRAME_DROP) FC_HZ=$(E2E_FC_HZ) CL_HZ=$(E2E_CL_HZ) \
	  PIPELINE=$(E2E_PIPELINE) SPI_UP_HZ=$(E2E_SPI_UP_HZ) SPI_DOWN_HZ=$(E2E_SPI_DOWN_HZ) \
	  LINK_SLOTS=$(E2E_LINK_SLOTS) HANDSHAKE_TIMEOUT_MS=$(E2E_HANDSHAKE_TIMEOUT_MS) KEX=$(E2E_FW_KEX) \
	  CODEC=$(E2E_CODEC) QUALITY=$(E2E_QUALITY) L1_BUFFER=$(E2E_L1_BUFFER) CODED_BYTES=$(E2E_CODED_BYTES) \
	  PAD=$(E2E_PAD) \
	  > $(E2E_DIR)/firmware-build.log 2>&1 \
	  || { tail -30 $(E2E_DIR)/firmware-build.log; echo "gvsoc-e2e: the firmware build failed (log: $(E2E_DIR)/firmware-build.log)"; exit 1; }
	rm -f $(E2E_DIR)/inputs/in*.pgm
	$(FW_TGT)/debug/gvsoc-e2e frames --out $(E2E_DIR)/inputs --count $(E2E_INPUTS) $(if $(filter 1,$(E2E_PHOTOS)),--photos)

# One run of the firmware on the model (the work directory keeps the HyperFlash image).
E2E_RUN = $(FW_TGT)/debug/gvsoc-e2e run --elf $(E2E_ELF) --model $(E2E_MODEL) \
	  --stm32-model $(E2E_STM32_MODEL) --state-period-us $(E2E_STATE_PERIOD_US) \
	  --keys $(E2E_DIR)/keys/receiver.key --inputs $(E2E_DIR)/inputs --work $(E2E_DIR)/work \
	  --frames $(E2E_FRAMES) --port $(E2E_PORT) --suite $(E2E_SUITE) --kex $(E2E_KEX) \
	  --wifi-mbps $(E2E_WIFI_MBPS) --wifi-queue-bytes $(E2E_WIFI_QUEUE_BYTES) \
	  --codec $(E2E_CODEC) --quality $(E2E_QUALITY) \
	  $(if $(E2E_SET_QUALITY),--set-quality $(E2E_SET_QUALITY) --set-quality-after $(E2E_SET_QUALITY_AFTER)) \
	  $(if $(and $(filter jpegls,$(E2E_CODEC)),$(E2E_VENV_PY)),--charls-python $(E2E_VENV_PY))

# The boot counter for real: one firmware, two boots on the AI-deck model, the HyperFlash image kept
# between them (GVSOC's flash model writes back into it). Boot 1 streams and its receiver records
# the HELLO, ACCEPT and KEY_ACK an attacker on the WiFi side could record; boot 2 must print
# counter 2, answer the replayed HELLO with a new ACCEPT (or refuse it) and refuse the replayed
# KEY_ACK, and still stream to a receiver that shakes hands for real.
BOOT2_DIR    ?= target/gvsoc-boot-twice
BOOT2_FRAMES ?= 4
gvsoc-boot-twice:
	@if ! command -v gapy >/dev/null 2>&1 || [ -z "$$GAP_SDK_HOME" ]; then \
	  echo "gvsoc-boot-twice: $(GVSOC_SKIP)"; exit 0; fi; \
	$(MAKE) --no-print-directory gvsoc-boot-twice-run E2E_DIR=$(BOOT2_DIR) E2E_FRAMES=$(BOOT2_FRAMES)

.PHONY: gvsoc-boot-twice gvsoc-boot-twice-run
gvsoc-boot-twice-run: gvsoc-e2e-prepare
	rm -rf $(E2E_DIR)/work
	@echo "gvsoc-boot-twice: boot 1 (a fresh flash image)"
	$(E2E_RUN) --min-frames $(E2E_FRAMES) --expect-boot 1 --record-session $(E2E_DIR)/boot1.session
	@echo "gvsoc-boot-twice: boot 2 (the flash as boot 1 left it; boot 1's HELLO and KEY_ACK replayed first)"
	$(E2E_RUN) --min-frames $(E2E_FRAMES) --keep-flash --expect-boot 2 --replay-session $(E2E_DIR)/boot1.session
	@echo "gvsoc-boot-twice: ok"

# The stages one after the other (OneShot camera, the drone loop sends itself): the baseline the
# paper measured (F. Barchi et al., "RUST-Encoded Stream Ciphers on a RISC-V Parallel Ultra-Low-Power
# Processor", PARMA-DITAM 2023); only the frames are checked.
gvsoc-e2e-sequential:
	$(MAKE) --no-print-directory gvsoc-e2e E2E_PIPELINE=0 E2E_LINK_SLOTS=0 E2E_CRITERIA="--min-frames $(E2E_FRAMES)"

# The negative check: the old link, 10 MHz in both directions. The stand-in corrupts every MISO bit
# clocked above 7.2 MHz, as the AI-deck's board does, so the handshake cannot complete: the run
# must fail, on that (the firmware gives up after 3 simulated seconds).
gvsoc-e2e-negative:
	$(MAKE) --no-print-directory gvsoc-e2e E2E_DIR=target/gvsoc-e2e-negative E2E_SPI_UP_HZ=10000000 \
	  E2E_SPI_DOWN_HZ=10000000 E2E_HANDSHAKE_TIMEOUT_MS=3000 E2E_FRAMES=4 E2E_CRITERIA="--min-frames 4" \
	  E2E_RUN_ARGS=--expect-miso-corruption

# The ESP32 stand-in: a GVSOC DPI model (the SDK's DPI headers) linked with esp32_bridge's C entry
# points, so the simulated ESP32 runs the real firmware's forwarding core and SPI-slave logic.
gvsoc-e2e-model:
	@mkdir -p $(E2E_DIR)
	$(CARGO) rustc --locked --quiet --release -p esp32_bridge --no-default-features --features capi,std --crate-type staticlib
	$(CXX) -O2 -g -fPIC -std=c++11 -Wall -Wno-unused-parameter -shared \
	  -I$(INSTALL_DIR)/include -I esp32_bridge/include gvsoc/e2e/esp32_standin.cpp \
	  $(FW_TGT)/release/libesp32_bridge.a -o $(E2E_MODEL) -lpthread -ldl
	$(CXX) -O2 -g -fPIC -std=c++11 -Wall -Wno-unused-parameter -shared \
	  -I$(INSTALL_DIR)/include gvsoc/e2e/stm32_standin.cpp -o $(E2E_STM32_MODEL)
