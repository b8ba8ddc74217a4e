#!/bin/sh
# vmm/guest/run-l1.sh: the nested-KVM test stage (make check-vm).
#
# Builds the L1 payload (a read-only ext4 disk: busybox, qemu-system-x86_64 and mkfs.ext4
# with their libraries, rung-vmm, rung-vmtest, the guest kernel + initramfs + base image,
# the test script) and an L1 initramfs (busybox, the cloud kernel's kvm/virtio/vhost
# modules, l1-init.sh). If the host has a working /dev/kvm the tests run right here; else L1
# boots under QEMU TCG with an AMD SVM CPU (-cpu max), with a timeout and ONE retry when
# L1 never got to print its summary (TCG boots occasionally hang; a soft lockup panics L1).
# The retry is loud: a "check-vm: RETRY:" line with the reason, and the last line says
# "AFTER A RETRY". Worst case: 2 x RUNG_VM_TIMEOUT.
# Prints the VMTEST/VMBENCH lines and "N passed, N failed"; exit 0 only if all passed.
#
# Inputs (env): KERNEL (guest bzImage), INITRAMFS, VMTEST (rung-vmtest), VMM (rung-vmm,
# optional), OUT (work dir, default build/vm), RUNG_VM_TIMEOUT (s per L1 run, 2100),
# RUNG_L1_SMP (L1 vCPUs, 1: see "A hung L1" in README.md), RUNG_L1_ACCEL (QEMU's -accel for L1, tcg,thread=multi),
# RUNG_L1_KVM_AMD (more kvm-amd options in L1, comma-separated, e.g. npt=0,vgif=0),
# RUNG_VM_QUIET (s without L1 console output before it is
# stopped as wedged, 150),
# VMTEST_DRIVER, VMTEST_BENCH, VMTEST_ONLY_BENCH, VMTEST_SNAP_N, VMTEST_OCI_CYCLES.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-build/vm}
: "${KERNEL:?guest bzImage}" "${INITRAMFS:?guest initramfs}" "${VMTEST:?rung-vmtest}"
VMM=${VMM:-}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
log() { echo "check-vm: $*" >&2; }
# l1_monitor CMD WAIT: QEMU's monitor (L1's) answers CMD; its reply after WAIT s, or the error.
l1_monitor() {
	python3 - "$OUT/l1.mon" "$1" "$2" <<'PY' 2>&1
import socket, sys, time
try:
    s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
    time.sleep(0.3); s.recv(65536)
    s.sendall(sys.argv[2].encode() + b"\n"); time.sleep(float(sys.argv[3]))
    print(s.recv(1 << 20).decode(errors="replace").replace("\r", ""))
except Exception as e:
    print(f"l1-monitor: {e}")
PY
}
# l1_state TIMEOUT_PID: a wedged L1 seen from outside: each QEMU thread's state and CPU time
# twice, 2 s apart (vCPU threads spinning, or all asleep: a QEMU deadlock), then every L1
# vCPU's registers from QEMU's monitor (twice: does RIP move?).
l1_state() {
	qp=$(cat "/proc/$1/task/$1/children" 2>/dev/null | cut -d' ' -f1)
	[ -n "$qp" ] || { echo "l1-state: no QEMU under pid $1"; return; }
	for n in 1 2; do
		echo "l1-state: QEMU $qp threads (name state utime stime, clock ticks) sample $n"
		for t in /proc/"$qp"/task/*; do
			echo "  $(cut -d' ' -f2,3,14,15 "$t/stat" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null)"
		done
		l1_monitor "info registers -a" 1.5 | grep -E '^(RIP|RAX|RSP|CS |SS |CR0|EFL|CPU|HLT)|CPL|^l1-monitor' | sed 's/^/  /'
		[ $n = 2 ] || sleep 2
	done
	return 0 # (run-l1.sh runs under set -e: a failed probe must not end the stage)
}
# l1_kick: a BREAK on L1's serial line through QEMU's monitor. An L1 found halted with
# interrupts on and nothing pending (README "A hung L1": QEMU TCG lost its timer interrupt)
# wakes on the line's interrupt: the tty's work leaves the idle loop, which reprograms the tick.
l1_kick() {
	l1_monitor "chardev-send-break serial0" 0.5 | grep -E '^(Error|l1-monitor)' | sed 's/^/  /'
	return 0
}
t_start=$(date +%s)

. "$here/copy-libs.sh"

# --- the guest's base image (python + busybox), rebuilt when its inputs change ------------
stamp=$(cat "$here/mkrootfs.sh" "$here/mkdisk.sh" /usr/bin/python3.11 | sha256sum | cut -c1-16)
if [ ! -f "$OUT/base-$stamp.img" ]; then
	log "base image: python rootfs"
	rm -f "$OUT"/base-*.img
	sh "$here/mkrootfs.sh" python "$OUT/rootfs-python"
	sh "$here/mkdisk.sh" base "$OUT/rootfs-python" "$OUT/base-$stamp.img"
	rm -rf "$OUT/rootfs-python"
fi

# --- the L1 payload ------------------------------------------------------------------------
P=$OUT/payload
rm -rf "$P"
sh "$here/mkrootfs.sh" busybox "$P" >/dev/null
copy_with_libs "$P" "$(command -v qemu-system-x86_64)"
mkdir -p "$P/usr/bin" && [ -e "$P/usr/bin/qemu-system-x86_64" ] || cp "$(command -v qemu-system-x86_64)" "$P/usr/bin/"
mkdir -p "$P/usr/share/qemu" && cp -L /usr/share/qemu/qboot.rom /usr/share/qemu/bios-microvm.bin \
	/usr/share/qemu/linuxboot_dma.bin /usr/share/qemu/kvmvapic.bin "$P/usr/share/qemu/"
copy_with_libs "$P" /sbin/mkfs.ext4
[ -e "$P/sbin/mkfs.ext4" ] || { mkdir -p "$P/sbin" && ln -s "$(readlink -f /sbin/mkfs.ext4)" "$P/sbin/mkfs.ext4"; }
mkdir -p "$P/etc" && : >"$P/etc/mke2fs.conf" && cp /etc/mke2fs.conf "$P/etc/" 2>/dev/null || true
mkdir -p "$P/rung/bin" "$P/rung/guest"
cp "$VMTEST" "$P/rung/bin/rung-vmtest"
if [ -n "$VMM" ] && [ -x "$VMM" ]; then
	copy_with_libs "$P" "$(readlink -f "$VMM")"
	cp "$VMM" "$P/rung/bin/rung-vmm"
else
	log "no rung-vmm built: the tests run against QEMU microvm (guest side only)"
fi
cp "$KERNEL" "$P/rung/guest/bzImage"
cp "$INITRAMFS" "$P/rung/guest/initramfs.cpio.gz"
cp "$OUT/base-$stamp.img" "$P/rung/guest/base.img"
cp "$here/mkdisk.sh" "$here/l1-tests.sh" "$here/l1-snapshot.sh" "$here/../../bench/vm-snapshot-l1.sh" \
	"$here/../../bench/vm-exec-l1.sh" "$P/rung/"
# the runtime itself (rung, its store with a python image), when it is built
if [ -n "${RUNG_BUILD:-}" ] && [ -x "$RUNG_BUILD/rung" ] && [ -x "$RUNG_BUILD/rfs-tool" ]; then
	sh "$here/payload-rung.sh" "$P" "$RUNG_BUILD" "$OUT/base-$stamp.img" >&2
fi

# --- run here if the host has KVM ----------------------------------------------------------
results=$OUT/l1-console.log
retried=""
# This CI host has a /dev/kvm node that answers KVM_GET_API_VERSION but cannot boot Linux
# (no svm/vmx in cpuinfo; SeaBIOS runs, the kernel never prints): only trust /dev/kvm
# when the CPU advertises hardware virtualisation. RUNG_VM_DIRECT=1/0 forces either way.
direct=${RUNG_VM_DIRECT:-}
# rung-vmm --probe boots a tiny long-mode guest to its first I/O exit: the real test.
if [ -z "$direct" ]; then
	direct=0
	if [ -c /dev/kvm ] && grep -qwE 'svm|vmx' /proc/cpuinfo; then
		if [ -n "$VMM" ] && [ -x "$VMM" ]; then
			"$VMM" --probe >/dev/null 2>&1 && direct=1
		else
			direct=1
		fi
	fi
fi
if [ "$direct" = 1 ]; then
	log "host has /dev/kvm: running the tests directly"
	scratch=$(mktemp -d /tmp/rung-vmtest.XXXXXX)
	PATH=$P/bin:$PATH RUNG_VM_PAYLOAD=$P RUNG_VM_SCRATCH=$scratch /bin/busybox sh "$P/rung/l1-tests.sh" 2>&1 | tee "$results" || true
	rm -rf "$scratch"
else
	l1=$(sh "$here/fetch-l1-kernel.sh")
	log "payload image"
	sh "$here/mkdisk.sh" base "$P" "$OUT/payload.img"
	L1I=$OUT/l1-initramfs.cpio.gz
	st=$(mktemp -d)
	mkdir -p "$st/bin" "$st/modules" "$st/dev"
	cp /bin/busybox "$st/bin/busybox"
	cp "$l1"/modules/*.ko "$st/modules/" && cp "$l1/modules.order" "$st/"
	install -m 755 "$here/l1-init.sh" "$st/init"
	(cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$L1I"
	rm -rf "$st"
	# A soft lockup in L1 panics it (softlockup_panic; panic=-1 with -no-reboot ends QEMU):
	# a wedged L1 costs 2 x watchdog_thresh, not the whole timeout, and its console keeps
	# the lockup's backtrace (both CPUs') for the retry's report.
	# nokaslr: a wedged L1's recorded RIPs are the same in every run, and map onto the
	# symbols of Debian's linux-image-<version>-dbg package (its own System.map is a stub).
	# A periodic tick in hardware (the LAPIC's periodic mode, not TSC-deadline; no
	# high-resolution timers, no tickless idle): a one-shot timer whose interrupt TCG loses
	# is never re-armed, and L1 stops (README 'A hung L1', the console flood).
	append="console=ttyS0 quiet panic=-1 nokaslr watchdog_thresh=20 softlockup_panic=1 softlockup_all_cpu_backtrace=1"
	append="$append lapic=notscdeadline highres=off nohz=off"
	[ -n "${VMTEST_DRIVER:-}" ] && append="$append vmtest_driver=$VMTEST_DRIVER"
	[ -n "${RUNG_L1_KVM_AMD:-}" ] && append="$append l1_kvm_amd=$RUNG_L1_KVM_AMD"
	[ -n "${VMTEST_BENCH:-}" ] && append="$append vmtest_bench=$VMTEST_BENCH"
	[ -n "${VMTEST_ONLY_BENCH:-}" ] && append="$append vmtest_only_bench=$VMTEST_ONLY_BENCH"
	[ -n "${VMTEST_SNAP_N:-}" ] && append="$append vmtest_snap_n=$VMTEST_SNAP_N"
	[ -n "${VMTEST_OCI_CYCLES:-}" ] && append="$append vmtest_oci_cycles=$VMTEST_OCI_CYCLES"
	[ -n "${VMTEST_TRACE:-}" ] && append="$append vmtest_trace=$VMTEST_TRACE"
	[ -n "${VMTEST_VERBOSE:-}" ] && append="$append vmtest_verbose=$VMTEST_VERBOSE"
	[ -n "${VMTEST_ONLY:-}" ] && append="$append vmtest_only=$(echo "$VMTEST_ONLY" | tr " " ,)"
	append="$append ${RUNG_L1_APPEND:-}"
	# The bound: at most 2 tries (one retry, only when L1 never reported), each killed
	# after $limit s, so a hung L1 costs at most one extra $limit s. Never more tries.
	limit=${RUNG_VM_TIMEOUT:-2100}
	# One L1 vCPU: the wedges seen with two were both CPUs looping in the int3 handler of a
	# cross-CPU live patch (TCG's cross-vCPU modified code); one vCPU has no such protocol.
	smp=${RUNG_L1_SMP:-1}
	accel=${RUNG_L1_ACCEL:-tcg,thread=multi}
	quiet=${RUNG_VM_QUIET:-150}
	kicks=0
	for try in 1 2; do
		log "L1 boot (try $try of at most 2): qemu -accel $accel -cpu max -smp $smp -m 3072, timeout ${limit}s"
		t0=$(date +%s)
		rm -f "$OUT/l1.rc"
		: >"$results.try$try"
		{ timeout -k 5 "$limit" qemu-system-x86_64 -accel "$accel" -cpu max \
			-M pc -smp "$smp" -m 3072 -nographic -no-reboot -nodefaults -serial stdio \
			-monitor "unix:$OUT/l1.mon,server=on,wait=off" \
			-kernel "$l1/vmlinuz" -initrd "$L1I" -append "$append" \
			-drive "file=$OUT/payload.img,if=virtio,format=raw,readonly=on" \
			</dev/null 2>&1 &
		  echo $! >"$OUT/l1.pid"; rc=0; wait $! || rc=$?; echo $rc >"$OUT/l1.rc"; } | sed -u 's/\r$//' | tee "$results.try$try" |
			grep --line-buffered -E '^(VMTEST|VMBENCH|L1)' &
		l1_pipe=$!
		# No console output for $quiet s (l1-init.sh prints a heartbeat every 20 s): L1 is
		# wedged whole (no CPU left to panic it); stop it now, not at the timeout.
		sz=-1 still=0
		rm -f "$OUT/l1.silent"
		while kill -0 "$l1_pipe" 2>/dev/null; do
			sleep 5
			nsz=$(wc -c <"$results.try$try")
			if [ "$nsz" = "$sz" ]; then still=$((still + 5)); else still=0 sz=$nsz; fi
			# silent for three heartbeats: record it (registers), then a BREAK on its serial line
			if [ "$still" = 60 ]; then
				kicks=$((kicks + 1))
				log "L1 printed nothing for 60 s: its state, then a BREAK on its serial line (kick $kicks)"
				l1_state "$(cat "$OUT/l1.pid")" >"$results.try$try.kick$kicks.state" 2>&1 || true
				l1_kick >&2
			fi
			if [ "$still" -ge "$quiet" ]; then
				log "L1 printed nothing for $still s: its state, then stopping it"
				echo "L1 silent for $still s" >"$OUT/l1.silent"
				l1_state "$(cat "$OUT/l1.pid")" >"$results.try$try.state" 2>&1 || true
				cat "$results.try$try.state" >&2
				kill -TERM "$(cat "$OUT/l1.pid")" 2>/dev/null
				break
			fi
		done
		wait "$l1_pipe" || true
		cp "$results.try$try" "$results"
		took=$(($(date +%s) - t0))
		log "L1 run took $took s (qemu status $(cat "$OUT/l1.rc" 2>/dev/null || echo '?'))"
		grep -q '^VMTEST-SUMMARY' "$results" && break
		grep -q '^L1-DONE' "$results" && break # finished without a summary: do not retry
		why=$(cat "$OUT/l1.silent" 2>/dev/null || true)
		for pat in 'soft lockup - CPU#[0-9]+ stuck for [0-9]+s! \[[^]]*\]' 'rcu_preempt self-detected stall' \
			'Kernel panic - not syncing: .*'; do
			[ -n "$why" ] || why=$(grep -m 1 -oE "$pat" "$results" || true)
		done
		[ -n "$why" ] || why="no summary within ${limit}s (qemu status $(cat "$OUT/l1.rc" 2>/dev/null || echo '?'))"
		log "L1 did not finish (try $try after $took s): $why; last console lines:"
		tail -n 40 "$results" >&2
		if [ "$try" = 1 ]; then
			retried="try 1 failed after $took s: $why (console: $results.try1)"
			log "RETRY: the one retry of this stage; $retried"
		fi
	done
fi
log "whole stage took $(($(date +%s) - t_start)) s"
sum=$(grep '^VMTEST-SUMMARY' "$results" | tail -n 1)
if [ -z "$sum" ]; then
	echo "0 passed, 1 failed (the L1 run never reported; see $results)${retried:+; $retried}"
	exit 1
fi
set -- $sum
kicked=
[ "${kicks:-0}" = 0 ] || kicked="; L1 KICKED $kicks time(s) after 60 s of silence (a BREAK on its serial line: README 'A hung L1')"
# The failures again, last, so that the tail of a long log (CI keeps only its end) names them.
[ "$4" = 0 ] || grep '^VMTEST FAIL' "$results" | cut -c1-600
echo "$2 passed, $4 failed ($6 skipped; log $results)${retried:+ AFTER A RETRY: $retried}$kicked"
[ "$4" = 0 ]
