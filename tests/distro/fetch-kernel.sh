#!/bin/sh
# tests/distro/fetch-kernel.sh: fetch and cache the kernel of the distro stage (make check-distro):
# Debian 12's own cloud kernel (what `linux-image-cloud-amd64` names, 6.1.x), with the modules
# the process, container, cgroup and egress suites need there. Prints the unpacked directory:
#   <dir>/vmlinuz, <dir>/modules/*.ko (flat), <dir>/modules.order (insmod order), <dir>/version
# Cache: ${RUNG_CACHE_DIR:-/var/cache/rung}/distro-kernel-<version>-m<hash of MODULES>/, reused
# when present. A separate cache from vmm/guest/fetch-l1-kernel.sh (another module list: no kvm,
# but overlay). Version: $RUNG_DISTRO_KERNEL (a package name), else the metapackage's.
# ext4, tmpfs, cgroups, namespaces and seccomp are built into the cloud kernel.
set -eu
# virtio-pci/blk: the payload and scratch disks; overlay: the container rung's root; veth and
# nftables (ct, nat, masquerade, reject): the egress allowlist and the suites' test internet.
MODULES="virtio_pci virtio_blk overlay veth loop nf_tables nft_ct nft_chain_nat nft_masq nft_reject_inet"
mhash=$(echo "$MODULES" | sha256sum | cut -c1-8)
cache=${RUNG_CACHE_DIR:-/var/cache/rung}
pkg=${RUNG_DISTRO_KERNEL:-}
if [ -z "$pkg" ]; then
	# Reuse a cached one first: the stage must not depend on the mirror once primed.
	for d in "$cache"/distro-kernel-*-m"$mhash"/; do
		[ -f "$d/vmlinuz" ] && { echo "${d%/}"; exit 0; }
	done
	pkg=$(apt-cache depends linux-image-cloud-amd64 | sed -n 's/.*Depends: \(linux-image-[^ ]*-cloud-amd64\).*/\1/p' | head -1)
	[ -n "$pkg" ] || { echo "distro: cannot resolve linux-image-cloud-amd64 (apt-get update?)" >&2; exit 1; }
fi
ver=${pkg#linux-image-}
out=$cache/distro-kernel-$ver-m$mhash
[ -f "$out/vmlinuz" ] && { echo "$out"; exit 0; }
mkdir -p "$cache"
exec 9>"$cache/distro-kernel.lock"
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
: >"$tmp/modules.order"
add() { # module name, after its dependencies (modinfo)
	local f d
	grep -qx "$1" "$tmp/modules.order" && return 0
	f=$(find "$kd" -name "$1.ko" -o -name "$1.ko.xz" | head -1)
	[ -n "$f" ] || { echo "distro: module $1 not in $pkg" >&2; exit 1; }
	for d in $(modinfo -F depends "$f" | tr ',' ' '); do add "$d"; done
	case "$f" in *.xz) xz -dc "$f" >"$tmp/modules/$1.ko" ;; *) cp "$f" "$tmp/modules/$1.ko" ;; esac
	echo "$1" >>"$tmp/modules.order"
}
for m in $MODULES; do add "$m"; done
echo "$ver" >"$tmp/version"
rm -rf "$tmp/deb" "$tmp/x"
mv "$tmp" "$out"
trap - EXIT
echo "$out"
