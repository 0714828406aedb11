"""The `gapstream` Python package against a real chain started from the CLI: `esp32-bridge` and a
simulated drone (`gapstream node`) streaming a folder of noise images, paired with
`gapstream.pair`. The package runs the Rust receiver; these tests see what a user sees."""

import re
import socket
import threading

import numpy as np
import pytest

import gapstream
from conftest import Chain

W, H, N = 324, 244, 12


@pytest.fixture(scope="module")
def chain(gapstream_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("chain")
    gapstream.pair(d / "keys")
    rng = np.random.default_rng(7)
    images = [rng.integers(0, 256, size=(H, W), dtype=np.uint8) for _ in range(N)]
    (d / "src").mkdir()
    for i, img in enumerate(images):
        (d / "src" / f"img_{i:02}.pgm").write_bytes(b"P5\n%d %d\n255\n" % (W, H) + img.tobytes())
    c = Chain(gapstream_bin, d / "keys" / "drone.key", source=d / "src", fps=25)
    yield {"dir": d, "port": c.port, "images": images}
    c.stop()


def index_of(images, px):
    for i, img in enumerate(images):
        if np.array_equal(img, px):
            return i
    return None


def test_n_frames_in_identical_n_frames_out(chain):
    images = chain["images"]
    got = []
    with gapstream.Receiver(connect=f"127.0.0.1:{chain['port']}", keys=chain["dir"] / "keys" / "receiver.key",
                            transport="tcp", suite="chacha20poly1305", max_frames=2 * N) as rx:
        for f in rx:
            got.append(f)
        stats = rx.stats()
    assert len(got) == 2 * N
    idx = [index_of(images, f.pixels) for f in got]
    assert None not in idx, "a delivered frame is not one of the drone's images"
    # Consecutive frames of the drone's cycle, so all N images exactly twice.
    assert all((b - a) % N == 1 for a, b in zip(idx, idx[1:])), idx
    assert sorted(idx) == sorted(list(range(N)) * 2)
    f = got[-1]
    assert f.pixels.dtype == np.uint8 and f.pixels.shape == (H, W) and (f.width, f.height) == (W, H)
    assert [g.sequence for g in got] == list(range(got[0].sequence, got[0].sequence + 2 * N))
    assert f.suite.startswith("chacha20poly1305") and f.epoch is not None
    # (a loaded machine queues frames for seconds: only plausibility here; make bench-stream measures)
    assert f.capture_ns <= f.receive_ns and 0 <= f.latency_ms < 60_000
    assert stats["frames"] == 2 * N and stats["tag_failures"] == 0 and not stats["running"]
    assert f.rgb().shape == (H, W, 3)
    # The drone's state comes with every frame (the simulated flight controller: a 1 m circle at
    # 1 m), and the frame's acquisition time on this machine's clock with its uncertainty.
    for g in got:
        s = g.state
        assert s is not None and s.valid and not s.stale, s
        assert abs((s.position[0] ** 2 + s.position[1] ** 2) ** 0.5 - 1.0) < 0.002 and s.position[2] == 1.0
        assert abs(sum(v * v for v in s.orientation) - 1.0) < 1e-3
        assert 0 <= s.age_ms <= 50.0 and s.exposure_end_us >= s.arrival_us
        # One machine, one clock: the stamp is the capture time give or take the estimate's error.
        # Its uncertainty is stated once a KEEPALIVE round trip (one a second) anchors the drone's
        # clock, and then bounds the error (1 ms for rounding); before, the stamp is the one-way
        # envelope (late by the link's transit: ~63 ms of air per raw frame through the bridge's
        # 10 Mbit/s WiFi model), somewhere between the capture and the arrival.
        if g.stamp_uncertainty_ns is None:
            assert g.capture_ns <= g.stamp_ns <= g.receive_ns
        else:
            assert abs(g.stamp_ns - g.capture_ns) <= g.stamp_uncertainty_ns + 1_000_000


def test_udp_frames_are_identical(chain):
    images = chain["images"]
    with gapstream.Receiver(connect=f"127.0.0.1:{chain['port']}", keys=chain["dir"] / "keys" / "receiver.key",
                            transport="udp", max_frames=N) as rx:
        frames = list(rx)
    assert len(frames) == N
    assert all(index_of(images, f.pixels) is not None for f in frames)


class TamperingProxy:
    """Forwards a TCP connection to the bridge, flipping one bit at each of `offsets` of the
    bridge-to-receiver byte stream (inside sealed frames: the handshake is long over)."""

    def __init__(self, target_port, offsets):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(1)
        self.port = self.srv.getsockname()[1]
        self.target, self.offsets, self.flipped = target_port, sorted(offsets), 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        c, _ = self.srv.accept()
        b = socket.create_connection(("127.0.0.1", self.target))
        threading.Thread(target=self.pump, args=(c, b, False), daemon=True).start()
        self.pump(b, c, True)

    def pump(self, src, dst, tamper):
        pos = 0
        try:
            while data := src.recv(65536):
                if tamper:
                    data = bytearray(data)
                    for o in self.offsets:
                        if pos <= o < pos + len(data):
                            data[o - pos] ^= 0x10
                            self.flipped += 1
                pos += len(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            dst.close()


def test_a_tampered_frame_is_counted_and_the_stream_goes_on(chain):
    images = chain["images"]
    proxy = TamperingProxy(chain["port"], [200_000 + 170_000 * k for k in range(5)])
    with gapstream.Receiver(connect=f"127.0.0.1:{proxy.port}", keys=chain["dir"] / "keys" / "receiver.key",
                            max_frames=20) as rx:
        frames = list(rx)
        stats = rx.stats()
    assert proxy.flipped == 5
    assert len(frames) == 20, "the stream goes on after a tampered frame"
    assert all(index_of(images, f.pixels) is not None for f in frames), "a tampered frame was delivered"
    assert stats["tag_failures"] >= 1, stats


def test_a_wrong_key_raises_the_cli_message(chain, tmp_path):
    gapstream.pair(tmp_path / "other")
    rx = gapstream.Receiver(connect=f"127.0.0.1:{chain['port']}", keys=tmp_path / "other" / "receiver.key",
                            idle_timeout=30)
    # Like `gapstream view` the receiver retries (a forged refusal must not stop it); the frame
    # timeout raises naming the cause: the key, by its file, and the refusal's own message.
    with pytest.raises(gapstream.Error) as e:
        rx.next(timeout=20)
    msg = str(e.value)
    assert re.search(r"no frame in 20.0 s: the drone refused \d+ handshake attempts? while the bridge was up: "
                     r"the receiver key \S*other/receiver.key is most likely not paired with this drone", msg), msg
    assert re.search(r"last: handshake attempt failed: drone refused the handshake.*paired with a different receiver key\?", msg), msg
    stats = rx.stats()
    assert stats["handshake_failures"] >= 1 and stats["frames"] == 0 and "not paired" in stats["diagnosis"], stats
    rx.close()


def test_setup_errors_raise_the_cli_messages(tmp_path):
    with pytest.raises(gapstream.Error, match="cannot read the receiver key file"):
        gapstream.Receiver(keys=tmp_path / "missing.key")
    gapstream.pair(tmp_path / "k")
    with pytest.raises(gapstream.Error, match="exists; pass --force"):
        gapstream.pair(tmp_path / "k")
    gapstream.pair(tmp_path / "k", force=True)
    gapstream.pair(tmp_path / "w", receivers=3, watchers=1)
    drone = (tmp_path / "w" / "drone.key").read_text()
    assert drone.count("\npeer_public=") == 2 and drone.count("\nwatcher_public=") == 1, drone
    with pytest.raises(gapstream.Error, match="--watchers 4"):
        gapstream.pair(tmp_path / "w", receivers=3, watchers=4, force=True)
    with pytest.raises(gapstream.Error, match="this is the drone key file"):
        gapstream.Receiver(keys=tmp_path / "k" / "drone.key")
    with pytest.raises(gapstream.Error, match="unknown transport"):
        gapstream.Receiver(keys=tmp_path / "k" / "receiver.key", transport="sctp")
