#!/bin/busybox sh
# tests/distro/init.sh: /init of the distro stage's L1 initramfs (run.sh). Loads the modules
# (virtio, overlay, veth, nftables), mounts the payload disk (/dev/vda, read-only ext4) and
# switches root to it: the suites then run on a root that is an ordinary ext4 mount, as on
# an installed Debian 12 machine, from /rung/distro/main.sh (mounts, cgroup2, the suites).
/bin/busybox mkdir -p /proc /sys /dev /p /bin
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sys /sys
/bin/busybox mount -t devtmpfs dev /dev
/bin/busybox --install -s /bin
export PATH=/bin
echo "DISTRO-L1 ready uptime $(cut -d' ' -f1 /proc/uptime) kernel $(uname -r) nproc $(grep -c ^processor /proc/cpuinfo)"
for m in $(cat /modules.order); do
	insmod "/modules/$m.ko" || echo "DISTRO-L1 insmod $m FAILED"
done
i=0; while [ ! -b /dev/vda ] && [ $i -lt 200 ]; do usleep 100000; i=$((i + 1)); done
if ! mount -o ro /dev/vda /p; then
	echo "DISTRO-L1 cannot mount the payload /dev/vda"
	echo "DISTRO-DONE rc=1"
	poweroff -f
fi
umount /proc /sys
mount -o move /dev /p/dev
exec switch_root /p /bin/sh /rung/distro/main.sh
