#!/bin/sh
# vmm/guest/payload-rung.sh P BUILD BASEIMG: add the rung runtime itself to the nested stage's
# payload, so that L1 runs `rung run --isolation vm --image ...` end to end (the runtime's vm
# backend: image store, base disk, jailed rung-vmm, agent over vsock), not only rung-vmm.
#   P        the payload root (run-l1.sh)
#   BUILD    the build dir (rung, rung-agent, rfs-tool, rung-probe; check_rung for the e2e_egress_vm suite)
#   BASEIMG  the python base image run-l1.sh built (ext4 of mkrootfs.sh python)
# It imports the same python rootfs as an OCI image, rung/vmtest:py, into $P/rung/store and
# seeds the store's vm disk cache with BASEIMG under that image's digest (building it again
# under TCG in L1 would take minutes).
set -eu
P=$1 BUILD=$2 BASEIMG=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/copy-libs.sh"
mkdir -p "$P/rung/bin"
copy_with_libs "$P" "$(readlink -f "$BUILD/rung")"
cp "$BUILD/rung" "$BUILD/rung-agent" "$P/rung/bin/"
# rung-dyn: build/rung is static (musl where its libraries are built: cli/module.mk); this runs
# in its place for what needs a shared library, or if L1's libc.so.6 is another build. The
# libc build/rung is linked against (build/gen/cli-libc), for the tests' reports.
if [ -x "$BUILD/rung-dyn" ]; then
	copy_with_libs "$P" "$(readlink -f "$BUILD/rung-dyn")"
	copy_loader_beside_libc "$P" "$BUILD/rung-dyn"
	cp "$BUILD/rung-dyn" "$P/rung/bin/"
fi
[ ! -f "$BUILD/gen/cli-libc" ] || cp "$BUILD/gen/cli-libc" "$P/rung/bin/cli-libc"
# rung-image (libarchive, libcurl): `rung cp` and `rung image` exec it from beside rung
if [ -x "$BUILD/rung-image" ]; then
	copy_with_libs "$P" "$(readlink -f "$BUILD/rung-image")"
	cp "$BUILD/rung-image" "$P/rung/bin/"
fi
# rung-probe (static): `rung ladder --rungs vm` in L1 finds it beside rung (docs/ladder.md)
if [ -x "$BUILD/rung-probe" ]; then cp "$BUILD/rung-probe" "$P/rung/bin/"; fi
# The e2e_egress_vm suite (tests/check_e2e_egress_vm.c) runs in L1 from the Check binary, next to the
# runtime's binaries (it finds them as siblings); its test internet runs iproute2's ip.
if [ -x "$BUILD/check_rung" ]; then
	copy_with_libs "$P" "$(readlink -f "$BUILD/check_rung")"
	cp "$BUILD/check_rung" "$P/rung/bin/"
	copy_with_libs "$P" /usr/sbin/ip
	# libnftables resolves protocol and service names through these
	mkdir -p "$P/etc" && for f in /etc/protocols /etc/services; do [ -f "$f" ] && cp "$f" "$P/etc/"; done
fi
# rung-oci (docs/oci.md): l1-oci-vm.sh runs it on the vm rung through check_rung's e2e_oci_vm
if [ -x "$BUILD/rung-oci" ]; then
	copy_with_libs "$P" "$(readlink -f "$BUILD/rung-oci")"
	cp "$BUILD/rung-oci" "$P/rung/bin/"
fi
# l1-oci-ctrd.sh: Debian's containerd, ctr and runc shim (Go, libc only; about 83 MB), at the
# paths e2e_oci_ctrdvm runs them from (tests/lib/ctrd.c), and /run for a tmpfs (containerd's
# shim sockets); the shim calls rung-oci-vm, not runc
if [ -x "$BUILD/rung-oci" ] && [ -x /usr/bin/containerd ]; then
	for f in /usr/bin/containerd /usr/bin/ctr /usr/bin/containerd-shim-runc-v2; do
		[ -x "$f" ] && copy_with_libs "$P" "$f"
	done
	mkdir -p "$P/run"
fi
cp "$here/l1-rung.sh" "$here/l1-oci-vm.sh" "$here/l1-oci-ctrd.sh" "$P/rung/"
tmp=$(mktemp -d /tmp/rung-payload.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
sh "$here/mkrootfs.sh" python "$tmp/rootfs" >/dev/null
tar -C "$tmp/rootfs" -cf "$tmp/rootfs.tar" .
"$BUILD/rfs-tool" layout --out "$tmp/oci" --tar "$tmp/rootfs.tar" --tag rung/vmtest:py \
	--compress gzip --env PATH=/usr/bin:/bin:/usr/sbin:/sbin --workdir /work >/dev/null
mkdir -p "$P/rung/store"
chmod 0711 "$P/rung/store"
out=$("$BUILD/rfs-tool" import --state "$P/rung/store" "$tmp/oci" rung/vmtest:py | tail -n 1)
digest=$(echo "$out" | grep -o 'sha256:[0-9a-f]\{64\}' | head -n 1)
[ -n "$digest" ] || { echo "payload-rung: import gave no digest: $out" >&2; exit 1; }
mkdir -p "$P/rung/store/vmdisks"
cp "$BASEIMG" "$P/rung/store/vmdisks/${digest#sha256:}.ext4"
chmod 0644 "$P/rung/store/vmdisks/${digest#sha256:}.ext4"
echo "payload-rung: rung/vmtest:py $digest"
