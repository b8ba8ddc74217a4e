#!/bin/sh
# scripts/musl-deps.sh: build, as static musl archives, the C libraries that the rung CLI links
# (jansson, libseccomp, libcap, libnl-3 + libnl-route-3, OpenSSL's libcrypto), so that
# build/rung can be linked -static-pie with musl-gcc instead of against glibc; and musl's own C
# memcpy and memmove (libmuslstring.a), which build/rung and rung-agent link in place of its
# x86_64 assembly (`rep movsq`: ~30 ns a call whatever the size on a virtualised host).
# Why musl: glibc's start-up runs ~65 CPUID instructions (cpu features, cache geometry), and on a
# virtualised host the hypervisor traps every one of them; the CLI starts on every rung call.
# cli/module.mk finds the result through MUSL_PREFIX (default /var/cache/rung/musl):
#   $(MUSL_PREFIX)/lib/lib{jansson,seccomp,cap,nl-3,nl-route-3,crypto,muslstring}.a
#   $(MUSL_PREFIX)/include (jansson.h, seccomp.h, sys/capability.h, openssl/) and .../include/libnl3
# Sources are the Debian source packages of the installed -dev packages (else the Sources index's
# newest), Debian's patches applied, fetched with apt-get source from the mirror the system's apt
# uses, through a private apt configuration kept in PREFIX.cache (lists, sources, build logs):
# apt checks them against the signed Sources index and the system's apt state is left alone.
# PREFIX is built as PREFIX.tmp-PID and renamed into place at the end; PREFIX/.stamp records the
# source versions and this script's checksum, and a run that matches it does nothing.
# Needs: build-essential musl-tools gperf cmake perl xz-utils dpkg-dev flex bison (libnl's parsers).
set -eu

usage() {
	cat <<EOF
usage: sh scripts/musl-deps.sh [PREFIX]
Builds static musl archives of jansson, libseccomp, libcap, libnl-3/libnl-route-3, libcrypto and
musl's C memcpy/memmove into PREFIX (default /var/cache/rung/musl); downloads, apt lists and
logs go to PREFIX.cache.
EOF
}

