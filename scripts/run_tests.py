#!/usr/bin/env python3
"""Runs the workspace's test binaries several at a time (`cargo test` runs one after the other).

    scripts/run_tests.py [--jobs N] [cargo test options...]

`cargo test` runs each test binary after the previous one ended. Most of the time of `make test`'s
host step went to a handful of stream tests that wait on paced frames and sockets (a demo at
30 fps, a receiver retrying for 20 s), with a core idle. This script:

1. builds every test binary with `cargo test --no-run` (the same command, features and profile as
   `cargo test`, so nothing is compiled twice), reading the executables from cargo's JSON messages;
2. runs them in a pool of `--jobs` (default: $TEST_JOBS, else 3), the slowest first (from the previous run's times
   in target/run-tests-times.json), each with the working directory and the CARGO_* variables
   cargo gives a test; the binaries listed in EXCLUSIVE run afterwards, alone (the test that loads
   every core on purpose and measures latency under that load);
3. runs the doc tests (`cargo test --doc`);

and prints one line per binary (passed / FAILED, seconds), the output of every failed binary, a
count, and exits non-zero if anything failed. Every binary runs even after one failed.
"""

import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time

# Binaries that must have the machine to themselves: they saturate every core on purpose and
# assert on latency measured under that load.
EXCLUSIVE = {("gapstream", "demo_under_load")}

ROOT = pathlib.Path(__file__).resolve().parents[1]
SYSROOT_LIBS = []


def target_dir():
    d = os.environ.get("CARGO_TARGET_DIR")
    return pathlib.Path(d) if d else ROOT / "target"


def build(cargo, args):
    """`cargo test --no-run` with cargo's messages: [(package, target, kind, exe, manifest_dir)]."""
    cmd = [cargo, "test", "--no-run", "--message-format=json-render-diagnostics", *args]
    p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    out = []
    for line in p.stdout:
        try:
            m = json.loads(line)
        except json.JSONDecodeError:
            continue
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m["profile"]["test"]:
            continue
        pkg = m["package_id"]
        manifest = pathlib.Path(m["manifest_path"]).parent
        out.append({
            "package": package_name(pkg, manifest),
            "target": m["target"]["name"],
            "kind": m["target"]["kind"][0],
            "exe": m["executable"],
            "dir": str(manifest),
            "version": package_version(pkg),
        })
    return p.wait(), out


def package_name(package_id, manifest):
    # "path+file:///…/gapstream#0.1.0" (the directory is the name) or "…#name@0.1.0".
    frag = package_id.rsplit("#", 1)[-1]
    return frag.split("@")[0] if "@" in frag else manifest.name


def package_version(package_id):
    frag = package_id.rsplit("#", 1)[-1]
    return frag.split("@")[-1]


def sysroot_libs():
    """Where a proc-macro crate's test binary finds libstd's shared object (cargo sets this too)."""
    try:
        root = subprocess.check_output(["rustc", "--print", "sysroot"], text=True).strip()
        host = next(l.split()[1] for l in subprocess.check_output(["rustc", "-vV"], text=True)
                    .splitlines() if l.startswith("host:"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        return []
    return [os.path.join(root, "lib", "rustlib", host, "lib"), os.path.join(root, "lib")]


def run_one(t, cargo, extra, log_dir):
    env = dict(os.environ)
    libs = [str(target_dir() / "debug" / "deps"), *SYSROOT_LIBS]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    env.update({
        "LD_LIBRARY_PATH": os.pathsep.join(libs),
        "CARGO": cargo,
        "CARGO_MANIFEST_DIR": t["dir"],
        "CARGO_PKG_NAME": t["package"],
        "CARGO_PKG_VERSION": t["version"],
        "CARGO_CRATE_NAME": t["target"].replace("-", "_"),
    })
    log = log_dir / f"{t['package']}.{t['kind']}.{t['target']}.log"
    start = time.monotonic()
    with open(log, "w") as f:
        rc = subprocess.call([t["exe"], *extra], cwd=t["dir"], env=env, stdout=f,
                             stderr=subprocess.STDOUT)
    return rc, time.monotonic() - start, log


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("TEST_JOBS", "3")))
    # Everything else goes to cargo test (e.g. --locked); after `--`, to every test binary.
    a, args = ap.parse_known_args()
    extra = []
    if "--" in args:
        i = args.index("--")
        args, extra = args[:i], args[i + 1:]
    cargo = os.environ.get("CARGO") or shutil.which("cargo") or "cargo"
    SYSROOT_LIBS.extend(sysroot_libs())

    rc, tests = build(cargo, args)
    if rc != 0:
        print(f"run-tests: `cargo test --no-run` failed (exit {rc}); the binaries it built run anyway",
              flush=True)
    log_dir = target_dir() / "run-tests"
    log_dir.mkdir(parents=True, exist_ok=True)
    times_file = target_dir() / "run-tests-times.json"
    try:
        last = json.loads(times_file.read_text())
    except (OSError, ValueError):
        last = {}

    def key(t):
        return f"{t['package']}:{t['kind']}:{t['target']}"

    pool_tests = [t for t in tests if (t["package"], t["target"]) not in EXCLUSIVE]
    alone = [t for t in tests if (t["package"], t["target"]) in EXCLUSIVE]
    pool_tests.sort(key=lambda t: -last.get(key(t), 0.0))

    results = []
    lock = threading.Lock()

    def report(t, rc, secs, log):
        with lock:
            word = "passed" if rc == 0 else "FAILED"
            print(f"run-tests: {word} {secs:6.1f} s  {t['package']} {t['kind']} {t['target']}",
                  flush=True)
            results.append((t, rc, secs, log))

    def job(t):
        rc, secs, log = run_one(t, cargo, extra, log_dir)
        report(t, rc, secs, log)

    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        list(ex.map(job, pool_tests))
    for t in alone:
        job(t)

    doc_start = time.monotonic()
    doc_log = log_dir / "doc-tests.log"
    with open(doc_log, "w") as f:
        doc_rc = subprocess.call([cargo, "test", "--doc", "--quiet", *args,
                                  *(["--"] + extra if extra else [])], cwd=ROOT, stdout=f,
                                 stderr=subprocess.STDOUT)
    print(f"run-tests: {'passed' if doc_rc == 0 else 'FAILED'} {time.monotonic() - doc_start:6.1f} s"
          "  doc tests", flush=True)
    if doc_rc != 0:
        sys.stdout.write(doc_log.read_text(errors="replace"))

    times_file.write_text(json.dumps({key(t): round(s, 1) for t, _, s, _ in results}, indent=1))
    failed = [(t, log) for t, rc, _, log in results if rc != 0]
    for t, log in failed:
        print(f"\n==== run-tests: output of the failed {t['package']} {t['kind']} {t['target']}"
              f" ({log})")
        sys.stdout.write(pathlib.Path(log).read_text(errors="replace"))
    n = len(results)
    bad = len(failed) + (doc_rc != 0) + (rc != 0)
    print(f"\nrun-tests: {n - len(failed)} of {n} test binaries passed"
          f"{'' if doc_rc == 0 else ', doc tests FAILED'}"
          f"{'' if rc == 0 else ', the build FAILED'}"
          f" in {time.monotonic() - start:.0f} s ({a.jobs} at a time)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
