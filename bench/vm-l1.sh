# bench/vm-l1.sh: sourced by the host halves of the vm benches (vm-snapshot.sh, vm-exec.sh;
# $here is the caller's directory, $OUT the stage's build/vm).
# vm_l1_log CASE PREFIX: runs vmm/guest/run-l1.sh with VMTEST_ONLY=CASE (the caller exported
# its own knobs first), unless LOG names a console log already; sets $log to that log, and
# fails when it holds no "VMBENCH PREFIX" line.
vm_l1_log() {
	log=${LOG:-}
	if [ -z "$log" ]; then
		export OUT VMTEST_ONLY="$1"
		sh "$here/../vmm/guest/run-l1.sh" >/dev/null 2>&1 || true
		log=$OUT/l1-console.log
	fi
	grep -q "^VMBENCH $2" "$log" || { echo "bench: no VMBENCH $2 lines in $log" >&2; exit 1; }
}
# median: of the whole numbers on stdin, separated by spaces or lines ("nan" without any)
median() { tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n | awk '{ v[NR] = $1 } END {
	if (NR == 0) { print "nan"; exit }
	print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
