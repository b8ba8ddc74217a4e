#!/bin/sh
# CPU per cold start, background included: run from the repository root, as root:
#   sh bench/cpu.sh            # RUNS=40 per row
# Each row runs its command RUNS times in a cgroup of its own and reads the cgroup's CPU time
# once every process of the row (a `rung run`'s hand-off child that unmounts the disk and makes
# the next spare, included) is gone: what a start costs the machine, not only its wall time,
# which matters back to back on few cores. Rows: `rung run -- /bin/true` (its ext4 disk),
# `rung run --disk 256M` (a tmpfs), bwrap with bench/spine.sh's namespaces. Work the kernel
# defers to its own threads (a network namespace's cleanup) is in no row.
set -eu
cd "$(dirname "$0")/.."
make -s build/rung build/rung-agent >/dev/null
R=$PWD/build/rung
RUNS=${RUNS:-40}
ST=$(mktemp -d /tmp/rung-bench-cpu-XXXXXX)
chmod 0711 "$ST"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	CG=/sys/fs/cgroup/rung-bench-cpu-$$ # v2: cpu.stat's usage_usec
else
	CG=/sys/fs/cgroup/cpuacct/rung-bench-cpu-$$ # v1: cpuacct.usage, in ns
fi
trap 'rmdir "$CG" 2>/dev/null || true; rm -rf "$ST"' EXIT
mkdir "$CG"
usage_us() {
	if [ -f "$CG/cpu.stat" ]; then
		awk '$1 == "usage_usec" { print $2 }' "$CG/cpu.stat"
	else
		echo $(($(cat "$CG/cpuacct.usage") / 1000))
	fi
}
. bench/bwrap.sh
row() { # NAME CMD...: the row's CPU per run
	name=$1
	shift
	"$@" >/dev/null # warm: the disk template, the page cache
	u0=$(usage_us)
	sh -c 'echo $$ >"$0/cgroup.procs"; n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do
		"$@" >/dev/null 2>&1 || exit 1; i=$((i + 1)); done' "$CG" "$RUNS" "$@" ||
		{ echo "$name: a run failed" >&2; exit 1; }
	i=0 # the background of the last runs
	while [ -s "$CG/cgroup.procs" ] && [ "$i" -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	u1=$(usage_us)
	awk -v n="$name" -v a="$u0" -v b="$u1" -v r="$RUNS" \
		'BEGIN { printf "%-16s %7.2f ms of CPU per run (%d runs)\n", n, (b - a) / r / 1000, r }'

}
row rung-run "$R" --state-dir "$ST" run -- /bin/true
row rung-run-tmpfs "$R" --state-dir "$ST" run --disk 256M -- /bin/true
# shellcheck disable=SC2086
row bwrap $BWRAP
