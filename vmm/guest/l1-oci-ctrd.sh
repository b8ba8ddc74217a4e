# vmm/guest/l1-oci-ctrd.sh: sourced by l1-tests.sh (busybox sh) where /dev/kvm works, for
# VMTEST_ONLY naming rung-oci-containerd (or none). rung-oci on the vm rung under containerd
# (docs/oci.md): the e2e_oci_ctrdvm Check suite (tests/check_e2e_oci_ctrdvm.c) starts a private
# containerd (Debian's containerd, ctr and runc shim, copied into the payload by
# payload-rung.sh), imports its busybox image for the native snapshotter and runs
# `ctr run --runc-binary .../rung-oci-vm`: echo, the guest's kernel and processes, an exit code,
# a TTY, `ctr task exec`, pause/resume (rung-vmm's CPU time), kill, delete, nothing left; rung's
# escape battery by `ctr task exec` of rung-probe in the guest; 5 run --rm cycles. containerd passes its RUNG_* environment to the
# shim and the shim to rung-oci, so the guest kernel and initramfs knobs reach it.
# Uses skip/now/ck_vm_suite/ck_result, $P, $G and $W from l1-tests.sh.
if [ ! -x "$P/rung/bin/rung-oci" ] || [ ! -x "$P/rung/bin/check_rung" ] || [ ! -x /usr/bin/containerd ]; then
	skip rung-oci-containerd "no rung-oci, check_rung or containerd in the payload"
else
	oc_b=$W/ck-ctrd
	mkdir -p "$oc_b" && chmod 0711 "$W" "$oc_b"
	# the suite runs $RUNG_BUILD_DIR/rung-oci (rung-agent and rung-vmm beside its real path)
	# and puts $RUNG_BUILD_DIR/rung-probe into its image
	ln -sf "$P/rung/bin/rung-oci" "$oc_b/rung-oci"
	ln -sf "$P/rung/bin/rung-probe" "$oc_b/rung-probe"
	# ctr run -t needs a pty pair (the suite's side of the TTY): L1's /dev has no devpts
	# mounted (l1-oci-vm.sh mounts it too; without it, as when VMTEST_ONLY names only this,
	# openpty failed and the TTY check read nothing: the second run of 2 Dec)
	if [ ! -e /dev/pts/ptmx ]; then mkdir -p /dev/pts && mount -t devpts -o ptmxmode=0666 devpts /dev/pts; fi
	# containerd makes /run/containerd (shim sockets, fifos) whatever its config says
	oc_run=0
	if ! (: >/run/.rung-w) 2>/dev/null; then mount -t tmpfs -o mode=0755,size=16m run /run && oc_run=1; fi
	rm -f /run/.rung-w
	oc_t0=$(now)
	ck_vm_suite e2e_oci_ctrdvm "$oc_b"
	oc_rc=$?
	[ "$oc_run" = 1 ] && umount /run
	ck_result rung-oci-containerd e2e_oci_ctrdvm "$oc_rc" "$oc_t0"
fi
