#!/bin/sh
# bench/cp.sh: `rung cp` of a host tree into a process sandbox and back out, against
# `tar -c | tar -x` between two host directories (the peer), in the same run; median of N.
# Usage: bench/cp.sh [FILES] [TOTAL_MiB] [N]   (default 2000 files, 50 MiB, N=3; the issue's
# larger figure: bench/cp.sh 10000 200). Root (a local store in a temporary state dir).
# RUNG=container: into a container sandbox instead (a busybox image built here with umoci).
# ratio = peer_ms / rung_ms (1.0: as fast as tar; the target is >= 0.7).
set -eu
B=$(cd "${RUNG_BUILD_DIR:-build}" && pwd)
FILES=${1:-2000}
MIB=${2:-50}
N=${3:-3}
W=$(mktemp -d /tmp/rung-bench-cp-XXXXXX)
chmod 755 "$W" # sandboxes run as unprivileged uids: the state dir's parents are o+x
export RUNG_STATE_DIR=$W/state
ID=
cleanup() {
	[ -n "$ID" ] && "$B/rung" dispose "$ID" >/dev/null 2>&1 || true
	"$B/rung" gc >/dev/null 2>&1 || true
	rm -rf "$W"
}
trap cleanup EXIT
now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# the tree: FILES files of TOTAL/FILES bytes each, 20 per directory
per=$((MIB * 1048576 / FILES))
mkdir -p "$W/src"
i=0
head -c $((MIB * 1048576)) /dev/urandom > "$W/blob"
while [ $i -lt "$FILES" ]; do
	d=$W/src/d$((i / 20))
	[ -d "$d" ] || mkdir "$d"
	i=$((i + 1))
done
python3 - "$W/blob" "$W/src" "$FILES" "$per" <<'PY'
import sys
blob, src, n, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
with open(blob, 'rb') as b:
    for i in range(n):
        with open(f"{src}/d{i // 20}/f{i}", 'wb') as f:
            f.write(b.read(per))
PY
RUNG=${RUNG:-process}
if [ "$RUNG" = container ]; then
	# a busybox image: its applets as links, imported (unpacked) into the store
	R=$W/rootfs
	mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/work" "$R/proc" "$R/dev" "$R/sys"
	cp /bin/busybox "$R/bin/busybox"
	for a in sh true rm ls cat; do ln -s busybox "$R/bin/$a"; done
	echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
	umoci init --layout "$W/oci" >/dev/null
	umoci new --image "$W/oci:bb" >/dev/null
	umoci unpack --image "$W/oci:bb" "$W/ub" >/dev/null 2>&1
	rm -rf "$W/ub/rootfs" && cp -a "$R" "$W/ub/rootfs"
	umoci repack --image "$W/oci:bb" "$W/ub" >/dev/null
	"$B/rung" image import "$W/oci" --tag bench/busybox:latest >/dev/null
	ID=$("$B/rung" acquire --isolation container --image bench/busybox:latest --disk 2G \
		--scope bench --thread cp --agent a)
else
	ID=$("$B/rung" acquire --scope bench --thread cp --agent a)
fi
printf 'rung: %s; tree: %d files, %d MiB; N=%d; median wall ms; load %s\n' "$RUNG" "$FILES" \
	"$MIB" "$N" "$(cut -d' ' -f1-3 /proc/loadavg)"
: > "$W/up"; : > "$W/down"; : > "$W/downtar"; : > "$W/peer"
r=0
while [ $r -lt "$N" ]; do
	# sync first: each starts with no other's writeback pending
	sync; t0=$(now); "$B/rung" cp "$W/src" "$ID:/tmp/b$r"; t1=$(now)
	echo $(((t1 - t0) / 1000000)) >> "$W/up"
	sync; t0=$(now); "$B/rung" cp "$ID:/tmp/b$r" "$W/out$r"; t1=$(now)
	echo $(((t1 - t0) / 1000000)) >> "$W/down"
	sync; t0=$(now); "$B/rung" cp "$ID:/tmp/b$r" - > "$W/t$r.tar"; t1=$(now)
	echo $(((t1 - t0) / 1000000)) >> "$W/downtar"
	rm -f "$W/t$r.tar"
	mkdir "$W/peer$r"
	sync; t0=$(now); tar -cf - -C "$W/src" . | tar -xf - -C "$W/peer$r"; t1=$(now)
	echo $(((t1 - t0) / 1000000)) >> "$W/peer"
	"$B/rung" exec "$ID" -- rm -rf "/tmp/b$r" >/dev/null
	(cd "$W/src" && find . -type f | sort | xargs sha256sum) > "$W/s1"
	(cd "$W/out$r" && find . -type f | sort | xargs sha256sum) > "$W/s2"
	cmp -s "$W/s1" "$W/s2" || { echo "bench/cp.sh: round trip differs" >&2; exit 1; }
	rm -rf "$W/out$r" "$W/peer$r"
	r=$((r + 1))
done
up=$(median < "$W/up"); down=$(median < "$W/down"); peer=$(median < "$W/peer")
dt=$(median < "$W/downtar")
printf '%-10s %8s %8s %7s\n' op rung_ms tar_ms ratio
# download-: the tar stream onto a file (`rung cp ID:DIR -`), no unpacking: where time goes
awk -v u="$up" -v d="$down" -v t="$dt" -v p="$peer" 'BEGIN {
	printf "%-10s %8d %8d %7.2f\n", "upload", u, p, p / u
	printf "%-10s %8d %8d %7.2f\n", "download", d, p, p / d
	printf "%-10s %8d %8d %7.2f\n", "download-", t, p, p / t }'
