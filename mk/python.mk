# Frames where users work: ROS 2 MCAP recordings (gapstream/src/mcap_out.rs) and the Python package
# `gapstream` (python/: PyO3 + maturin). Tests run with the project venv (.venv, made by
# scripts/setup.sh from setup.d/*.pip), against the CLI's binaries built by cargo.
## make mcap-test     a 10 s demo recorded with --mcap and --record, read back by mcap-ros2-support and rosbags (Images, Odometry, tf: the trajectory exactly)
## make python-test   build + install the Python package into .venv, pytest against esp32-bridge + gapstream node,
##                    a ground station (gapstream.Ground) against gapstream swarm; README's Python example
##                    run twice against the demo, examples/view_and_save.py
.PHONY: mcap-test python-test python-install
TEST_TARGETS += mcap-test python-test
VENV ?= .venv
PYTHON := $(VENV)/bin/python
PYTEST := $(PYTHON) -m pytest -q -p no:cacheprovider


mcap-test:
	$(HOST_BINS)
	$(PYTEST) python/tests/test_mcap.py

# The user's one line is `pip install ./python` (an isolated build, maturin from PyPI, release
# profile). Here: the venv's maturin, the dev profile (shares target/debug with the host tests).
python-install:
	PATH="$(abspath $(VENV))/bin:$$PATH" MATURIN_PEP517_ARGS="--profile dev" \
	  $(PYTHON) -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps ./python

# The three modules side by side (pytest-xdist, one worker per file: each starts its own demo or
# drones and mostly waits on them): 28 s instead of 51 s here.
python-test: python-install
	$(HOST_BINS)
	$(PYTHON) -c "import gapstream, sys; print('gapstream', gapstream.__version__, 'from', gapstream.__file__)"
	$(PYTEST) -n 3 --dist loadfile python/tests/test_receiver.py python/tests/test_readme.py python/tests/test_ground.py

# Zenoh publishing is behind the cargo feature `zenoh` (the zenoh crate is large: its clean build
# would more than double `make test`), so this step is not part of `make test`.
## make zenoh-test    gapstream --features zenoh; an eclipse-zenoh subscriber in another process gets >= 50 frames of `view --zenoh`, pixel-identical,
##                    and each drone of `ground --zenoh` (two simulated drones) under gapstream/<drone>/, identical to its MCAP topic
.PHONY: zenoh-test
zenoh-test: setup
	$(CARGO) build --locked --quiet -p gapstream --features zenoh
	$(CARGO) build --locked --quiet -p esp32_bridge --features host --bin esp32-bridge
	$(PYTEST) -s python/tests/test_zenoh.py
