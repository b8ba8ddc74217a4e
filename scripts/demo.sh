#!/bin/sh
# rung's main job on its embedded default: run agent-written code in a `process` sandbox
# (namespaces + seccomp + no capabilities, no network), needing no image.
set -eu
cd "$(dirname "$0")/.."
R=build/rung
export RUNG_STATE_DIR=${RUNG_STATE_DIR:-/var/lib/rung}
echo "== rung run: agent-written Python in a fresh process sandbox"
$R run --kind demo -- python3 -c '
import os, socket
print("hello from a rung sandbox: uid", os.getuid(), "pid", os.getpid(), "cwd", os.getcwd())
caps = [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]
print("effective capabilities:", caps)
print("network interfaces:", sorted(n for _, n in socket.if_nameindex()))
print("host /root visible:", os.path.exists("/root"), "| host /home visible:", os.path.exists("/home"))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    print("egress: OPEN")
except OSError as e:
    print("egress: blocked (%s)" % e.strerror)
print("2 + 2 =", 2 + 2)
'
echo "== a command that outlives its timeout is killed, daemons included (exit 124)"
set +e
$R run --timeout 1 -- sh -c 'setsid sleep 60 & sleep 60'
echo "exit status: $?"
