#!/bin/sh
# Benchmark for issue 2 (the spine): run from the repository root, as root:  sh bench/spine.sh
# Measures in ONE run, so ratios compare like with like on a noisy machine:
#   cold:  `rung run -- /bin/true` (acquire + exec + dispose)  vs  bwrap with the same namespaces
#   warm:  `rung exec ID -- /bin/true` (CLI round trip to a live sandbox)  vs  bwrap cold
#   rate:  sequential warm execs through the library (bench/exec-rate)
set -eu
cd "$(dirname "$0")/.."
make -s build/rung build/rung-agent build/bench/exec-rate >/dev/null
R=$PWD/build/rung
ST=$(mktemp -d /tmp/rung-bench-XXXXXX)
trap '"$R" --state-dir "$ST" dispose-scope --scope bench >/dev/null 2>&1 || true; rm -rf "$ST"' EXIT
RUNS=${RUNS:-40}
BWRAP="bwrap --unshare-user --unshare-pid --unshare-net --unshare-ipc --unshare-uts --unshare-cgroup --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin --proc /proc --dev /dev --tmpfs /tmp /bin/true"
ID=$("$R" --state-dir "$ST" acquire --scope bench --thread warm --agent bench)
hyperfine -N -w 5 -r "$RUNS" --export-json "$ST/hf.json" \
	-n rung-run-cold "$R --state-dir $ST run -- /bin/true" \
	-n bwrap-cold "$BWRAP" \
	-n rung-exec-warm "$R --state-dir $ST exec $ID -- /bin/true" >/dev/null
python3 - "$ST/hf.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
med = {k: v["median"] * 1000 for k, v in r.items()}
for k, v in med.items():
    print(f"{k:16s} median {v:7.2f} ms")
print(f"ratio cold  rung run / bwrap      = {med['rung-run-cold']/med['bwrap-cold']:.2f}x  (target <= 1.0)")
print(f"ratio warm  rung exec / bwrap cold = {med['rung-exec-warm']/med['bwrap-cold']:.2f}x  (target <= 0.2)")
PY
RUNG_AGENT=$PWD/build/rung-agent "$PWD/build/bench/exec-rate" "$ST" "${EXECS:-2000}"
echo "(target: >= 1000 warm execs/s)"