case $# in 0) ;; 1) case $1 in -h | --help) usage; exit 0 ;; -*) usage >&2; exit 2 ;; esac ;;
*) usage >&2; exit 2 ;; esac
PREFIX=${1:-/var/cache/rung/musl}
case $PREFIX in /*) ;; *) PREFIX=$(pwd)/$PREFIX ;; esac
while [ "${PREFIX%/}" != "$PREFIX" ]; do PREFIX=${PREFIX%/}; done
[ -n "$PREFIX" ] || { usage >&2; exit 2; }

# source package:installed -dev package, in build order
LIBS="jansson:libjansson-dev libseccomp:libseccomp-dev libcap2:libcap-dev libnl3:libnl-3-dev
 openssl:libssl-dev musl:musl-dev"
ARCHIVES="libjansson.a libseccomp.a libcap.a libnl-3.a libnl-route-3.a libcrypto.a
 libmuslstring.a"

msg() { printf 'musl-deps: %s\n' "$*" >&2; }
die() { msg "$*"; exit 1; }

installed() { # pkg: the source version of the installed package, or nothing
	dpkg-query -W -f='${db:Status-Abbrev}|${source:Version}\n' "$1" 2>/dev/null |
		sed -n 's/^ii *|//p'
}

# What the stamp must say: this script, the musl it builds against, the wanted source versions.
want_stamp() {
	echo "script $(sha256sum <"$0" | cut -d' ' -f1)"
	echo "musl-dev $(installed musl-dev)"
	for l in $LIBS; do
		v=$(installed "${l#*:}")
		echo "want ${l%%:*} ${v:--}"
	done
}

WANT=$(want_stamp)
if [ -f "$PREFIX/.stamp" ] && [ "$(grep -v '^got ' "$PREFIX/.stamp")" = "$WANT" ]; then
	ok=1
	for a in $ARCHIVES; do [ -f "$PREFIX/lib/$a" ] || ok=; done
	[ -z "$ok" ] || { msg "up to date ($PREFIX)"; exit 0; }
fi

T0=$(date +%s)
missing=
for t in musl-gcc gcc make cmake gperf perl xz flex bison apt-get apt-cache dpkg-source \
	setsid flock sha256sum; do
	command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
[ -z "$missing" ] || die "missing tools:$missing (see scripts/setup-deps.sh; gperf, cmake," \
	"flex, bison and dpkg-dev are needed here)"
JOBS=$(nproc)
CODENAME=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$CODENAME" ] || die "no VERSION_CODENAME in /etc/os-release: not a Debian system?"

[ ! -e "$PREFIX" ] || [ -f "$PREFIX/.stamp" ] || [ -z "$(ls -A "$PREFIX" 2>/dev/null)" ] ||
	die "$PREFIX exists and was not made by musl-deps (no .stamp): not replacing it"
CACHE=$PREFIX.cache
APT=$CACHE/apt
DL=$CACHE/src
LOGS=$CACHE/log
STAGE=
WORK=
child=
mkdir -p "$APT/lists/partial" "$APT/cache" "$APT/parts.d" "$DL" "$LOGS" 2>/dev/null &&
	[ -w "$CACHE" ] ||
	die "cannot create or write $CACHE (for $PREFIX): run as root or pick another PREFIX"
# as root, apt downloads as its sandbox user _apt, which must be able to write there
[ "$(id -u)" != 0 ] || ! id _apt >/dev/null 2>&1 || chown _apt "$DL"
exec 9>"$CACHE/lock"
flock -n 9 || die "another musl-deps is running for $PREFIX (lock $CACHE/lock)"

cleanup() {
	rc=$?
	trap - EXIT INT TERM HUP
	if [ -n "$child" ]; then
		kill -s TERM -- "-$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	rm -rf ${STAGE:+"$STAGE"} ${WORK:+"$WORK"}
	case $rc in
	0) ;; 129 | 130 | 143) msg "interrupted; $PREFIX not changed" ;;
	*) msg "failed; $PREFIX not changed" ;;
	esac
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

STAGE=$PREFIX.tmp-$$
mkdir "$STAGE" "$STAGE/lib" "$STAGE/include" || { STAGE=; die "cannot create $PREFIX.tmp-$$"; }
WORK=$CACHE/build.$$
rm -rf "$WORK"
mkdir "$WORK" "$WORK/dest"
DEST=$WORK/dest

# run DIR CMD...: run CMD in DIR, output appended to $LOG, in its own process group so that
# the trap can stop it with all its children.
run() {
	(cd "$1" && shift && exec setsid "$@") >>"$LOG" 2>&1 </dev/null &
	child=$!
	wait "$child" && child= && return 0
	r=$?
	child=
	return "$r"
}
# step DIR CMD...: run, or fail showing the end of $LOG
step() {
	run "$@" && return 0
	msg "$WHAT: $2 failed (in $1); last 30 lines of $LOG:"
	tail -n 30 "$LOG" >&2
	die "$WHAT failed; full log: $LOG"
}

# --- fetch: a private apt configuration with deb-src entries for the system's Debian mirror
# Every entry of the system's sources (one-line or deb822) for $CODENAME{,-updates,-security}
# with component main whose URI is a Debian archive (.../debian or .../debian-security) becomes a
# deb-src entry, keeping its options (Signed-By, Check-Valid-Until, ...).
srcs() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
		/etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && printf '@FILE %s\n' "$f" && cat "$f" && echo
	done
	return 0
}
srcs | awk -v cn="$CODENAME" '
function flush(   i, n, u, s, nu, ns, out, k) {
	if (!have) return
	have = 0
	if (tolower(f["enabled"]) == "no" || f["types"] !~ /(^|[ \t])deb(-src)?([ \t]|$)/) return
	if (f["components"] !~ /(^|[ \t])main([ \t]|$)/) return
	n = split(f["uris"], u, /[ \t]+/); nu = ""
	for (i = 1; i <= n; i++) {
		sub(/\/+$/, "", u[i])
		if (u[i] ~ /^https?:\/\/.*\/debian(-security)?(\/|$)/) nu = nu " " u[i]
	}
	n = split(f["suites"], s, /[ \t]+/); ns = ""
	for (i = 1; i <= n; i++)
		if (s[i] == cn || s[i] == cn "-updates" || s[i] == cn "-security") ns = ns " " s[i]
	if (nu == "" || ns == "") return
	out = "Types: deb-src\nURIs:" nu "\nSuites:" ns "\nComponents: main\n"
	for (k in f)
		if (k !~ /^(types|uris|suites|components|enabled)$/ &&
		    k !~ /^(arch|architectures|lang|languages|target|targets)$/)
			out = out name[k] ":" (f[k] ~ /^\n/ ? "" : " ") f[k] "\n"
	print out
}
function reset() { split("", f); split("", name); have = 0; last = "" }
/^@FILE / { flush(); reset(); deb822 = ($2 ~ /\.sources$/); next }
deb822 && /^[ \t]*#/ { next }
deb822 && /^[ \t]*$/ { flush(); reset(); next }
deb822 && /^[ \t]/ { if (last != "") f[last] = f[last] "\n" $0; next }
deb822 {
	k = $0; sub(/:.*/, "", k); v = $0; sub(/^[^:]*:[ \t]*/, "", v); sub(/[ \t]+$/, "", v)
	last = tolower(k); f[last] = v; name[last] = k; have = 1; next
}
{ sub(/#.*/, "") }
$1 == "deb" || $1 == "deb-src" {
	flush(); reset(); i = 2
	if ($2 ~ /^\[/) {
		o = ""
		for (; i <= NF; i++) { o = o " " $i; if ($i ~ /\]$/) { i++; break } }
		gsub(/[][]/, "", o); n = split(o, opt, /[ \t]+/)
		for (j = 1; j <= n; j++) {
			if (opt[j] !~ /=/) continue
			k = opt[j]; sub(/[-+]?=.*/, "", k); v = opt[j]; sub(/^[^=]*=/, "", v)
			gsub(/,/, " ", v); f[tolower(k)] = v; name[tolower(k)] = k
		}
	}
	f["types"] = $1; f["uris"] = $i; f["suites"] = $(i + 1); c = ""
	for (j = i + 2; j <= NF; j++) c = c " " $j
	f["components"] = c; have = 1; flush(); reset()
}
END { flush() }' >"$APT/debian-src.sources"
[ -s "$APT/debian-src.sources" ] || die "no Debian $CODENAME main entry (URI .../debian or" \
	".../debian-security) in /etc/apt/sources.list or /etc/apt/sources.list.d/"
# The system's apt.conf is read (proxies, ...) but its update hooks are not run.
cat >"$APT/apt.conf" <<EOF
Dir::Etc::SourceList "$APT/debian-src.sources";
Dir::Etc::SourceParts "$APT/parts.d";
Dir::State::Lists "$APT/lists";
Dir::Cache "$APT/cache";
Dir::Cache::pkgcache "pkgcache.bin";
Dir::Cache::srcpkgcache "srcpkgcache.bin";
#clear APT::Update::Pre-Invoke;
#clear APT::Update::Post-Invoke;
#clear APT::Update::Post-Invoke-Success;
EOF

LOG=$LOGS/apt.log
WHAT="apt-get update"
: >"$LOG"
msg "updating the Sources index from $(awk '/^URIs:/ { $1 = ""; printf "%s", $0 }' \
	"$APT/debian-src.sources" | sed 's/^ //') ..."
step / apt-get -c "$APT/apt.conf" -q --error-on=any update
apt-cache -c "$APT/apt.conf" showsrc --only-source $(for l in $LIBS; do echo "${l%%:*}"; done) \
	>"$APT/showsrc" 2>>"$LOG" || die "apt-cache showsrc failed; see $LOG"
INDEX=$(awk '/^Package:/ { p = $2 } /^Version:/ { print p, $2 }' "$APT/showsrc")

newer() { # floor V...: the Vs newer than floor (all if floor is -), newest first
	fl=$1 out=
	shift
	for v; do
		[ "$fl" = - ] || dpkg --compare-versions "$v" gt "$fl" || continue
		new='' placed=''
		for o in $out; do
			if [ -z "$placed" ] && dpkg --compare-versions "$v" gt "$o"; then
				new="$new $v" placed=1
			fi
			new="$new $o"
		done
		[ -n "$placed" ] || new="$new $v"
		out=$new
	done
	echo $out
}

GOT=
KEEP=
for l in $LIBS; do
	src=${l%%:*}
	inst=$(installed "${l#*:}")
	all=$(echo "$INDEX" | awk -v p="$src" '$1 == p { print $2 }')
	[ -n "$all" ] || die "no source package $src in the Sources index (see $LOG)"
	cands=$(newer "${inst:--}" $all)
	if [ -n "$inst" ] && echo "$all" | grep -qxF -e "$inst"; then
		cands="$inst $cands"
	else
		[ -n "$cands" ] || cands=$(newer - $all | cut -d' ' -f1)
		why="${l#*:} not installed"
		[ -z "$inst" ] || why="installed version $inst not in the Sources index"
		msg "$src: $why; trying $(echo $cands | sed 's/ /, then /g')"
	fi
	v=
	for c in $cands; do
		msg "fetching $src $c ..."
		WHAT="fetching $src $c"
		if run "$DL" apt-get -c "$APT/apt.conf" -q source --download-only "$src=$c" &&
			[ -f "$DL/${src}_${c#*:}.dsc" ]; then
			v=$c
			break
		fi
		msg "$src $c could not be fetched (see $LOG); trying the next version"
	done
	[ -n "$v" ] || die "could not fetch any of $src$(echo " $cands" | sed 's/ /, /g;s/^,//')" \
		"from the mirror; see $LOG"
	GOT="${GOT}got $src $v
"
	dsc=$DL/${src}_${v#*:}.dsc
	KEEP="$KEEP ${dsc##*/} $(awk '/^Files:/ { f = 1; next } /^[^ ]/ { f = 0 } f { print $3 }' \
		"$dsc" | tr '\n' ' ')"
done
for f in "$DL"/*; do # drop sources of versions no longer wanted
	case " $KEEP " in *" ${f##*/} "*) ;; *) [ ! -f "$f" ] || rm -f "$f" ;; esac
done

# --- build
KH=$CACHE/kh # the kernel's uapi headers and nothing else of /usr/include (musl-gcc skips it)
ASM=/usr/include/$(gcc -print-multiarch)/asm
[ -d "$ASM" ] || ASM=/usr/include/asm
[ -d /usr/include/linux ] && [ -d "$ASM" ] || die "no kernel headers: install linux-libc-dev"
rm -rf "$KH"
mkdir "$KH"
ln -s /usr/include/linux "$KH/linux"
ln -s /usr/include/asm-generic "$KH/asm-generic"
ln -s "$ASM" "$KH/asm"
CFLAGS="-O2 -fPIE -fstack-protector-strong -isystem $KH"

# dpkg-source -x applies Debian's patches and touches what they change; put the autotools outputs
# back after their inputs so make does not try to run automake (the one Makefile.am patch,
# libnl3's, moves /etc files and drops shared-library symbol versions: nothing the .a needs).
untouch() {
	(cd "$1" && for g in aclocal.m4 configure; do [ ! -f "$g" ] || touch "$g"; done &&
		find . \( -name Makefile.in -o -name '*.h.in' \) -exec touch {} +)
}

build_jansson() {
	step "$S" cmake -S . -B _b -DCMAKE_C_COMPILER=musl-gcc "-DCMAKE_C_FLAGS=$CFLAGS" \
		-DCMAKE_BUILD_TYPE= -DCMAKE_INSTALL_PREFIX=/usr -DJANSSON_BUILD_DOCS=OFF \
		-DJANSSON_WITHOUT_TESTS=ON -DJANSSON_EXAMPLES=OFF -DJANSSON_BUILD_SHARED_LIBS=OFF
	step "$S/_b" make -j"$JOBS"
	step "$S/_b" make install DESTDIR="$DEST"
}
build_libseccomp() {
	untouch "$S"
	step "$S" ./configure CC=musl-gcc "CFLAGS=$CFLAGS" --prefix=/usr --enable-static \
		--disable-shared --disable-python
	step "$S/src" make -j"$JOBS" libseccomp.la
	step "$S/src" make install-libLTLIBRARIES DESTDIR="$DEST"
	step "$S/include" make install-includeHEADERS DESTDIR="$DEST"
}
build_libcap2() {
	# libcap/Makefile turns -fPIE into -fPIC (Debian patch), as good for -static-pie
	step "$S/libcap" make -j"$JOBS" CC=musl-gcc BUILD_CC=gcc "COPTS=$CFLAGS" libcap.a
	mkdir -p "$DEST/usr/lib" "$DEST/usr/include/sys"
	cp "$S/libcap/libcap.a" "$DEST/usr/lib/"
	cp "$S/libcap/include/sys/capability.h" "$DEST/usr/include/sys/"
}
build_libnl3() {
	untouch "$S"
	step "$S" ./configure CC=musl-gcc "CFLAGS=$CFLAGS" --prefix=/usr --sysconfdir=/etc \
		--disable-shared --enable-static --disable-cli --disable-debug
	step "$S" make -j"$JOBS" lib/libnl-3.la lib/libnl-route-3.la
	step "$S" make $(sed -n 's/^\(libnlinclude[a-z_]*\)_HEADERS *=.*/install-\1HEADERS/p' \
		"$S/Makefile.am") DESTDIR="$DEST"
	cp "$S/lib/.libs/libnl-3.a" "$S/lib/.libs/libnl-route-3.a" "$DEST/usr/lib/"
}
# no-asm: the assembly's OPENSSL_cpuid_setup runs from .init at every start of the program, 8
# CPUID instructions (trapped on a virtualised host, what musl is for here); build/rung digests
# only small things (keys, manifests) in C.
build_openssl() {
	step "$S" ./Configure linux-x86_64 CC=musl-gcc "CFLAGS=$CFLAGS" --prefix=/usr \
		--libdir=lib --openssldir=/usr/lib/ssl no-shared no-tests no-dso no-engine no-async \
		no-afalgeng no-comp no-legacy no-module no-ssl3 no-asm
	step "$S" make -j"$JOBS" build_generated
	step "$S" make -j"$JOBS" libcrypto.a
	mkdir -p "$DEST/usr/include/openssl"
	cp "$S/libcrypto.a" "$DEST/usr/lib/"
	cp "$S"/include/openssl/*.h "$DEST/usr/include/openssl/"
}

# musl's own C memcpy and memmove, built as musl builds them (freestanding, and without the
# loop-to-memcpy pattern that would make memcpy call itself), into an archive linked whole ahead
# of libc.a (agent/module.mk): its x86_64 assembly's `rep movsq` costs ~30 ns a call whatever
# the size on this project's (virtualised) hosts, the C ~3 ns for 8 bytes; a `rung run` makes
# ~4500 calls, most of them printf's.
build_musl() {
	mkdir -p "$DEST/usr/lib"
	for f in memcpy memmove; do
		step "$S" musl-gcc $CFLAGS -ffreestanding -fno-tree-loop-distribute-patterns \
			-c "src/string/$f.c" -o "$WORK/$f.o"
	done
	step "$WORK" ar rcs "$DEST/usr/lib/libmuslstring.a" memcpy.o memmove.o
}

n=0
total=$(echo $LIBS | wc -w)
for l in $LIBS; do
	n=$((n + 1))
	src=${l%%:*}
	v=$(echo "$GOT" | awk -v p="$src" '$2 == p { print $3 }')
	msg "building $src $v ($n/$total) ..."
	LOG=$LOGS/$src.log
	WHAT="building $src"
	: >"$LOG"
	S=$WORK/$src
	step "$WORK" dpkg-source -x "$DL/${src}_${v#*:}.dsc" "$S"
	"build_$src"
done

for a in $ARCHIVES; do
	cp "$DEST/usr/lib/$a" "$STAGE/lib/" || die "$a was not built"
done
cp -R "$DEST/usr/include/." "$STAGE/include/"
printf '%s\n%s' "$WANT" "$GOT" >"$STAGE/.stamp"
OLD=
if [ -e "$PREFIX" ]; then
	OLD=$PREFIX.old-$$
	mv "$PREFIX" "$OLD"
fi
mv "$STAGE" "$PREFIX" || { [ -z "$OLD" ] || mv "$OLD" "$PREFIX"; die "cannot rename $STAGE"; }
STAGE=
[ -z "$OLD" ] || rm -rf "$OLD"
rm -rf "$WORK"
WORK=
msg "done in $(($(date +%s) - T0)) s: $PREFIX ($(echo "$GOT" | awk 'NF { printf "%s%s %s",
	s, $2, $3; s = ", " }'))"
