#!/bin/sh
# vmm/guest/l1-tests.sh: the vm-rung tests, run where /dev/kvm works (inside the L1 guest of
# run-l1.sh, or directly on a host with /dev/kvm). busybox sh; no bashisms.
#
# Layout under $P (the payload root; "" inside L1): rung/bin/{rung-vmm,rung-vmtest},
# rung/guest/{bzImage,initramfs.cpio.gz,base.img}; usr/bin/qemu-system-x86_64 for the
# baseline. Scratch in $W. Output: one line per test,
#   VMTEST PASS|FAIL|SKIP <name> <detail>
# then "VMTEST-SUMMARY <n> passed, <n> failed, <n> skipped", and VMBENCH lines.
# Env: VMTEST_DRIVER=rung-vmm|qemu (default: rung-vmm if present, else qemu, so that the
# guest side is proven even before rung-vmm boots), VMTEST_BENCH=N boots per VMM (0: none),
# VMTEST_ONLY="boot panic snapshot ..." runs only those tests (debugging), VMTEST_ONLY_BENCH=1;
# "snapbench" in VMTEST_ONLY runs bench/vm-snapshot-l1.sh (VMTEST_SNAP_N rounds), "execbench"
# bench/vm-exec-l1.sh (VMTEST_EXEC_N rounds).
set -u
[ "${VMTEST_TRACE:-0}" = 1 ] && set -x
P=${RUNG_VM_PAYLOAD:-}
W=${RUNG_VM_SCRATCH:-/tmp/rung-vmtest}
B=$P/rung/bin G=$P/rung/guest
VMM=$B/rung-vmm VT=$B/rung-vmtest QEMU=$P/usr/bin/qemu-system-x86_64
K=$G/bzImage I=$G/initramfs.cpio.gz BASE=$G/base.img
MEM=256
SERIAL_CAP=262144
VMM_EXTRA="" # more rung-vmm arguments for the next vm_start (word-split; no spaces inside)
npass=0 nfail=0 nskip=0
mkdir -p "$W"

now() { echo "$EPOCHREALTIME"; }
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%d", (b - a) * 1000 }'; }
pass() { npass=$((npass + 1)); echo "VMTEST PASS $*"; }
fail() { nfail=$((nfail + 1)); echo "VMTEST FAIL $*"; }
skip() { nskip=$((nskip + 1)); echo "VMTEST SKIP $*"; }

driver=${VMTEST_DRIVER:-}
[ -n "$driver" ] || { [ -x "$VMM" ] && driver=rung-vmm || driver=qemu; }

