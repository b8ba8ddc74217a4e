#!/usr/bin/env python3
"""Benchmark `rung serve`: the API exec round trip vs `rung exec` from the CLI, same run.

    python3 bench/serve.py [--n 300] [--cli "{rung} exec {id} -- /bin/true"]

Measures, against a throwaway daemon on a temp store (or --socket/--token for a live one):
  http_floor   GET /healthz round trip (HTTP + client overhead, no sandbox work)
  api_exec     POST /v1/sandboxes/{id}/exec of /bin/true, one client (Unix socket)
  api_exec_tcp the same over TCP loopback
  cli_exec     `rung exec` of /bin/true on the same sandbox and store (a process per call)
  vs_bwrap     api_exec and bubblewrap's cold start (bench/spine.sh's namespaces) interleaved,
               one of each per round (--rounds), so both see the same load: the issue's
               target is api_exec <= 0.25x bwrap cold (skipped, loudly, without bwrap)
and requests/s for exec at 1, 8 and 32 concurrent clients. Prints a table and, with --json,
one JSON object. The CLI row is skipped, loudly, when build/rung has no `exec` subcommand.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python"))

from rung_client import SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402


def stats(ms: list[float]) -> dict:
    s = sorted(ms)
    return {"n": len(s), "p50_ms": round(statistics.median(s), 3),
            "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))], 3),
            "mean_ms": round(statistics.fmean(s), 3)}


def timed(fn, n: int) -> list[float]:
    for _ in range(min(10, n)):  # warm up
        fn()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


BWRAP = ("--unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup "
         "--die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib "
         "--symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc --dev /dev "
         "--tmpfs /tmp /bin/true").split()


def vs_bwrap(api_exec, rounds: int) -> dict | None:
    """API exec and bwrap's cold start, alternated round by round (the same load for both)."""
    bw = shutil.which("bwrap")
    if not bw:
        print("*** SKIP vs_bwrap: no bwrap on PATH ***", file=sys.stderr)
        return None
    null = os.open(os.devnull, os.O_WRONLY)
    api, cold = [], []
    for i in range(rounds + 3):  # 3 warm-up rounds
        t0 = time.perf_counter()
        api_exec()
        t1 = time.perf_counter()
        pid = os.posix_spawn(bw, [bw, *BWRAP], os.environ,
                             file_actions=[(os.POSIX_SPAWN_DUP2, null, 1)])
        _, st = os.waitpid(pid, 0)
        t2 = time.perf_counter()
        if st:
            sys.exit(f"bwrap failed (status {st})")
        if i >= 3:
            api.append((t1 - t0) * 1000)
            cold.append((t2 - t1) * 1000)
    os.close(null)
    a, c = stats(api), stats(cold)
    return {"api_exec": a, "bwrap_cold": c, "ratio": round(a["p50_ms"] / c["p50_ms"], 3)}


def throughput(fn, clients: int, seconds: float) -> float:
    count = [0] * clients
    stop = time.monotonic() + seconds

    def w(i: int) -> None:
        while time.monotonic() < stop:
            fn()
            count[i] += 1
    ts = [threading.Thread(target=w, args=(i,)) for i in range(clients)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(count) / (time.monotonic() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=5, help="per throughput point")
    ap.add_argument("--cli", default="{rung} exec {id} -- /bin/true",
                    help="CLI command template ({rung}, {id}, {state})")
    ap.add_argument("--rounds", type=int, default=60, help="api_exec vs bwrap rounds")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    build = Path(os.environ.get("RUNG_BUILD_DIR", ROOT / "build"))
    res: dict = {}
    # one tenant is the whole benchmark: its per-scope limits (429 beyond) fit 32 clients
    with Daemon(scopes=("bench",), tcp=True,
                extra_token_lines="limits bench requests=128 connections=256\n") as d:
        b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["bench"])
        tb = SandboxBackend(url=d.url, token=d.tokens["bench"])
        sb = b.acquire(SandboxKey("bench", "bench"), SandboxSpec(kind="bench", egress_allow=[]))
        tsb = tb.get(sb.id)
        res["http_floor"] = stats(timed(b.health, a.n))
        res["api_exec"] = stats(timed(lambda: sb.exec(["/bin/true"]), a.n))
        res["api_exec_tcp"] = stats(timed(lambda: tsb.exec(["/bin/true"]), a.n))
        res["vs_bwrap"] = vs_bwrap(lambda: sb.exec(["/bin/true"]), a.rounds)
        rung = build / "rung"
        argv = a.cli.format(rung=rung, id=sb.id, state=d.state_dir).split()
        env = dict(os.environ, RUNG_STATE_DIR=d.state_dir)
        probe = (subprocess.run(argv, env=env, capture_output=True, timeout=60)
                 if rung.exists() else None)
        if probe is not None and probe.returncode == 0:
            res["cli_exec"] = stats(timed(lambda: subprocess.run(argv, env=env, check=True,
                                                                 capture_output=True),
                                          max(30, a.n // 3)))
            res["api_vs_cli"] = round(res["api_exec"]["p50_ms"] / res["cli_exec"]["p50_ms"], 3)
        else:
            why = "build/rung not built" if probe is None else (
                f"`{' '.join(argv)}` failed: {probe.stderr.decode()[:200]!r}")
            print(f"*** SKIP cli_exec: {why} ***", file=sys.stderr)
            res["cli_exec"] = None
        res["api_overhead_ms"] = round(res["api_exec"]["p50_ms"] - res["http_floor"]["p50_ms"], 3)
        res["exec_rps"] = {c: round(throughput(lambda: sb.exec(["/bin/true"]), c, a.seconds), 1)
                           for c in (1, 8, 32)}
        res["healthz_rps_8"] = round(throughput(b.health, 8, a.seconds), 1)
        b.dispose_scope()
    res["hyperfine"] = bool(shutil.which("hyperfine"))
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{'measure':<14} {'p50 ms':>9} {'p99 ms':>9} {'mean ms':>9}")
    for k in ("http_floor", "api_exec", "api_exec_tcp", "cli_exec"):
        v = res.get(k)
        if v:
            print(f"{k:<14} {v['p50_ms']:>9.3f} {v['p99_ms']:>9.3f} {v['mean_ms']:>9.3f}")
        else:
            print(f"{k:<14} {'skipped':>9}")
    vb = res.get("vs_bwrap")
    if vb:
        print(f"interleaved ({a.rounds} rounds): api_exec {vb['api_exec']['p50_ms']:.3f} ms, bwrap "
              f"cold {vb['bwrap_cold']['p50_ms']:.3f} ms: api_exec / bwrap cold = {vb['ratio']}x "
              "(target <= 0.25x)")
    if res.get("api_vs_cli") is not None:
        print(f"api_exec / cli_exec (p50): {res['api_vs_cli']}")
    print(f"exec requests/s by clients: {res['exec_rps']}; healthz requests/s (8): "
          f"{res['healthz_rps_8']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
