"""CharLS (through imagecodecs) on the JPEG-LS frames `gvsoc-e2e run --codec jpegls` received.

usage: charls_check.py RECEIVED_DIR INPUTS_DIR

Decodes every RECEIVED_DIR/*.jls with CharLS and checks that it is, bit-exact, one of the input
frames INPUTS_DIR/in*.pgm (binary P5, 8 bits). Prints one line per frame that is not, then
`charls_check exact=N frames=M charls=VERSION`.
"""
import glob
import os
import sys

import imagecodecs
import numpy as np


def read_pgm(path):
    data = open(path, "rb").read()
    fields = []
    i = 0
    while len(fields) < 4:
        while data[i : i + 1].isspace():
            i += 1
        if data[i : i + 1] == b"#":
            while data[i : i + 1] not in (b"\n", b""):
                i += 1
            continue
        j = i
        while not data[j : j + 1].isspace():
            j += 1
        fields.append(data[i:j])
        i = j
    magic, w, h, maxval = fields[0], int(fields[1]), int(fields[2]), int(fields[3])
    if magic != b"P5" or maxval != 255:
        raise ValueError(f"{path}: not an 8-bit binary PGM")
    return np.frombuffer(data[i + 1 : i + 1 + w * h], np.uint8).reshape(h, w)


received, inputs = sys.argv[1], sys.argv[2]
pictures = [read_pgm(p).tobytes() for p in sorted(glob.glob(os.path.join(inputs, "in*.pgm")))]
files = sorted(glob.glob(os.path.join(received, "*.jls")))
exact = 0
for f in files:
    try:
        a = imagecodecs.jpegls_decode(open(f, "rb").read())
    except Exception as e:  # noqa: BLE001 - any decoder failure is a failed frame
        print(f"{os.path.basename(f)}: CharLS: {e}")
        continue
    if a.dtype == np.uint8 and a.ndim == 2 and a.tobytes() in pictures:
        exact += 1
    else:
        print(f"{os.path.basename(f)}: CharLS decodes it to no input frame ({a.shape} {a.dtype})")
version = imagecodecs.version(dict).get("charls", "?") if isinstance(imagecodecs.version(dict), dict) else "?"
print(f"charls_check exact={exact} frames={len(files)} charls={version}")