# vm_start ID UPPER DRIVER [EXTRA_CMDLINE]: boot in the background; addr in $W/ID.addr.
vm_start() {
	id=$1 upper=$2 drv=$3 extra=${4:-}
	rm -f "$W/$id.sock" "$W/$id.ctl" "$W/$id.serial"
	case $drv in
	rung-vmm)
		"$VMM" --kernel "$K" --initrd "$I" --disk "$BASE,ro" --disk "$upper" --mem $MEM \
			--cpus "${CPUS:-1}" --cmdline "${VMTEST_CMDLINE:-quiet} $extra" --serial-log "$W/$id.serial" --serial-cap $SERIAL_CAP \
			--vsock-uds "$W/$id.sock" --control "$W/$id.ctl" $VMM_EXTRA >"$W/$id.out" 2>&1 &
		echo "$W/$id.sock" >"$W/$id.addr" ;;
	qemu)
		# microvm: the first virtio-blk-device given is vda.
		"$QEMU" -M microvm,acpi=off -enable-kvm -cpu host -m $MEM -smp 1 -nodefaults \
			-no-user-config -nographic -no-reboot -L "$P/usr/share/qemu" \
			-serial "file:$W/$id.serial" -kernel "$K" -initrd "$I" \
			-append "console=ttyS0 ${VMTEST_CMDLINE:-quiet} panic=-1 $extra" \
			-drive "id=b,file=$BASE,format=raw,if=none,readonly=on" -device virtio-blk-device,drive=b \
			-drive "id=u,file=$upper,format=raw,if=none" -device virtio-blk-device,drive=u \
			-device vhost-vsock-device,guest-cid=3 >"$W/$id.out" 2>&1 &
		echo "vsock:3:1024" >"$W/$id.addr" ;;
	esac
	echo $! >"$W/$id.pid"
}
vm_addr() { cat "$W/$1.addr"; }
# vm_wait ID TIMEOUT_MS: until the agent answers PING; fails early if the VMM exits.
vm_wait() {
	vw_end=$(awk -v a="$(now)" -v t="$2" 'BEGIN { printf "%.3f", a + t / 1000 }')
	while :; do
		"$VT" wait "$(vm_addr "$1")" 2000 >/dev/null 2>"$W/$1.wait" && return 0
		vm_alive "$1" || { echo "VMM exited before the agent was ready" >>"$W/$1.wait"; return 1; }
		awk -v a="$(now)" -v e="$vw_end" 'BEGIN { exit !(a < e) }' || return 1
	done
}
# A VMM that exited stays a zombie until this shell waits for it: kill -0 is not enough.
vm_alive() {
	va_st=$(cut -d')' -f2 "/proc/$(cat "$W/$1.pid")/stat" 2>/dev/null | cut -d' ' -f2)
	[ -n "$va_st" ] && [ "$va_st" != Z ]
}
# vm_stop ID: SIGTERM, then SIGKILL after 5 s; sets vm_rc to the exit status.
vm_stop() {
	pid=$(cat "$W/$1.pid")
	kill -TERM "$pid" 2>/dev/null
	vs_i=0
	while vm_alive "$1" && [ $vs_i -lt 50 ]; do usleep 100000; vs_i=$((vs_i + 1)); done
	kill -KILL "$pid" 2>/dev/null
	wait "$pid"
	vm_rc=$?
}
# vm_wait_exit ID SECONDS: wait for the VMM to exit on its own; vm_rc, or 255 if it hung.
vm_wait_exit() {
	pid=$(cat "$W/$1.pid") ve_i=0
	while vm_alive "$1" && [ $ve_i -lt $(($2 * 10)) ]; do usleep 100000; ve_i=$((ve_i + 1)); done
	if vm_alive "$1"; then kill -KILL "$pid"; wait "$pid"; vm_rc=255; return; fi
	wait "$pid"
	vm_rc=$?
}
vexec() { id=$1; shift; "$VT" exec "$(vm_addr "$id")" -t 60000 "$@"; } # slow when L1 is loaded
upper() { rm -f "$1"; "$P/rung/mkdisk.sh" upper "$1" 256 >/dev/null; }
dump() { echo "---- $1 (last lines of $2)"; tail -n 15 "$2" 2>/dev/null | sed 's/^/    /'; }
# ck_vm_suite SUITE BUILD_DIR: check_rung SUITE (killed after 1200 s) with RUNG_BUILD_DIR, the
# guest kernel and initramfs, a 180 s boot timeout and uid slots in $W/uid-slots-SUITE, into
# $W/SUITE.log; its exit status.
ck_vm_suite() {
	timeout -s KILL $((1200 + 60 * ${RUNG_TEST_OCI_CYCLES:-0})) env CK_VERBOSITY=verbose RUNG_BUILD_DIR="$2" \
		RUNG_VM_KERNEL="$G/bzImage" RUNG_VM_INITRD="$G/initramfs.cpio.gz" \
		RUNG_UID_REGISTRY="$W/uid-slots-$1" RUNG_VM_BOOT_TIMEOUT_MS=180000 \
		"$P/rung/bin/check_rung" "$1" >"$W/$1.log" 2>&1
}
# ck_result NAME SUITE RC T0: the PASS or FAIL line of a Check suite that ran into $W/SUITE.log
# with exit status RC since T0 (a skipped test fails it; its "SUITE: " lines are its figures).
ck_result() {
	cr_log=$W/$2.log
	cr_res=$(grep -E '^[0-9]+%: Checks' "$cr_log" | tail -n 1)
	cr_lines=$(grep "^$2: " "$cr_log" | tr '\n' ' ')
	if [ "$3" = 0 ] && ! grep -q 'skipped' "$cr_log" && [ -n "$cr_res" ]; then
		pass "$1" "$2 suite ($cr_res) in $(ms_since "$4") ms: $cr_lines"
	else
		fail "$1" "rc=$3 $(grep -E 'Checks|:F:|:E:|skip' "$cr_log" | tr '\n' ' ' | cut -c1-800) $cr_lines"
		dump "$2" "$cr_log"
	fi
}


