#!/bin/sh
# tests/distro/run.sh: the distro stage (make check-distro). The process-rung, container-rung,
# cgroup and egress suites of check_rung on Debian 12's OWN kernel (the cloud kernel, 6.1) with
# a PURE cgroup2 hierarchy and the stores on ext4, the layout of a stock Debian 12 / Ubuntu /
# Fedora machine; the host's own run (make check-unit) covers its kernel and hybrid layout.
#
# L1 is that kernel under QEMU TCG (no nested KVM is needed: -cpu max, any host), booted with
#   - an initramfs: busybox, the modules of fetch-kernel.sh, init.sh;
#   - /dev/vda, a read-only ext4 payload that becomes L1's root: busybox and python3 (what the
#     suites exec), iproute2's ip, check_rung, rung, rung-agent, rfs-tool with their libraries;
#   - /dev/vdb, a sparse ext4 scratch disk: /tmp, /var/lib, /var/cache in L1 (main.sh).
# One timeout per boot and ONE retry, loudly, only when L1 never reported its summary (a TCG
# boot occasionally hangs). Prints the DISTRO lines, then "N passed, N failed"; exit 0 only if
# every suite passed. Skips (exit 0, loudly) only when qemu-system-x86_64 is absent.
#
# Inputs (env): RUNG_BUILD (the build dir, with check_rung, rung, rung-agent, rfs-tool), OUT
# (work dir, default $RUNG_BUILD/distro), DISTRO_SUITES (space-separated suite names or
# prefixes; default below), RUNG_DISTRO_TIMEOUT (s per boot, default 2400; the whole run took
# 990 s on a loaded 2-core host), RUNG_DISTRO_BOOT_TIMEOUT (s until L1 must have set up its
# cgroup2 root, default 300: a hung TCG boot is retried then), DISTRO_VERBOSE=1
# (every suite's whole log), DISTRO_SMP / DISTRO_MEM (L1 CPUs / MiB; 2 / 3072).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
guest=$(cd "$here/../../vmm/guest" && pwd) # copy-libs.sh, mkrootfs.sh, mkdisk.sh (read-only use)
: "${RUNG_BUILD:?the build dir}"
OUT=${OUT:-$RUNG_BUILD/distro}
SUITES=${DISTRO_SUITES:-"cgroup_v2 cgroup_plan rootfs_store e2e_container_kernel e2e_process_limits e2e_process_agentside runtime_seccomp e2e_container_store e2e_container_agentside e2e_process_exec e2e_process_keep e2e_process_life e2e_process_escape runtime_policy e2e_process_leak e2e_cli_basics e2e_container_life e2e_container_limits e2e_container_leak netpolicy_net netpolicy_life e2e_egress_process e2e_egress_life e2e_egress_container e2e_egress_cli e2e_resume e2e_procs_basic e2e_procs_container e2e_ports_basic e2e_ports_serve e2e_files_ops e2e_files_container e2e_files_cli e2e_stats_basic e2e_stats_net e2e_callbacks_basic e2e_callbacks_container e2e_callbacks_cli e2e_cp_basic e2e_cp_container e2e_archive_serve e2e_pool_claim e2e_fork_fs e2e_fork_container e2e_commit_image rootfs_overlay e2e_oci_life e2e_oci_exec e2e_oci_hooks e2e_cli_runowned e2e_cli_runfirst e2e_process_first e2e_cli_runspare e2e_cli_static e2e_cli_refused e2e_container_runowned e2e_oci_egress e2e_oci_pod e2e_oci_containerd"}
log() { echo "check-distro: $*" >&2; }
t_start=$(date +%s)
if ! command -v qemu-system-x86_64 >/dev/null; then
	log "SKIPPED: qemu-system-x86_64 is not installed (apt-get install qemu-system-x86):" \
		"the suites did NOT run on Debian 12's kernel with cgroup v2"
	echo "0 passed, 0 failed (stage skipped: no qemu-system-x86_64)"
	exit 0
