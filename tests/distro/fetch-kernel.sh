#!/bin/sh
# tests/distro/fetch-kernel.sh: fetch and cache the kernel of the distro stage (make check-distro):
# Debian 12's own cloud kernel (what `linux-image-cloud-amd64` names, 6.1.x), with the modules
# the process, container, cgroup and egress suites need there, through the nested stage's
# fetcher (vmm/guest/fetch-l1-kernel.sh) with this list and its own cache. Prints the unpacked
# directory: <dir>/vmlinuz, <dir>/modules/*.ko (flat), <dir>/modules.order, <dir>/version,
# <dir>/config. Cache: ${RUNG_CACHE_DIR:-/var/cache/rung}/distro-kernel-<version>-m<hash>/.
# Version: $RUNG_DISTRO_KERNEL (a package name), else the metapackage's. ext4, tmpfs, cgroups,
# namespaces and seccomp are built into the cloud kernel.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# virtio-pci/blk: the payload and scratch disks; overlay: the container rung's root; loop: every
# sandbox's disk image; veth and nftables (ct, nat, masquerade, reject): the egress allowlist and
# the suites' test internet; nft_objref: the sandbox table's named counters; nft_nat: rung-oci's
# pod table (dev.rung.egress-allow) sends DNS to its proxy by dnat (a Debian host loads these on
# demand; L1 has no modprobe).
L1_MODULES="virtio_pci virtio_blk overlay veth loop nf_tables nft_ct nft_chain_nat nft_masq nft_reject_inet nft_objref nft_nat" \
L1_CACHE_NAME=distro-kernel RUNG_L1_KERNEL="${RUNG_DISTRO_KERNEL:-}" \
	exec sh "$here/../../vmm/guest/fetch-l1-kernel.sh"
