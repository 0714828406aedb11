#!/usr/bin/env python3
"""libjpeg-turbo through Pillow, the independent JPEG encoder and decoder of gapstream_jpeg's tests
and benchmarks (run with the project venv's Python: .venv/bin/python).

    pillow_jpeg.py JOBS

JOBS is a text file, one job per line (paths relative to the job file's folder):

    encode IN.pgm OUT.jpg QUALITY RESTART_ROWS   Pillow's JPEG of IN at QUALITY with the Annex K
                                                 luminance table scaled by IJG's formula, given
                                                 explicitly (qtables=), standard Huffman tables
                                                 (optimize off), restart_marker_rows=RESTART_ROWS
                                                 (0: no restart markers)
    decode IN.jpg OUT.pgm                        libjpeg-turbo's decoding of IN, as 8-bit grey
    version                                      prints "pillow <version> libjpeg-turbo <version>"

Prints "ok <jobs>" when every job succeeded; exits non-zero with one line on the first failure.
"""
import sys
from pathlib import Path

from PIL import Image, features

# ITU-T T.81 Table K.1, natural order.
K1 = [
    16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
    14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
    18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
    49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99,
]


def scaled(quality):
    """libjpeg's jpeg_quality_scaling + jpeg_add_quant_table(force_baseline=TRUE)."""
    q = min(max(quality, 1), 100)
    scale = 5000 // q if q < 50 else 200 - 2 * q
    return [min(max((v * scale + 50) // 100, 1), 255) for v in K1]


def main():
    if len(sys.argv) != 2:
        print("usage: pillow_jpeg.py JOBS", file=sys.stderr)
        return 2
    jobs = Path(sys.argv[1])
    base = jobs.parent
    n = 0
    for line in jobs.read_text().splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "encode" and len(f) == 5:
            im = Image.open(base / f[1])
            im.load()
            if im.mode != "L":
                raise SystemExit(f"pillow_jpeg: {f[1]} is not 8-bit grey")
            quality, rows = int(f[3]), int(f[4])
            # qtables in natural order (Pillow >= 8.3 takes and returns natural order).
            im.save(base / f[2], "JPEG", qtables=[scaled(quality)], optimize=False,
                    restart_marker_rows=rows)
        elif f[0] == "decode" and len(f) == 3:
            im = Image.open(base / f[1])
            im.load()
            if im.mode != "L":
                raise SystemExit(f"pillow_jpeg: {f[1]} decodes to {im.mode}, not L")
            im.save(base / f[2])
        elif f[0] == "version" and len(f) == 1:
            print(f"pillow {Image.__version__} libjpeg-turbo {features.version('libjpeg_turbo')}")
        else:
            raise SystemExit(f"pillow_jpeg: bad job line: {line!r}")
        n += 1
    print(f"ok {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
