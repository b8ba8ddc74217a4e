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
log=${LOG:-}
if [ -z "$log" ]; then
	export OUT VMTEST_ONLY=execbench VMTEST_EXEC_N=${BENCH_N:-40}
	sh "$here/../vmm/guest/run-l1.sh" >/dev/null 2>&1 || true
	log=$OUT/l1-console.log
fi
grep -q '^VMBENCH exec' "$log" || { echo "vm-exec: no VMBENCH exec lines in $log" >&2; exit 1; }
grep -E '^VMTEST (PASS|FAIL|SKIP) execbench' "$log" || true
median() { tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n | awk '{ v[NR] = $1 } END {
	if (NR == 0) { print "nan"; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
g=$(grep '^VMBENCH exec gap_ms' "$log" | cut -d' ' -f4- | median)
b=$(grep '^VMBENCH exec b2b_ms' "$log" | cut -d' ' -f4- | median)
echo "vm exec of /bin/true, 2 vCPUs, median (ms, rung-vmtest's start in L1 included): after a 100 ms pause $g, back to back $b"
awk -v g="$g" -v b="$b" 'BEGIN { if (b != "nan" && b > 0) printf "ratio after a pause / back to back: %.2f\n", g / b }'
grep '^VMBENCH exec gp_ms' "$log" | sed 's/^VMBENCH exec gp_ms /a grace period in that guest (synchronize_rcu by membarrier), median ms: /'
