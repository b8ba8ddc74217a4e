#!/bin/sh
# tests/distro/main.sh: pid 1 of the distro stage's L1 after switch_root (init.sh), on the
# read-only ext4 payload root. Sets up what a stock Debian 12 machine has:
#   - a PURE cgroup2 hierarchy at /sys/fs/cgroup (no v1 anywhere), with cpu, memory and pids
#     enabled in the root's cgroup.subtree_control, as systemd does; this script and the suites
#     run in a leaf group (/sys/fs/cgroup/ci.scope), like a login or a service;
#   - /tmp, /var/lib and /var/cache on an ext4 scratch disk (/dev/vdb): the suites' stores
#     (rung_test_tmpdir) and the default state dir /var/lib/rung are on ext4;
#   - /run and /dev/shm on tmpfs, loopback up, /etc/resolv.conf with a nameserver line.
# Then runs the suites named by the kernel command line (distro_suites=a,b,...) with
# suites.sh, and powers off. Output lines: DISTRO PASS|FAIL|SKIP ..., DISTRO-SUMMARY, DISTRO-DONE.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup || echo "DISTRO-L1 cannot mount cgroup2"
mkdir -p /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666 devpts /dev/pts
mount -t tmpfs -o mode=1777 shm /dev/shm
mount -t tmpfs -o mode=0755,size=64m run /run
i=0; while [ ! -b /dev/vdb ] && [ $i -lt 100 ]; do usleep 100000; i=$((i + 1)); done
if mount -t ext4 /dev/vdb /mnt/scratch; then
	for d in tmp varlib varcache; do mkdir -p /mnt/scratch/$d; done
	chmod 1777 /mnt/scratch/tmp
	mount -o bind /mnt/scratch/tmp /tmp
	mount -o bind /mnt/scratch/varlib /var/lib
	mount -o bind /mnt/scratch/varcache /var/cache
else
	echo "DISTRO-L1 cannot mount the scratch disk /dev/vdb"
fi
ip link set lo up
hostname rung-distro
echo "DISTRO-L1 root $(grep ' / ' /proc/mounts | cut -d' ' -f3) tmp $(grep ' /tmp ' /proc/mounts | cut -d' ' -f3)" \
	"cgroup $(grep ' /sys/fs/cgroup ' /proc/mounts | cut -d' ' -f3) controllers '$(cat /sys/fs/cgroup/cgroup.controllers)'"
# Delegation as systemd does it: the root enables the controllers for its children; processes
# live in leaves (the root is exempt from the no-internal-processes rule, nothing else is).
echo "+cpu +memory +pids" >/sys/fs/cgroup/cgroup.subtree_control ||
	echo "DISTRO-L1 cannot enable cpu memory pids in the root's subtree_control"
mkdir -p /sys/fs/cgroup/ci.scope && echo $$ >/sys/fs/cgroup/ci.scope/cgroup.procs
echo "DISTRO-L1 subtree_control '$(cat /sys/fs/cgroup/cgroup.subtree_control)'"
suites=""
for a in $(cat /proc/cmdline); do
	case "$a" in
	distro_suites=*) suites=$(echo "${a#*=}" | tr , " ") ;;
	distro_verbose=1) export DISTRO_VERBOSE=1 ;;
	distro_bench=*) export DISTRO_BENCH=${a#*=} ;;
	esac
done
sh /rung/distro/suites.sh $suites
rc=$?
[ -n "${DISTRO_BENCH:-}" ] && [ -x /rung/bin/bench-container ] && sh /rung/distro/bench.sh "$DISTRO_BENCH"
echo "DISTRO-DONE rc=$rc uptime $(cut -d' ' -f1 /proc/uptime)"
sync
poweroff -f
