#!/bin/sh
# tests/install.sh: `make check-install`. Installs rung into a DESTDIR under a temp dir and uses
# it from there with the build tree out of reach (a private mount namespace with a tmpfs over
# the repository) and no RUNG_* variable: a process sandbox through the installed CLI (also
# from a copy of the prefix elsewhere: nothing is tied to /usr/local), a C program built with
# `pkg-config --cflags --libs --static rung` against the installed header and library, and the
# Python client pip-installed offline into a venv. Ends with "N passed, N failed".
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/rung-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
chmod 0755 "$T" # the state dir below it must be searchable by the sandboxes' uids
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
ko() { fail=$((fail + 1)); echo "FAIL: $*"; }
# run CMD... with a clean environment and the repository hidden behind an empty tmpfs
hidden() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C \
		unshare --mount --propagation private \
		sh -c 'mount -t tmpfs -o size=1m rung-hidden "$0" && cd / && exec "$@"' "$repo" "$@"
}

D=$T/root
P=$D/usr/local
if make -C "$repo" --no-print-directory install DESTDIR="$D" >"$T/install.log" 2>&1; then
	ok "make install DESTDIR=$D"
else
	tail -30 "$T/install.log"; ko "make install"
	echo "$pass passed, $fail failed"; exit 1
fi

# -- the files, where the FHS puts them -------------------------------------------------------
for f in bin/rung bin/rung-serve bin/rung-image libexec/rung/rung-agent libexec/rung/rung-vmm \
	libexec/rung/rung-dyn; do
	[ -x "$P/$f" ] && ok "installed $f" || ko "missing $P/$f"
done
for f in include/rung/rung.h include/rung/err.h lib/librung.a lib/pkgconfig/rung.pc \
	share/man/man1/rung.1 share/man/man1/rung-serve.1 share/man/man1/rung-image.1 \
	lib/systemd/system/rung.service; do
	[ -f "$P/$f" ] && ok "installed $f" || ko "missing $P/$f"
done
nman=0
for c in run acquire exec write read run-code ls inspect suspend resume dispose dispose-scope gc; do
	grep -q "^\.TH RUNG-$(echo $c | tr a-z A-Z) " "$P/share/man/man1/rung-$c.1" && nman=$((nman + 1)) ||
		ko "no man page rung-$c.1 made from rung $c --help"
done
[ $nman = 13 ] && ok "a man page per command (rung-run.1 ... rung-gc.1)"
grep -q '^\.TH RUNG ' "$P/share/man/man1/rung.1" && grep -q 'acquire' "$P/share/man/man1/rung.1" &&
	ok "rung.1 is a man page made from rung --help" || ko "rung.1 has no .TH or no commands"
grep -q '^ExecStart=/usr/local/bin/rung serve' "$P/lib/systemd/system/rung.service" &&
	ok "rung.service runs /usr/local/bin/rung" || ko "rung.service ExecStart not substituted"

# -- a process sandbox from the installed CLI, the build tree hidden -------------------------
root=1
if [ "$(id -u)" != 0 ]; then
	root=0
	echo "SKIP (LOUD): not root: no sandbox is run from the install and no mount namespace hides"
	echo "  the build tree; only the files, pkg-config, the build of a C program against the"
	echo "  install and the Python client are checked (make check runs as root)."
fi
if [ $root = 1 ]; then
	out=$(hidden "$P/bin/rung" --state-dir "$T/state" run -- /bin/echo hi 2>"$T/run.err")
	[ "$out" = hi ] && ok "installed rung run -- /bin/echo hi" ||
		{ cat "$T/run.err"; ko "installed rung run printed '$out'"; }
	hidden sh -c '[ ! -e "$0/Makefile" ]' "$repo" && ok "the build tree is hidden in that namespace" ||
		ko "the repository is still visible in the test namespace"
	# relocated: the same tree under another prefix finds its own helpers
	mkdir -p "$T/elsewhere" && cp -a "$P" "$T/elsewhere/prefix"
	out=$(hidden "$T/elsewhere/prefix/bin/rung" --state-dir "$T/state" run -- /bin/echo moved 2>"$T/run.err")
	[ "$out" = moved ] && ok "a copy of the prefix elsewhere runs a sandbox" ||
		{ cat "$T/run.err"; ko "relocated rung run printed '$out'"; }
	# and it really uses libexec: without its agent it fails naming that path
	mv "$T/elsewhere/prefix/libexec/rung/rung-agent" "$T/agent.away"
	hidden "$T/elsewhere/prefix/bin/rung" --state-dir "$T/state" run -- /bin/true 2>"$T/run.err"
	rc=$?
	if [ $rc != 0 ] && grep -q "rung-agent binary $T/elsewhere/prefix/libexec/rung/rung-agent: No such file" "$T/run.err"; then
		ok "without libexec/rung/rung-agent: refused naming the path ($(head -c 200 "$T/run.err"))"
	else
		cat "$T/run.err"; ko "without its agent rung exited $rc"
	fi
	# rung serve / rung image: the installed CLI execs its installed siblings
	hidden "$P/bin/rung" --state-dir "$T/state" image ls >"$T/img.out" 2>&1 &&
		ok "installed rung image ls (rung-image beside rung)" || { cat "$T/img.out"; ko "rung image ls"; }
	hidden "$P/bin/rung" serve --help 2>&1 | grep -q -- '--tokens' &&
		ok "installed rung serve --help (rung-serve beside rung)" || ko "rung serve --help"
