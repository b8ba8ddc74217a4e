#!/bin/sh
# make check-oci (an optional test stage): the OCI runtime-tools validation suite (../shared/conformance, or
# $OCI_VALIDATION_SRC) against rung-oci and runc in the same run, side by side.
# Fails when rung-oci fails a test that runc passes, except the tests that need what rung refuses
# by design (docs/oci.md, "Refused"): those are listed on a line of their own. Such a failure is
# run once more alone first (killsig races its signal against the shell's trap), and a pass
# then is reported as FLAKY on a line of its own.
# Without the suite it says so loudly and exits 0.
#   usage: scripts/check-oci.sh build/rung-oci [TEST...]
set -u
RUNG=$(cd "$(dirname "$1")" && pwd)/$(basename "$1"); shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=${OCI_VALIDATION_SRC:-$ROOT/../shared/conformance}
# in a git worktree, ../shared is beside the main checkout
if [ -z "${OCI_VALIDATION_SRC:-}" ] && [ ! -d "$SRC" ]; then
	common=$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
	[ -n "$common" ] && SRC=$(dirname "$(dirname "$common")")/shared/conformance
fi
RUNC=${RUNC:-/usr/sbin/runc}
# joining pid/ipc/mount/uts namespaces by path, the host's pid namespace, extra devices
BY_DESIGN="linux_ns_itype linux_ns_path linux_devices"
if [ ! -f "$SRC/oci-validation.sh" ]; then
	echo "check-oci: SKIPPED: no OCI validation suite at $SRC (set OCI_VALIDATION_SRC)"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "check-oci: SKIPPED: the validation suite runs containers and needs root"
	exit 0
fi
if [ ! -x "$RUNC" ]; then
	echo "check-oci: SKIPPED: no runc at $RUNC to compare with (apt-get install runc)"
	exit 0
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
start=$(date +%s)
sh "$SRC/oci-validation.sh" "$RUNC" "$@" >"$T/runc" 2>&1 || true
sh "$SRC/oci-validation.sh" "$RUNG" "$@" >"$T/rung" 2>&1 || true
if ! grep -q ' passed, ' "$T/rung" || ! grep -q ' passed, ' "$T/runc"; then
	echo "check-oci: the suite did not run:"; cat "$T/runc" "$T/rung"; exit 1
fi
printf '%-40s %-14s %-14s\n' TEST runc rung-oci
bad="" design="" retried=""
for t in $(awk 'NF == 3 { print $2 }' "$T/runc"); do
	a=$(awk -v t="$t" '$2 == t { print $1 " " $3 }' "$T/runc")
	b=$(awk -v t="$t" '$2 == t { print $1 " " $3 }' "$T/rung")
	printf '%-40s %-14s %-14s\n' "$t" "$a" "${b:-missing}"
	case "$a" in PASS*) ;; *) continue ;; esac
	case "$b" in PASS*) continue ;; esac
	case " $BY_DESIGN " in *" $t "*) design="$design $t"; continue ;; esac
	# once more, alone: killsig and pidfile race their own signals against the program's start
	again=$(sh "$SRC/oci-validation.sh" "$RUNG" "$t" 2>&1 | awk -v t="$t" '$2 == t { print $1 " " $3 }')
	case "$again" in PASS*) retried="$retried $t"; continue ;; esac
	bad="$bad $t"
done
# a test that fails before its delete (pidfile, when `true` exits before its kill) leaves a
# stopped container of the suite's: delete those (their bundles are the suite's /tmp/ocitest*)
left=""
for d in /run/rung-oci/*/; do
	[ -f "$d/state.json" ] || continue
	grep -q '"bundle":"/tmp/ocitest' "$d/state.json" || continue
	id=$(basename "$d"); left="$left $id"
	"$RUNG" delete --force "$id" || echo "check-oci: could not delete $id"
done
echo "runc:     $(tail -1 "$T/runc")"
echo "rung-oci: $(tail -1 "$T/rung")"
echo "check-oci: $(( $(date +%s) - start )) s"
[ -n "$left" ] && echo "check-oci: deleted what failed tests left (as runc's would):$left"
[ -n "$retried" ] && echo "check-oci: FLAKY: failed once, passed when run again:$retried"
[ -n "$design" ] && echo "check-oci: refused by rung's boundary (runc passes):$design"
if [ -n "$bad" ]; then
	echo "check-oci: FAIL: rung-oci fails what runc passes:$bad"
	exit 1
fi
echo "check-oci: OK"
