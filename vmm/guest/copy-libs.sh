# vmm/guest/copy-libs.sh: sourced by the stage's scripts (POSIX sh).
# copy_with_libs ROOT BINARY: copy BINARY and every library ldd names to the same paths under ROOT.
copy_with_libs() {
	mkdir -p "$1$(dirname "$2")" && cp -L "$2" "$1$2"
	for l in $(ldd "$2" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p'); do
		[ -e "$1$l" ] || { mkdir -p "$1$(dirname "$l")" && cp -L "$l" "$1$l"; }
	done
}
# copy_loader_beside_libc ROOT DYNBINARY: the dynamic loader also in libc.so.6's directory under
# ROOT (as Debian has it), where a static program's dlopen looks for it by name: build/rung is
# static and loads libnftables and libcurl with dlopen (cli/module.mk, common/dl.h).
copy_loader_beside_libc() {
	so=$(ldd "$2" | sed -n 's/^[[:space:]]*libc\.so\.6 => \([^ ]*\) .*/\1/p')
	ld=$(readelf -l "$2" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
	[ -n "$so" ] && [ -n "$ld" ] || return 0
	d=$(dirname "$so")/$(basename "$ld")
	[ -e "$1$d" ] || { mkdir -p "$1$(dirname "$d")" && cp -L "$ld" "$1$d"; }
}
