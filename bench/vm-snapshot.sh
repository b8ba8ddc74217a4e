#!/bin/sh
# bench/vm-snapshot.sh: rung-vmm restore from a snapshot vs cold boot of the same VM, to
# agent-ready, and the memory of 10 clones restored from one file vs one booted guest, under
# nested KVM. Run it through `make bench-vm-snapshot` (which builds its inputs and passes
# KERNEL, INITRAMFS, VMTEST, VMM, OUT). The measuring half is bench/vm-snapshot-l1.sh, run
# inside the L1 guest of vmm/guest/run-l1.sh (or directly on a host with working KVM);
# this half prints its lines and the medians. Rounds: $BENCH_N (default 5).
# With LOG=FILE it only summarises an existing console log (e.g. of
# `make check-vm VMTEST_ONLY="... snapbench"`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${OUT:=build/vm}"
. "$here/vm-l1.sh"
export VMTEST_SNAP_N=${BENCH_N:-5}
vm_l1_log snapbench snap
grep -E '^VMTEST (FAIL|SKIP) snapbench' "$log" || true
grep '^VMBENCH snap' "$log" | grep -v ' timeline '
c=$(grep '^VMBENCH snap cold_ms' "$log" | cut -d' ' -f4- | median)
r=$(grep '^VMBENCH snap restore_ms' "$log" | cut -d' ' -f4- | median)
echo "vm to agent-ready, median (ms): cold boot $c, restore from a snapshot $r"
awk -v r="$r" -v c="$c" 'BEGIN { if (r != "nan" && c != "nan" && c > 0) printf "ratio restore/cold boot: %.3f (target <= 0.1)\n", r / c }'
# where a restore's time goes (rung-vmm's own timeline, ms since its start), the last round
grep '^VMBENCH snap timeline' "$log" | tail -n 1 | sed 's/^VMBENCH snap timeline /restore timeline (ms since rung-vmm started): /'
grep '^VMBENCH snap mem one_guest' "$log" | awk '{ printf "memory (PSS): one booted guest %d KiB; %d clones of one snapshot %d KiB together (memory check done in %s of them)\n", $5, $7, $9, $NF }'
grep '^VMBENCH snap mem ratio' "$log" | sed 's/^VMBENCH snap mem ratio /clones\/one guest: /'
grep '^VMBENCH snap mem with_file' "$log" | sed 's/^VMBENCH snap mem with_file_kib \([0-9]*\) ratio /with the snapshot file: \1 KiB, clones\/one guest: /'
