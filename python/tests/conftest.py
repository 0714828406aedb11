"""Shared fixtures: the gapstream CLI built by cargo (GAPSTREAM_BIN, default target/debug/gapstream)."""

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def gapstream_bin() -> str:
    target = os.environ.get("CARGO_TARGET_DIR", str(ROOT / "target"))
    p = os.environ.get("GAPSTREAM_BIN", os.path.join(target, "debug", "gapstream"))
    if not os.access(p, os.X_OK):
        pytest.fail(f"{p} is missing: build it with `cargo build -p gapstream` (make python-test does)")
    return p
