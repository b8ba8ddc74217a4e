#!/bin/sh
# vmm/guest/mkdisk.sh: the two disks of a vm-rung sandbox.
#
#   mkdisk.sh base  ROOTFS_DIR IMG     the image's read-only root filesystem (guest /dev/vda)
#   mkdisk.sh upper IMG SIZE_MIB       a sparse per-sandbox upper disk      (guest /dev/vdb)
#   mkdisk.sh plan  ROOTFS_DIR         print the base image size and inode count, do nothing
#
# base: one ext4 image per image digest, built once from the unpacked root filesystem
# (`mkfs.ext4 -d DIR`, ownership and modes as in DIR; run as root so they are kept), with
# no journal (it is only ever mounted read-only, by every sandbox of the image at once)
# and no reserved blocks. Size = tree size (du, in 1 KiB blocks) + 25% + 16 MiB, inodes =
# 2 x entries + 1024, so the image holds the tree with headroom but stays small.
# upper: a sparse file (truncate) formatted ext4 with a journal and lazy inode tables, so it
# costs a few MiB on the host until the sandbox writes; the guest init puts the overlay's
# upper/ and work/ dirs on it (agent/vm-init.c). It lives in the sandbox's store dir so that
# files persist across execs, VM restarts and warm re-acquire.
#
# Both write IMG.tmp and rename it into place, so a crash never leaves a half-made IMG.
# What the runtime needs to do (rootfs/ or runtime/, in C): the same two mkfs.ext4 argv
# arrays via execve (no shell), the size computed by the same rule (plan) from a walk of
# the unpacked tree, the base image cached by image digest, the upper made at acquire.
set -eu
MKFS=${MKFS:-/sbin/mkfs.ext4}

plan() { # DIR -> "size_kib inodes"
	[ -d "$1" ] || { echo "mkdisk: $1: not a directory" >&2; exit 1; }
	kib=$(du -skx "$1" | cut -f1)
	n=$(find "$1" -xdev | wc -l)
	echo "$((kib + kib / 4 + 16384)) $((2 * n + 1024))"
}

case "${1:-}" in
plan)
	[ $# = 2 ] || { echo "usage: $0 plan ROOTFS_DIR" >&2; exit 2; }
	plan "$2"
	;;
base)
	[ $# = 3 ] || { echo "usage: $0 base ROOTFS_DIR IMG" >&2; exit 2; }
	set -- "$2" "$3" $(plan "$2")
	rm -f "$2.tmp"
	truncate -s "$3K" "$2.tmp"
	"$MKFS" -q -F -t ext4 -O ^has_journal -m 0 -N "$4" -L rung-base \
		-E lazy_itable_init=0,root_owner=0:0 -d "$1" "$2.tmp"
	mv "$2.tmp" "$2"
	;;
upper)
	[ $# = 3 ] || { echo "usage: $0 upper IMG SIZE_MIB" >&2; exit 2; }
	case "$3" in '' | *[!0-9]*) echo "mkdisk: SIZE_MIB must be a number, got '$3'" >&2; exit 2 ;; esac
	[ "$3" -ge 16 ] || { echo "mkdisk: SIZE_MIB must be at least 16" >&2; exit 2; }
	rm -f "$2.tmp"
	truncate -s "$3M" "$2.tmp"
	"$MKFS" -q -F -t ext4 -m 0 -L rung-upper \
		-E lazy_itable_init=1,lazy_journal_init=1,nodiscard "$2.tmp"
	mv "$2.tmp" "$2"
	;;
*)
	sed -n '2,8p' "$0" >&2
	exit 2
	;;
esac
