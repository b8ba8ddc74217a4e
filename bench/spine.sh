#!/bin/sh
# Benchmark for issue 2 (the spine): run from the repository root, as root:  sh bench/spine.sh
# Measures in ONE run, so ratios compare like with like on a noisy machine (hyperfine, then the
# same commands interleaved round by round, bench/interleave.py):
#   cold:  `rung run -- /bin/true` (acquire + exec + dispose)  vs  bwrap with the same namespaces;
#          interleaved also `rung run --disk 256M` (rung-run-tmpfs: a disk the 512 MiB memory
#          limit covers, so a tmpfs instead of the ext4 image on a loop device)
#   warm:  `rung exec ID -- /bin/true` (CLI round trip to a live sandbox)  vs  bwrap cold
#   rate:  sequential warm execs through the library (bench/exec-rate)
#   floors: /bin/true and `rung --version` started bare (a CLI exec costs at least both)
# RUNG_TRACE=/abs/file on any of these prints phase timestamps (bench/trace-median.sh).
set -eu
cd "$(dirname "$0")/.."
make -s build/rung build/rung-agent build/bench/exec-rate >/dev/null
R=$PWD/build/rung
ST=$(mktemp -d /tmp/rung-bench-XXXXXX)
trap '"$R" --state-dir "$ST" dispose-scope --scope bench >/dev/null 2>&1 || true; rm -rf "$ST"' EXIT
RUNS=${RUNS:-40}
. bench/bwrap.sh
ID=$("$R" --state-dir "$ST" acquire --scope bench --thread warm --agent bench)
hyperfine -N -w 5 -r "$RUNS" --export-json "$ST/hf.json" \
	-n rung-run-cold "$R --state-dir $ST run -- /bin/true" \
	-n bwrap-cold "$BWRAP" \
	-n rung-exec-warm "$R --state-dir $ST exec $ID -- /bin/true" \
	-n true /bin/true -n rung-version "$R --version" >/dev/null
python3 - "$ST/hf.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
med = {k: v["median"] * 1000 for k, v in r.items()}
for k, v in med.items():
    print(f"{k:16s} median {v:7.2f} ms")
print(f"ratio cold  rung run / bwrap      = {med['rung-run-cold']/med['bwrap-cold']:.2f}x  (target <= 1.0)")
print(f"ratio warm  rung exec / bwrap cold = {med['rung-exec-warm']/med['bwrap-cold']:.2f}x  (target <= 0.2)")
print(f"floors: /bin/true {med['true']:.2f} ms, rung --version {med['rung-version']:.2f} ms (a CLI exec is both)")
PY
echo "interleaved, $RUNS rounds (each round runs each command once, in a random order: the same load for all):"
SHUFFLE=1 python3 bench/interleave.py "$RUNS" "rung-run-cold=$R --state-dir $ST run -- /bin/true" \
	"bwrap-cold=$BWRAP" "rung-exec-warm=$R --state-dir $ST exec $ID -- /bin/true" \
	true=/bin/true "rung-version=$R --version" \
	"rung-run-tmpfs=$R --state-dir $ST run --disk 256M -- /bin/true" >"$ST/il.txt"
python3 - "$ST/il.txt" <<'PY'
import sys
m = {l.split()[0]: [float(x) for x in l.split()[1:]] for l in open(sys.argv[1])}
for k, (med, p25, p75) in m.items():
    print(f"{k:16s} median {med:7.2f} ms  (p25 {p25:.2f}, p75 {p75:.2f})")
cold, bw, warm = m["rung-run-cold"][0], m["bwrap-cold"][0], m["rung-exec-warm"][0]
print(f"ratio cold  rung run / bwrap      = {cold / bw:.2f}x  (target <= 1.0)")
print(f"ratio warm  rung exec / bwrap cold = {warm / bw:.2f}x  (target <= 0.2)")
print(f"ratio cold  rung run --disk 256M (tmpfs) / bwrap = {m['rung-run-tmpfs'][0] / bw:.2f}x")
PY
RUNG_AGENT=$PWD/build/rung-agent "$PWD/build/bench/exec-rate" "$ST" "${EXECS:-2000}"
echo "(target: >= 1000 warm execs/s; host_spawn_* is /bin/true started on the host, no sandbox: the floor)"
