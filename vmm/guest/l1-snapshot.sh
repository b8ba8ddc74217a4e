# vmm/guest/l1-snapshot.sh: more snapshot cases of the nested stage, sourced by l1-tests.sh
# (its helpers: vm_start, vm_restore, vm_wait, vexec, pass/fail). busybox sh.
#   snap_damaged_memory FILE   (part of "snapshot") guest memory damaged in the file: the
#                              restored VM is stopped by the background check, naming it
#   t_snapshot_smp             ("snapshot-smp") two vCPUs, both busy while saved
# The restore timeline rung-vmm logs (docs/snapshots.md), for a pass line: "checked 1.2 ..."
# grew: two samples of /proc/stat's cpu0 and cpu1 lines on stdin; how many CPUs were busy more
# than idle between them. Busy counts steal: nested under TCG most of a spinning vCPU's time is
# the L1 hypervisor's (steal grew ~170 ticks in 2 s where user grew 0-2), so user+nice+system
# alone grew on 0 or 1 of 2 busy vCPUs now and then; an idle vCPU's idle time grows instead.
grew() { awk '/^cpu[01] / { b = $2 + $3 + $4 + $7 + $8 + $9; i = $5 + $6
	if ($1 in a) { if (b - a[$1] > i - d[$1]) n++ } else { a[$1] = b; d[$1] = i } }
	END { print n + 0 }'; }
timeline() { grep -o 'restore timeline.*' "$1" | tail -n 1 | sed 's/restore timeline (ms since start): //'; }

snap_damaged_memory() {
	sdm_size=$(wc -c <"$1")
	# 64 MiB below the end: inside guest memory (the file's tail), far from the state part
	printf 'XXXXXXXX' | dd of="$1" bs=1 seek=$((sdm_size - (64 << 20))) conv=notrunc 2>/dev/null
	t0=$(now)
	vm_restore sd "$1" "$W/u5.img"
	"$VT" wait "$(vm_addr sd)" 30000 >/dev/null 2>&1 && sdm_ans=yes || sdm_ans=no
	vm_wait_exit sd 90
	if [ $vm_rc = 1 ] && grep -q "guest memory checksum mismatch" "$W/sd.out"; then
		pass "damaged guest memory: the restored VM stopped after $(ms_since "$t0") ms (agent answered first: $sdm_ans): $(grep -o 'rung-vmm: exit: .*' "$W/sd.out" | cut -c1-200)"
	else
		fail "damaged guest memory: status $vm_rc after $(ms_since "$t0") ms: $(tail -n 2 "$W/sd.out" | tr '\n' ' ')"
	fi
}

# Two vCPUs: both spinning when paused and saved; the restored guest has both online, its
# files, a working exec, and both vCPUs run (each one's busy time in /proc/stat grows).
t_snapshot_smp() {
	if [ $driver != rung-vmm ]; then skip "snapshot-smp: needs rung-vmm (driver $driver)"; return; fi
	upper "$W/u6.img"
	CPUS=2
	vm_start m "$W/u6.img" $driver
	CPUS=1
	if ! vm_wait m 90000; then
		fail "snapshot-smp: boot with --cpus 2: $(tail -n 1 "$W/m.wait")"; dump vmm "$W/m.out"; vm_stop m; return
	fi
	vexec m -i "smp-ram" -- /bin/sh -c 'cat > /dev/shm/smp.txt && echo smp-disk > /work/smp.txt && sync'
	vexec m -t 120000 -- /bin/sh -c 'for i in 1 2; do sh -c "while :; do :; done" & done; wait' \
		>/dev/null 2>&1 &
	busy=$!
	sleep 4
	before=$(vexec m -- /bin/sh -c 'grep "^cpu[01] " /proc/stat; sleep 2; grep "^cpu[01] " /proc/stat' | grew)
	r1=$("$VT" ctl "$W/m.ctl" pause)
	t0=$(now)
	r2=$("$VT" ctl "$W/m.ctl" "snapshot $W/m.snap")
	save_ms=$(ms_since "$t0")
	kill -KILL "$(cat "$W/m.pid")"; wait "$(cat "$W/m.pid")"
	wait $busy
	if [ "${r2%% *}" != ok ]; then
		fail "snapshot-smp: save with two busy vCPUs: '$r1' / '$r2'"; dump vmm "$W/m.out"; return
	fi
	t0=$(now)
	vm_restore m2 "$W/m.snap" "$W/u6.img"
	if ! vm_wait m2 60000; then
		fail "snapshot-smp: restore: $(tail -n 1 "$W/m2.wait")"; dump vmm "$W/m2.out"
		dump serial "$W/m2.serial"; vm_stop m2; rm -f "$W/m.snap"; return
	fi
	ready=$(ms_since "$t0")
	out=$(vexec m2 -- /bin/sh -c 'cat /dev/shm/smp.txt; echo; cat /work/smp.txt; cat /sys/devices/system/cpu/online; grep -c ^processor /proc/cpuinfo')
	[ "$before" = 2 ] && [ "$out" = "$(printf 'smp-ram\nsmp-disk\n0-1\n2')" ] &&
		pass "snapshot-smp: 2 vCPUs saved busy (busy time grew on $before of 2 just before, saved in $save_ms ms), restored to agent-ready in $ready ms: both online, RAM and disk files intact, exec works" ||
		fail "snapshot-smp: busy before the save on $before of 2 vCPUs; restored guest: got '$(echo "$out" | tr '\n' ' ')'"
	# both vCPUs run after the restore: two spinners for 3 s, each CPU's user+system grows
	out=$(vexec m2 -- /bin/sh -c 'grep "^cpu[01] " /proc/stat; spin() { while :; do :; done; }
		spin & a=$!; spin & b=$!; sleep 3; kill $a $b; grep "^cpu[01] " /proc/stat' 2>&1)
	n=$(echo "$out" | grew)
	[ "$n" = 2 ] && pass "snapshot-smp: both vCPUs run after the restore ($(timeline "$W/m2.out"))" ||
		fail "snapshot-smp: busy time grew on $n of 2 vCPUs: $(echo "$out" | tr '\n' ' ' | cut -c1-300)"
	vm_stop m2
	rm -f "$W/m.snap"
}
