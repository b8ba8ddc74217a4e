#!/usr/bin/env python3
"""How long `rung dispose ID` keeps its caller, two builds against each other in one run.

    RUNG_OLD=/path/to/old/build/rung python3 bench/dispose.py [--rounds 40] [--json]

A supervised sandbox (`rung acquire`, the daemon's and the library's kind) that wrote 1 MiB
to its disk is disposed; only the dispose is timed (the CLI's start included, the same for
both builds). Each round runs both builds in a random order, each on a store of its own (the
old build needs its rung-agent beside it). Prints the medians and new / old. After the rounds,
the loop devices left backed by either store (0: the teardown finished after each dispose
returned). As root, from the repository root; the stores are removed at the end.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rung(binary: str, store: str, *args: str) -> str:
    return subprocess.run([binary, "--state-dir", store, *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def one(binary: str, store: str, n: int) -> float:
    sid = rung(binary, store, "acquire", "--scope", "bench", "--thread", f"t{n}", "--agent", "a")
    rung(binary, store, "exec", sid, "--", "/bin/sh", "-c",
         "dd if=/dev/zero of=/work/f bs=64k count=16 2>/dev/null")
    t0 = time.perf_counter()
    rung(binary, store, "dispose", sid)
    return (time.perf_counter() - t0) * 1000


def loops_under(prefixes: list[str]) -> int:
    n = 0
    for f in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            backing = Path(f).read_text()
        except OSError:
            continue
        n += any(backing.startswith(p) for p in prefixes)
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    old = os.environ.get("RUNG_OLD")
    if not old:
        print("bench/dispose.py: set RUNG_OLD to the old build's rung", file=sys.stderr)
        return 2
    subprocess.run(["make", "-s", "build/rung", "build/rung-agent"], cwd=ROOT, check=True)
    builds = {"old": old, "new": str(ROOT / "build" / "rung")}
    stores = {k: tempfile.mkdtemp(prefix="rung-bench-dispose-") for k in builds}
    times: dict[str, list[float]] = {k: [] for k in builds}
    try:
        for s in stores.values():
            os.chmod(s, 0o711)
        for k in builds:  # warm: each store's disk template and spares
            one(builds[k], stores[k], -1)
        for i in range(a.rounds):
            order = list(builds)
            random.shuffle(order)
            for k in order:
                times[k].append(one(builds[k], stores[k], i))
        deadline = time.monotonic() + 5
        while loops_under(list(stores.values())) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = loops_under(list(stores.values()))
    finally:
        for k, s in stores.items():
            subprocess.run([builds[k], "--state-dir", s, "gc"], capture_output=True)
            shutil.rmtree(s, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    if a.json:
        print(json.dumps({"median_ms": med, "new_over_old": med["new"] / med["old"],
                          "loops_left": left, "rounds": a.rounds}))
    else:
        for k, v in med.items():
            print(f"rung dispose ({k})  p50 {v:.2f} ms  ({a.rounds} rounds, interleaved)")
        print(f"new / old = {med['new'] / med['old']:.2f}x; loop devices left after 5 s: {left}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
