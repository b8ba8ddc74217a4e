#!/bin/sh
# docs/style.md: includes point down only. common <- rootfs, netpolicy, vmm, cgroup (never each
# other) <- runtime <- server, cli. agent uses common only; probe (rung-probe) only libc. Fails listing each offending line.
# Within a module, the files' includes form no cycle: a.c including b.h, where b.c exists, is an
# edge a -> b (a calls into b), so two files never lean on each other. A header without a .c of
# its own (a module's shared types, *-internal.h) makes no edge: keep functions out of those.
# And only a program's main reads the environment (docs/configuration.md).
set -u
bad=0
modules="common rootfs netpolicy vmm cgroup runtime server cli agent probe oci"
check() { # module, forbidden include prefixes...
	m=$1; shift
	[ -d "$m" ] || return 0
	for f in "$@"; do
		hits=$(grep -nE "#include \"$f/" "$m"/*.c "$m"/*.h 2>/dev/null || true)
		if [ -n "$hits" ]; then echo "layering: $m must not include $f/:"; echo "$hits"; bad=1; fi
	done
}
allow() { # module, the modules it may include besides itself (include/rung is public)
	m=$1; shift
	forbid=""
	for o in $modules; do
		[ "$o" = "$m" ] && continue
		case " $* " in *" $o "*) ;; *) forbid="$forbid $o" ;; esac
	done
	check "$m" $forbid
}
allow common
allow rootfs common
allow netpolicy common
allow vmm common
allow cgroup common
allow agent common
allow probe
allow runtime common rootfs netpolicy cgroup
allow server common rootfs netpolicy cgroup runtime
allow cli common rootfs netpolicy cgroup runtime server
# rung-oci: the container rung's pieces (runtime/seccomp.h, cgroup/, rootfs/ idmap, netpolicy/ for
# the egress annotation), no server or cli
allow oci common rootfs netpolicy cgroup runtime

# Include cycles inside one module: a depth-first search over the file -> header edges.
cycles() { # module
	m=$1
	[ -d "$m" ] || return 0
	for f in "$m"/*.c; do
		[ -f "$f" ] || continue
		from=$(basename "$f" .c)
		sed -n "s|^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$m/\([^\"/]*\)\.h\".*|\1|p" "$f" |
			while read -r to; do
				[ "$to" != "$from" ] && [ -f "$m/$to.c" ] && echo "$from $to"
			done
	done | sort -u | awk -v m="$m" '
		{ n[$1]++; adj[$1, n[$1]] = $2; node[$1] = 1; node[$2] = 1 }
		function visit(u,   i, v, k, p) {
			state[u] = 1; stack[++depth] = u
			for (i = 1; i <= n[u]; i++) {
				v = adj[u, i]
				if (state[v] == 1) {
					p = ""
					for (k = depth; k >= 1; k--) { p = stack[k] " -> " p; if (stack[k] == v) break }
					printf "layering: include cycle in %s/: %s%s\n", m, p, v
					found = 1
				} else if (state[v] == 0)
					visit(v)
			}
			depth--; state[u] = 2
		}
		END { for (u in node) if (state[u] == 0) visit(u); exit found }' || bad=1
}
for m in $modules; do cycles "$m"; done
# Configuration in one place (docs/configuration.md): only a program's main reads the
# environment and passes what it read down as options; library code reads none. These are the
# programs' main files; tests/ (the check_rung program and its harness) and fuzz/ are not scanned.
mains="cli/main.c cli/main-image.c server/main-serve.c rootfs/main-tool.c agent/main.c
vmm/main.c vmm/guest/vmtest.c bench/container.c bench/egress.c bench/exec-rate.c bench/pool.c
bench/procs.c bench/netpolicy.c bench/port.c
bench/callbacks.c oci/main-oci.c"
for f in $(find . -name '*.[ch]' -not -path './tests/*' -not -path './fuzz/*' \
		-not -path './build/*' -not -path './.*' | sed 's|^\./||' | sort); do
	case " $(echo $mains) " in *" $f "*) continue ;; esac
	hits=$(grep -nE '(^|[^A-Za-z0-9_])(secure_)?getenv([^A-Za-z0-9_]|$)' "$f" || true)
	if [ -n "$hits" ]; then
		echo "config: $f reads the environment; only a program's main may (scripts/check-layers.sh):"
		echo "$hits"
		bad=1
	fi
done
[ $bad = 0 ] && echo "layering: ok"
exit $bad
