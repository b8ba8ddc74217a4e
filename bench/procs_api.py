#!/usr/bin/env python3
"""Benchmark background processes through `rung serve` (the Python client), each against a
peer in the same run, rounds interleaved (each round runs every measure once):

    python3 bench/procs_api.py [--n 100] [--echoes 300] [--json]

  start_first_byte  POST .../procs {"follow": true} of /bin/echo x until its first output
                    chunk (one request)  vs  exec_first_byte: POST .../exec {"stream": true}
                    of the same command until its first chunk   (ratio, target <= 1.5)
  start_then_logs   the same in two requests: POST .../procs, then GET .../logs?follow=1
  session_run       POST .../sessions/{s}/run of `true`  vs  api_exec: POST .../exec of
                    /bin/true, collected                         (ratio, target <= 1.0)
  attach_echo       one byte through the WebSocket attach to a pty `cat` until its echo comes
                    back (median, p99)  vs  exec of /bin/true (the API's round-trip floor)
A throwaway daemon on a temp store (as bench/serve.py); medians and p99 in milliseconds.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python"))

from rung_client import SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402


def stats(ms: list[float]) -> dict:
    s = sorted(ms)
    return {"n": len(s), "p50_ms": round(statistics.median(s), 3),
            "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))], 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="interleaved rounds")
    ap.add_argument("--echoes", type=int, default=300)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with Daemon(scopes=("bench",)) as d:
        b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["bench"])
        sb = b.acquire(SandboxKey(thread="bench", agent="procs"), SandboxSpec(kind="bench"))
        sess = sb.shell("/bin/sh")
        rows: dict[str, list[float]] = {k: [] for k in (
            "start_first_byte", "start_then_logs", "exec_first_byte", "session_run",
            "api_exec")}

        def start_first(one_request: bool) -> float:
            t0 = time.perf_counter()
            p = sb.start(["/bin/echo", "x"], follow=one_request)
            next(iter(p.follow(since=0)))
            t = (time.perf_counter() - t0) * 1000
            p.kill()
            return t

        def exec_first() -> float:
            t0 = time.perf_counter()
            s = sb.exec_stream(["/bin/echo", "x"])
            next(iter(s))
            t = (time.perf_counter() - t0) * 1000
            s.close()
            return t

        def timed(fn) -> float:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1000

        for _ in range(5):  # warm up
            sb.exec(["/bin/true"])
            sess.run("true")
        for _ in range(a.n):
            rows["start_first_byte"].append(start_first(True))
            rows["start_then_logs"].append(start_first(False))
            rows["exec_first_byte"].append(exec_first())
            rows["session_run"].append(timed(lambda: sess.run("true")))
            rows["api_exec"].append(timed(lambda: sb.exec(["/bin/true"])))
        t = sb.start(["/bin/cat"], pty=True)
        echo = []
        with t.attach() as at:
            for _ in range(a.echoes):
                t0 = time.perf_counter()
                at.send(b"a")
                at.recv(timeout=10)
                echo.append((time.perf_counter() - t0) * 1000)
        t.kill()
        out = {k: stats(v) for k, v in rows.items()}
        out["attach_echo"] = stats(echo)
        out["ratio_start_vs_exec"] = round(out["start_first_byte"]["p50_ms"] /
                                           out["exec_first_byte"]["p50_ms"], 2)
        out["ratio_session_vs_exec"] = round(out["session_run"]["p50_ms"] /
                                             out["api_exec"]["p50_ms"], 2)
        sb.dispose()
    if a.json:
        print(json.dumps(out))
        return 0
    for k in ("start_first_byte", "start_then_logs", "exec_first_byte", "session_run",
              "api_exec", "attach_echo"):
        print(f"{k:18} p50 {out[k]['p50_ms']:8.3f} ms   p99 {out[k]['p99_ms']:8.3f} ms")
    print(f"ratio start/exec to first byte  {out['ratio_start_vs_exec']} (target <= 1.5)")
    print(f"ratio session run/exec          {out['ratio_session_vs_exec']} (target <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