echo "VMTEST driver=$driver kernel=$(wc -c <"$K") initramfs=$(wc -c <"$I") base=$(wc -c <"$BASE")"
base_sum=$(sha256sum "$BASE" | cut -d' ' -f1)
booted=0

# boot: to agent-ready; exec: stdout, exit code, stdin, python; env; files; the image intact.
t_boot() {
	upper "$W/u1.img"
	t0=$(now)
	vm_start a "$W/u1.img" $driver
	if vm_wait a 60000; then
		pass "boot agent-ready in $(ms_since "$t0") ms"
		booted=1
		[ "${VMTEST_VERBOSE:-0}" = 1 ] && { echo "---- serial"; sed "s/^/    /" "$W/a.serial"; }
	else
		fail "boot: $(tail -n 1 "$W/a.wait")"; dump serial "$W/a.serial"; dump vmm "$W/a.out"
		vm_stop a
	fi
}
t_exec() {
	out=$(vexec a -- /bin/echo hello-from-l2)
	[ "$out" = hello-from-l2 ] && pass "exec echo" || fail "exec echo: got '$out'"
	vexec a -- /bin/sh -c 'exit 7'; rc=$?
	[ $rc = 7 ] && pass "exec exit code 7" || fail "exec exit code: got $rc"
	out=$(vexec a -i "abc" -- /bin/sh -c 'tr a-z A-Z')
	[ "$out" = ABC ] && pass "exec stdin" || fail "exec stdin: got '$out'"
	out=$(vexec a -- /usr/bin/python3 -c 'print(2+2)' 2>&1)
	[ "$out" = 4 ] && pass "python3 -c print(2+2)" || fail "python3: got '$out'"
	out=$(vexec a -- /bin/sh -c 'grep -c "^overlay / overlay" /proc/mounts; hostname; echo $PATH; test -c /dev/null && test -d /proc/self && test -w /tmp && test -c /dev/ptmx && echo ok' 2>&1)
	exp=$(printf '1\nrung\n/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nok')
	[ "$out" = "$exp" ] && pass "guest env (overlay root, hostname, PATH, /proc /dev /tmp)" ||
		fail "guest env: got '$out'"
}
t_files() {
	vexec a -i "persist-me" -- /bin/sh -c 'cat > /work/f.txt && echo changed >> /etc/hostname'
	out=$(vexec a -- /bin/cat /work/f.txt)
	[ "$out" = persist-me ] && pass "write/read file" || fail "write/read file: got '$out'"
	# What the runtime must do before it stops a VM whose upper disk it keeps: sync. The
	# guest init's 1 s writeback is the safety net for a stop without one (tested below).
	vexec a -- /bin/sync
	vexec a -i "unsynced" -- /bin/sh -c 'cat > /work/nosync.txt'
	sleep 4
	vm_stop a
	[ "$(sha256sum "$BASE" | cut -d' ' -f1)" = "$base_sum" ] && pass "base image unchanged" ||
		fail "base image was modified"
}
# restart: a new VM on the same upper disk sees the files (warm re-acquire); then pause.
t_restart() {
	vm_start b "$W/u1.img" $driver
	if vm_wait b 60000; then
		out=$(vexec b -- /bin/sh -c 'cat /work/f.txt; echo; tail -n 1 /etc/hostname')
		[ "$out" = "$(printf 'persist-me\nchanged')" ] && pass "files persist across VM restart" ||
			fail "persistence: got '$out'"
		out=$(vexec b -- /bin/cat /work/nosync.txt 2>&1)
		[ "$out" = unsynced ] && pass "a write 4 s before an unclean stop (no sync) survives" ||
			fail "unsynced write lost across an unclean stop: got '$out'"
		t_pause
	else
		fail "restart with the same upper disk did not boot: $(tail -n 1 "$W/b.wait")"
		dump serial "$W/b.serial"; dump vmm "$W/b.out"
	fi
	vm_stop b
}
t_pause() {
	if [ $driver != rung-vmm ]; then
		skip "pause/resume: needs rung-vmm's --control socket (driver $driver)"
		return
	fi
	r1=$("$VT" ctl "$W/b.ctl" pause)
	if "$VT" wait "$(vm_addr b)" 1500 >/dev/null 2>&1; then
		fail "pause: the agent still answers while paused ($r1)"
		return
	fi
	r2=$("$VT" ctl "$W/b.ctl" status)
	r3=$("$VT" ctl "$W/b.ctl" resume)
	if "$VT" wait "$(vm_addr b)" 10000 >/dev/null; then
		out=$(vexec b -- /bin/cat /work/f.txt)
		[ "$out" = persist-me ] && pass "pause blocks the agent, resume restores it ($r1 / $r2 / $r3)" ||
			fail "after resume: got '$out'"
	else fail "resume: agent does not answer ($r1 / $r2 / $r3)"; fi
}
# panic: the VMM exits with a reason, never hangs. A command cannot panic the guest any more
# (/proc/sysrq-trigger is read-only for it): the guest kernel panics at boot instead, on an
# init that does not exist ("Requested init ... failed").
t_panic() {
	upper "$W/u2.img"
	vm_start c "$W/u2.img" $driver "rdinit=/no-such-init init=/no-such-init"
	vm_wait_exit c 60
	if [ $vm_rc = 255 ]; then
		fail "panic: VMM still running 60 s after the guest was started to panic"
		dump serial "$W/c.serial"; dump vmm "$W/c.out"
	elif grep -q "Kernel panic" "$W/c.serial"; then
		pass "guest panic: VMM exited with status $vm_rc: $(tail -n 1 "$W/c.out")"
	else
		fail "panic: VMM exited ($vm_rc) but no panic in the serial log"; dump serial "$W/c.serial"
	fi
}
# flood: the serial log stays bounded (rung-vmm --serial-cap) and the agent responsive.
# The agent kills what an exec leaves behind, so the flood is one long exec in the background.
t_flood() {
	[ -f "$W/u2.img" ] || upper "$W/u2.img"
	# The smallest cap rung-vmm takes, so that the flood (a few KiB/s under nested KVM)
	# certainly passes it; the guest counts what it wrote.
	SERIAL_CAP=4096
	vm_start d "$W/u2.img" $driver
	SERIAL_CAP=262144
	if ! vm_wait d 60000; then
		fail "flood: guest did not boot: $(tail -n 1 "$W/d.wait")"
		dump serial "$W/d.serial"; dump vmm "$W/d.out"; vm_stop d; return
	fi
	vexec d -t 60000 -- /bin/sh -c 'l=0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789ab
		n=0; end=$(($(date +%s) + 12))
		while [ $(date +%s) -lt $end ]; do
			for i in 1 2 3 4 5 6 7 8; do echo $l; done > /dev/ttyS0; n=$((n + 8 * ${#l} + 8))
		done; echo $n' >"$W/d.flood" 2>&1 &
	flood=$!
	sleep 6
	t0=$(now)
	if "$VT" wait "$(vm_addr d)" 10000 >/dev/null; then
		pass "agent answers within $(ms_since "$t0") ms during a console flood"
	else fail "agent unresponsive during a console flood"; fi
	wait $flood
	wrote=$(tail -n 1 "$W/d.flood")
	sz=$(wc -c <"$W/d.serial")
	if [ $driver = rung-vmm ]; then
		case "$wrote" in ''|*[!0-9]*)
			fail "flood: the guest's writer did not end with its byte count: '$wrote'"
			vm_stop d; return ;;
		esac
		if [ "$wrote" -le 8192 ]; then
			fail "flood too slow to test the cap: the guest wrote only '$wrote' bytes"
		elif [ "$sz" -le 8192 ]; then
			pass "serial log bounded: guest wrote $wrote bytes, log holds $sz (cap 4096)"
		else
			fail "serial log $sz bytes after the guest wrote $wrote (cap 4096)"
		fi
	else
		skip "serial log bound: QEMU's file chardev has none ($sz bytes written)"
	fi
	vm_stop d
}
# garbage: nonsense in every virtio-mmio device's registers; the VMM survives or exits
# cleanly, never hangs or dies by a signal. Device order is reversed so the vsock device
# (the agent's channel) is poked last.
# poke_all ID: from inside the guest, all-ones into the queue and status registers of every
# virtio-mmio device on its command line, then a bogus queue notify; output in $W/ID.poke.
poke_all() {
	vexec "$1" -t 30000 -- /bin/sh -c 'set -e; n=0
		for d in $(tr " " "\n" < /proc/cmdline | sed -n "s/^virtio_mmio.device=.*@\(0x[0-9a-fA-F]*\):.*/\1/p" | sort -r); do
			for off in 0x030 0x038 0x080 0x084 0x090 0x094 0x0a0 0x0a4 0x044 0x070 0x050; do
				devmem $(printf "0x%x" $((d + off))) 32 0xffffffff
			done
			devmem $(printf "0x%x" $((d + 0x050))) 32 0x7fff
			n=$((n + 1))
		done; echo "poked $n devices"' >"$W/$1.poke" 2>&1
	sleep 3
}
t_garbage() {
	[ -f "$W/u2.img" ] || upper "$W/u2.img"
	# rung.privileged=1: the guest owns its kernel (root with its capabilities, as a hostile
	# guest would); without it a command cannot open /dev/mem and the test proves nothing
	vm_start e "$W/u2.img" $driver rung.privileged=1
	if ! vm_wait e 60000; then
		fail "virtio garbage: guest did not boot: $(tail -n 1 "$W/e.wait")"
		dump serial "$W/e.serial"; dump vmm "$W/e.out"; vm_stop e; return
	fi
	poke_all e
	poked=$(tail -n 1 "$W/e.poke")
	case "$poked" in "poked "[1-9]*) ;; *)
		fail "virtio garbage: the guest could not poke the devices: '$poked'"; vm_stop e; return ;;
	esac
	"$VT" wait "$(vm_addr e)" 3000 >/dev/null 2>&1 && ans=yes || ans=no
	if vm_alive e; then
		vm_stop e
		[ $vm_rc -lt 128 ] || [ $vm_rc = 143 ] &&
			pass "virtio garbage: VMM survived (guest said '$poked', agent answers: $ans), stopped with $vm_rc" ||
			fail "virtio garbage: VMM died by signal ($vm_rc)"
	else
		wait "$(cat "$W/e.pid")"; vm_rc=$?
		[ $vm_rc -lt 128 ] && pass "virtio garbage: VMM exited cleanly ($vm_rc: $(tail -n 1 "$W/e.out"); guest said '$poked')" ||
			{ fail "virtio garbage: VMM crashed (status $vm_rc)"; dump vmm "$W/e.out"; }
	fi
}

