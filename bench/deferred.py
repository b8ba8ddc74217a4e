#!/usr/bin/env python3
"""What a cold start leaves to the kernel's own threads: rung run against bwrap, per run.

    python3 bench/deferred.py [--blocks 6] [--runs 20] [--gap-ms 300] [--rung-opts "--disk 256M"]
                              [--json]

Much of a sandbox's teardown is not done by any process of ours: the kernel defers it to
its threads (kworkers: the network namespace's cleanup_net, cgroup css release and free,
the loop device's and the block layer's work; ksoftirqd and the RCU threads: the objects
freed after a grace period). Whatever runs next shares the CPUs with it, which is what
bench/follow.py's `left behind` ratio sees, and why it does not shrink with a longer gap
between commands (lazy RCU batches callbacks for up to seconds).

This bench runs `rung run -- /bin/true` and bwrap (bench/bwrap.sh's line) in alternate
blocks of --runs commands each, a --gap-ms pause after each command, and sums the CPU time
of every kernel thread (/proc/PID/schedstat: each is a process of one thread; PF_KTHREAD
only) over each block. It prints, per command, the median over its blocks of that sum per
run, the ratio rung / bwrap, the difference, and the kernel threads (by name, numbers
dropped; each one's median over the blocks) where the difference is. Threads that exit
during a block lose their share (a small undercount for both). Background work (kdamond,
timers) lands in both alike. As root, from the repository root, on a throwaway store it
removes after.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from follow import bwrap_argv, remove_store, run_quiet  # noqa: E402

PF_KTHREAD = 0x00200000


def kthreads() -> dict[int, tuple[str, int]]:
    """tid -> (name, ns on a CPU), for every kernel thread now. A kworker's name changes with
    its work (its suffix): a thread is its tid."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = open(f"/proc/{pid}/stat").read()
            # flags: the 9th field, the 7th after the name's closing parenthesis
            if not int(stat[stat.rindex(")") + 2:].split()[6]) & PF_KTHREAD:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            ns = int(open(f"/proc/{pid}/schedstat").read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        out[int(pid)] = (name, ns)
    return out


def family(name: str) -> str:
    """kworker/1:2H-kblockd -> kworker; ksoftirqd/0 -> ksoftirqd; jbd2/vda-8 -> jbd2."""
    return re.split(r"[/:]", name, maxsplit=1)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=6, help="blocks per command (default 6)")
    ap.add_argument("--runs", type=int, default=20, help="commands per block (default 20)")
    ap.add_argument("--gap-ms", type=float, default=300, help="pause after each command (300)")
    ap.add_argument("--rung-opts", default="", metavar="OPTS",
                    help='spec options for rung run, split on spaces (e.g. "--disk 256M": a '
                         "tmpfs disk, as --memory 512M by default covers it)")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    a = ap.parse_args()
    if a.blocks < 1 or a.runs < 1:
        ap.error("--blocks and --runs: at least 1")
    build = Path(os.environ.get("RUNG_BUILD_DIR", ROOT / "build"))
    if not (build / "rung").exists():
        sys.exit(f"deferred.py: {build / 'rung'} not built (make)")
    store = tempfile.mkdtemp(prefix="rung-bench-deferred.")
    cmds = {"rung": [str(build / "rung"), "--state-dir", store, "run", *a.rung_opts.split(),
                     "--", "/bin/true"],
            "bwrap": bwrap_argv()}
    null = os.open(os.devnull, os.O_WRONLY)

    def run(name: str) -> None:
        run_quiet(name, cmds[name], null)

    per_run: dict[str, list[float]] = {k: [] for k in cmds}
    by_family: dict[str, list[dict[str, float]]] = {k: [] for k in cmds}  # a dict per block
    try:
        for name in cmds:  # warm up (the store's templates and spares, the page cache)
            for _ in range(3):
                run(name)
        time.sleep(a.gap_ms / 1000)
        for b in range(a.blocks * 2):
            name = list(cmds)[b % 2]
            before = kthreads()
            for _ in range(a.runs):
                run(name)
                time.sleep(a.gap_ms / 1000)
            after = kthreads()
            total = 0
            fam: dict[str, float] = {}
            for tid, (kname, ns) in after.items():
                d = ns - before.get(tid, ("", 0))[1]  # a new thread: all of its time
                if d < 0:  # its tid reused by a new thread in the block
                    d = ns
                total += d
                fam[family(kname)] = fam.get(family(kname), 0) + d / a.runs / 1e6
            by_family[name].append(fam)
            per_run[name].append(total / a.runs / 1e6)
    finally:
        remove_store(build, store)
    med = {k: statistics.median(v) for k, v in per_run.items()}
    names = {f for blocks in by_family.values() for b in blocks for f in b}
    # each thread family's median over a command's blocks (one block's burst is not its own)
    fams = {k: {f: statistics.median(b.get(f, 0) for b in v) for f in names}
            for k, v in by_family.items()}
    diff = {f: fams["rung"][f] - fams["bwrap"][f] for f in names}
    top = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:6]
    res = {"blocks": a.blocks, "runs": a.runs, "gap_ms": a.gap_ms, "rung_opts": a.rung_opts,
           "kthread_ms_per_run": med, "blocks_ms_per_run": per_run,
           "ratio": med["rung"] / med["bwrap"] if med["bwrap"] else None,
           "difference_ms": med["rung"] - med["bwrap"],
           "difference_by_thread_ms": dict(top)}
    if a.json:
        print(json.dumps(res))
        return 0
    for k in cmds:
        v = per_run[k]
        print(f"{k:6s} kernel threads' CPU per run: median {med[k]:.3f} ms "
              f"(blocks {min(v):.3f}-{max(v):.3f})")
    if res["ratio"] is not None:
        print(f"ratio  rung / bwrap = {res['ratio']:.2f}x, difference "
              f"{res['difference_ms']:+.3f} ms per run")
    print("where (rung minus bwrap, ms per run): " +
          ", ".join(f"{f} {d:+.3f}" for f, d in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
