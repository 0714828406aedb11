"""A Zenoh subscriber in its own process: listens on ENDPOINT, stores every payload published on
`gapstream/<drone>/image` as OUT/image_NNNNN.cdr and the stats as OUT/stats.jsonl, prints `ready`
once subscribed and exits after COUNT images or TIMEOUT seconds. DRONE `*` (a ground station):
every drone's, each under OUT/<drone>/ by the key it came on."""

import pathlib
import sys
import threading
import time

import zenoh


def main() -> int:
    endpoint, drone, out, count, timeout = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    out.mkdir(parents=True, exist_ok=True)
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("listen/endpoints", f'["{endpoint}"]')
    conf.insert_json5("scouting/multicast/enabled", "false")
    n = 0
    done = threading.Event()

    def under(sample):
        if drone != "*":
            return out
        d = out / str(sample.key_expr).split("/")[1]
        d.mkdir(exist_ok=True)
        return d

    def on_image(sample):
        nonlocal n
        if n < count:
            (under(sample) / f"image_{n:05}.cdr").write_bytes(sample.payload.to_bytes())
            n += 1
        if n >= count:
            done.set()

    def on_stats(sample):
        with open(under(sample) / "stats.jsonl", "a") as f:
            f.write(sample.payload.to_string() + "\n")

    with zenoh.open(conf) as s:
        s.declare_subscriber(f"gapstream/{drone}/image", on_image)
        s.declare_subscriber(f"gapstream/{drone}/stats", on_stats)
        print("ready", flush=True)
        done.wait(timeout)
        time.sleep(0.2)
    print(f"received {n} images", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
