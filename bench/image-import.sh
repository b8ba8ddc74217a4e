#!/bin/sh
# bench/image-import.sh: image import throughput (rfs-tool import = verify + store + unpack)
# against `tar -x` of the same layer blob, per compression; median (and minimum) of N runs.
# Usage: bench/image-import.sh [ROOTFS.tar] [N]     (see bench/README.md, section "image")
# Default ROOTFS.tar: build/image-default/rootfs.tar (make image-default), else a tar of
# the host's /usr/lib/python3* and /usr/share/doc (built once into build/bench-image/).
set -eu
B=${RUNG_BUILD_DIR:-build}
N=${2:-5}
TOOL=$B/rfs-tool
[ -x "$TOOL" ] || make -s "$TOOL"
W=${BENCH_DIR:-$B/bench-image}
mkdir -p "$W"
STATE=$(cd "$W" && pwd)/state
SRC=${1:-$B/image-default/rootfs.tar}
if [ ! -f "$SRC" ]; then
	SRC=$W/host-usr.tar
	[ -f "$SRC" ] || tar -cf "$SRC" -C / usr/lib/python3 usr/share/doc 2>/dev/null || true
fi
now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
minimum() { sort -n | head -1; }
size=$(stat -c %s "$SRC")
printf 'source: %s (%d MiB uncompressed), N=%d, median wall ms\n' "$SRC" $((size >> 20)) "$N"
printf 'load average: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %8s %8s %8s %11s %7s %8s %8s %7s\n' layer blobMiB rung_ms tar_ms rung_MiB/s ratio \
	min_rung min_tar ratio
for c in none gzip zstd; do
	L=$W/oci-$c
	rm -rf "$L"
	"$TOOL" layout --out "$L" --tar "$SRC" --tag bench/img:$c --compress $c >/dev/null
	blob=$(ls -S "$L"/blobs/sha256 | head -1)
	bsize=$(stat -c %s "$L/blobs/sha256/$blob")
	case $c in none) tflag="" ;; gzip) tflag=-z ;; zstd) tflag=--zstd ;; esac
	cat "$L/blobs/sha256/$blob" >/dev/null # warm the page cache for both
	: >"$W/r.txt"; : >"$W/t.txt"
	i=0
	while [ $i -lt "$N" ]; do
		rm -rf "$W/state" "$W/x"; sync
		t0=$(now); "$TOOL" import --state "$STATE" "$L" >/dev/null 2>&1; t1=$(now)
		echo $(((t1 - t0) / 1000000)) >>"$W/r.txt"
		mkdir "$W/x"; sync
		t0=$(now); tar $tflag -xf "$L/blobs/sha256/$blob" -C "$W/x"; t1=$(now)
		echo $(((t1 - t0) / 1000000)) >>"$W/t.txt"
		i=$((i + 1))
	done
	r=$(median <"$W/r.txt"); t=$(median <"$W/t.txt")
	rm_=$(minimum <"$W/r.txt"); tm=$(minimum <"$W/t.txt")
	awk -v c=$c -v b="$bsize" -v r="$r" -v t="$t" -v s="$size" -v rm="$rm_" -v tm="$tm" 'BEGIN {
		printf "%-6s %8.1f %8d %8d %11.0f %6.2fx %8d %8d %6.2fx\n", c, b/1048576, r, t,
			s/1048576/(r/1000), t/r, rm, tm, tm/rm }'
done
rm -rf "$W/state" "$W/x"
