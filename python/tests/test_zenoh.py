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
import time

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


def test_a_ground_station_publishes_each_drone_under_its_name(gapstream_bin, tmp_path):
    """`gapstream ground --zenoh --mcap` with two simulated drones (`gapstream swarm`, another
    process): the subscriber on `gapstream/*/image` gets each drone's images under
    `gapstream/<drone>/`, every one of them the very Image the ground station recorded on
    `/<drone>/image` of its MCAP (and on no other drone's topic), and each drone's stats."""
    from mcap.reader import make_reader
    from rosbags.typesys import Stores, get_typestore

    d = tmp_path / "swarm"
    swarm = subprocess.Popen(
        [gapstream_bin, "swarm", "--drones", "2", "--dir", str(d), "--fps", "15"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    sub = subprocess.Popen(
        [sys.executable, str(pathlib.Path(__file__).with_name("zenoh_subscriber.py")),
         endpoint, "*", str(tmp_path / "sub"), "100000", "60"],
        stdout=subprocess.PIPE, text=True)
    mcap = tmp_path / "fleet.mcap"
    try:
        fleet = d / "fleet.toml"
        t0 = time.time()
        while not fleet.exists() and time.time() - t0 < 60:
            time.sleep(0.1)
        assert fleet.exists(), "gapstream swarm wrote no fleet file"
        assert sub.stdout.readline().strip() == "ready"
        r = subprocess.run(
            [gapstream_bin, "ground", "--fleet", str(fleet), "--viewer", "none", "--duration", "8",
             "--zenoh", endpoint, "--mcap", str(mcap)],
            capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        # The banner (where it publishes) is on stdout, diagnostics on stderr.
        assert "gapstream/<drone>/" in r.stdout, r.stdout + r.stderr
    finally:
        sub.terminate()
        sub.wait(timeout=10)
        swarm.terminate()
        swarm.wait(timeout=20)
    recorded = {}
    with open(mcap, "rb") as f:
        for _, channel, message in make_reader(f).iter_messages():
            if channel.topic.endswith("/image"):
                recorded[bytes(message.data)] = channel.topic.split("/")[1]
    store = get_typestore(Stores.ROS2_HUMBLE)
    names = sorted(p.name for p in (tmp_path / "sub").iterdir())
    assert names == ["drone-01", "drone-02"], names
    for name in names:
        got = sorted((tmp_path / "sub" / name).glob("image_*.cdr"))
        print(f"{name}: {len(got)} images over Zenoh")
        assert len(got) >= 30, (name, len(got))
        for p in got:
            raw = p.read_bytes()
            assert recorded.get(raw) == name, f"{name}/{p.name} is not an image recorded on /{name}/image"
            img = store.deserialize_cdr(raw, "sensor_msgs/msg/Image")
            assert (img.width, img.height, img.encoding) == (324, 244, "mono8")
        stats = [json.loads(l) for l in (tmp_path / "sub" / name / "stats.jsonl").read_text().splitlines()]
        assert stats and stats[-1]["lost"] == 0, stats[-1:]
