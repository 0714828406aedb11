"""`gapstream demo --mcap` read back by independent readers from PyPI.

A 10 s demo records every verified frame twice: as PNG files (--record) and as ROS 2 MCAP
(--mcap). Foxglove's `mcap` + `mcap-ros2-support` decode every message of the MCAP from its
embedded ros2msg schemas; `rosbags` opens it as a ROS 2 bag and deserialises the Images, the
Odometry and the tf messages with its own ROS 2 type definitions. Both must give as many Images as
PNG files, pixel-identical, and one Odometry and one TFMessage per Image with the Image's stamp,
holding exactly the simulated drone's trajectory (gapstream::flight::Circle) at the STM32 time its
FrameInfo names, recomputed here from the trajectory's formulas and the compression of the
Crazyflie firmware's quaternions.
"""

import math
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
        [gapstream_bin, "demo", "--duration", "10", "--viewer", "none",
         "--mcap", str(mcap), "--record", str(pngs)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    print(r.stdout.strip().splitlines()[-2:])
    # PNGs are named by the frame number burned into the picture: in stream order as well
    frames = {}
    for p in sorted(pngs.glob("frame_*.png")):
        frames[int(p.stem.split("_")[1])] = np.asarray(Image.open(p).convert("L"))
    assert len(frames) >= 20, f"only {len(frames)} frames in 10 s"
    return mcap, frames


# --- the simulated drone's trajectory, as gapstream::flight::Circle::default() defines it --------

def _mm(v):
    """Metres to the message's mm: rounded half away from zero, saturated to i16."""
    x = v * 1000.0
    r = math.floor(abs(x) + 0.5)
    return int(max(-32768, min(32767, math.copysign(r, x))))


def _quatcompress(q):
    """The Crazyflie firmware's "smallest three" compression (float32), q = [x, y, z, w]."""
    q = [np.float32(v) for v in q]
    largest = 0
    for i in range(1, 4):
        if abs(q[i]) > abs(q[largest]):
            largest = i
    negate = q[largest] < 0
    comp = largest
    for i in range(4):
        if i == largest:
            continue
        negbit = int((q[i] < 0) != negate)
        mag = int(np.float32(np.float32(511.0) * (np.float32(abs(q[i])) / np.float32(math.sqrt(0.5))))
                  + np.float32(0.5))
        comp = (comp << 10) | (negbit << 9) | min(mag, 511)
    return comp


def _quatdecompress(comp):
    largest = comp >> 30
    q = [np.float32(0)] * 4
    c = comp
    for i in reversed(range(4)):
        if i == largest:
            continue
        mag, neg = c & 511, (c >> 9) & 1
        c >>= 10
        v = np.float32(np.float32(math.sqrt(0.5)) * np.float32(mag)) / np.float32(511)
        q[i] = np.float32(-v if neg else v)
    s = np.float32(0)
    for i in reversed(range(4)):
        if i != largest:
            s = np.float32(s + q[i] * q[i])
    q[largest] = np.sqrt(np.float32(1) - s)
    return [float(v) for v in q]


def _circle(stm32_us):
    """(position m, velocity m/s world, orientation [x, y, z, w], rates rad/s) in the message's
    units, as the simulated STM32 sent them."""
    t = stm32_us / 1e6
    w = 2.0 * math.pi / 10.0
    th = w * t
    r = 1.0
    yaw = th + math.pi / 2
    pos = [_mm(r * math.cos(th)), _mm(r * math.sin(th)), _mm(1.0)]
    vel = [_mm(-r * w * math.sin(th)), _mm(r * w * math.cos(th)), 0]
    q = _quatcompress([0.0, 0.0, math.sin(yaw / 2.0), math.cos(yaw / 2.0)])
    rates = [0, 0, _mm(w)]
    si = lambda v: [x / 1000.0 for x in v]  # noqa: E731
    return si(pos), si(vel), _quatdecompress(q), si(rates)


def _world_to_body(q, v):
    x, y, z, w = q
    r = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]
    return [r[0][j] * v[0] + r[1][j] * v[1] + r[2][j] * v[2] for j in range(3)]


def _stamp(h):
    return h.stamp.sec * 10**9 + h.stamp.nanosec


def _check_state(odom, tf, info):
    """One frame's Odometry and TFMessage against the trajectory at the FrameInfo's STM32 time."""
    assert info.state_flags == 1, f"state flags {info.state_flags} (1: valid, not stale)"
    assert 0 <= info.state_age_ms <= 12.0, info.state_age_ms
    pos, vel, q, rates = _circle(info.stm32_us)
    assert odom.header.frame_id == "world" and odom.child_frame_id == "crazyflie"
    p = odom.pose.pose.position
    o = odom.pose.pose.orientation
    assert [p.x, p.y, p.z] == pos, (info.stm32_us, [p.x, p.y, p.z], pos)
    assert [o.x, o.y, o.z, o.w] == q, (info.stm32_us, [o.x, o.y, o.z, o.w], q)
    a = odom.twist.twist.angular
    assert [a.x, a.y, a.z] == rates
    # The twist is in the body frame (ROS): the world velocity turned by the orientation.
    lin = odom.twist.twist.linear
    want = _world_to_body(q, vel)
    assert all(abs(g - e) < 1e-12 for g, e in zip([lin.x, lin.y, lin.z], want)), (lin, want)
    (t,) = tf.transforms
    assert _stamp(t.header) == _stamp(odom.header)
    assert t.header.frame_id == "world" and t.child_frame_id == "crazyflie"
    tr, rot = t.transform.translation, t.transform.rotation
    assert [tr.x, tr.y, tr.z] == pos and [rot.x, rot.y, rot.z, rot.w] == q


