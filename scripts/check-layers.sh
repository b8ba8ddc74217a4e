#!/bin/sh
# docs/style.md: includes point down only. common <- rootfs, netpolicy, vmm (never each other)
# <- runtime <- server, cli. agent uses common only. Fails listing each offending line.
set -u
bad=0
check() { # module, forbidden include prefixes...
	m=$1; shift
	[ -d "$m" ] || return 0
	for f in "$@"; do
		hits=$(grep -nE "#include \"$f/" "$m"/*.c "$m"/*.h 2>/dev/null || true)
		if [ -n "$hits" ]; then echo "layering: $m must not include $f/:"; echo "$hits"; bad=1; fi
	done
}
check common rootfs netpolicy vmm runtime server cli agent
check rootfs netpolicy vmm runtime server cli agent
check netpolicy rootfs vmm runtime server cli agent
check vmm rootfs netpolicy runtime server cli agent
check agent rootfs netpolicy vmm runtime server cli
check runtime server cli agent vmm
check server cli agent vmm
check cli agent vmm
[ $bad = 0 ] && echo "layering: ok"
exit $bad