fi
for f in check_rung rung rung-dyn rung-agent rung-serve rung-image rfs-tool rung-oci; do
	[ -x "$RUNG_BUILD/$f" ] || { log "$RUNG_BUILD/$f is not built"; exit 1; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
. "$guest/copy-libs.sh"
kdir=$(sh "$here/fetch-kernel.sh")

# --- the payload: L1's root ----------------------------------------------------------------
t0=$(date +%s)
P=$OUT/root
sh "$guest/mkrootfs.sh" python "$P" >/dev/null
for x in mnt/scratch var/lib var/cache run rung/bin rung/distro; do mkdir -p "$P/$x"; done
for f in check_rung rung rung-dyn rung-agent rung-serve rung-image rfs-tool rung-oci; do
	copy_with_libs "$P" "$(readlink -f "$RUNG_BUILD/$f")"
	cp "$RUNG_BUILD/$f" "$P/rung/bin/"
done
copy_loader_beside_libc "$P" "$RUNG_BUILD/rung-dyn"
# e2e_cli_static: the static rung as if libc6 had changed since its link, or its loader moved
if [ -x "$RUNG_BUILD/tests/rung-libc-moved" ]; then
	mkdir -p "$P/rung/bin/tests" && cp "$RUNG_BUILD/tests/rung-libc-moved" \
		"$RUNG_BUILD/tests/rung-ld-missing" "$P/rung/bin/tests/"
fi
copy_with_libs "$P" /usr/sbin/ip
# every process and container sandbox's disk (limits.disk): an ext4 image made by mkfs.ext4
copy_with_libs "$P" "$(readlink -f /sbin/mkfs.ext4)"
[ -e "$P/sbin/mkfs.ext4" ] || { mkdir -p "$P/sbin" && cp -L /sbin/mkfs.ext4 "$P/sbin/mkfs.ext4"; }
cp /etc/mke2fs.conf "$P/etc/" 2>/dev/null || true
# the container suites read a stopped sandbox's disk image with debugfs (e2fsprogs)
copy_with_libs "$P" "$(readlink -f /sbin/debugfs)"
[ -e "$P/sbin/debugfs" ] || cp -L /sbin/debugfs "$P/sbin/debugfs"
# e2e_egress_process checks that nft inside a sandbox cannot touch the rules (the binary, not libnftables).
copy_with_libs "$P" /usr/sbin/nft
# e2e_process_escape asks perl for raw syscalls and checks /etc/shadow stays hidden from a sandbox.
copy_with_libs "$P" /usr/bin/perl
printf 'root:*:19000:0:99999:7:::\n' >"$P/etc/shadow" && chmod 0640 "$P/etc/shadow"
[ -e "$P/usr/sbin/ip" ] || cp -L /usr/sbin/ip "$P/usr/sbin/ip"
# e2e_oci_containerd (in the default list; only when the suites name it): Debian's containerd, ctr and the runc shim (Go, libc only; about
# 83 MB) at the paths the suite runs them from (tests/lib/ctrd.c; the shim calls rung-oci, not
# runc), and rung-probe (static), which the suite puts into its image from beside check_rung.
case " $SUITES " in *" e2e_oci_containerd "* | *" e2e_oci_c"* | *" e2e_oci_ "* | *" e2e_ "*)
	for f in /usr/bin/containerd /usr/bin/ctr /usr/bin/containerd-shim-runc-v2; do
		[ -x "$f" ] && copy_with_libs "$P" "$f"
	done
	[ -x "$RUNG_BUILD/rung-probe" ] && cp "$RUNG_BUILD/rung-probe" "$P/rung/bin/" ;;
esac
# libnftables resolves protocol and service names through these; the resolver wants a nameserver.
for f in /etc/protocols /etc/services /etc/nsswitch.conf; do [ -f "$f" ] && cp "$f" "$P/etc/"; done
echo "nameserver 127.0.0.53" >"$P/etc/resolv.conf"
printf '127.0.0.1 localhost\n' >"$P/etc/hosts"
cp "$here/main.sh" "$here/suites.sh" "$P/rung/distro/"
[ -f "$here/bench.sh" ] && cp "$here/bench.sh" "$P/rung/distro/"
# DISTRO_BENCH=N: the container-vs-crun figure too (bench.sh): bench/container, crun, a
# busybox OCI layout (rfs-tool layout) and a crun bundle of the same rootfs.
if [ -n "${DISTRO_BENCH:-}" ]; then
	[ -x "$RUNG_BUILD/bench/container" ] || { log "DISTRO_BENCH: build $RUNG_BUILD/bench/container first"; exit 1; }
	copy_with_libs "$P" "$(readlink -f "$RUNG_BUILD/bench/container")"
	cp "$RUNG_BUILD/bench/container" "$P/rung/bin/bench-container"
	copy_with_libs "$P" /usr/bin/crun
	bb=$OUT/bench-rootfs
	rm -rf "$bb" && mkdir -p "$bb/bin" "$bb/etc" "$bb/tmp" "$bb/work" "$bb/proc" "$bb/dev" "$bb/sys"
	cp /bin/busybox "$bb/bin/busybox"
	for a in sh true ls cat echo id sleep; do ln -s busybox "$bb/bin/$a"; done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$bb/etc/passwd"
	tar -C "$bb" -cf "$OUT/bench-rootfs.tar" .
	mkdir -p "$P/rung/bench/bundle"
	"$RUNG_BUILD/rfs-tool" layout --out "$P/rung/bench/oci" --tar "$OUT/bench-rootfs.tar" \
		--tag bench/busybox:latest --compress gzip --env PATH=/bin >/dev/null
	cp -a "$bb" "$P/rung/bench/bundle/rootfs"
	(cd "$P/rung/bench/bundle" && crun spec)
	python3 - "$P/rung/bench/bundle/config.json" <<'PY'
