"""`gapstream.Ground` against `gapstream swarm` (three simulated drones, each with its own bridge
and keys, in another process): `for name, frame in ground.frames()` yields every drone's verified
frames, each drone's sequence without a gap, its name burned into its pictures."""

import subprocess
import time

import numpy as np
import pytest

import gapstream


@pytest.fixture(scope="module")
def swarm(gapstream_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("swarm")
    p = subprocess.Popen(
        [gapstream_bin, "swarm", "--drones", "3", "--dir", str(d), "--fps", "15"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fleet = d / "fleet.toml"
    t0 = time.time()
    while not fleet.exists() and time.time() - t0 < 60:
        time.sleep(0.1)
    assert fleet.exists(), "gapstream swarm wrote no fleet file"
    yield fleet
    p.terminate()
    p.wait(timeout=20)


def test_every_drones_frames_by_name(swarm):
    got = {}
    with gapstream.Ground(fleet=swarm, frame_timeout=30) as ground:
        assert ground.names == ["drone-01", "drone-02", "drone-03"]
        for name, frame in ground.frames():
            got.setdefault(name, []).append(frame)
            if all(len(got.get(n, [])) >= 15 for n in ground.names):
                break
        stats = ground.stats()
    assert sorted(got) == ["drone-01", "drone-02", "drone-03"]
    for name, frames in got.items():
        seqs = [f.sequence for f in frames]
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), (name, seqs)
        f = frames[-1]
        assert f.pixels.shape == (244, 324) and f.pixels.dtype == np.uint8
        assert f.suite.startswith("chacha20poly1305")
        assert stats[name]["lost"] == 0 and stats[name]["tag_failures"] == 0
    # Three pictures of three drones: the label bands (the names) differ.
    bands = [got[n][-1].pixels[-18:, :120] for n in sorted(got)]
    assert not np.array_equal(bands[0], bands[1]) and not np.array_equal(bands[1], bands[2])
