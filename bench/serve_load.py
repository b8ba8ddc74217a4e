#!/usr/bin/env python3
"""Load test for `rung serve`: N concurrent clients doing exec for S seconds; zero errors allowed.

    python3 bench/serve_load.py --clients 50 --seconds 60            # the full run
    python3 bench/serve_load.py --clients 50 --seconds 10            # what `make check` runs
    python3 bench/serve_load.py --socket /run/rung/rung.sock --token T   # an existing daemon

With --churn every iteration acquires a fresh sandbox, execs in it and disposes it.
Without --socket it starts a throwaway daemon from $RUNG_BUILD_DIR (default ./build). Each
client is a thread with its own connections; clients share --sandboxes sandboxes (one per
thread key). Prints one summary line; exits 1 on any error.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients" / "python"))

from rung_client import SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402


def pct(sorted_ms: list[float], p: float) -> float:
    if not sorted_ms:
        return float("nan")
    k = min(len(sorted_ms) - 1, max(0, round(p / 100 * (len(sorted_ms) - 1))))
    return sorted_ms[k]


def run(backend: SandboxBackend, clients: int, seconds: float, n_sandboxes: int,
        argv: list[str], tcp_backend: SandboxBackend | None = None, churn: bool = False) -> dict:
    spec = SandboxSpec(kind="load", egress_allow=[])
    sandboxes = [] if churn else [
        backend.acquire(SandboxKey(thread=f"load-{i}", agent="load"), spec)
        for i in range(n_sandboxes)]
    lat: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def churn_once(i: int, k: int) -> None:
        sb = backend.acquire(SandboxKey(thread=f"churn-{i}-{k}", agent="load"), spec)
        r = sb.exec(argv, timeout=30)
        if r.exit_code != 0 or r.timed_out:
            raise RuntimeError(f"exit {r.exit_code} timed_out={r.timed_out}")
        sb.dispose()

    def client(i: int) -> None:
        if churn:
            start.wait()
            k = 0
            while time.monotonic() < stop_at[0]:
                t0 = time.perf_counter()
                try:
                    churn_once(i, k)
                    lat[i].append((time.perf_counter() - t0) * 1000)
                except Exception as e:
                    with lock:
                        errors.append(f"client {i}: {type(e).__name__}: {e}")
                k += 1
            return
        sb = sandboxes[i % n_sandboxes]
        if tcp_backend is not None and i % 2:  # half the clients over TCP loopback
            sb = tcp_backend.get(sb.id)
        start.wait()
        while time.monotonic() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                r = sb.exec(argv, timeout=30)
                if r.exit_code != 0 or r.timed_out:
                    raise RuntimeError(f"exit {r.exit_code} timed_out={r.timed_out} "
                                       f"stderr={r.stderr[:200]!r}")
            except Exception as e:  # every failure counts: the target is zero
                with lock:
                    errors.append(f"client {i}: {type(e).__name__}: {e}")
                continue
            lat[i].append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.monotonic() + seconds
    t0 = time.monotonic()
    start.wait()
    for t in threads:
        t.join(seconds + 120)
    wall = time.monotonic() - t0
    all_ms = sorted(x for per in lat for x in per)
    backend.dispose_scope()
    return {
        "clients": clients, "seconds": round(wall, 2), "sandboxes": n_sandboxes,
        "requests": len(all_ms), "errors": len(errors), "rps": round(len(all_ms) / wall, 1),
        "p50_ms": round(pct(all_ms, 50), 2), "p99_ms": round(pct(all_ms, 99), 2),
        "max_ms": round(all_ms[-1], 2) if all_ms else None,
        "mean_ms": round(statistics.fmean(all_ms), 2) if all_ms else None,
        "first_errors": errors[:5],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--sandboxes", type=int, default=10)
    ap.add_argument("--socket")
    ap.add_argument("--token", default=os.environ.get("RUNG_TOKEN"))
    ap.add_argument("--tcp", action="store_true", help="half the clients over TCP loopback")
    ap.add_argument("--churn", action="store_true",
                    help="each iteration is acquire + exec + dispose of a fresh sandbox")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("argv", nargs="*", default=["/bin/true"])
    a = ap.parse_args()
    if a.socket:
        res = run(SandboxBackend(socket_path=a.socket, token=a.token), a.clients, a.seconds,
                  a.sandboxes, a.argv, churn=a.churn)
    else:
        # One tenant is the whole load here: its per-scope limits (429 beyond) fit the clients.
        lim = (f"limits load requests={2 * a.clients} connections={4 * a.clients} "
               f"sandboxes={a.sandboxes + 2 * a.clients}\n")
        with Daemon(scopes=("load",), tcp=a.tcp, extra_token_lines=lim,
                    extra_args=["--max-connections", str(max(256, 4 * a.clients))]) as d:
            b = SandboxBackend(socket_path=d.socket_path, token=d.tokens["load"])
            tb = SandboxBackend(url=d.url, token=d.tokens["load"]) if a.tcp else None
            res = run(b, a.clients, a.seconds, a.sandboxes, a.argv, tb, churn=a.churn)
    if a.json:
        print(json.dumps(res))
    else:
        print("load: " + " ".join(f"{k}={v}" for k, v in res.items() if k != "first_errors"))
        for e in res["first_errors"]:
            print("  error: " + e)
    return 0 if res["errors"] == 0 and res["requests"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