import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["process"]["args"] = ["/bin/true"]
c["process"]["terminal"] = False
c["linux"]["resources"] = {"memory": {"limit": 512 << 20},
                           "cpu": {"quota": 100000, "period": 100000},
                           "pids": {"limit": 256}}
json.dump(c, open(p, "w"))
PY
	rm -rf "$bb" "$OUT/bench-rootfs.tar"
fi
[ -n "${DISTRO_EXTRA:-}" ] && for f in $DISTRO_EXTRA; do copy_with_libs "$P" "$f"; done
sh "$guest/mkdisk.sh" base "$P" "$OUT/root.img"
rm -rf "$P"
sh "$guest/mkdisk.sh" upper "$OUT/scratch.img" 4096 >/dev/null
L1I=$OUT/initramfs.cpio.gz
st=$(mktemp -d)
mkdir -p "$st/bin" "$st/modules" "$st/dev"
cp /bin/busybox "$st/bin/busybox"
cp "$kdir"/modules/*.ko "$st/modules/" && cp "$kdir/modules.order" "$st/"
install -m 755 "$here/init.sh" "$st/init"
(cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$L1I"
rm -rf "$st"
log "payload and disks: $(($(date +%s) - t0)) s; kernel $(cat "$kdir/version")"

# --- boot ----------------------------------------------------------------------------------
results=$OUT/console.log
append="console=ttyS0 quiet panic=-1 distro_suites=$(echo $SUITES | tr ' ' ,)"
[ "${DISTRO_VERBOSE:-0}" = 1 ] && append="$append distro_verbose=1"
[ -n "${DISTRO_BENCH:-}" ] && append="$append distro_bench=$DISTRO_BENCH"
tmo=${RUNG_DISTRO_TIMEOUT:-2400}
boot_tmo=${RUNG_DISTRO_BOOT_TIMEOUT:-300}
for try in 1 2; do
	[ $try = 2 ] && sh "$guest/mkdisk.sh" upper "$OUT/scratch.img" 4096 >/dev/null
	log "L1 boot (try $try): Debian $(cat "$kdir/version") under qemu TCG -smp ${DISTRO_SMP:-2} -m ${DISTRO_MEM:-3072}, timeout ${tmo}s"
	t0=$(date +%s)
	raw=$results.try$try.raw
	: >"$raw" # before the tail below: qemu's own redirection may come after it starts
	timeout -k 5 "$tmo" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -M pc \
		-smp "${DISTRO_SMP:-2}" -m "${DISTRO_MEM:-3072}" -nographic -no-reboot -nodefaults \
		-serial stdio -monitor none -kernel "$kdir/vmlinuz" -initrd "$L1I" -append "$append" \
		-drive "file=$OUT/root.img,if=virtio,format=raw,readonly=on" \
		-drive "file=$OUT/scratch.img,if=virtio,format=raw" \
		</dev/null >"$raw" 2>&1 &
	qpid=$!
	tail -n +1 -f --pid=$qpid "$raw" | sed -u 's/\r$//' | grep --line-buffered -E '^(DISTRO|    )' &
	tpid=$!
	# A TCG boot that hangs hangs early: no "DISTRO-L1 subtree_control" within the boot
	# timeout ends this try at once instead of after the whole run's timeout.
	waited=0
	while kill -0 $qpid 2>/dev/null; do
		if [ $waited -ge "$boot_tmo" ] && ! grep -q '^DISTRO-L1 subtree_control' "$raw"; then
			log "L1 did not come up within ${boot_tmo}s (try $try): stopping it"
			kill $qpid 2>/dev/null
			break
		fi
		sleep 2
		waited=$((waited + 2))
	done
	wait $qpid || true
	wait $tpid 2>/dev/null || true
	sed 's/\r$//' "$raw" >"$results.try$try" && rm -f "$raw"
	cp "$results.try$try" "$results"
	log "L1 run took $(($(date +%s) - t0)) s"
	grep -q '^DISTRO-SUMMARY' "$results" && break
	grep -q '^DISTRO-DONE' "$results" && break # finished without a summary: no retry
	[ $try = 1 ] && log "RETRY (once): L1 did not finish (try 1); last console lines:" ||
		log "L1 did not finish on the retry either; last console lines:"
	tail -n 20 "$results" >&2
done
rm -f "$OUT/scratch.img"
log "whole stage took $(($(date +%s) - t_start)) s"
sum=$(grep '^DISTRO-SUMMARY' "$results" | tail -n 1)
if [ -z "$sum" ]; then
	echo "0 passed, 1 failed (the L1 run never reported; see $results)"
	exit 1
fi
# The failures again, last, with their details: a CI log keeps only its tail.
if grep -q '^DISTRO FAIL' "$results"; then
	echo "check-distro: the failures again:"
	awk '/^DISTRO FAIL/ { on = 1; print; next } /^DISTRO / { on = 0 } on' "$results"
fi
set -- $sum
echo "$2 passed, $4 failed (Debian $(cat "$kdir/version"), cgroup2, ext4; log $results)"
[ "$4" = 0 ]
