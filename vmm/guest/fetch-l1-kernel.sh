#!/bin/sh
# vmm/guest/fetch-l1-kernel.sh: fetch and cache the L1 kernel of the nested-KVM test stage.
#
# The L1 guest (booted by QEMU TCG with an AMD SVM CPU model) runs Debian's cloud kernel,
# whose kvm, kvm-amd, virtio and vhost-vsock modules load there (it has no 9p). Prints the unpacked directory:
#   <dir>/vmlinuz, <dir>/modules/*.ko (flat), <dir>/modules.order (insmod order),
#   <dir>/version
# Cache: ${RUNG_CACHE_DIR:-/var/cache/rung}/l1-kernel-<version>-m<hash of MODULES>/ (reused
# when present; a cache made for another module list is not).
# Version: $RUNG_L1_KERNEL, else what `apt-cache depends linux-image-cloud-amd64` names.
# Other stages reuse it with their own list and cache name (tests/distro/fetch-kernel.sh):
#   L1_MODULES="..."   the module list (default: the nested stage's, below)
#   L1_CACHE_NAME=NAME the cache's prefix (default l1-kernel); the kernel's config is kept too
set -eu
# Modules L1 loads (their dependencies are added, in order): KVM (AMD, nested), the
# virtio-pci disk that carries the test payload, vhost-vsock for the QEMU baseline, tun for
# the virtio-net test's tap; veth and nftables (the netpolicy table: ct, nat, masquerade,
# reject) for the e2e_egress_vm suite; loop for rung image commit of a vm sandbox (its upper
# disk's copy is read through a loop device) and overlay (a vm disk of the committed image is
# built from its layers' merged view); nft_objref for the sandbox table's named counters (a
# Debian host loads it on demand; L1 has no modprobe); nft_nat and nft_fib_inet for rung-oci-vm's
# pod network (connections to the pod's address forwarded to the guest: a prerouting DNAT on
# `fib daddr type local`). Add to this list; the cache key follows it.
MODULES=${L1_MODULES:-"kvm-amd virtio_pci virtio_blk vhost_vsock tun veth loop overlay nf_tables nft_ct nft_chain_nat nft_masq nft_reject_inet nft_objref nft_nat nft_fib_inet"}
name=${L1_CACHE_NAME:-l1-kernel}
mhash=$(echo "$MODULES" | sha256sum | cut -c1-8)
cache=${RUNG_CACHE_DIR:-/var/cache/rung}
pkg=${RUNG_L1_KERNEL:-}
if [ -z "$pkg" ]; then
	# Reuse any cached one first: the stage must not depend on the mirror once primed.
	for d in "$cache"/"$name"-*-m"$mhash"/; do
		[ -f "$d/vmlinuz" ] && { echo "${d%/}"; exit 0; }
	done
	pkg=$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/.*Depends: \(linux-image-[^ ]*-cloud-amd64\).*/\1/p' | head -1)
	[ -n "$pkg" ] || { echo "fetch-l1-kernel: cannot resolve linux-image-cloud-amd64 (apt-get update?)" >&2; exit 1; }
fi
ver=${pkg#linux-image-}
out=$cache/$name-$ver-m$mhash
[ -f "$out/vmlinuz" ] && { echo "$out"; exit 0; }
for t in modinfo xz dpkg apt-get; do # a missing one would cache a kernel without its modules' deps
	command -v $t >/dev/null || { echo "fetch-l1-kernel: $t is not installed (sh scripts/setup-deps.sh test)" >&2; exit 1; }
done
mkdir -p "$cache"
exec 9>"$cache/$name.lock"
flock 9
[ -f "$out/vmlinuz" ] && { echo "$out"; exit 0; }
tmp=$out.tmp.$$
rm -rf "$tmp" && mkdir -p "$tmp/deb" "$tmp/modules"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp/deb" && apt-get download -q "$pkg" >&2)
dpkg -x "$tmp"/deb/*.deb "$tmp/x"
cp "$tmp/x/boot/vmlinuz-$ver" "$tmp/vmlinuz"
cp "$tmp/x/boot/config-$ver" "$tmp/config"
kd=$tmp/x/lib/modules/$ver/kernel
# MODULES, in dependency order (resolved with modinfo).
: >"$tmp/modules.order"
add() { # module name (recursive: keep f, d and deps local)
	local f d deps
	grep -qx "$1" "$tmp/modules.order" && return 0
	f=$(find "$kd" -name "$1.ko" -o -name "$1.ko.xz" | head -1)
	[ -n "$f" ] || { echo "fetch-l1-kernel: module $1 not in $pkg" >&2; exit 1; }
	deps=$(modinfo -F depends "$f") || { echo "fetch-l1-kernel: modinfo $f failed" >&2; exit 1; }
	for d in $(echo "$deps" | tr ',' ' '); do add "$d"; done
	case "$f" in *.xz) xz -dc "$f" >"$tmp/modules/$1.ko" ;; *) cp "$f" "$tmp/modules/$1.ko" ;; esac
	echo "$1" >>"$tmp/modules.order"
}
for m in $MODULES; do add "$m"; done
echo "$ver" >"$tmp/version"
rm -rf "$tmp/deb" "$tmp/x"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
