#!/usr/bin/env python3
"""What a cold `rung run` leaves behind: each cold start timed after each, in a random order.

    python3 bench/follow.py [--rounds 40] [--gap-ms 50] [--json]

`rung run -- /bin/true` returns before its teardown is done (its heir releases the disk, the
cgroup and the namespaces after the CLI has exited: docs/architecture.md), so its cost can
land on whatever starts next. spine.sh's interleaved loop spreads that cost over every
command of a round, bwrap included. This bench times the four ordered pairs of {rung run,
bwrap} (spine.sh's namespaces, bench/bwrap.sh), --rounds times each, shuffled, a --gap-ms
pause before each pair, and prints the median of the second command of each pair:

  X after Y   X's cold start right after Y's has returned

and the ratios: `rung after bwrap / bwrap after bwrap` (a start's own latency, both behind
the same predecessor), `rung after rung / bwrap after bwrap` (back to back, each behind
itself: what hyperfine's blocks measure) and `bwrap after rung / bwrap after bwrap` (what a
run's teardown costs the next start). As root, from the repository root, on a throwaway
store it removes after.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def bwrap_argv() -> list[str]:
    """bench/bwrap.sh's command line (the one peer of every cold-start target)."""
    bw = shutil.which("bwrap")
    if not bw:
        sys.exit("follow.py: no bwrap on PATH (scripts/setup-deps.sh test installs it)")
    text = (ROOT / "bench" / "bwrap.sh").read_text()
    m = re.search(r'^BWRAP="\$\(command -v bwrap\) ([^"]*)"', text, re.M)
    if not m:
        sys.exit("follow.py: bench/bwrap.sh: no BWRAP= line")
    return [bw, *m.group(1).split()]


def run_quiet(name: str, argv: list[str], null: int) -> None:
    """argv to its end, stdout on null; a failure raises."""
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
    _, st = os.waitpid(pid, 0)
    if st:
        raise RuntimeError(f"{name} failed (wait status {st})")


def remove_store(build: Path, store: str) -> None:
    """gc the throwaway store, then remove it. The last run's heir may still be filling its
    spare disks after the CLI returned (docs/architecture.md): retry for up to 2 s, then say
    what is left."""
    subprocess.run([str(build / "rung"), "--state-dir", store, "gc"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(40):
        shutil.rmtree(store, ignore_errors=True)
        if not os.path.exists(store):
            return
        time.sleep(0.05)
    print(f"*** {store} could not be removed: remove it by hand ***", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=40, help="pairs of each kind (default 40, at least 2)")
    ap.add_argument("--gap-ms", type=float, default=50, help="pause before each pair (50)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = ap.parse_args()
    if a.rounds < 2:
        ap.error("--rounds: at least 2 (quartiles need two)")
    build = Path(os.environ.get("RUNG_BUILD_DIR", ROOT / "build"))
    if not (build / "rung").exists():
        sys.exit(f"follow.py: {build / 'rung'} not built (make)")
    store = tempfile.mkdtemp(prefix="rung-bench-follow.")
    cmds = {"rung": [str(build / "rung"), "--state-dir", store, "run", "--", "/bin/true"],
            "bwrap": bwrap_argv()}
    null = os.open(os.devnull, os.O_WRONLY)

    def timed(name: str) -> float:
        t0 = time.perf_counter()
        run_quiet(name, cmds[name], null)
        return (time.perf_counter() - t0) * 1000

    res: dict[str, list[float]] = {}
    try:
        for _ in range(5):  # warm up
            timed("rung")
            timed("bwrap")
        pairs = [(x, y) for x in cmds for y in cmds] * a.rounds
        random.shuffle(pairs)
        for first, second in pairs:
            time.sleep(a.gap_ms / 1000)
            timed(first)
            res.setdefault(f"{second} after {first}", []).append(timed(second))
    finally:
        remove_store(build, store)
    med = {k: statistics.median(v) for k, v in sorted(res.items())}
    ratios = {
        "start": med["rung after bwrap"] / med["bwrap after bwrap"],
        "back_to_back": med["rung after rung"] / med["bwrap after bwrap"],
        "left_behind": med["bwrap after rung"] / med["bwrap after bwrap"],
    }
    if a.json:
        print(json.dumps({"rounds": a.rounds, "median_ms": med, "ratios": ratios}))
        return 0
    for k, v in med.items():
        q = statistics.quantiles(res[k], n=4)
        print(f"{k:18s} median {v:7.2f} ms  (p25 {q[0]:.2f}, p75 {q[2]:.2f})")
    print(f"ratio start         rung after bwrap / bwrap after bwrap = {ratios['start']:.3f}x")
    print(f"ratio back to back  rung after rung / bwrap after bwrap  = "
          f"{ratios['back_to_back']:.3f}x")
    print(f"left behind         bwrap after rung / bwrap after bwrap = "
          f"{ratios['left_behind']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