# net-ping: a tap in L1 (10.99.0.1/30) attached to rung-vmm's virtio-net (--net-tap); the
# guest kernel configures eth0 from ip= and answers ICMP echo itself.
t_net_ping() {
	if [ $driver != rung-vmm ]; then
		skip "net-ping: needs rung-vmm --net-tap (driver $driver)"
		return
	fi
	[ -c /dev/net/tun ] || { fail "net-ping: no /dev/net/tun in L1 (tun module not loaded?)"; return; }
	tunctl -d rvtap0 >/dev/null 2>&1
	if ! tunctl -t rvtap0 >"$W/tap.out" 2>&1 || ! ip addr add 10.99.0.1/30 dev rvtap0 ||
		! ip link set rvtap0 up; then
		fail "net-ping: cannot set up tap rvtap0: $(tail -n 1 "$W/tap.out")"
		tunctl -d rvtap0 >/dev/null 2>&1
		return
	fi
	[ -f "$W/u2.img" ] || upper "$W/u2.img"
	VMM_EXTRA="--net-tap rvtap0"
	vm_start f "$W/u2.img" $driver "ip=10.99.0.2::10.99.0.1:255.255.255.252::eth0:off rung.privileged=1"
	VMM_EXTRA=""
	if ! vm_wait f 60000; then
		fail "net-ping: guest did not boot: $(tail -n 1 "$W/f.wait")"
		dump serial "$W/f.serial"; dump vmm "$W/f.out"
	elif ping -c 3 -W 2 10.99.0.2 >"$W/f.ping" 2>&1; then
		pass "net-ping: 3/3 echo replies from the guest over virtio-net ($(grep round-trip "$W/f.ping"))"
	else
		fail "net-ping: $(grep -E 'transmitted|bad' "$W/f.ping" | tail -n 1)"
		dump ping "$W/f.ping"; dump serial "$W/f.serial"; dump vmm "$W/f.out"
		ip -s link show rvtap0 | sed 's/^/    /'
	fi
	# the same garbage as t_garbage, now with virtio-net among the devices
	poke_all f
	case "$(tail -n 1 "$W/f.poke")" in "poked "[1-9]*) ;; *)
		fail "net garbage: the guest could not poke the devices: '$(tail -n 1 "$W/f.poke")'" ;;
	esac
	if vm_alive f; then
		vm_stop f
		[ $vm_rc -lt 128 ] || [ $vm_rc = 143 ] &&
			pass "net garbage: VMM with virtio-net survived ($(tail -n 1 "$W/f.poke")), stopped with $vm_rc" ||
			fail "net garbage: VMM died by signal ($vm_rc)"
	else
		wait "$(cat "$W/f.pid")"; vm_rc=$?
		[ $vm_rc -lt 128 ] && pass "net garbage: VMM exited cleanly ($vm_rc; guest said '$(tail -n 1 "$W/f.poke")')" ||
			{ fail "net garbage: VMM crashed (status $vm_rc)"; dump vmm "$W/f.out"; }
	fi
	tunctl -d rvtap0 >/dev/null 2>&1
}

