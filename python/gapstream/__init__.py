"""gapstream: the verified frames of a GAP8 nano-drone's encrypted camera stream, in Python.

Everything security-relevant runs in the Rust receiver of ``gapstream view`` (the Noise_KK
handshake, per-frame AEAD verification, the replay window, rekeys, reconnects); this package
hands its verified frames over as numpy arrays::

    import gapstream
    with gapstream.Receiver(connect="192.168.4.1:5000", keys="keys/receiver.key") as rx:
        for frame in rx:
            print(frame.sequence, frame.latency_ms, frame.pixels.shape)

Errors are raised as :class:`gapstream.Error` with the message the CLI prints.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Iterator, Optional

import numpy as np

from ._gapstream import GapstreamError as Error
from ._gapstream import RawGround as _RawGround
from ._gapstream import RawReceiver as _RawReceiver
from ._gapstream import demosaic_rggb as _demosaic_rggb
from ._gapstream import encode_png as _encode_png
from ._gapstream import pair as _pair

__all__ = ["Error", "Frame", "Ground", "Receiver", "State", "pair"]
__version__ = "0.1.0"


@dataclasses.dataclass(frozen=True)
class State:
    """The drone's state when a frame was exposed, as its flight controller estimated it: the record
    in the frame's associated data, authenticated with the frame (docs/protocol.md, section 6)."""

    valid: bool
    """The drone held a sample from the flight controller (else every value below is 0)."""
    stale: bool
    """The sample was older than the drone's bound when the exposure ended (sent, flagged)."""
    stm32_us: int
    """The flight controller's time of the sample, us (wraps every 71.6 min)."""
    arrival_us: int
    """When the sample reached the GAP8, us of the drone's clock."""
    exposure_end_us: int
    """When the frame's exposure ended, us of the drone's clock."""
    position: tuple
    """x, y, z in m (world frame)."""
    velocity: tuple
    """m/s, world frame."""
    acceleration: tuple
    """m/s^2."""
    orientation: tuple
    """Unit quaternion (x, y, z, w)."""
    rates: tuple
    """Body rates roll, pitch, yaw in rad/s."""

    @property
    def age_ms(self) -> Optional[float]:
        """The sample's age at the end of the exposure, ms (None without a sample)."""
        if not self.valid or self.exposure_end_us < self.arrival_us:
            return None
        return (self.exposure_end_us - self.arrival_us) / 1000.0


@dataclasses.dataclass(frozen=True)
class Frame:
    """One verified frame."""

    sequence: int
    """The drone's frame sequence number (authenticated; replays are rejected)."""
    epoch: Optional[int]
    """Key epoch the frame was sealed under (None for the stock plaintext stream)."""
    capture_ns: Optional[int]
    """Capture time on the drone, Unix ns (authenticated header field)."""
    receive_ns: int
    """When the receiver delivered it, Unix ns on this machine."""
    latency_ms: Optional[float]
    """Capture to delivery (None when the clocks make it implausible)."""
    suite: str
    """Negotiated suite / key establishment, e.g. ``chacha20poly1305 / x25519``."""
    width: int
    height: int
    pixels: np.ndarray
    """The sensor's pixels, ``uint8`` of shape (height, width), read-only (a coded frame's
    decoded samples)."""
    pixel_format: int = 0
    """The authenticated pixel-format code: 0 GRAY8, 1 BAYER_RGGB8, 3 JPEG, 4 JPEG-LS,
    5 JPEG-LS of an RGGB mosaic (docs/protocol.md)."""
    coded: Optional[bytes] = None
    """A coded frame's payload as it verified (the JPEG file, the JPEG-LS stream); None for raw."""
    stamp_ns: int = 0
    """Acquisition time on this machine's clock, Unix ns, estimated from the stream (the drone's
    clock offset and drift: KEEPALIVE round trips and the frames' delays); ``receive_ns`` when the
    stream carries no capture time. What ROS stamps would be."""
    stamp_uncertainty_ns: Optional[int] = None
    """How far ``stamp_ns`` may be off: half the best KEEPALIVE round trip plus the drift's error
    (None without an estimate, and before the first round trip, when the stamp is late by the
    link's minimum transit, which the stream cannot tell)."""
    state: Optional[State] = None
    """The drone's state with the frame (None when the drone sends none)."""

    def rgb(self) -> np.ndarray:
        """The frame demosaiced as an RGGB Bayer mosaic (colour HM01B0): ``uint8`` (height, width, 3)."""
        raw = _demosaic_rggb(self.pixels.tobytes(), self.width, self.height)
        return np.frombuffer(raw, dtype=np.uint8).reshape(self.height, self.width, 3)

    def png(self) -> bytes:
        """``pixels`` encoded as PNG (grey, or RGB for a demosaiced frame)."""
        channels = 3 if self.pixels.ndim == 3 else 1
        return _encode_png(np.ascontiguousarray(self.pixels).tobytes(), self.width, self.height, channels)

    def save_png(self, path: "str | os.PathLike[str]") -> None:
        """Writes ``pixels`` as a PNG file (needs nothing beyond this package)."""
        with open(path, "wb") as f:
            f.write(self.png())


