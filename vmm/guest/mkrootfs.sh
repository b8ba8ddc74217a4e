#!/bin/sh
# vmm/guest/mkrootfs.sh KIND DIR: small root filesystems for the vm-rung test stage
# (what an unpacked OCI image would be; the runtime gets these from rootfs/ instead).
#   busybox  busybox-static with its applets linked in /bin, /etc/passwd, /work
#   python   busybox plus the host's /usr/bin/python3.11 with its shared libraries and
#            standard library (no test suite, no tkinter/idle), and coreutils' printenv
set -eu
[ $# = 2 ] || { echo "usage: $0 busybox|python DIR" >&2; exit 2; }
kind=$1 d=$2
rm -rf "$d" && mkdir -p "$d"
for x in bin sbin etc proc sys dev tmp root work usr/bin usr/sbin usr/lib usr/local/bin; do mkdir -p "$d/$x"; done
chmod 1777 "$d/tmp"
chmod 700 "$d/root"
cp /bin/busybox "$d/bin/busybox"
for a in $(/bin/busybox --list); do [ -e "$d/bin/$a" ] || ln -s busybox "$d/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$d/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$d/etc/group"
echo rung >"$d/etc/hostname"
case "$kind" in
busybox) ;;
python)
	py=/usr/bin/python3.11
	[ -x $py ] || { echo "mkrootfs: $py missing (apt-get install python3.11)" >&2; exit 1; }
	. "$(dirname "$0")/copy-libs.sh"
	copy_with_libs "$d" $py
	ln -sf python3.11 "$d/usr/bin/python3"
	copy_with_libs "$d" /usr/bin/printenv # busybox has none; the protocol tests use it
	tar -C / -cf - --exclude='__pycache__' --exclude='usr/lib/python3.11/test' \
		--exclude='usr/lib/python3.11/idlelib' --exclude='usr/lib/python3.11/tkinter' \
		--exclude='usr/lib/python3.11/ensurepip' --exclude='usr/lib/python3.11/lib2to3' \
		--exclude='usr/lib/python3.11/config-3.11-x86_64-linux-gnu' usr/lib/python3.11 | tar -C "$d" -xf -
	for so in "$d"/usr/lib/python3.11/lib-dynload/*.so; do
		for l in $(ldd "$so" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p'); do
			[ -e "$d$l" ] || { mkdir -p "$d$(dirname "$l")" && cp -L "$l" "$d$l"; }
		done
	done
	;;
*) echo "mkrootfs: unknown kind $kind" >&2; exit 2 ;;
esac