# snapshot: a running guest saved through the control socket (paused first, so the upper disk
# and the guest's page cache agree), its rung-vmm killed, the snapshot restored into a new
# rung-vmm: a file in guest RAM (/dev/shm) and one on the disk are there, the agent answers a
# new connection; a truncated snapshot is refused naming the problem.
vm_restore() { # ID SNAPSHOT UPPER: like vm_start, from a snapshot
	rm -f "$W/$1.sock" "$W/$1.ctl" "$W/$1.serial"
	RUNG_VMM_DEBUG=1 "$VMM" --restore "$2" --disk "$BASE,ro" --disk "$3" --serial-log "$W/$1.serial" \
		--serial-cap $SERIAL_CAP --vsock-uds "$W/$1.sock" --control "$W/$1.ctl" >"$W/$1.out" 2>&1 &
	echo $! >"$W/$1.pid"
	echo "$W/$1.sock" >"$W/$1.addr"
}
t_snapshot() {
	if [ $driver != rung-vmm ]; then skip "snapshot: needs rung-vmm (driver $driver)"; return; fi
	upper "$W/u5.img"
	vm_start s "$W/u5.img" $driver
	if ! vm_wait s 60000; then
		fail "snapshot: boot: $(tail -n 1 "$W/s.wait")"; dump vmm "$W/s.out"; vm_stop s; return
	fi
	vexec s -i "in-ram" -- /bin/sh -c 'cat > /dev/shm/snap.txt && echo on-disk > /work/snap.txt && sync'
	r1=$("$VT" ctl "$W/s.ctl" pause)
	t0=$(now)
	r2=$("$VT" ctl "$W/s.ctl" "snapshot $W/s.snap")
	save_ms=$(ms_since "$t0")
	kill -KILL "$(cat "$W/s.pid")"; wait "$(cat "$W/s.pid")"
	if [ "${r2%% *}" != ok ] || [ ! -f "$W/s.snap" ] || ls "$W"/s.snap.tmp-* >/dev/null 2>&1; then
		fail "snapshot: save: '$r1' / '$r2'"; dump vmm "$W/s.out"; return
	fi
	pass "snapshot saved in $save_ms ms ($(wc -c <"$W/s.snap") bytes; $r2)"
	t0=$(now)
	vm_restore s2 "$W/s.snap" "$W/u5.img"
	if vm_wait s2 30000; then
		pass "restore agent-ready in $(ms_since "$t0") ms (timeline, ms: $(timeline "$W/s2.out"))"
		out=$(vexec s2 -- /bin/sh -c 'cat /dev/shm/snap.txt; echo; cat /work/snap.txt; echo after > /work/after.txt; cat /work/after.txt')
		[ "$out" = "$(printf 'in-ram\non-disk\nafter')" ] &&
			pass "restored guest: RAM and disk files intact, exec works" ||
			fail "restored guest: got '$out'"
		out=$(vexec s2 -- /bin/echo second-connection)
		[ "$out" = second-connection ] && pass "restored guest: a second agent connection" ||
			fail "restored guest: second connection got '$out'"
	else
		fail "restore: agent not ready: $(tail -n 1 "$W/s2.wait")"; dump vmm "$W/s2.out"
		dump serial "$W/s2.serial"
	fi
	vm_stop s2
	snap_damaged_memory "$W/s.snap" # l1-snapshot.sh
	head -c $(($(wc -c <"$W/s.snap") - 4096)) "$W/s.snap" >"$W/s.trunc"
	vm_restore s3 "$W/s.trunc" "$W/u5.img"
	vm_wait_exit s3 30
	if [ $vm_rc = 1 ] && grep -q "truncated" "$W/s3.out"; then
		pass "truncated snapshot refused: $(tail -n 1 "$W/s3.out")"
	else
		fail "truncated snapshot: status $vm_rc: $(tail -n 1 "$W/s3.out")"
	fi
	rm -f "$W/s.snap" "$W/s.trunc"
}

