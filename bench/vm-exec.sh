#!/bin/sh
# bench/vm-exec.sh: an exec's latency in a two-vCPU vm sandbox after a pause and back to
# back, under nested KVM. Run it through `make bench-vm-exec` (which builds its inputs and
# passes KERNEL, INITRAMFS, VMTEST, VMM, OUT; RUNG_VM_AGENT=path puts another rung-agent in
# the initramfs, for an A/B of the guest side). The measuring half is bench/vm-exec-l1.sh,
# run inside the L1 guest of vmm/guest/run-l1.sh; this half prints the medians. Rounds:
# $BENCH_N (default 40). With LOG=FILE it only summarises an existing console log.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:=build/vm}"
. "$here/vm-l1.sh"
export VMTEST_EXEC_N=${BENCH_N:-40}
vm_l1_log execbench exec
grep -E '^VMTEST (PASS|FAIL|SKIP) execbench' "$log" || true
g=$(grep '^VMBENCH exec gap_ms' "$log" | cut -d' ' -f4- | median)
b=$(grep '^VMBENCH exec b2b_ms' "$log" | cut -d' ' -f4- | median)
echo "vm exec of /bin/true, 2 vCPUs, median (ms, rung-vmtest's start in L1 included):" \
	"after a 100 ms pause $g, back to back $b"
awk -v g="$g" -v b="$b" 'BEGIN { if (b != "nan" && b > 0)
	printf "ratio after a pause / back to back: %.2f\n", g / b }'
grep '^VMBENCH exec gp_ms' "$log" |
	sed 's/^VMBENCH exec gp_ms /a grace period in that guest (synchronize_rcu by membarrier), ms: /'
