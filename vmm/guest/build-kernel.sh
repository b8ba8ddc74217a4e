#!/bin/sh
# vmm/guest/build-kernel.sh: build (or reuse) the vm-rung guest kernel.
#
#   build-kernel.sh            build if needed; print the cached bzImage path on stdout
#   build-kernel.sh --path     only print where the bzImage is/would be cached
#
# Source: Debian's /usr/src/linux-source-6.1.tar.xz (package linux-source-6.1).
# Config: `make tinyconfig` + vmm/guest/kernel.config (scripts/kconfig/merge_config.sh),
# then every "=y" / "=n" line of the fragment is verified in the final .config (a
# silently dropped option is an error, not a surprise at boot).
# Cache:  ${RUNG_CACHE_DIR:-/var/cache/rung}/kernel-<sha256(fragment + source version)>/
#         bzImage, config, build-seconds. Reused when present; builds are serialised by flock.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
frag=$here/kernel.config
src_tar=${RUNG_KERNEL_SRC:-/usr/src/linux-source-6.1.tar.xz}
cache=${RUNG_CACHE_DIR:-/var/cache/rung}
[ -f "$src_tar" ] || { echo "build-kernel: $src_tar missing (sh scripts/setup-deps.sh vm)" >&2; exit 1; }
srcver=$(dpkg-query -W -f='${Package}=${Version}' linux-source-6.1 2>/dev/null || stat -c %s-%Y "$src_tar")
key=$( { cat "$frag"; echo "source:$srcver"; } | sha256sum | cut -d' ' -f1)
out=$cache/kernel-$key
if [ "${1:-}" = --path ]; then echo "$out/bzImage"; exit 0; fi
[ -f "$out/bzImage" ] && { echo "$out/bzImage"; exit 0; }

mkdir -p "$cache"
exec 9>"$cache/kernel-$key.lock"
flock 9
[ -f "$out/bzImage" ] && { echo "$out/bzImage"; exit 0; }

t0=$(date +%s)
work=$cache/kernel-$key.build
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
echo "build-kernel: unpacking $src_tar ($srcver)" >&2
tar -xJf "$src_tar" -C "$work"
k=$work/linux-source-6.1
jobs=$(nproc)
echo "build-kernel: tinyconfig + $frag" >&2
make -C "$k" -s ARCH=x86_64 tinyconfig >&2
(cd "$k" && ARCH=x86_64 ./scripts/kconfig/merge_config.sh -m .config "$frag" >&2)
make -C "$k" -s ARCH=x86_64 olddefconfig >&2
# Verify the fragment survived dependency resolution.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n) opt=${line%=n}
		grep -q "^$opt=" "$k/.config" && { echo "build-kernel: $opt should be off" >&2; bad=1; } ;;
	CONFIG_*=*) grep -qx "$line" "$k/.config" || { echo "build-kernel: $line not in final .config" >&2; bad=1; } ;;
	esac
done <"$frag"
[ $bad = 0 ] || exit 1
echo "build-kernel: make -j$jobs bzImage" >&2
make -C "$k" -s ARCH=x86_64 -j"$jobs" bzImage >&2
t1=$(date +%s)
tmp=$out.tmp.$$
rm -rf "$tmp" && mkdir -p "$tmp"
cp "$k/arch/x86/boot/bzImage" "$tmp/bzImage"
cp "$k/.config" "$tmp/config"
echo $((t1 - t0)) >"$tmp/build-seconds"
mv "$tmp" "$out"
echo "build-kernel: built in $((t1 - t0)) s: $out/bzImage" >&2
echo "$out/bzImage"
