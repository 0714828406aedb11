"""README.md's Python example as a new user runs it: the `make demo DEMO_ARGS="..."` the README
names, started from the CLI in a fresh folder, and the README's ```python block run twice in a row
in a fresh interpreter from that folder (both are extracted from README.md, so they cannot drift).
Then examples/view_and_save.py against the same demo, with nothing beyond the package installed.

The block connects to 127.0.0.1:5000, the demo's bridge port; when another program holds that port
the demo takes a free one and says so, and only then the test puts that port into the block."""

import ast
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def readme_python_part():
    text = (ROOT / "README.md").read_text()
    start = text.index("**Python.**")
    part = text[start:]
    demo_args = re.search(r'make demo DEMO_ARGS="([^"]*)"', part)
    block = re.search(r"```python\n(.*?)```", part, re.S)
    assert demo_args and block, "README.md's Python part lost its demo command or its example"
    return shlex.split(demo_args.group(1)), block.group(1)


@pytest.fixture(scope="module")
def demo(gapstream_bin, tmp_path_factory):
    work = tmp_path_factory.mktemp("first-hour")
    demo_args, block = readme_python_part()
    p = subprocess.Popen([gapstream_bin, "demo", *demo_args, "--viewer", "none"], cwd=work,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, ready = [], threading.Event()

    def read():
        for line in p.stdout:
            lines.append(line)
            if "handshake with the drone done" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    ok = ready.wait(120)
    if not ok:
        p.kill()
        pytest.fail("the demo did not stream within 120 s:\n" + "".join(lines))
    port = next(re.search(r"TCP 127\.0\.0\.1:(\d+)", l).group(1) for l in lines if " TCP 127.0.0.1:" in l)
    if port != "5000":
        block = block.replace('"127.0.0.1:5000"', f'"127.0.0.1:{port}"')
    yield {"dir": work, "block": block, "port": port, "lines": lines}
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()


def png_size(path):
    head = pathlib.Path(path).read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_the_readme_example_runs_twice_in_a_row(demo):
    for run in (1, 2):
        r = subprocess.run([sys.executable, "-c", demo["block"]], cwd=demo["dir"], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"run {run}:\n{r.stdout}\n{r.stderr}\ndemo:\n{''.join(demo['lines'])}"
        stats = ast.literal_eval(r.stdout.strip().splitlines()[-1])
        assert stats["frames"] == 60 and stats["tag_failures"] == 0, f"run {run}: {stats}"
        assert png_size(demo["dir"] / "last_frame.png") == (324, 244)
        (demo["dir"] / "last_frame.png").unlink()


def test_view_and_save_needs_only_the_package(demo, tmp_path):
    try:
        import cv2  # noqa: F401
        pytest.fail("OpenCV is in the test venv: this test must show the example works without it")
    except ImportError:
        pass
    out = tmp_path / "dataset"
    r = subprocess.run([sys.executable, str(ROOT / "python/examples/view_and_save.py"),
                        "--connect", f"127.0.0.1:{demo['port']}",
                        "--keys", str(demo["dir"] / "target/demo-keys/receiver3.key"),
                        "--frames", "20", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "saving only" in r.stderr
    assert r.stdout.startswith("saved 20 frames to "), r.stdout
    rows = (out / "frames.csv").read_text().splitlines()
    assert rows[0].startswith("file,sequence,key_epoch") and len(rows) == 21
    for row in rows[1:]:
        assert png_size(out / row.split(",")[0]) == (324, 244)