want() { [ -z "${VMTEST_ONLY:-}" ] || case " $VMTEST_ONLY " in *" $1 "*) true ;; *) false ;; esac; }
if [ "${VMTEST_ONLY_BENCH:-0}" != 1 ]; then
	want boot && t_boot
	if [ $booted = 1 ]; then
		want exec && t_exec
		t_files
		want restart && t_restart
	fi
	. "$P/rung/l1-snapshot.sh"
	want snapshot && t_snapshot
	want snapshot-smp && t_snapshot_smp
	# the snapshot benchmark (bench/vm-snapshot.sh): only when named
	case " ${VMTEST_ONLY:-} " in *" snapbench "*) . "$P/rung/vm-snapshot-l1.sh" ;; esac
	# the exec benchmark (bench/vm-exec.sh): only when named
	case " ${VMTEST_ONLY:-} " in *" execbench "*) . "$P/rung/vm-exec-l1.sh" ;; esac
	want panic && t_panic
	want flood && t_flood
	want garbage && t_garbage
	want net-ping && t_net_ping
	# the runtime end to end: rung run --isolation vm ... (l1-rung.sh, from payload-rung.sh)
	if want rung && [ -f "$P/rung/l1-rung.sh" ]; then . "$P/rung/l1-rung.sh"; fi
	# rung-oci on the vm rung (l1-oci-vm.sh, from payload-rung.sh)
	if { want rung-oci-vm || want rung-oci-vmnet; } && [ -f "$P/rung/l1-oci-vm.sh" ]; then
		. "$P/rung/l1-oci-vm.sh"
	fi
	# rung-oci on the vm rung under containerd (l1-oci-ctrd.sh, from payload-rung.sh)
	if want rung-oci-containerd && [ -f "$P/rung/l1-oci-ctrd.sh" ]; then . "$P/rung/l1-oci-ctrd.sh"; fi
	echo "VMTEST-SUMMARY $npass passed, $nfail failed, $nskip skipped"
