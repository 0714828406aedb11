#!/usr/bin/env python3
"""Save the verified frames of a gapstream drone as a dataset, and show them if OpenCV is there.

    pip install ./python                         # from the repository's top: all that saving needs
    make demo DEMO_ARGS="--keys-dir target/demo-keys" &        # a simulated drone on this machine
    python python/examples/view_and_save.py --keys target/demo-keys/receiver3.key \
        --out dataset --frames 100               # a real AI-deck: --connect 192.168.4.1:5000

Writes dataset/frame_<sequence>.png and dataset/frames.csv (sequence, key epoch, capture and
receive time, latency, suite) with the package alone. A window shows the frames when OpenCV with
its GUI is installed (`pip install opencv-python`) and there is a display; otherwise (or with
--no-window) it only saves.
"""

import argparse
import csv
import pathlib
import sys

import gapstream


def main() -> int:
    a = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    a.add_argument("--connect", default="127.0.0.1:5000")
    a.add_argument("--keys", default="target/demo-keys/receiver3.key")
    a.add_argument("--transport", default="tcp", choices=["tcp", "udp"])
    a.add_argument("--suite", default="chacha20poly1305")
    a.add_argument("--frames", type=int, default=100, help="stop after this many frames")
    a.add_argument("--out", default="dataset", help="folder for the PNGs and frames.csv")
    a.add_argument("--bayer", action="store_true", help="colour HM01B0: demosaic RGGB")
    a.add_argument("--no-window", action="store_true")
    args = a.parse_args()

    cv2 = None
    if not args.no_window:
        try:
            import cv2  # optional: only for the window (pip install opencv-python)
        except ImportError:
            print("no OpenCV (pip install opencv-python for a window): saving only", file=sys.stderr)

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    window = cv2 is not None
    try:
        rx = gapstream.Receiver(connect=args.connect, keys=args.keys, transport=args.transport,
                                suite=args.suite, max_frames=args.frames, demosaic=args.bayer)
    except gapstream.Error as e:
        print(f"gapstream: error: {e}", file=sys.stderr)
        return 1
    with rx, open(out / "frames.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["file", "sequence", "key_epoch", "capture_ns", "receive_ns", "latency_ms", "suite"])
        try:
            for fr in rx:
                name = f"frame_{fr.sequence:08}.png"
                fr.save_png(out / name)
                w.writerow([name, fr.sequence, fr.epoch, fr.capture_ns, fr.receive_ns,
                            "" if fr.latency_ms is None else f"{fr.latency_ms:.3f}", fr.suite])
                if window:
                    img = cv2.cvtColor(fr.pixels, cv2.COLOR_RGB2BGR) if fr.pixels.ndim == 3 else fr.pixels
                    try:
                        cv2.imshow("gapstream", cv2.resize(img, None, fx=2, fy=2,
                                                           interpolation=cv2.INTER_NEAREST))
                        if cv2.waitKey(1) & 0xFF in (ord("q"), 27):
                            break
                    except cv2.error:
                        window = False  # no display: save only
        except gapstream.Error as e:
            print(f"gapstream: error: {e}", file=sys.stderr)
            return 1
        s = rx.stats()
    print(f"saved {s['frames']} frames to {out}/ (frames.csv); lost {s['lost']}, "
          f"tag failures {s['tag_failures']}, latency p50 {s.get('latency_p50_ms') or 0:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
