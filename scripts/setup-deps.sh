#!/bin/sh
# Install, idempotently, every Debian 12 package rung needs to build and test; then, as root,
# build/rung's musl libraries (scripts/musl-deps.sh: built once into /var/cache/rung/musl, about
# a minute and a half; without them build/rung links against glibc, a slower start).
# Usage: scripts/setup-deps.sh [build|test|vm]   (default: test, which includes build)
set -eu
BUILD="build-essential pkg-config clang make libseccomp-dev libcap-dev libnl-3-dev
 libnl-route-3-dev libnftables-dev libnftnl-dev libmnl-dev libjansson-dev libmicrohttpd-dev libarchive-dev
 libssl-dev libcurl4-openssl-dev check linux-libc-dev musl-tools busybox-static python3 uidmap
 help2man gperf cmake flex bison dpkg-dev xz-utils"
TEST="$BUILD bubblewrap hyperfine iproute2 nftables e2fsprogs cpio crun runc containerd golang-go umoci skopeo
 docker-registry mmdebstrap qemu-system-x86 kmod xz-utils curl procps psmisc
 python3-pip python3-setuptools python3-wheel python3-venv"
VM="$TEST linux-source-6.1 bc flex bison libelf-dev lz4"
case "${1:-test}" in
build) want=$BUILD ;; test) want=$TEST ;; vm) want=$VM ;;
*) echo "usage: $0 [build|test|vm]" >&2; exit 2 ;;
esac
missing=""
for p in $want; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$st" in *"install ok installed"*) ;; *) missing="$missing $p" ;; esac
done
if [ -n "$missing" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "setup-deps: missing packages:$missing (run as root to install them)" >&2
		exit 1
	fi
	echo "setup-deps: installing:$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
[ "$(id -u)" = 0 ] || [ -f "${MUSL_PREFIX:-/var/cache/rung/musl}/.stamp" ] || {
	echo "setup-deps: no musl libraries in ${MUSL_PREFIX:-/var/cache/rung/musl} (run as root" \
		"to build them): build/rung links against glibc, a slower start" >&2
	exit 0
}
[ "$(id -u)" != 0 ] || sh "$(dirname "$0")/musl-deps.sh" ${MUSL_PREFIX:+"$MUSL_PREFIX"} || {
	echo "*** setup-deps: the musl libraries could not be built (above): build/rung links" \
		"against glibc, a slower start ***" >&2
}
