#!/bin/sh
# tests/distro/suites.sh SUITE...: run Check suites of check_rung inside the distro stage's L1
# (main.sh), one process per suite, each bounded by a timeout. One line per suite:
#   DISTRO PASS|FAIL <suite> <Check's summary line> <seconds>
# then a check that nothing was left behind (cgroups, nft tables, veths, mounts), and
#   DISTRO-SUMMARY <n> passed, <n> failed
# A suite whose log reports a skipped test counts as failed: every facility is there.
set -u
B=/rung/bin
W=/tmp/distro
rm -rf "$W" && mkdir -p "$W/build"
# RUNG_BUILD_DIR holds rung, rung-agent, rfs-tool and gets skips.log: a writable copy.
cp -a "$B"/. "$W/build/"
npass=0 nfail=0
now() { cut -d' ' -f1 /proc/uptime; }
ok() { npass=$((npass + 1)); echo "DISTRO PASS $*"; }
bad() { nfail=$((nfail + 1)); echo "DISTRO FAIL $*"; }
mounts0=$(wc -l </proc/self/mountinfo)
groups() { for d in /sys/fs/cgroup/rung-*; do [ -d "$d" ] && echo "${d#/sys/fs/cgroup/}"; done; }
[ -n "$(groups)" ] && echo "    before any suite: cgroups $(groups | tr '\n' ' ')"
for s in "$@"; do
	g0=$(groups)
	t0=$(now)
	d0=$(dmesg | wc -l)
	rm -f "$W/build/skips.log"
	timeout -s KILL "${DISTRO_SUITE_TIMEOUT:-900}" env RUNG_BUILD_DIR="$W/build" \
		CK_DEFAULT_TIMEOUT="${DISTRO_CK_TIMEOUT:-240}" CK_TIMEOUT_MULTIPLIER="${DISTRO_CK_MULT:-4}" \
		CK_VERBOSITY=verbose "$W/build/check_rung" "$s" >"$W/$s.log" 2>&1
	rc=$?
	secs=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }')
	# Check's summary, even behind another process's unfinished line (they share the log)
	res=$(grep -oE '[0-9]+%: Checks: [0-9]+, Failures: [0-9]+, Errors: [0-9]+' "$W/$s.log" |
		tail -n 1)
	if [ "$rc" = 0 ] && [ -n "$res" ] && ! [ -s "$W/build/skips.log" ]; then
		ok "$s ($res) ${secs}s"
		# the figures the tests print (CPU used under cpu.max, peak pids, OOM kills, ...)
		grep -E '^(container|cgroup|v2|spine|egress)[a-z0-9 _()-]*: ' "$W/$s.log" | head -n 12 | sed 's/^/    figure: /'
		[ "${DISTRO_VERBOSE:-0}" = 1 ] && sed 's/^/    /' "$W/$s.log"
	else
		bad "$s rc=$rc (${res:-no summary}) ${secs}s"
		grep -E ':[FE]:|SKIP|skip' "$W/$s.log" | head -n 40 | sed 's/^/    /'
		# what the log ends with, as bytes (a summary line that is not at a line's start, a
		# log cut short), and the room left where it is written
		echo "    log: $(wc -c <"$W/$s.log") bytes, $(wc -l <"$W/$s.log") lines; its end:"
		tail -n 12 "$W/$s.log" | cat -v | cut -c 1-200 | sed 's/^/    | /'
		df -k /tmp | tail -n 1 | sed 's/^/    df: /'
		[ "${DISTRO_VERBOSE:-0}" = 1 ] && sed 's/^/    | /' "$W/$s.log"
		dmesg | tail -n +$((d0 + 1)) | tail -n 8 | sed 's/^/    dmesg: /'
	fi
	# a store group this suite left (its sandboxes' groups below it, if any): named here, so
	# the leftovers check below points at the suite
	for g in $(groups); do
		case " $(echo $g0) " in *" $g "*) continue ;; esac
		echo "    left by $s: cgroup $g: $(cd /sys/fs/cgroup/$g && find . -mindepth 1 -type d | tr '\n' ' ') procs $(cat /sys/fs/cgroup/$g/cgroup.procs | tr '\n' ' ')"
	done
done
# Nothing left behind by any suite.
left=""
for d in /sys/fs/cgroup/rung-*; do [ -d "$d" ] && left="$left cgroup:${d#/sys/fs/cgroup/}"; done
for d in /sys/fs/cgroup/ci.scope/*/; do [ -d "$d" ] && left="$left cgroup:$d"; done
for l in $(ls /sys/class/net); do case "$l" in lo) ;; *) left="$left link:$l" ;; esac; done
mounts1=$(wc -l </proc/self/mountinfo)
[ "$mounts1" -gt "$mounts0" ] && left="$left mounts:$mounts0->$mounts1"
if [ -z "$left" ]; then ok "leftovers none (cgroups, links, mounts)"; else
	bad "leftovers:$left"
	echo "    now $(now) s; left groups last changed at (s since boot):"
	b=$(awk '/^btime/ { print $2 }' /proc/stat)
	for g in $(groups); do echo "      $g $(($(stat -c %Y /sys/fs/cgroup/$g) - b))"; done
	ps -o pid,ppid,args | awk '$3 !~ /^\[/' | tail -n 25 | sed 's/^/      ps: /'
fi
echo "DISTRO-SUMMARY $npass passed, $nfail failed"
[ "$nfail" = 0 ]
