#!/bin/sh
# Phase timings from a RUNG_TRACE file: sorts the lines of all processes by time and prints
# each phase with the microseconds since the previous line and since the first.
#   RUNG_TRACE=/tmp/t.log build/rung run -- /bin/true; sh bench/trace.sh /tmp/t.log
set -eu
sort -k2,2n "$1" | awk '$1 == "rung-trace" { if (!t0) { t0 = $2; p = $2 }
	ph = ""; for (i = 4; i <= NF; i++) ph = ph (i > 4 ? " " : "") $i
	printf "%8d %8d  %-7s %s\n", $2 - p, $2 - t0, $3, ph; p = $2 }'
