"""`gapstream demo --mcap` read back by independent readers from PyPI.

A 5 s demo records every verified frame twice: as PNG files (--record) and as ROS 2 MCAP
(--mcap). Foxglove's `mcap` + `mcap-ros2-support` decode every message of the MCAP from its
embedded ros2msg schemas; `rosbags` opens it as a ROS 2 bag and deserialises the Images with its
own ROS 2 type definitions. Both must give as many Images as PNG files, pixel-identical.
"""

import pathlib
import subprocess

import numpy as np
import pytest
from PIL import Image

from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory


@pytest.fixture(scope="module")
def recording(gapstream_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("mcap")
    mcap = d / "demo.mcap"
    pngs = d / "png"
    r = subprocess.run(
        [gapstream_bin, "demo", "--duration", "5", "--viewer", "none",
         "--mcap", str(mcap), "--record", str(pngs)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout.strip().splitlines()[-2:])
    # PNGs are named by the frame number burned into the picture: in stream order as well
    frames = {}
    for p in sorted(pngs.glob("frame_*.png")):
        frames[int(p.stem.split("_")[1])] = np.asarray(Image.open(p).convert("L"))
    assert len(frames) >= 10, f"only {len(frames)} frames in 5 s"
    return mcap, frames


def test_mcap_ros2_support_decodes_every_message(recording):
    mcap, frames = recording
    images, infos = [], []
    with open(mcap, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        for schema, channel, message, msg in reader.iter_decoded_messages():
            assert schema.encoding == "ros2msg" and channel.message_encoding == "cdr"
            if channel.topic == "/gapstream/image":
                assert schema.name == "sensor_msgs/msg/Image"
                images.append((message, msg))
            else:
                assert channel.topic == "/gapstream/frame_info"
                assert schema.name == "gapstream_msgs/msg/FrameInfo"
                infos.append(msg)
    assert len(images) == len(infos) == len(frames)
    for (message, img), info, (name, ref) in zip(images, infos, sorted(frames.items())):
        assert img.encoding == "mono8" and (img.width, img.height, img.step) == (324, 244, 324)
        px = np.frombuffer(bytes(img.data), dtype=np.uint8).reshape(img.height, img.width)
        assert np.array_equal(px, ref), f"sequence {info.sequence} differs from frame_{name:08}.png"
        stamp = img.header.stamp.sec * 10**9 + img.header.stamp.nanosec
        assert stamp == message.publish_time
        assert (info.header.stamp.sec, info.header.stamp.nanosec) == (
            img.header.stamp.sec, img.header.stamp.nanosec)
        assert info.suite.startswith("chacha20poly1305")
        assert 0 < info.latency_ms < 60_000 and info.tag_failures == 0
        recv = info.receive_stamp.sec * 10**9 + info.receive_stamp.nanosec
        assert recv == message.log_time >= stamp
    seqs = [i.sequence for i in infos]
    assert seqs == sorted(seqs) and [i.frames for i in infos] == list(range(1, len(infos) + 1))


def test_rosbags_opens_it_as_a_ros2_bag(recording):
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    mcap, frames = recording
    store = get_typestore(Stores.ROS2_HUMBLE)
    with Reader(mcap) as bag:
        topics = {c.topic: c for c in bag.connections}
        assert topics["/gapstream/image"].msgtype == "sensor_msgs/msg/Image"
        assert topics["/gapstream/frame_info"].msgtype == "gapstream_msgs/msg/FrameInfo"
        assert bag.message_count == 2 * len(frames)
        images = [
            store.deserialize_cdr(raw, c.msgtype)
            for c, _, raw in bag.messages(connections=[topics["/gapstream/image"]])
        ]
    assert len(images) == len(frames)
    for img, (seq, px) in zip(images, sorted(frames.items())):
        got = np.asarray(img.data, dtype=np.uint8).reshape(img.height, img.width)
        assert np.array_equal(got, px), f"frame {seq} differs"


def test_a_ground_stations_recording_has_topics_per_drone(gapstream_bin, tmp_path):
    """`gapstream demo --drones 2 --mcap`: one file, /drone-01/... and /drone-02/..., as many
    Images as FrameInfos per drone, each drone's pictures with its own name burned in."""
    mcap = tmp_path / "fleet.mcap"
    r = subprocess.run(
        [gapstream_bin, "demo", "--drones", "2", "--duration", "5", "--viewer", "none",
         "--mcap", str(mcap)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    counts, last = {}, {}
    with open(mcap, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, msg in reader.iter_decoded_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            if schema.name == "sensor_msgs/msg/Image":
                last[channel.topic] = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.width)
    assert sorted(counts) == ["/drone-01/frame_info", "/drone-01/image", "/drone-02/frame_info", "/drone-02/image"]
    for d in ("drone-01", "drone-02"):
        assert counts[f"/{d}/image"] == counts[f"/{d}/frame_info"] >= 10, counts
    # The label bands (the drones' names) differ, the rest of the pattern is the same scene.
    a, b = last["/drone-01/image"], last["/drone-02/image"]
    assert not np.array_equal(a[-18:, :120], b[-18:, :120])
