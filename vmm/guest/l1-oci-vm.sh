# vmm/guest/l1-oci-vm.sh: sourced by l1-tests.sh (busybox sh) where /dev/kvm works, for
# VMTEST_ONLY naming rung-oci-vm or rung-oci-vmnet (or none). rung-oci on the vm rung (docs/oci.md): the
# e2e_oci_vm Check suite (tests/check_e2e_oci_vm.c) drives build/rung-oci as rung-oci-vm on a
# busybox bundle: create/start/state/kill/delete, output and exit codes (0, 7, killed), the
# program under the guest's kernel, the CRI's file binds and a pod's directory binds (a
# service-account token's layout, an emptyDir) copied in, nothing left after delete, and
# create+start timed against
# the container rung's rung-oci on the same bundle (its line printed in the PASS).
# Uses skip/now/ck_vm_suite/ck_result, $P, $G and $W from l1-tests.sh.
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
	if want rung-oci-vm; then
		ov_t0=$(now)
		ck_vm_suite e2e_oci_vm "$ov_b"
		ov_rc=$?
		ck_result rung-oci-vm e2e_oci_vm "$ov_rc" "$ov_t0"
	fi
	# the pod's network (VMTEST_ONLY rung-oci-vmnet): a CNI-like netns into a test internet
	# (iproute2's ip, from payload-rung.sh), the guest's traffic through it, the allowlist
	if want rung-oci-vmnet; then
		ov_t0=$(now)
		ck_vm_suite e2e_oci_vmnet "$ov_b"
		ov_rc=$?
		ck_result rung-oci-vmnet e2e_oci_vmnet "$ov_rc" "$ov_t0"
		ov_left=$(ls /sys/class/net | grep '^rg' | tr '\n' ' ')
		[ -z "$ov_left" ] || fail rung-oci-vmnet-leak "a tap is left: $ov_left"
	fi
fi
