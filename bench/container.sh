#!/bin/sh
# Benchmark for issue 3 (the container rung): run from the repository root, as root:
#   sh bench/container.sh            (RUNS=30 hyperfine runs, CYCLES=30 library cycles)
# One run measures, on the same busybox rootfs, so the ratios compare like with like:
#   lib:  cold acquire + `exec /bin/true` through librung (bench/container.c), image already
#         unpacked in the store; dispose timed apart; crun (below) timed in the same loop,
#         one run of each in turn, so both see the same load on a busy machine
#   cli:  `rung run --isolation container --image ... -- /bin/true` (acquire + exec + dispose,
#         plus the CLI's own process start)
#   crun: `crun run -b BUNDLE` of a bundle with the same rootfs and the same memory/pids/cpu
#         limits, in `unshare -m sh -c 'umount /sys/fs/cgroup/unified && exec crun ...'`
#         (crun 1.8.1 refuses this host's hybrid cgroups otherwise: docs/platform.md), minus the
#         same wrapper around /bin/true
#   then the cli row and crun interleaved, each round in a random order (bench/interleave.py
#   SHUFFLE=1): the same load for all; RUNG_OLD=/path/to/another/rung (its rung-agent beside
#   it) adds that build's cli row to the same loop (a before/after in one run)
set -eu
cd "$(dirname "$0")/.."
make -s build/rung build/rung-agent build/bench/container >/dev/null
R=$PWD/build/rung
T=$(mktemp -d /tmp/rung-bench-ctr-XXXXXX)
chmod 0711 "$T" # the sandboxes' uids must reach the store below it (mktemp makes it 0700)
ST=$T/state
trap '"$R" --state-dir "$ST" dispose-scope --scope bench-container >/dev/null 2>&1 || true; "$R" --state-dir "$ST" gc >/dev/null 2>&1 || true; rm -rf "$T"' EXIT
RUNS=${RUNS:-30}
CYCLES=${CYCLES:-30}

# The rootfs: static busybox and its applet links.
RFS=$T/rootfs
mkdir -p "$RFS/bin" "$RFS/etc" "$RFS/tmp" "$RFS/work" "$RFS/proc" "$RFS/dev" "$RFS/sys"
cp /bin/busybox "$RFS/bin/busybox"
for a in sh true ls cat echo id sleep; do ln -s busybox "$RFS/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$RFS/etc/passwd"

# rung: an OCI layout of it (umoci), imported (and so unpacked) into the store.
umoci init --layout "$T/oci" >/dev/null
umoci new --image "$T/oci:bb" >/dev/null
umoci unpack --image "$T/oci:bb" "$T/ub" >/dev/null 2>&1
rm -rf "$T/ub/rootfs" && cp -a "$RFS" "$T/ub/rootfs"
umoci repack --image "$T/oci:bb" "$T/ub" >/dev/null
"$R" --state-dir "$ST" image import "$T/oci" --tag bench/busybox:latest >/dev/null

# crun: a bundle of the same rootfs, limits as rung's defaults (512 MiB, 1 CPU, 256 pids).
B=$T/bundle
mkdir -p "$B" && cp -a "$RFS" "$B/rootfs"
(cd "$B" && crun spec)
python3 - "$B/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["process"]["args"] = ["/bin/true"]
c["process"]["terminal"] = False
c["linux"]["resources"] = {"memory": {"limit": 512 << 20},
                           "cpu": {"quota": 100000, "period": 100000},
                           "pids": {"limit": 256}}
json.dump(c, open(p, "w"))
PY
WRAP="unshare -m sh -c 'umount /sys/fs/cgroup/unified && exec /bin/true'"
CRUN="unshare -m sh -c 'umount /sys/fs/cgroup/unified && exec crun run -b $B rung-bench-$$'"

hyperfine -N -w 3 -r "$RUNS" --export-json "$T/hf.json" \
	-n crun-run "$CRUN" \
	-n crun-wrapper "$WRAP" \
	-n rung-run "$R --state-dir $ST run --isolation container --image bench/busybox -- /bin/true" \
	>/dev/null
RUNG_AGENT=$PWD/build/rung-agent "$PWD/build/bench/container" "$ST" bench/busybox "$CYCLES" "$B" >"$T/lib.txt"
python3 - "$T/hf.json" "$T/lib.txt" <<'PY'
import json, sys
r = {x["command"]: x["median"] * 1000 for x in json.load(open(sys.argv[1]))["results"]}
lib = {k: float(v) for k, v in (l.split() for l in open(sys.argv[2]))}
hf_crun = r["crun-run"] - r["crun-wrapper"]
crun = lib["crun_net_ms"]
print("interleaved, one cycle of each in turn (bench/container.c):")
print(f"  crun run, net of the wrapper    median {crun:7.2f} ms  ({lib['crun_wrapped_ms']:.2f} - {lib['wrapper_ms']:.2f})")
print(f"  rung lib acquire                median {lib['lib_acquire_ms']:7.2f} ms")
print(f"  rung lib first exec /bin/true   median {lib['lib_first_exec_ms']:7.2f} ms")
print(f"  rung lib acquire + exec         median {lib['lib_acquire_exec_ms']:7.2f} ms")
print(f"  rung lib dispose                median {lib['lib_dispose_ms']:7.2f} ms")
print(f"  ratio lib acquire+exec / crun          = {lib['lib_acquire_exec_ms']/crun:.2f}x  (target <= 0.5)")
tot = lib["lib_acquire_exec_ms"] + lib["lib_dispose_ms"]
print(f"  ratio lib acquire+exec+dispose / crun  = {tot/crun:.2f}x  (crun run includes its delete)")
print("hyperfine -N (commands one after the other):")
print(f"  crun run, net of the wrapper    median {hf_crun:7.2f} ms  ({r['crun-run']:.2f} - {r['crun-wrapper']:.2f})")
print(f"  rung run (CLI, incl. dispose)   median {r['rung-run']:7.2f} ms")
print(f"  ratio rung run (CLI) / crun            = {r['rung-run']/hf_crun:.2f}x")
PY
printf '#!/bin/sh\nexec unshare -m sh -c "umount /sys/fs/cgroup/unified && exec %s"\n' \
	"crun run -b $B rung-bench-il-$$" >"$T/crun.sh"
printf '#!/bin/sh\nexec unshare -m sh -c "umount /sys/fs/cgroup/unified && exec /bin/true"\n' \
	>"$T/wrap.sh"
RUN="run --isolation container --image bench/busybox -- /bin/true"
SHUFFLE=1 python3 bench/interleave.py "$RUNS" "crun-wrapped=/bin/sh $T/crun.sh" \
	"crun-wrapper=/bin/sh $T/wrap.sh" "rung-run=$R --state-dir $ST $RUN" \
	${RUNG_OLD:+"rung-run-old=$RUNG_OLD --state-dir $ST $RUN"} >"$T/il.txt"
python3 - "$T/il.txt" <<'PY'
import sys
m = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[1])}
crun = m["crun-wrapped"] - m["crun-wrapper"]
print("interleaved, each round in a random order (bench/interleave.py SHUFFLE=1):")
print(f"  crun run, net of the wrapper    median {crun:7.2f} ms  ({m['crun-wrapped']:.2f} - {m['crun-wrapper']:.2f})")
for k in ("rung-run", "rung-run-old"):
    if k in m:
        print(f"  {k:15s} (CLI)          median {m[k]:7.2f} ms  = {m[k] / crun:.2f}x crun (target <= 1.0)")
PY