fi

# Benchmark (bench/vm-boot.sh reads these lines): VMM start -> agent PONG, per VMM.
n=${VMTEST_BENCH:-0}
[ "$n" -gt 0 ] || exit 0
rss_beyond_guest() { # pid: KiB of RSS outside the guest-memory mapping (MEM MiB)
	awk -v want=$((MEM * 1024)) '
		/^[0-9a-f]+-[0-9a-f]+ / { split($1, r, "-"); cur = 0 }
		/^Size:/ { cur = ($2 >= want && $2 <= want + 4096) }
		/^Rss:/ { if (cur) g += $2; else o += $2 }
		END { print o, g }' "/proc/$1/smaps"
}
for drv in rung-vmm qemu; do
	[ $drv = rung-vmm ] && [ ! -x "$VMM" ] && { echo "VMBENCH $drv absent"; continue; }
	upper "$W/ub.img"
	bi=0 times=""
	while [ $bi -lt "$n" ]; do
		t0=$(now)
		vm_start bench "$W/ub.img" $drv
		if vm_wait bench 60000; then
			t=$(ms_since "$t0"); times="$times $t"
			echo "VMBENCH $drv sample_ms $t"
			[ $bi = 0 ] && set -- $(rss_beyond_guest "$(cat "$W/bench.pid")") &&
				echo "VMBENCH $drv rss_beyond_guest_kib $1 guest_rss_kib $2"
		else
			echo "VMBENCH $drv boot $bi failed"; dump serial "$W/bench.serial"
		fi
		vm_stop bench
		bi=$((bi + 1))
	done
	echo "VMBENCH $drv ready_ms$times"
done
exit 0