def test_mcap_ros2_support_decodes_every_message(recording):
    mcap, frames = recording
    images, infos, odoms, tfs = [], [], {}, {}
    with open(mcap, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        for schema, channel, message, msg in reader.iter_decoded_messages():
            assert schema.encoding == "ros2msg" and channel.message_encoding == "cdr"
            if channel.topic == "/gapstream/image":
                assert schema.name == "sensor_msgs/msg/Image"
                images.append((message, msg))
            elif channel.topic == "/gapstream/odometry":
                assert schema.name == "nav_msgs/msg/Odometry"
                assert _stamp(msg.header) == message.publish_time
                odoms[message.publish_time] = msg
            elif channel.topic == "/tf":
                assert schema.name == "tf2_msgs/msg/TFMessage"
                tfs[message.publish_time] = msg
            else:
                assert channel.topic == "/gapstream/frame_info"
                assert schema.name == "gapstream_msgs/msg/FrameInfo"
                infos.append(msg)
    assert len(images) == len(infos) == len(frames)
    # One Odometry and one tf per Image, at the Image's stamp, with the trajectory's values.
    assert len(odoms) == len(tfs) == len(images)
    for (message, img), info in zip(images, infos):
        stamp = _stamp(img.header)
        _check_state(odoms[stamp], tfs[stamp], info)
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
        assert topics["/gapstream/odometry"].msgtype == "nav_msgs/msg/Odometry"
        assert topics["/tf"].msgtype == "tf2_msgs/msg/TFMessage"
        assert bag.message_count == 4 * len(frames)
        images = [
            store.deserialize_cdr(raw, c.msgtype)
            for c, _, raw in bag.messages(connections=[topics["/gapstream/image"]])
        ]
        odoms = [
            store.deserialize_cdr(raw, c.msgtype)
            for c, _, raw in bag.messages(connections=[topics["/gapstream/odometry"]])
        ]
        tfs = [
            store.deserialize_cdr(raw, c.msgtype)
            for c, _, raw in bag.messages(connections=[topics["/tf"]])
        ]
    assert len(images) == len(odoms) == len(tfs) == len(frames)
    for img, odom, tf in zip(images, odoms, tfs):
        assert _stamp(img.header) == _stamp(odom.header) == _stamp(tf.transforms[0].header)
        p = odom.pose.pose.position
        assert (p.z, odom.child_frame_id) == (1.0, "crazyflie")
        assert abs(math.hypot(p.x, p.y) - 1.0) <= 0.0015, "on the 1 m circle (mm rounding)"
    for img, (seq, px) in zip(images, sorted(frames.items())):
        got = np.asarray(img.data, dtype=np.uint8).reshape(img.height, img.width)
        assert np.array_equal(got, px), f"frame {seq} differs"


def test_a_ground_stations_recording_has_topics_per_drone(gapstream_bin, tmp_path):
    """`gapstream demo --drones 2 --mcap`: one file, /drone-01/... and /drone-02/..., as many
    Images as FrameInfos, Odometries and TFs per drone (body frame <drone>/crazyflie), each
    drone's pictures with its own name burned in."""
    mcap = tmp_path / "fleet.mcap"
    r = subprocess.run(
        [gapstream_bin, "demo", "--drones", "2", "--duration", "5", "--viewer", "none",
         "--mcap", str(mcap)],
        capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    counts, last, bodies = {}, {}, {}
    with open(mcap, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message, msg in reader.iter_decoded_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            if schema.name == "sensor_msgs/msg/Image":
                last[channel.topic] = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.width)
            if schema.name == "nav_msgs/msg/Odometry":
                bodies.setdefault(channel.topic, set()).add(msg.child_frame_id)
    assert sorted(counts) == [f"/{d}/{t}" for d in ("drone-01", "drone-02")
                              for t in ("frame_info", "image", "odometry", "tf")]
    for d in ("drone-01", "drone-02"):
        n = counts[f"/{d}/image"]
        assert n == counts[f"/{d}/frame_info"] == counts[f"/{d}/odometry"] == counts[f"/{d}/tf"] >= 10, counts
        assert bodies[f"/{d}/odometry"] == {f"{d}/crazyflie"}
    # The label bands (the drones' names) differ, the rest of the pattern is the same scene.
    a, b = last["/drone-01/image"], last["/drone-02/image"]
    assert not np.array_equal(a[-18:, :120], b[-18:, :120])
