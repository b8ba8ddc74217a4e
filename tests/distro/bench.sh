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
# pid 1 born in its cgroup (clone3 CLONE_INTO_CGROUP, the default) against attached through
# cgroup.procs as before (RUNG_CLONE_INTO_CGROUP=0): rounds alternate the two, each round a
# few cycles with crun interleaved, so both see the same load on a busy host; the median of
# each figure over the rounds is printed per mode.
rounds=${DISTRO_BENCH_ROUNDS:-6}
i=0
while [ $i -lt "$rounds" ]; do
	for mode in clone3 attach; do
		flag=1; [ $mode = attach ] && flag=0
		if RUNG_CLONE_INTO_CGROUP=$flag RUNG_AGENT=/rung/bin/rung-agent BENCH_CRUN_DIRECT=1 \
			/rung/bin/bench-container "$W/state" bench/busybox "$n" "$W/bundle" >"$W/out.txt" 2>"$W/err.txt"; then
			sed "s/^/$mode /" "$W/out.txt" >>"$W/all.txt"
		else
			echo "DISTRO-BENCH $mode failed: $(tail -n 3 "$W/err.txt" | tr '\n' ' ')"
		fi
	done
	i=$((i + 1))
done
for mode in clone3 attach; do
	for k in lib_acquire_ms lib_first_exec_ms lib_acquire_exec_ms lib_dispose_ms crun_net_ms; do
		v=$(awk -v m=$mode -v k=$k '$1 == m && $2 == k { print $3 }' "$W/all.txt" | sort -n |
			awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }')
		echo "DISTRO-BENCH $mode $k $v (median of $rounds rounds of $n cycles)"
	done
	awk -v m=$mode '$1 == m && $2 == "lib_acquire_exec_ms" { a[++n] = $3 } $1 == m && $2 == "crun_net_ms" { c[n] = $3 }
		END { for (i = 1; i <= n; i++) printf "%.2f\n", a[i] / c[i] }' "$W/all.txt" | sort -n |
		awk -v m=$mode '{ a[NR] = $1 } END { if (NR) printf "DISTRO-BENCH %s ratio_lib_acquire_exec_over_crun %.2f (median over rounds)\n", m, (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'
done
/rung/bin/rung --state-dir "$W/state" gc >/dev/null 2>&1
