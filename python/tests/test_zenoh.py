"""`gapstream view --zenoh` received by an `eclipse-zenoh` subscriber in another process.

The chain (esp32-bridge + simulated drone) comes from the CLI; `gapstream record` (`view` with a
PNG recorder; built with the cargo feature `zenoh`) connects to the subscriber's endpoint,
publishes every verified frame as a CDR sensor_msgs/msg/Image and records the same frames as PNG. Every image the subscriber got,
decoded by rosbags' own ROS 2 types, must be one of the recorded frames, pixel-identical; at least
50 of them.
"""

import json
import pathlib
import subprocess
import sys

import numpy as np
from PIL import Image

import gapstream
from conftest import Chain, free_port

WANT = 50


def test_a_zenoh_subscriber_receives_identical_frames(gapstream_bin, tmp_path):
    from rosbags.typesys import Stores, get_typestore

    gapstream.pair(tmp_path / "keys")
    chain = Chain(gapstream_bin, tmp_path / "keys" / "drone.key", fps=25)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    sub = subprocess.Popen(
        [sys.executable, str(pathlib.Path(__file__).with_name("zenoh_subscriber.py")),
         endpoint, "test", str(tmp_path / "sub"), "100000", "60"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert sub.stdout.readline().strip() == "ready"
        r = subprocess.run(
            # `record DIR` is `view` that also saves every verified frame as PNG
            [gapstream_bin, "record", str(tmp_path / "png"), "--connect", f"127.0.0.1:{chain.port}",
             "--keys", str(tmp_path / "keys" / "receiver.key"), "--viewer", "none", "--duration", "20",
             "--zenoh", endpoint, "--drone", "test"],
            capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        # the banner and the closing lines are on stdout (diagnostics on stderr)
        assert "published" in r.stdout and "plaintext inside Zenoh" in r.stdout, r.stdout
    finally:
        sub.terminate()
        sub.wait(timeout=10)
        chain.stop()
    recorded = {}
    for p in (tmp_path / "png").glob("frame_*.png"):
        recorded[np.asarray(Image.open(p).convert("L")).tobytes()] = p.name
    store = get_typestore(Stores.ROS2_HUMBLE)
    got = sorted((tmp_path / "sub").glob("image_*.cdr"))
    print(f"{len(recorded)} frames recorded, {len(got)} received over Zenoh")
    assert len(got) >= WANT
    names = set()
    for p in got:
        img = store.deserialize_cdr(p.read_bytes(), "sensor_msgs/msg/Image")
        assert (img.width, img.height, img.encoding) == (324, 244, "mono8")
        px = np.asarray(img.data, dtype=np.uint8).tobytes()
        assert px in recorded, f"{p.name} is not a frame the receiver verified"
        names.add(recorded[px])
    assert len(names) == len(got), "a frame arrived twice"
    stats = [json.loads(line) for line in (tmp_path / "sub" / "stats.jsonl").read_text().splitlines()]
    assert stats and stats[-1]["tag_failures"] == 0 and stats[-1]["published"] <= len(recorded)
