#!/bin/sh
# tests/distro/bench.sh N: in the distro stage's L1 (main.sh, when run.sh got DISTRO_BENCH=N):
# container acquire + exec /bin/true through librung (bench/container.c) against `crun run` of
# a bundle with the same busybox rootfs, interleaved cycle by cycle, on Debian 12's 6.1 with
# pure cgroup2 (crun needs no wrapper here), the store on ext4. Prints DISTRO-BENCH lines.
set -u
n=${1:-20}
S=/rung/bench
W=/tmp/bench
rm -rf "$W" && mkdir -p "$W" && chmod 0711 "$W"
/rung/bin/rfs-tool import --state "$W/state" "$S/oci" bench/busybox:latest >/dev/null ||
	{ echo "DISTRO-BENCH failed: import"; exit 1; }
cp -a "$S/bundle" "$W/bundle"
# twice: pid 1 born in its cgroup (clone3 CLONE_INTO_CGROUP, the default), then attached
# through cgroup.procs as before (RUNG_CLONE_INTO_CGROUP=0): what the clone3 path saves.
for mode in clone3 attach; do
	flag=1; [ $mode = attach ] && flag=0
	if RUNG_CLONE_INTO_CGROUP=$flag RUNG_AGENT=/rung/bin/rung-agent BENCH_CRUN_DIRECT=1 \
		/rung/bin/bench-container "$W/state" bench/busybox "$n" "$W/bundle" >"$W/out.txt" 2>"$W/err.txt"; then
		sed "s/^/DISTRO-BENCH $mode /" "$W/out.txt"
		awk -v m=$mode '{ v[$1] = $2 } END { if (v["crun_net_ms"] > 0) printf "DISTRO-BENCH %s ratio_lib_acquire_exec_over_crun %.2f\n", m, v["lib_acquire_exec_ms"] / v["crun_net_ms"] }' "$W/out.txt"
	else
		echo "DISTRO-BENCH $mode failed: $(tail -n 3 "$W/err.txt" | tr '\n' ' ')"
	fi
done
/rung/bin/rung --state-dir "$W/state" gc >/dev/null 2>&1
