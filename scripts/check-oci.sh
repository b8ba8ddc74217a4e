#!/bin/sh
# make check-oci (a stage of make check, an optional test stage in that it skips loudly without
# the suite, root or runc): the OCI runtime-tools validation suite (../shared/conformance,
# or $OCI_VALIDATION_SRC) against rung-oci and runc in the same run, side by side.
# Fails when rung-oci fails a test that runc passes, except the tests that need what rung refuses
# by design (docs/oci.md, "Refused"): those are listed on a line of their own.
# Each run is private: its bundles in its own TMPDIR, its TAP logs in its own directory (the
# suite's runner clears every /tmp/ocitest* after each test and logs to one directory per
# runtime name, so two runs at once on one host would delete each other's live bundles).
# The one race that is the suite's own (killsig signals before its shell has set its trap, see
# docs/oci.md) is retried once, and said so.
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
# the suite's own races (docs/oci.md): retried once
SUITE_RACES="killsig"
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
BUILT=${OCI_VALIDATION_DIR:-/var/cache/oci-validation}
if [ ! -x "$BUILT/src/validation/default/default.t" ]; then # build it once (no test named so)
	OCI_VALIDATION_DIR=$BUILT sh "$SRC/oci-validation.sh" "$RUNC" check-oci-build-only >/dev/null ||
		{ echo "check-oci: the suite did not build (see $BUILT/build.log)"; exit 1; }
fi
T=$(mktemp -d /tmp/check-oci.XXXXXX)
chmod 755 "$T" && mkdir -m 755 "$T/v" "$T/tmp" && ln -s "$BUILT/src" "$T/v/src"
clean() {
	# containers that failed tests left behind (they never reached their delete): delete them,
	# as runc's would be
	for d in /run/rung-oci/*/; do
		[ -f "$d/state.json" ] && grep -q "\"bundle\":\"$T/tmp/" "$d/state.json" || continue
		"$RUNG" delete --force "$(basename "$d")" >/dev/null 2>&1 &&
			echo "check-oci: deleted $(basename "$d"), left by a failed test"
	done
	for m in "$T"/tmp/*; do [ -d "$m" ] && umount -R "$m" 2>/dev/null; done
	rm -rf --one-file-system "$T"
}
trap clean EXIT
suite() { # RUNTIME [TEST...]
	OCI_VALIDATION_DIR=$T/v TMPDIR=$T/tmp sh "$SRC/oci-validation.sh" "$@" 2>&1
}
start=$(date +%s)
suite "$RUNC" "$@" >"$T/runc" || true
suite "$RUNG" "$@" >"$T/rung" || true
if ! grep -q ' passed, ' "$T/rung" || ! grep -q ' passed, ' "$T/runc"; then
	echo "check-oci: the suite did not run:"; cat "$T/runc" "$T/rung"; exit 1
fi
printf '%-40s %-14s %-14s\n' TEST runc rung-oci
bad="" design="" retried=""
for t in $(awk 'NF == 3 { print $2 }' "$T/runc"); do
	a=$(awk -v t="$t" '$2 == t { print $1 " " $3 }' "$T/runc")
	b=$(awk -v t="$t" '$2 == t { print $1 " " $3 }' "$T/rung")
	case "$a $b" in PASS*FAIL*|PASS*ERROR*|PASS*" ")
		case " $SUITE_RACES " in *" $t "*)
			cp "$T/v/logs/rung-oci/$t.tap" "$T/$t.first.tap"
			retried="$retried $t"
			b=$(suite "$RUNG" "$t" | awk -v t="$t" '$2 == t { print $1 " " $3 }')
			b="$b (retried)" ;;
		esac ;;
	esac
	printf '%-40s %-14s %-14s\n' "$t" "$a" "${b:-missing}"
	case "$a" in PASS*) ;; *) continue ;; esac
	case "$b" in PASS*) continue ;; esac
	case " $BY_DESIGN " in *" $t "*) design="$design $t"; continue ;; esac
	bad="$bad $t"
done
echo "runc:     $(tail -1 "$T/runc")"
echo "rung-oci: $(tail -1 "$T/rung")"
echo "check-oci: $(( $(date +%s) - start )) s"
for t in $retried; do
	echo "check-oci: RETRIED $t once (the suite's race, docs/oci.md); its first try:"
	grep -A6 '^not ok' "$T/$t.first.tap" | sed 's/^/    /'
done
[ -n "$design" ] && echo "check-oci: refused by rung's boundary (runc passes):$design"
if [ -n "$bad" ]; then
	echo "check-oci: FAIL: rung-oci fails what runc passes:$bad"
	for t in $bad; do
		echo "--- $t (rung-oci's TAP)"; grep -A12 '^not ok' "$T/v/logs/rung-oci/$t.tap" | head -40
	done
	exit 1
fi
echo "check-oci: OK"
