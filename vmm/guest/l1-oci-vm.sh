# vmm/guest/l1-oci-vm.sh: sourced by l1-tests.sh (busybox sh) where /dev/kvm works, for
# VMTEST_ONLY naming rung-oci-vm (or none). rung-oci on the vm rung (docs/oci.md): the
# e2e_oci_vm Check suite (tests/check_e2e_oci_vm.c) drives build/rung-oci as rung-oci-vm on a
# busybox bundle: create/start/state/kill/delete, output and exit codes (0, 7, killed), the
# program under the guest's kernel, nothing left after delete, and create+start timed against
# the container rung's rung-oci on the same bundle (its line printed in the PASS).
# Uses pass/fail/skip/now/ms_since/dump, $P, $G and $W from l1-tests.sh.
if [ ! -x "$P/rung/bin/rung-oci" ] || [ ! -x "$P/rung/bin/check_rung" ]; then
	skip rung-oci-vm "no rung-oci or check_rung in the payload"
else
	ov_b=$W/ck-oci
	mkdir -p "$ov_b" && chmod 0711 "$W" "$ov_b"
	# the suite runs $RUNG_BUILD_DIR/rung-oci; rung-oci finds rung-agent and rung-vmm beside
	# its real path
	ln -sf "$P/rung/bin/rung-oci" "$ov_b/rung-oci"
	# a terminal (process.terminal) is a pty of the host's devpts: L1's /dev has none mounted
	if [ ! -e /dev/pts/ptmx ]; then mkdir -p /dev/pts && mount -t devpts -o ptmxmode=0666 devpts /dev/pts; fi
	ov_t0=$(now)
	timeout -s KILL 1200 env CK_VERBOSITY=verbose RUNG_BUILD_DIR="$ov_b" \
		RUNG_VM_KERNEL="$G/bzImage" RUNG_VM_INITRD="$G/initramfs.cpio.gz" \
		RUNG_UID_REGISTRY="$W/uid-slots-oci" RUNG_VM_BOOT_TIMEOUT_MS=180000 \
		"$P/rung/bin/check_rung" e2e_oci_vm >"$W/e2e_oci_vm.log" 2>&1
	ov_rc=$?
	ov_res=$(grep -E '^[0-9]+%: Checks' "$W/e2e_oci_vm.log" | tail -n 1)
	ov_lines=$(grep '^e2e_oci_vm: ' "$W/e2e_oci_vm.log" | tr '\n' ' ')
	if [ "$ov_rc" = 0 ] && ! grep -q 'skipped' "$W/e2e_oci_vm.log" && [ -n "$ov_res" ]; then
		pass rung-oci-vm "e2e_oci_vm suite ($ov_res) in $(ms_since "$ov_t0") ms: $ov_lines"
	else
		fail rung-oci-vm "rc=$ov_rc $(grep -E 'Checks|:F:|:E:|skip' "$W/e2e_oci_vm.log" | tr '\n' ' ' | cut -c1-800) $ov_lines"
		dump e2e_oci_vm "$W/e2e_oci_vm.log"
	fi
fi
