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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Chain:
    """`esp32-bridge` + `gapstream node` (the simulated drone) started from the CLI, on free ports."""

    def __init__(self, gapstream_bin: str, drone_key, source: str = "synthetic", fps: float = 25):
        import subprocess
        import time

        self.spi, self.port = free_port(), free_port()
        bridge_bin = os.path.join(os.path.dirname(gapstream_bin), "esp32-bridge")
        self.procs = [subprocess.Popen(
            [bridge_bin, "--spi-listen", f"127.0.0.1:{self.spi}", "--tcp", f"127.0.0.1:{self.port}",
             "--udp", f"127.0.0.1:{self.port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        time.sleep(0.5)
        self.procs.append(subprocess.Popen(
            [gapstream_bin, "node", "--bridge", f"127.0.0.1:{self.spi}", "--keys", str(drone_key),
             "--source", str(source), "--fps", str(fps), "--spi-hz", "0"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(0.5)

    def stop(self):
        for p in self.procs:
            p.terminate()
            p.wait(timeout=10)
