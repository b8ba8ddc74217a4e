#!/bin/sh
# CPU per cold start, everything on the machine included: run from the repository root, as root,
# on an otherwise idle machine:
#   sh bench/cpu.sh            # RUNS=200 per row
# Each row runs its command RUNS times back to back and reads the machine's busy time
# (/proc/stat: user, nice, system, irq, softirq of every CPU) from before the first run to after
# the last run's background is done: its processes gone (a `rung run`'s heir, which unmounts the
# disk and makes the next spare) and a settling pause for what the kernel defers to its threads
# (a network namespace's cleanup, a cgroup's release). The machine's idle busy rate, measured
# first, is taken off each row for its duration. What a start costs the machine, not only its
# wall time, which matters back to back on few cores. Not a row's own cgroup: `rung run` moves
# its sandbox's processes (pid 1, the agent, the command) into the sandbox's groups, where a
# row's group would not count them. Rows: `rung run -- /bin/true` (its ext4 disk), `rung run
# --disk 256M` (a tmpfs), bwrap with bench/spine.sh's namespaces (bench/bwrap.sh).
set -eu
cd "$(dirname "$0")/.."
make -s build/rung build/rung-agent >/dev/null
R=$PWD/build/rung
RUNS=${RUNS:-200}
SETTLE=${SETTLE:-0.5}
HZ=$(getconf CLK_TCK)
ST=$(mktemp -d /tmp/rung-bench-cpu-XXXXXX)
chmod 0711 "$ST"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
	CG=/sys/fs/cgroup/rung-bench-cpu-$$
else
	CG=/sys/fs/cgroup/pids/rung-bench-cpu-$$
fi
trap 'rmdir "$CG" 2>/dev/null || true; rm -rf "$ST"' EXIT
mkdir "$CG" # only to know when a row's processes are all gone
busy() { awk '$1 == "cpu" { print $2 + $3 + $4 + $7 + $8; exit }' /proc/stat; }
now_ms() { date +%s%3N; }
b0=$(busy)
t0=$(now_ms)
sleep 3
IDLE=$(awk -v b="$(($(busy) - b0))" -v t="$(($(now_ms) - t0))" -v hz="$HZ" \
	'BEGIN { printf "%.4f\n", b * 1000 / hz / t }') # ms of CPU per ms, idle
echo "idle machine: $IDLE ms of CPU per ms (taken off each row)"
. bench/bwrap.sh
row() { # NAME CMD...: the row's CPU per run
	name=$1
	shift
	"$@" >/dev/null # warm: the disk template, the page cache
	sleep "$SETTLE"
	b0=$(busy)
	t0=$(now_ms)
	sh -c 'echo $$ >"$0/cgroup.procs"; n=$1; shift; i=0; while [ "$i" -lt "$n" ]; do
		"$@" >/dev/null 2>&1 || exit 1; i=$((i + 1)); done' "$CG" "$RUNS" "$@" ||
		{ echo "$name: a run failed" >&2; exit 1; }
	i=0 # the background of the last runs
	while [ -s "$CG/cgroup.procs" ] && [ "$i" -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep "$SETTLE"
	awk -v n="$name" -v b="$(($(busy) - b0))" -v t="$(($(now_ms) - t0))" -v hz="$HZ" \
		-v idle="$IDLE" -v r="$RUNS" 'BEGIN { c = b * 1000 / hz - idle * t
		printf "%-16s %7.2f ms of CPU per run (%d runs, %d ms)\n", n, c / r, r, t }'
}
row rung-run "$R" --state-dir "$ST" run -- /bin/true
row rung-run-tmpfs "$R" --state-dir "$ST" run --disk 256M -- /bin/true
# shellcheck disable=SC2086
row bwrap $BWRAP
