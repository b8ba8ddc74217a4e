#!/bin/sh
# Median phase timings over N traced runs of a command:
#   sh bench/trace-median.sh 20 build/rung --state-dir D run -- /bin/true
# Each phase: the median of its offset from the run's first line, and the difference to the
# previous phase's median offset (phases ordered by median offset), in us.
set -eu
n=$1; shift
T=$(mktemp /tmp/rung-trace-XXXXXX)
chmod 0666 "$T" # the sandbox child (an unprivileged host uid) appends to it too
ALL=$(mktemp /tmp/rung-trace-all-XXXXXX)
i=0
while [ "$i" -lt "$n" ]; do
	: >"$T"
	RUNG_TRACE=$T "$@" >/dev/null
	sort -k2,2n "$T" | awk -v run="$i" '$1 == "rung-trace" { if (!t0) t0 = $2
		ph = ""; for (i = 4; i <= NF; i++) ph = ph (i > 4 ? " " : "") $i
		printf "%d\t%s\t%d\n", run, ph, $2 - t0 }' >>"$ALL"
	i=$((i + 1))
done
python3 - "$ALL" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(list); end = {}
for line in open(sys.argv[1]):
    run, ph, t = line.rstrip("\n").split("\t")
    if (run, ph) in end:
        continue  # first occurrence per run
    end[(run, ph)] = int(t); d[ph].append(int(t))
prev = 0
for ph, v in sorted(d.items(), key=lambda kv: statistics.median(kv[1])):
    m = statistics.median(v)
    print(f"{m - prev:9.0f} {m:9.0f} us  {ph}")
    prev = m
PY
rm -f "$T" "$ALL"
