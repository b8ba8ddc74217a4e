#!/bin/sh
# bench/ctr.sh: `ctr run --rm IMAGE ID /bin/true` through containerd with rung-oci as the
# runtime binary against runc, in one run, interleaved (each round runs every row once, the
# order turning round by round, so all rows see the same load); medians and the ratio.
# As root, from the repository root (see bench/README.md, section "ctr"):
#   sh bench/ctr.sh              (ROUNDS=30)
# A private containerd (its own config, root, state and socket under a temporary directory,
# no CRI), a busybox image built here (rfs-tool layout) and imported with `ctr images import`.
# Rows (each its own fresh container, `ctr run --rm`):
#   rung-oci:         --runc-binary build/rung-oci on containerd's default overlayfs snapshotter
#                     (rung-oci remounts the overlay over idmapped layers: docs/oci.md)
#   runc:             Debian's runc, the same snapshotter (the peer: like with like)
#   rung-oci-native:  rung-oci on the native snapshotter (a copied directory, idmapped itself)
#   runc-native:      runc on the native snapshotter
set -eu
cd "$(dirname "$0")/.."
make -s build/rung-oci build/rfs-tool >/dev/null
RUNG_OCI=${RUNG_OCI:-$PWD/build/rung-oci} # RUNG_OCI=another build's, for a before/after
ROUNDS=${ROUNDS:-30}
T=$(mktemp -d /tmp/rung-bench-ctrd-XXXXXX)
NS=rung-bench-$$
A="ctr --address $T/c.sock --namespace $NS"
PID=
RUN_DIR_MADE=
[ -e /run/containerd ] || RUN_DIR_MADE=1 # containerd makes its shim socket and fifo dirs there
cleanup() {
	for id in $($A containers ls -q 2>/dev/null); do
		$A tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
		$A tasks delete -f "$id" >/dev/null 2>&1 || true
		$A containers delete "$id" >/dev/null 2>&1 || true
	done
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
	grep -o " $T/[^ ]*" /proc/self/mountinfo | sort -r | while read -r m; do
		umount -l "$m" 2>/dev/null || true
	done
	for h in $(awk '$9 ~ /^cgroup2?$/ {print $5}' /proc/self/mountinfo); do
		rmdir "$h/$NS" 2>/dev/null || true
	done
	rm -rf "$T"
	if [ -n "$RUN_DIR_MADE" ]; then
		rmdir /run/containerd/s /run/containerd/fifo /run/containerd/runc /run/containerd \
			2>/dev/null || true
	fi
}
trap cleanup EXIT INT TERM

cat >"$T/config.toml" <<TOML
version = 2
root = "$T/root"
state = "$T/state"
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.internal.v1.opt",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$T/c.sock"
[ttrpc]
  address = "$T/c.sock.ttrpc"
TOML
containerd --config "$T/config.toml" >"$T/containerd.log" 2>&1 &
PID=$!
i=0
until $A version >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 200 ] || { echo "containerd did not start: $T/containerd.log" >&2; exit 1; }
	sleep 0.05
done

# The image: static busybox and its applet links.
R=$T/rootfs
mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/proc" "$R/dev" "$R/sys"
cp /bin/busybox "$R/bin/busybox"
for a in sh true echo; do ln -s busybox "$R/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' >"$R/etc/passwd"
tar -cf "$T/rootfs.tar" -C "$R" .
build/rfs-tool layout --out "$T/layout" --tar "$T/rootfs.tar" --tag bench/busybox:latest \
	--compress gzip >/dev/null
tar -cf "$T/layout.tar" -C "$T/layout" .
IMG=bench/busybox:latest
$A images import --snapshotter native "$T/layout.tar" >/dev/null
$A images import "$T/layout.tar" >/dev/null # and unpacked for overlayfs

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
row() { # name: one ctr run --rm, its wall time in microseconds appended to $T/NAME
	id=b$n-$1
	case $1 in
	rung-oci) set -- "$1" --runc-binary "$RUNG_OCI" --runc-root "$T/oci" ;;
	runc) set -- "$1" --runc-root "$T/runc-root" ;;
	rung-oci-native) set -- "$1" --snapshotter native --runc-binary "$RUNG_OCI" --runc-root "$T/oci" ;;
	runc-native) set -- "$1" --snapshotter native --runc-root "$T/runc-root" ;;
	esac
	name=$1
	shift
	t0=$(now)
	$A run --rm "$@" "$IMG" "$id" /bin/true || { echo "$name: ctr run failed" >&2; exit 1; }
	t1=$(now)
	echo $(((t1 - t0) / 1000)) >>"$T/$name"
}
ROWS="rung-oci runc rung-oci-native runc-native"
# one warm-up of each, untimed
n=w
for r in $ROWS; do row "$r"; done
for r in $ROWS; do : >"$T/$r"; done
n=0
while [ $n -lt "$ROUNDS" ]; do
	# the order turns each round: row k first in round k (mod 4)
	set -- $ROWS
	k=$((n % 4))
	while [ $k -gt 0 ]; do x=$1; shift; set -- "$@" "$x"; k=$((k - 1)); done
	for r in "$@"; do row "$r"; done
	n=$((n + 1))
done
printf 'ctr run --rm %s /bin/true, %d rounds interleaved, load average %s\n' "$IMG" "$ROUNDS" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-16s %10s\n' row median_ms
for r in $ROWS; do
	printf '%-16s %10.1f\n' "$r" "$(median <"$T/$r" | awk '{print $1/1000}')"
done
ratio() { echo "$(median <"$T/$1") $(median <"$T/$2")" | awk '{printf "%.2f", $1/$2}'; }
printf 'ratio rung-oci/runc (overlayfs): %sx\n' "$(ratio rung-oci runc)"
printf 'ratio rung-oci-native/runc-native: %sx\n' "$(ratio rung-oci-native runc-native)"
