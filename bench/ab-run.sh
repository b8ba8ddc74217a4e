#!/bin/sh
# A/B of cold `rung run -- /bin/true` between two builds, against bwrap, in one run: run from
# the repository root, as root:
#   RUNG_OLD=/path/to/old/build/rung sh bench/ab-run.sh      # RUNS=40 blocks, ROUNDS=100
# First hyperfine blocks (old, new, bwrap, new, old: each command's runs back to back, so what a
# run leaves to the background lands on its own next run), then the three interleaved in a
# random order per round (bench/interleave.py, SHUFFLE=1: the same load for all). Each build
# runs on a store of its own; both stores are removed at the end. The old build needs its
# rung-agent beside it (a worktree's build/). POOL=N: each store gets a warm pool of N for
# `rung run`'s default spec first (`rung pool set`, by each build, its keeper refilling after
# each claim as a user's would), so the rung rows are runs served by a pool.
set -eu
cd "$(dirname "$0")/.."
[ -n "${RUNG_OLD:-}" ] || { echo "bench/ab-run.sh: set RUNG_OLD to the old build's rung" >&2; exit 2; }
command -v hyperfine >/dev/null || { echo "bench/ab-run.sh: no hyperfine" >&2; exit 2; }
make -s build/rung build/rung-agent >/dev/null
NEW=$PWD/build/rung
SO=$(mktemp -d /tmp/rung-bench-ab-XXXXXX)
SN=$(mktemp -d /tmp/rung-bench-ab-XXXXXX)
chmod 0711 "$SO" "$SN"
# the last run's heir may still be filling its spare disks when the loops end: retry the rm
clean() {
	if [ -n "${POOL:-}" ]; then
		"$RUNG_OLD" --state-dir "$SO" pool rm bench >/dev/null 2>&1 || true
		"$NEW" --state-dir "$SN" pool rm bench >/dev/null 2>&1 || true
	fi
	"$RUNG_OLD" --state-dir "$SO" gc >/dev/null 2>&1 || true
	"$NEW" --state-dir "$SN" gc >/dev/null 2>&1 || true
	for _ in 1 2 3 4 5 6 7 8 9 10; do rm -rf "$SO" "$SN" 2>/dev/null && return; sleep 0.2; done
	echo "bench/ab-run.sh: could not remove $SO $SN" >&2
}
trap clean EXIT
. bench/bwrap.sh
if [ -n "${POOL:-}" ]; then
	"$RUNG_OLD" --state-dir "$SO" pool set bench --size "$POOL" >/dev/null
	"$NEW" --state-dir "$SN" pool set bench --size "$POOL" >/dev/null
fi
hyperfine -N -w 5 -r "${RUNS:-40}" --export-json "$SN/hf.json" \
	-n old "$RUNG_OLD --state-dir $SO run -- /bin/true" -n new "$NEW --state-dir $SN run -- /bin/true" \
	-n bwrap "$BWRAP" -n new2 "$NEW --state-dir $SN run -- /bin/true" \
	-n old2 "$RUNG_OLD --state-dir $SO run -- /bin/true" >/dev/null
SHUFFLE=1 python3 bench/interleave.py "${ROUNDS:-100}" "old=$RUNG_OLD --state-dir $SO run -- /bin/true" \
	"new=$NEW --state-dir $SN run -- /bin/true" "bwrap=$BWRAP" >"$SN/il.txt"
python3 - "$SN/hf.json" "$SN/il.txt" <<'PY'
import json, sys
r = {x["command"]: x["median"] * 1000 for x in json.load(open(sys.argv[1]))["results"]}
b = r["bwrap"]
print("blocks (medians):      " + "  ".join(f"{k} {v:.2f} ms ({v / b:.3f}x)" for k, v in r.items()))
m = {l.split()[0]: float(l.split()[1]) for l in open(sys.argv[2])}
b = m["bwrap"]
print("interleaved (medians): " + "  ".join(f"{k} {v:.2f} ms ({v / b:.3f}x)" for k, v in m.items()))
PY
