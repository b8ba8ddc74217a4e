#!/bin/busybox sh
# vmm/guest/l1-init.sh: /init of the L1 guest of the nested-KVM test stage (run-l1.sh).
# Loads kvm-amd (nested=1), virtio-pci/blk and vhost-vsock, mounts the read-only payload
# disk (/dev/vda), and runs rung/l1-tests.sh chrooted into it. Kernel command line:
#   vmtest_driver=rung-vmm|qemu   vmtest_bench=N   vmtest_shell=1 (debug: a shell at the end)
#   l1_kvm_amd=npt=0,vgif=0 (more kvm-amd options, comma-separated: the lockup experiments)
/bin/busybox mkdir -p /proc /sys /dev /p /bin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox --install -s /bin
export PATH=/bin
# L1's own loopback, as a host has it (rung port listens on 127.0.0.1 here)
ip link set lo up || echo "L1 cannot bring lo up"
echo "L1-READY uptime $(cut -d' ' -f1 /proc/uptime) nproc $(grep -c ^processor /proc/cpuinfo) svm $(grep -cw svm /proc/cpuinfo)"
kvm_amd_opt="nested=1"
for a in $(cat /proc/cmdline); do
	case "$a" in l1_kvm_amd=*) kvm_amd_opt="$kvm_amd_opt $(echo "${a#*=}" | tr , " ")" ;; esac
done
for m in $(cat /modules.order); do
	opt=""; [ "$m" = kvm-amd ] && opt=$kvm_amd_opt
	insmod "/modules/$m.ko" $opt || echo "L1 insmod $m FAILED"
done
kp() { for p in "$@"; do printf ' %s=%s' "$p" "$(cat /sys/module/kvm_amd/parameters/$p 2>/dev/null)"; done; }
[ -c /dev/kvm ] && echo "L1 /dev/kvm present (kvm_amd$(kp nested npt avic vgif vls nrips); clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource), clockevent $(cat /sys/devices/system/clockevents/clockevent0/current_device 2>/dev/null), tick modes $(sed -n 's/^Tick Device: mode: *//p' /proc/timer_list 2>/dev/null | tr '\n' ' '))" || echo "L1 /dev/kvm ABSENT"
i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do usleep 100000; i=$((i + 1)); done
mount -o ro /dev/vda /p || echo "L1 cannot mount payload /dev/vda"
mount -t proc proc /p/proc && mount -t sysfs sys /p/sys && mount -o bind /dev /p/dev &&
	mount -t tmpfs -o size=1400m tmp /p/tmp
# POSIX shared memory, as a Debian host has it (the ladder plants a secret there)
mkdir -p /p/dev/shm && mount -t tmpfs -o mode=1777,size=64m shm /p/dev/shm
for a in $(cat /proc/cmdline); do
	case "$a" in
	vmtest_driver=*) export VMTEST_DRIVER=${a#*=} ;;
	vmtest_bench=*) export VMTEST_BENCH=${a#*=} ;;
	vmtest_only_bench=*) export VMTEST_ONLY_BENCH=${a#*=} ;;
	vmtest_snap_n=*) export VMTEST_SNAP_N=${a#*=} ;;
	vmtest_oci_cycles=*) export RUNG_TEST_OCI_CYCLES=${a#*=} ;;
	vmtest_trace=1) export VMTEST_TRACE=1 ;;
	vmtest_verbose=1) export VMTEST_VERBOSE=1 VMTEST_CMDLINE=loglevel=7 ;;
	vmtest_only=*) export VMTEST_ONLY=$(echo "${a#*=}" | tr , " ") ;;
	vmtest_shell=1) SHELL_=1 ;;
	esac
done
# A heartbeat for run-l1.sh, which stops an L1 that prints nothing for a while (wedged).
(while sleep 20; do echo "hb $(cut -d' ' -f1 /proc/uptime)"; done) &
echo "L1 tests start uptime $(cut -d' ' -f1 /proc/uptime)"
chroot /p /bin/sh /rung/l1-tests.sh
echo "L1-DONE rc=$? uptime $(cut -d' ' -f1 /proc/uptime)"
[ "${SHELL_:-0}" = 1 ] && setsid cttyhack sh
poweroff -f
