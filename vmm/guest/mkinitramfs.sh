#!/bin/sh
# vmm/guest/mkinitramfs.sh AGENT OUT.cpio.gz: the vm-rung guest initramfs.
#
# Holds exactly: /init (the static rung-agent, which runs agent_vm_init() as pid 1),
# /dev/console, and the empty mount points vm-init uses. No shell, no busybox: the
# product path depends on nothing but the agent. Reproducible: sorted entries, mtime 0,
# uid/gid 0, gzip -n. Needs root (mknod /dev/console).
set -eu
[ $# = 2 ] || { echo "usage: $0 AGENT OUT.cpio.gz" >&2; exit 2; }
agent=$1 out=$2
[ -x "$agent" ] || { echo "mkinitramfs: $agent: not an executable" >&2; exit 1; }
if file -L "$agent" 2>/dev/null | grep -q 'dynamically linked'; then
	echo "mkinitramfs: $agent is dynamically linked; the guest has no libc" >&2; exit 1
fi
st=$(mktemp -d)
trap 'rm -rf "$st"' EXIT
chmod 755 "$st"
mkdir -p "$st/dev" "$st/proc" "$st/sys" "$st/rung"
mknod -m 600 "$st/dev/console" c 5 1
install -m 755 "$agent" "$st/init"
find "$st" -exec touch -h -d @0 {} +
mkdir -p "$(dirname "$out")"
(cd "$st" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -n -9 >"$out.tmp"
mv "$out.tmp" "$out"
