#!/bin/sh
# bench/vm-boot.sh: VMM start -> agent-ready, rung-vmm vs QEMU microvm, under nested KVM.
# Run it through `make bench-vm` (which builds its inputs and passes KERNEL, INITRAMFS,
# VMTEST, VMM, OUT). Boots the same guest kernel + initramfs + disks N times with each
# VMM inside the L1 guest of vmm/guest/run-l1.sh (or directly on a host with working KVM),
# and prints the medians, the ratio rung-vmm/QEMU (target <= 0.5) and rung-vmm's RSS
# beyond guest memory. N = $BENCH_N (default 7).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:=build/vm}"
export OUT VMTEST_BENCH=${BENCH_N:-7} VMTEST_ONLY_BENCH=1
sh "$here/../vmm/guest/run-l1.sh" >/dev/null 2>&1 || true
log=$OUT/l1-console.log
grep -q '^VMBENCH' "$log" || { echo "vm-boot: no VMBENCH lines in $log" >&2; exit 1; }
grep '^VMBENCH' "$log" | grep -v sample_ms
median() { tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n | awk '{ v[NR] = $1 } END {
	if (NR == 0) { print "nan"; exit } print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# Per-boot samples, so that a run cut short (an L1 hang) still gives what it measured.
r=$(grep '^VMBENCH rung-vmm sample_ms' "$log" | cut -d' ' -f4 | median)
q=$(grep '^VMBENCH qemu sample_ms' "$log" | cut -d' ' -f4 | median)
nr=$(grep -c '^VMBENCH rung-vmm sample_ms' "$log" || true)
nq=$(grep -c '^VMBENCH qemu sample_ms' "$log" || true)
echo "vm boot to agent-ready, median (ms): rung-vmm $r (n=$nr), qemu-microvm $q (n=$nq)"
awk -v r="$r" -v q="$q" 'BEGIN { if (r != "nan" && q != "nan" && q > 0) printf "ratio rung-vmm/qemu: %.2f (target <= 0.5)\n", r / q }'
grep '^VMBENCH .* rss_beyond_guest_kib' "$log" | awk '{ printf "%s RSS beyond guest memory: %d KiB (guest memory resident: %d KiB)\n", $2, $4, $6 }'
