# The stream where users work: ROS 2 MCAP recordings (gapstream/src/mcap_out.rs), read back by
# independent PyPI readers in the project venv (.venv, made by scripts/setup.sh from setup.d/*.pip).
## make mcap-test     a 5 s demo recorded with --mcap and --record, read back by mcap-ros2-support and rosbags
.PHONY: mcap-test
TEST_TARGETS += mcap-test
VENV ?= .venv
PYTHON := $(VENV)/bin/python

mcap-test:
	$(CARGO) build --locked --quiet -p gapstream
	$(PYTHON) -m pytest -q -p no:cacheprovider python/tests/test_mcap.py
