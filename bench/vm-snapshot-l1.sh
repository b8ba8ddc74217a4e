# bench/vm-snapshot-l1.sh: the snapshot benchmark's measuring half, sourced by
# vmm/guest/l1-tests.sh inside the nested stage's L1 (or on a host with KVM) when
# VMTEST_ONLY names "snapbench"; bench/vm-snapshot.sh runs it and summarises. busybox sh.
#
# 1. Restore vs cold boot of the same VM (256 MiB, 1 vCPU, the same kernel, initramfs and
#    disks), VMTEST_SNAP_N rounds (default 5), interleaved: a cold boot of rung-vmm to the
#    agent's first PONG, then a rung-vmm --restore of a snapshot of that VM (taken once, at
#    agent-ready, paused) to the agent's first PONG on a new connection.
# 2. Memory: one booted guest's rung-vmm alone, then 10 rung-vmm --restore of the one file
#    running at once; each process's PSS from /proc/PID/smaps_rollup (shared pages divided
#    among the processes mapping them), measured once every clone's background memory check
#    is done (its read-only view of the file is unmapped then; at most 60 s is waited for
#    each, the count that finished is printed). Also the sum with the snapshot file's page
#    cache added whole (an upper bound: the file lives in L1's tmpfs).
# Prints "VMBENCH snap ..." lines; a VM that does not come up is a FAIL line.
sb_n=${VMTEST_SNAP_N:-5} sb_clones=10
sb_pss() { awk '/^Pss:/ { print $2 }' "/proc/$(cat "$W/$1.pid")/smaps_rollup"; }
sb_median() { tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n | awk '{ v[NR] = $1 } END {
	if (NR == 0) { print "nan"; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# sb_verified ID SECONDS: until rung-vmm logged its memory check done
sb_verified() {
	sv_i=0
	while ! grep -q "guest memory verified" "$W/$1.out" && [ $sv_i -lt $(($2 * 10)) ]; do
		usleep 100000; sv_i=$((sv_i + 1))
	done
	grep -q "guest memory verified" "$W/$1.out"
}

sb_template() {
	upper "$W/sb-tpl.img"
	vm_start sbt "$W/sb-tpl.img" rung-vmm
	if ! vm_wait sbt 90000; then fail "snapbench: template boot: $(tail -n 1 "$W/sbt.wait")"; vm_stop sbt; return 1; fi
	"$VT" ctl "$W/sbt.ctl" pause >/dev/null
	sb_r=$("$VT" ctl "$W/sbt.ctl" "snapshot $W/sb.snap")
	vm_stop sbt
	[ "${sb_r%% *}" = ok ] || { fail "snapbench: snapshot: $sb_r"; return 1; }
	echo "VMBENCH snap file_bytes $(wc -c <"$W/sb.snap") save '$sb_r'"
}

sb_rounds() {
	upper "$W/sb-cold.img"
	sb_cold="" sb_rest="" i=0
	while [ $i -lt "$sb_n" ]; do
		t0=$(now)
		vm_start sbc "$W/sb-cold.img" rung-vmm
		if vm_wait sbc 90000; then sb_cold="$sb_cold $(ms_since "$t0")"
		else fail "snapbench: cold boot $i: $(tail -n 1 "$W/sbc.wait")"; fi
		vm_stop sbc
		t0=$(now)
		vm_restore sbr "$W/sb.snap" "$W/sb-tpl.img"
		if vm_wait sbr 60000; then
			sb_rest="$sb_rest $(ms_since "$t0")"
			echo "VMBENCH snap timeline $(timeline "$W/sbr.out")"
		else
			fail "snapbench: restore $i: $(tail -n 1 "$W/sbr.wait")"; dump vmm "$W/sbr.out"
		fi
		vm_stop sbr
		i=$((i + 1))
	done
	echo "VMBENCH snap cold_ms$sb_cold"
	echo "VMBENCH snap restore_ms$sb_rest"
	c=$(echo "$sb_cold" | sb_median) r=$(echo "$sb_rest" | sb_median)
	echo "VMBENCH snap median cold_ms $c restore_ms $r ratio $(awk -v r="$r" -v c="$c" 'BEGIN { if (c > 0) printf "%.3f", r / c; else print "nan" }') (target <= 0.1)"
}

# The clones share the template's upper disk read-only (they are only asked for PONG; the
# disk is not what is measured); memory is mapped privately from the one file.
sb_memory() {
	vm_start sbm "$W/sb-cold.img" rung-vmm
	if ! vm_wait sbm 90000; then fail "snapbench: memory boot: $(tail -n 1 "$W/sbm.wait")"; vm_stop sbm; return; fi
	sleep 5
	one=$(sb_pss sbm)
	vm_stop sbm
	i=0 ids=""
	while [ $i -lt $sb_clones ]; do
		vm_restore "sbk$i" "$W/sb.snap" "$W/sb-tpl.img,ro"
		vm_wait "sbk$i" 60000 && ids="$ids sbk$i" || fail "snapbench: clone $i: $(tail -n 1 "$W/sbk$i.wait")"
		i=$((i + 1))
	done
	nv=0
	for id in $ids; do sb_verified "$id" 60 && nv=$((nv + 1)); done
	sleep 5
	tot=0 per=""
	for id in $ids; do
		"$VT" wait "$(vm_addr "$id")" 5000 >/dev/null || fail "snapbench: $id does not answer at the end"
		p=$(sb_pss "$id"); tot=$((tot + p)); per="$per $p"
	done
	for id in $ids; do vm_stop "$id"; done
	n=$(echo $ids | wc -w)
	echo "VMBENCH snap mem one_guest_pss_kib $one clones $n clones_pss_kib $tot per_clone_kib$per memory_checked $nv"
	fk=$(($(wc -c <"$W/sb.snap") / 1024))
	echo "VMBENCH snap mem with_file_kib $((tot + fk)) ratio $(awk -v t="$((tot + fk))" -v o="$one" 'BEGIN { if (o > 0) printf "%.2f", t / o; else print "nan" }') (the clones' PSS plus the whole snapshot file's page cache, $fk KiB, as if all of it stayed resident)"
	echo "VMBENCH snap mem ratio $(awk -v t="$tot" -v o="$one" 'BEGIN { if (o > 0) printf "%.2f", t / o; else print "nan" }') (10 clones' PSS / one booted guest's; 10 would be no sharing)"
}

if [ $driver != rung-vmm ]; then
	skip "snapbench: needs rung-vmm (driver $driver)"
elif sb_template; then
	sb_rounds
	sb_memory
	rm -f "$W/sb.snap"
fi
