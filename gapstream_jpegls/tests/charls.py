"""CharLS (through imagecodecs) on the files the Rust test `charls.rs` wrote into DIR.

  NAME_WxHxC.raw      a picture, C component planes of W x H bytes one after the other
  NAME.ours.jls       our encoder's stream of it

writes
  NAME.ours.dec.raw   CharLS's decoding of NAME.ours.jls, component-planar
  NAME_WxHxC.pK.charls.jls   CharLS's lossless encoding of plane K (default parameters)
"""
import glob
import os
import re
import sys

import imagecodecs
import numpy as np

d = sys.argv[1]
for f in sorted(glob.glob(os.path.join(d, "*.ours.jls"))):
    a = imagecodecs.jpegls_decode(open(f, "rb").read())
    if a.ndim == 3:
        a = np.ascontiguousarray(a.transpose(2, 0, 1))
    open(f[: -len(".jls")] + ".dec.raw", "wb").write(a.astype(np.uint8).tobytes())
for f in sorted(glob.glob(os.path.join(d, "*.raw"))):
    m = re.search(r"_(\d+)x(\d+)x(\d+)\.raw$", f)
    if not m:
        continue
    w, h, c = map(int, m.groups())
    planes = np.frombuffer(open(f, "rb").read(), np.uint8).reshape(c, h, w)
    for k in range(c):
        # imagecodecs' own estimate of the output size is too small for some small noisy
        # pictures ("destination buffer is too small"): give it room.
        code = imagecodecs.jpegls_encode(
            np.ascontiguousarray(planes[k]), level=0, out=w * h * 8 + 4096
        )
        open(f[: -len(".raw")] + f".p{k}.charls.jls", "wb").write(code)
print("charls.py: charls", imagecodecs.version(dict)["charls"] if isinstance(imagecodecs.version(dict), dict) else "")