fi

# -- a C program against the installed header and librung.a, through pkg-config --------------
cat >"$T/hello.c" <<'C'
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <rung/rung.h>
static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}
int main(int argc, char **argv)
{
	/* a second thread: the sandbox's supervisor is then `rung __supervise`, re-exec'd from
	 * helperdir (a single-threaded caller's is a plain fork) */
	pthread_t th;
	pthread_create(&th, NULL, idle, NULL);
	struct rung_err err = {0};
	struct rung_router *r;
	struct rung_router_opts o = {.state_dir = argv[1], .helper_dir = argc > 2 ? argv[2] : HELPERDIR};
	if (argc < 2 || rung_router_new(&o, &r, &err) < 0)
		return fprintf(stderr, "router: %s\n", err.msg), 1;
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.kind = strdup("hello");
	struct rung_key key = {"install", "hello", "c"};
	struct rung_sandbox *sb;
	if (rung_acquire(r, &key, &spec, &sb, NULL, &err) < 0)
		return fprintf(stderr, "acquire: %s\n", err.msg), 1;
	static const char *const av[] = {"/bin/echo", "from-c", NULL};
	struct rung_exec_req req = {.argv = av};
	struct rung_exec_res res = {0};
	if (rung_exec(sb, &req, &res, &err) < 0)
		return fprintf(stderr, "exec: %s\n", err.msg), 1;
	printf("%s %d %s", rung_isolation_name(rung_sandbox_isolation(sb)), res.exit_code, res.out);
	int rc = rung_dispose(r, rung_sandbox_id(sb), NULL, &err);
	rung_exec_res_release(&res);
	rung_sandbox_close(sb);
	rung_spec_release(&spec);
	rung_router_free(r);
	return rc < 0 ? (fprintf(stderr, "dispose: %s\n", err.msg), 1) : 0;
}
C
# --define-variable applies to every .pc: the system ones gain harmless extra -I/-L dirs under $P
pc() { PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --define-variable=prefix="$P" "$@" rung; }
flags=$(pc --cflags --libs --static) && helperdir=$(pc --variable=helperdir) &&
	ok "pkg-config --cflags --libs --static rung: $flags" || ko "pkg-config rung"
if cc -std=c11 -Wall -Werror -o "$T/hello" "$T/hello.c" -DHELPERDIR="\"$helperdir\"" $flags \
	2>"$T/cc.err"; then
	ok "a C program builds against the installed header and librung.a"
	if [ $root = 1 ]; then
		out=$(hidden "$T/hello" "$T/state" 2>"$T/hello.err")
		[ "$out" = "process 0 from-c" ] && ok "it acquires a process sandbox, execs, disposes: '$out'" ||
			{ cat "$T/hello.err"; ko "the C program printed '$out'"; }
		# its supervisor really is helperdir's rung: the same helpers without it fail there
		mkdir -p "$T/norung" && cp "$helperdir/rung-agent" "$helperdir/rung-vmm" "$T/norung/"
		hidden "$T/hello" "$T/state" "$T/norung" >/dev/null 2>"$T/hello.err"
		grep -q "supervisor" "$T/hello.err" &&
			ok "the supervisor is re-exec'd from helperdir (without rung there: $(cat "$T/hello.err"))" ||
			{ cat "$T/hello.err"; ko "a helper dir without rung did not fail on __supervise"; }
	fi
else
	cat "$T/cc.err"; ko "cc against the installed rung"
fi

# -- the Python client, pip-installed offline -------------------------------------------------
py=/usr/bin/python3
cp -a "$repo/clients/python" "$T/pyclient"
if $py -m venv --system-site-packages "$T/venv" >"$T/venv.log" 2>&1 &&
	env -i PATH=/usr/bin:/bin HOME="$T" PIP_DISABLE_PIP_VERSION_CHECK=1 \
		"$T/venv/bin/pip" install --no-build-isolation --no-index "$T/pyclient" >"$T/pip.log" 2>&1; then
	ok "pip install --no-build-isolation --no-index ./clients/python (a venv)"
else
	tail -20 "$T/venv.log" "$T/pip.log"; ko "pip install of the client"
fi
rm -rf "$T/pyclient"
got=$(cd / && env -i PATH=/usr/bin:/bin "$T/venv/bin/python" -c \
	'import rung_client, importlib.metadata as m; print(rung_client.__file__, m.version("rung-client"), rung_client.SandboxBackend.__name__)' 2>&1)
case "$got" in
"$T/venv/lib/"*"/site-packages/rung_client/__init__.py 0.1.0 SandboxBackend") ok "import rung_client from the venv: $got" ;;
*) ko "import rung_client: $got" ;;
esac

# -- make uninstall takes every installed file back ------------------------------------------
make -C "$repo" --no-print-directory uninstall DESTDIR="$D" >"$T/uninstall.log" 2>&1
left=$(find "$D" ! -type d | head -5)
[ -z "$left" ] && ok "make uninstall DESTDIR=... leaves no file" || ko "make uninstall left: $left"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
