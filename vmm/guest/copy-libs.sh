# vmm/guest/copy-libs.sh: sourced by the stage's scripts (POSIX sh).
# copy_with_libs ROOT BINARY: copy BINARY and every library ldd names to the same paths under ROOT.
copy_with_libs() {
	mkdir -p "$1$(dirname "$2")" && cp -L "$2" "$1$2"
	for l in $(ldd "$2" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\).*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p'); do
		[ -e "$1$l" ] || { mkdir -p "$1$(dirname "$l")" && cp -L "$l" "$1$l"; }
	done
}
