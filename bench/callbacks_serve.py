#!/usr/bin/env python3
"""Benchmark host callbacks through `rung serve` and the Python client, in one run:

    python3 bench/callbacks_serve.py [--n 500]     (as root; build/rung-serve built)

The same loop inside the sandbox (N raw calls on $RUNG_CALLBACK_FD, one thread, each timed)
runs against an echo callback answered by the client over HTTP (NDJSON event, POST answer),
and, as the peer, on the host against a bare Unix socketpair whose other end a Python thread
answers (json.loads, json.dumps): p50/p99 in microseconds, calls/s and the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python"))

from rung_client import SandboxBackend, SandboxKey, SandboxSpec  # noqa: E402
from rung_client.testing import Daemon  # noqa: E402

LOOP = r"""
import json, os, sys, time
n = int(sys.argv[1]); fd = int(os.environ['RUNG_CALLBACK_FD']); buf = b''
def call(i):
    global buf
    os.write(fd, json.dumps({'id': i, 'name': 'echo', 'args': {'i': i}}).encode() + b'\n')
    while b'\n' not in buf:
        buf += os.read(fd, 65536)
    line, _, buf = buf.partition(b'\n')
    return json.loads(line)
for i in range(20): call(i)
lat = []; t0 = time.perf_counter()
for i in range(n):
    a = time.perf_counter_ns(); call(i); lat.append(time.perf_counter_ns() - a)
el = time.perf_counter() - t0; lat.sort()
print(lat[len(lat) // 2] / 1000, lat[min(len(lat) - 1, len(lat) * 99 // 100)] / 1000, n / el)
"""


def bare(n: int) -> list[float]:
    a, b = socket.socketpair()

    def serve():
        f = a.makefile("rb")
        for line in f:
            c = json.loads(line)
            a.sendall(json.dumps({"id": c["id"], "ok": True, "result": c["args"]},
                                 separators=(",", ":")).encode() + b"\n")
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    fd = b.fileno()
    p = subprocess.run(["/usr/bin/python3", "-c", LOOP, str(n)], pass_fds=(fd,),
                       env={"RUNG_CALLBACK_FD": str(fd)}, capture_output=True, text=True,
                       check=True)
    b.close()
    a.shutdown(socket.SHUT_RDWR)
    return [float(x) for x in p.stdout.split()]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=500)
    args = ap.parse_args()
    d = Daemon(scopes=("bench",)).start()
    try:
        be = SandboxBackend(socket_path=d.socket_path, token=d.tokens["bench"])
        sb = be.acquire(SandboxKey(thread="cb", agent="bench"),
                        SandboxSpec(kind="cb", requires=["exec", "host_callbacks"]))
        rows = {}
        for _ in range(2):  # interleaved; the second round is reported
            rows["bare_unix_json"] = bare(args.n)
            r = sb.exec(["python3", "-c", LOOP, str(args.n)], callbacks={"echo": lambda i: {"i": i}})
            rows["daemon"] = [float(x) for x in r.stdout.split()]
        for k, (p50, p99, cps) in rows.items():
            print(f"{k:15s} p50 {p50:8.1f} us  p99 {p99:8.1f} us  {cps:8.0f} calls/s")
        print(f"ratio daemon/bare p50 = {rows['daemon'][0] / rows['bare_unix_json'][0]:.1f}x")
        be.dispose_scope()
    finally:
        d.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
