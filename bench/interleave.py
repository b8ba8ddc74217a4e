#!/usr/bin/env python3
"""Interleaved timing of commands: each round runs every command once, in turn, so on a busy
machine they all see the same load (hyperfine runs one command's block after another's).
usage: interleave.py ROUNDS NAME=CMD [NAME=CMD...]   (CMD is split on spaces; stdout to /dev/null)
Prints one line per command: name, median, p25, p75 in ms; exits 1 if a command fails.
SHUFFLE=1: each round in a random order (seeded, so a run repeats), not the order given: what a
command leaves to the background (a sandbox's teardown after `rung run` returned) then lands
on every other command alike, not on the one after it."""
import os, random, statistics, sys, time

rounds = int(sys.argv[1])
cmds = [(a.split("=", 1)[0], a.split("=", 1)[1].split()) for a in sys.argv[2:]]
res = {name: [] for name, _ in cmds}
null = os.open("/dev/null", os.O_WRONLY)
rng = random.Random(1)
for i in range(rounds + 3):  # 3 warm-up rounds
    order = rng.sample(cmds, len(cmds)) if os.environ.get("SHUFFLE") == "1" else cmds
    for name, argv in order:
        t = time.perf_counter_ns()
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
        _, status = os.waitpid(pid, 0)
        dt = (time.perf_counter_ns() - t) / 1e6
        if status:
            sys.exit(f"{name}: {' '.join(argv)} failed (status {status})")
        if i >= 3:
            res[name].append(dt)
for name, _ in cmds:
    v = sorted(res[name])
    print(f"{name} {statistics.median(v):.2f} {v[len(v) // 4]:.2f} {v[3 * len(v) // 4]:.2f}")
