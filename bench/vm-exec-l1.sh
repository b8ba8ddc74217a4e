# bench/vm-exec-l1.sh: the vm exec benchmark's measuring half, sourced by
# vmm/guest/l1-tests.sh inside the nested stage's L1 (or on a host with KVM) when VMTEST_ONLY
# names "execbench"; bench/vm-exec.sh runs it and summarises. busybox sh.
#
# One guest with two vCPUs and the command cgroup every runtime-made guest has (rung.pids,
# agent/vm-cgroup.c), VMTEST_EXEC_N execs of /bin/true (default 40) two ways, interleaved:
# after a 100 ms pause (longer than an RCU grace period: a command's move into its cgroup
# that waits for one pays it here) and right after the previous one. Each exec is timed
# around rung-vmtest in L1 (its own start included: compare within a run). The reference:
# what a grace period costs in that guest, membarrier(MEMBARRIER_CMD_GLOBAL) timed by python3
# there (a synchronize_rcu), the median of 15 after a 100 ms pause.
# Prints "VMBENCH exec gap_ms ...", "VMBENCH exec b2b_ms ..." (ms, one per exec) and
# "VMBENCH exec gp_ms <median>".
eb_n=${VMTEST_EXEC_N:-40}
eb_run() {
	upper "$W/eb.img"
	CPUS=2 vm_start eb "$W/eb.img" rung-vmm "rung.pids=256"
	if ! vm_wait eb 90000; then
		fail "execbench: boot: $(tail -n 1 "$W/eb.wait")"
		vm_stop eb
		return 1
	fi
	vexec eb -- /bin/true || { fail "execbench: first exec"; vm_stop eb; return 1; }
	eb_gap="" eb_b2b="" eb_i=0
	while [ $eb_i -lt "$eb_n" ]; do
		usleep 100000
		eb_t=$(now); vexec eb -- /bin/true; eb_gap="$eb_gap $(ms_since "$eb_t")"
		eb_t=$(now); vexec eb -- /bin/true; eb_b2b="$eb_b2b $(ms_since "$eb_t")"
		eb_i=$((eb_i + 1))
	done
	eb_gp=$(vexec eb -- /usr/bin/python3 -c '
import ctypes, time
sc, r = ctypes.CDLL(None).syscall, []
for i in range(15):
    time.sleep(0.1)
    t = time.monotonic()
    if sc(324, 1, 0, 0) != 0:  # membarrier, MEMBARRIER_CMD_GLOBAL
        raise SystemExit("membarrier failed")
    r.append((time.monotonic() - t) * 1000)
print("%.1f" % sorted(r)[7])' 2>&1)
	out=$(vexec eb -- /bin/cat /proc/self/cgroup)
	vm_stop eb
	echo "VMBENCH exec gap_ms$eb_gap"
	echo "VMBENCH exec b2b_ms$eb_b2b"
	echo "VMBENCH exec gp_ms $eb_gp"
	# the commands ran in the guest's command cgroup, or the bench measured nothing of it
	[ "$out" = "0::/cmd" ] && pass "execbench: $eb_n rounds, commands in 0::/cmd" ||
		fail "execbench: the command's cgroup is '$out', not 0::/cmd"
}
eb_run