def _frame(t: tuple, demosaic: bool) -> Frame:
    """A frame from the native module's tuple (python/src/lib.rs, ``FrameTuple``)."""
    seq, epoch, cap, recv, lat, suite, w, h, raw, (fmt, coded), (stamp, unc), st = t
    px = np.frombuffer(raw, dtype=np.uint8).reshape(h, w)
    if demosaic:
        px = np.frombuffer(_demosaic_rggb(raw, w, h), dtype=np.uint8).reshape(h, w, 3)
    state = None
    if st is not None:
        flags, stm32, arrival, end, pos, vel, acc, q, rates = st
        state = State(bool(flags & 1), bool(flags & 2), stm32, arrival, end, tuple(pos),
                      tuple(vel), tuple(acc), tuple(q), tuple(rates))
    return Frame(seq, epoch, cap, recv, lat, suite, w, h, px, fmt, coded, stamp, unc, state)


class Receiver:
    """Receives from a bridge (an AI-deck's ESP32, or ``esp32-bridge``) and yields :class:`Frame` s.

    Arguments are those of ``gapstream view``: ``connect`` the bridge's address, ``keys`` the
    receiver's key file from :func:`pair`, ``transport`` ``"tcp"`` or ``"udp"``, ``suite``
    (``chacha20poly1305``, ``aes128gcm``, the unauthenticated ``chacha20`` / ``aes128ctr``,
    ``none``, or ``stock`` for Bitcraze's plaintext stream), ``kex`` (``x25519``, ``p256``,
    ``rsa2048``). The stream ends after ``duration`` seconds or ``max_frames`` frames, or at
    :meth:`close`. ``demosaic=True`` makes ``pixels`` the RGB image of an RGGB mosaic.
    ``frame_timeout``: iteration raises (see :meth:`next`) after that long without a frame.
    ``fec=True`` (with ``transport="udp"``) asks the bridge for forward error correction: lost
    packets are rebuilt from parity packets (``stats()`` has ``fec_recovered``,
    ``fec_unrecoverable_blocks``, ``fec_redundancy_pct``).
    """

    def __init__(
        self,
        connect: str = "127.0.0.1:5000",
        keys: "str | os.PathLike[str]" = "keys/receiver.key",
        transport: str = "tcp",
        suite: str = "chacha20poly1305",
        kex: str = "x25519",
        *,
        packet_size: int = 1020,
        duration: Optional[float] = None,
        max_frames: Optional[int] = None,
        idle_timeout: float = 3.0,
        demosaic: bool = False,
        frame_timeout: Optional[float] = None,
        keylog: "Optional[str | os.PathLike[str]]" = None,
        verbose: bool = False,
        fec: bool = False,
    ) -> None:
        self._demosaic = demosaic
        self._frame_timeout = frame_timeout
        self._rx = _RawReceiver(
            connect, os.fspath(keys), transport, suite, kex, packet_size, duration,
            max_frames, idle_timeout, None if keylog is None else os.fspath(keylog), verbose, fec,
        )

    def next(self, timeout: Optional[float] = None) -> Optional[Frame]:
        """The next frame; None at the end of the stream. After ``timeout`` s without a frame:
        :class:`Error` with the receiver's last message (``handshake refused: ...`` for a wrong
        key: like ``gapstream view`` the receiver keeps retrying), or TimeoutError."""
        t = self._rx.next_frame(timeout)
        if t is None:
            return None
        return _frame(t, self._demosaic)

    def __iter__(self) -> Iterator[Frame]:
        while True:
            f = self.next(self._frame_timeout)
            if f is None:
                return
            yield f

    def stats(self) -> dict:
        """Counters (frames, lost, tag_failures, replays, handshakes, rekeys, key_epoch, fps,
        latency percentiles, state): live while running, final after the stream ended.
        ``dropped``: frames this receiver's queue let go because Python fell behind (it keeps
        the freshest 64; the receiver never waits for Python). ``diagnosis``: why no frame
        comes, when the receiver can tell (a key the drone refuses, ...)."""
        return self._rx.stats()

    def close(self) -> None:
        """Stops the receiver (it leaves the drone's group properly)."""
        self._rx.close()

    def __enter__(self) -> "Receiver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Ground:
    """A ground station: every drone of a fleet file at once (``gapstream ground``), each with its
    own receiver (handshake, verification, replay window, rekeys, reconnects)::

        with gapstream.Ground(fleet="fleet.toml") as ground:
            for name, frame in ground.frames():
                print(name, frame.sequence, frame.pixels.shape)

    ``fleet``: the TOML fleet file (name, address or id, receiver_key, drone_public_key per
    drone). ``discover``: find members named by ``id`` over mDNS on these interfaces (``"all"``,
    ``"lo"``, or a name) first. The receivers keep the freshest 64 frames of each drone for
    Python: one drone Python falls behind on never pushes out another drone's frames.
    """

    def __init__(
        self,
        fleet: "str | os.PathLike[str]",
        transport: str = "tcp",
        suite: str = "chacha20poly1305",
        kex: str = "x25519",
        *,
        packet_size: int = 1020,
        duration: Optional[float] = None,
        discover: Optional[str] = None,
        discover_secs: float = 3.0,
        demosaic: bool = False,
        frame_timeout: Optional[float] = None,
        verbose: bool = False,
    ) -> None:
        self._demosaic = demosaic
        self._frame_timeout = frame_timeout
        self._g = _RawGround(
            os.fspath(fleet), transport, suite, kex, packet_size, duration, discover,
            discover_secs, verbose,
        )

    @property
    def names(self) -> list:
        """The drones received, by name."""
        return self._g.names()

    def next(self, timeout: Optional[float] = None) -> "Optional[tuple[str, Frame]]":
        """The next frame of any drone as ``(name, frame)``; None once every receiver stopped
        (``duration``, :meth:`close`). TimeoutError after ``timeout`` s without a frame."""
        t = self._g.next_frame(timeout)
        if t is None:
            return None
        name, f = t
        return name, _frame(f, self._demosaic)

    def frames(self) -> "Iterator[tuple[str, Frame]]":
        """``for name, frame in ground.frames()``: every drone's frames as they come."""
        while True:
            item = self.next(self._frame_timeout)
            if item is None:
                return
            yield item

    def stats(self) -> dict:
        """Each drone's counters by name (frames, lost, tag_failures, replays, handshakes,
        rekeys, key_epoch, fps, state, ...): live while running, final after."""
        return self._g.stats()

    def close(self) -> None:
        """Stops every drone's receiver."""
        self._g.close()

    def __enter__(self) -> "Ground":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pair(
    dir: "str | os.PathLike[str]" = "keys", receivers: int = 1, force: bool = False, watchers: int = 0
) -> None:
    """``gapstream pair``: writes ``dir/drone.key`` and ``dir/receiver.key`` (mode 0600); with
    ``receivers > 1`` also ``receiver2.key``, ...; the last ``watchers`` receivers watch only
    (the drone refuses their SET_QUALITY)."""
    _pair(os.fspath(dir), receivers, force, watchers)
