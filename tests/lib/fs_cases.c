/*
 * tests/lib/fs_cases.c: the file-operation cases of e2e_files_* (check_e2e_files_*.c), written
 * once for every rung. ops: mkdir (-p, mode), stat, list, move, remove (-r) against what a
 * shell inside sees; errors: each stable code from the operation that yields it; symlinks: a
 * battery of absolute, "..", looping and host-pointing links, none of which leads out of the
 * root or makes rm/mv act on anything but the link; swap: a directory swapped for a link to
 * the sandbox's root while a recursive remove walks it deletes nothing through the link.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/lib/fs_cases.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

static const struct fs_env *env;

struct fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
};

static void fx_open(struct fx *f, const char *thread)
{
	f->r = env->router();
	f->sb = env->acquire(f->r, thread);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
}

static void sh_ok(struct rung_sandbox *sb, const char *script) { free(spine_sh_ok(sb, script)); }

/* The output of a shell line, trailing newline dropped (malloc'd). */
static char *sh_out(struct rung_sandbox *sb, const char *script)
{
	char *o = spine_sh_ok(sb, script);
	size_t n = strlen(o);
	if (n && o[n - 1] == '\n')
		o[n - 1] = 0;
	return o;
}

static const struct rung_fs_entry *find(const struct rung_fs_entry *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

static void case_ops(void)
{
	struct fx f;
	fx_open(&f, "ops");
	struct rung_err err = {0};
	ck_assert_msg(rung_fs_mkdir(f.sb, "a/b/c", 0700, true, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_fs_mkdir(f.sb, "a/b/c", 0, true, &err) == 0, "-p twice: %s", err.msg);
	ck_assert_msg(rung_fs_mkdir(f.sb, "/work/d", 0750, false, &err) == 0, "%s", err.msg);
	sh_ok(f.sb, "printf hello > a/file && chmod 640 a/file && ln -s b/c a/link");
	char *o = sh_out(f.sb, "stat -c %a a/b/c /work/d");
	ck_assert_str_eq(o, "700\n750");
	free(o);

	struct rung_fs_entry e;
	ck_assert_msg(rung_fs_stat(f.sb, "a/file", &e, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rung_fs_kind_name(e.kind), "file");
	ck_assert_uint_eq(e.size, 5);
	ck_assert_uint_eq(e.mode, 0640);
	ck_assert_ptr_null(e.target);
	ck_assert(e.mtime_ns > 0);
	rung_fs_entry_release(&e);
	ck_assert_msg(rung_fs_stat(f.sb, "/work/a/link", &e, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rung_fs_kind_name(e.kind), "symlink");
	ck_assert_str_eq(e.target, "b/c");
	rung_fs_entry_release(&e);
	ck_assert_msg(rung_fs_stat(f.sb, "/", &e, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(rung_fs_kind_name(e.kind), "dir");
	rung_fs_entry_release(&e);

	struct rung_fs_entry *v;
	size_t n;
	ck_assert_msg(rung_fs_list(f.sb, "a", &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(rung_fs_kind_name(find(v, n, "b")->kind), "dir");
	ck_assert_str_eq(rung_fs_kind_name(find(v, n, "link")->kind), "symlink");
	ck_assert_uint_eq(find(v, n, "file")->size, 5);
	rung_fs_entries_free(v, n);
	/* listing through a link inside lists its target */
	ck_assert_msg(rung_fs_list(f.sb, "a/link", &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	rung_fs_entries_free(v, n);

	ck_assert_msg(rung_fs_move(f.sb, "a/file", "/work/d/moved", &err) == 0, "%s", err.msg);
	o = sh_out(f.sb, "cat /work/d/moved; test -e a/file || echo gone");
	ck_assert_str_eq(o, "hellogone");
	free(o);
	/* remove acts on a link, not its target */
	ck_assert_msg(rung_fs_remove(f.sb, "a/link", false, &err) == 0, "%s", err.msg);
	o = sh_out(f.sb, "test -d a/b/c && echo kept; test -L a/link || echo unlinked");
	ck_assert_str_eq(o, "kept\nunlinked");
	free(o);
	sh_ok(f.sb, "mkdir -p a/b/c/d/e && touch a/b/c/d/e/f a/b/x && ln -s /etc a/b/etc");
	ck_assert_msg(rung_fs_remove(f.sb, "a", true, &err) == 0, "%s", err.msg);
	o = sh_out(f.sb, "test -e a || echo gone; test -f /etc/passwd && echo etc");
	ck_assert_str_eq(o, "gone\netc");
	free(o);
	ck_assert_msg(rung_fs_remove(f.sb, "/work/d/moved", false, &err) == 0, "%s", err.msg);
	fx_close(&f);
}

/* op's -errno is want, its stable code is code and the message names the path. */
static void expect_err(int r, const struct rung_err *err, int want, const char *code,
		       const char *path)
{
	ck_assert_msg(r == -want, "want -%d (%s), got %d: %s", want, code, r, err->msg);
	ck_assert_str_eq(rung_errno_code(r), code);
	ck_assert_msg(strstr(err->msg, path), "message '%s' names no '%s'", err->msg, path);
}

static void case_errors(void)
{
	struct fx f;
	fx_open(&f, "errors");
	struct rung_err err = {0};
	struct rung_fs_entry e, *v;
	size_t n;
	sh_ok(f.sb, "mkdir -p full/sub ro && touch file full/x && chmod 555 ro");
	int r = rung_fs_stat(f.sb, "nope", &e, &err);
	expect_err(r, &err, ENOENT, "not_found", "nope");
	r = rung_fs_list(f.sb, "file", &v, &n, &err);
	expect_err(r, &err, ENOTDIR, "not_a_directory", "file");
	r = rung_fs_stat(f.sb, "file/x", &e, &err);
	expect_err(r, &err, ENOTDIR, "not_a_directory", "file/x");
	r = rung_fs_remove(f.sb, "full", false, &err);
	expect_err(r, &err, EISDIR, "is_a_directory", "full");
	r = rung_fs_mkdir(f.sb, "full", 0, false, &err);
	expect_err(r, &err, EEXIST, "exists", "full");
	r = rung_fs_mkdir(f.sb, "file", 0, true, &err);
	expect_err(r, &err, EEXIST, "exists", "file");
	sh_ok(f.sb, "mkdir empty");
	r = rung_fs_move(f.sb, "empty", "full", &err);
	ck_assert_msg(r == -ENOTEMPTY || r == -EEXIST, "%d %s", r, err.msg);
	ck_assert_str_eq(rung_errno_code(-ENOTEMPTY), "not_empty");
	/* the agent has no CAP_DAC_OVERRIDE: a 0555 directory refuses it */
	r = rung_fs_mkdir(f.sb, "ro/x", 0, false, &err);
	expect_err(r, &err, EACCES, "permission_denied", "ro/x");
	r = rung_fs_remove(f.sb, "/", true, &err);
	ck_assert_msg(r == -EBUSY && strstr(err.msg, "root"), "%d %s", r, err.msg);
	/* a mount point is not walked (/proc, /dev in every rung) */
	r = rung_fs_remove(f.sb, "/proc", true, &err);
	ck_assert_msg(r == -EBUSY && strstr(err.msg, "mount point"), "%d %s", r, err.msg);
	r = rung_fs_remove(f.sb, "full/..", true, &err);
	ck_assert_msg(r == -EINVAL, "%d %s", r, err.msg);
	r = rung_fs_move(f.sb, "nope", "x", &err);
	expect_err(r, &err, ENOENT, "not_found", "nope");
	r = rung_fs_mkdir(f.sb, "m", 010000, false, &err);
	ck_assert_int_eq(r, -EINVAL);
	char *o = sh_out(f.sb, "ls -d full file ro empty");
	ck_assert_str_eq(o, "empty\nfile\nfull\nro");
	free(o);
	fx_close(&f);
}

/* A host directory with a file: a link inside pointing at its host path must not reach it
 * (the sandbox's root has no such path). */
static char *host_canary(void)
{
	char *d = NULL;
	/* under the tcase's base (its teardown removes it even when the test fails); a tcase
	 * without one (the container suite's) gets a fresh directory under /tmp */
	if (spine_base()[0]) {
		ck_assert(asprintf(&d, "%s/fs-canary.%d", spine_base(), (int)getpid()) > 0);
		ck_assert_msg(mkdir(d, 0755) == 0 || errno == EEXIST, "mkdir %s: %m", d);
	} else {
		ck_assert_ptr_nonnull(d = rung_test_tmpdir("fs-canary"));
		chmod(d, 0755);
	}
	char p[512];
	snprintf(p, sizeof(p), "%s/victim", d);
	FILE *fp = fopen(p, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("host", fp);
	fclose(fp);
	return d;
}

static void host_canary_check(char *d)
{
	char p[512];
	struct stat st;
	snprintf(p, sizeof(p), "%s/victim", d);
	ck_assert_msg(stat(p, &st) == 0 && st.st_size == 4, "host file %s touched", p);
	snprintf(p, sizeof(p), "%s/new", d);
	ck_assert_msg(stat(p, &st) < 0, "%s made on the host", p);
	snprintf(p, sizeof(p), "%s/victim", d);
	unlink(p);
	rmdir(d);
	free(d);
}

static void case_symlinks(void)
{
	struct fx f;
	fx_open(&f, "links");
	struct rung_err err = {0};
	char *host = host_canary();
	char sc[1024];
	sh_ok(f.sb, "mkdir -p /work/t");
	snprintf(sc, sizeof(sc),
		 "mkdir -p /work/keep/in && echo k > /work/keep/in/f && cd /work/t && "
		 "ln -s %s host && ln -s / abs && ln -s ../../../../../.. up && "
		 "ln -s loop2 loop1 && ln -s loop1 loop2 && ln -s /work/keep keep",
		 host);
	sh_ok(f.sb, sc);
	struct rung_fs_entry e, *v;
	size_t n;
	/* the host path does not exist inside */
	char p[1024];
	snprintf(p, sizeof(p), "host/victim");
	int r = rung_fs_stat(f.sb, p, &e, &err);
	ck_assert_msg(r == -ENOENT, "%d %s", r, err.msg);
	r = rung_fs_remove(f.sb, "t/host/victim", false, &err);
	ck_assert_msg(r == -ENOENT, "%d %s", r, err.msg);
	/* -p through the dangling link: refused (as mkdir -p does), nothing made on the host */
	r = rung_fs_mkdir(f.sb, "t/host/new", 0, true, &err);
	ck_assert_msg(r == -ENOENT || r == -EEXIST, "%d %s", r, err.msg);
	r = rung_fs_mkdir(f.sb, "t/host/new", 0, false, &err);
	ck_assert_msg(r == -ENOENT, "%d %s", r, err.msg);
	/* -p through ".." links stays inside */
	ck_assert_msg(rung_fs_mkdir(f.sb, "t/up/work/made/x", 0, true, &err) == 0, "%s", err.msg);
	char *o = sh_out(f.sb, "test -d /work/made/x && echo inside");
	ck_assert_str_eq(o, "inside");
	free(o);
	/* ".." and absolute links resolve within the root */
	ck_assert_msg(rung_fs_list(f.sb, "t/up/work/keep", &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].name, "in");
	rung_fs_entries_free(v, n);
	ck_assert_msg(rung_fs_stat(f.sb, "t/abs/work/keep/in/f", &e, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(e.size, 2);
	rung_fs_entry_release(&e);
	ck_assert_msg(rung_fs_stat(f.sb, "/work/t/up/../../../work/keep/in/f", &e, &err) == 0, "%s",
		      err.msg);
	rung_fs_entry_release(&e);
	/* loops: the link itself stats; through it, ELOOP */
	ck_assert_msg(rung_fs_stat(f.sb, "t/loop1", &e, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(e.target, "loop2");
	rung_fs_entry_release(&e);
	r = rung_fs_list(f.sb, "t/loop1", &v, &n, &err);
	expect_err(r, &err, ELOOP, "symlink_loop", "t/loop1");
	r = rung_fs_stat(f.sb, "t/loop1/x", &e, &err);
	ck_assert_int_eq(r, -ELOOP);
	/* rm -r and mv of a link act on the link */
	ck_assert_msg(rung_fs_remove(f.sb, "t/keep", true, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_fs_move(f.sb, "t/abs", "t/abs2", &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_fs_remove(f.sb, "t/abs2", true, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_fs_remove(f.sb, "t/host", true, &err) == 0, "%s", err.msg);
	o = sh_out(f.sb, "cat /work/keep/in/f; test -f /etc/passwd && echo etc; ls /work/t");
	ck_assert_str_eq(o, "k\netc\nloop1\nloop2\nup");
	free(o);
	/* a move into a link's place resolves the destination's parent confined too */
	ck_assert_msg(rung_fs_move(f.sb, "t/loop1", "t/up/work/keep/moved", &err) == 0, "%s",
		      err.msg);
	o = sh_out(f.sb, "readlink /work/keep/moved");
	ck_assert_str_eq(o, "loop2");
	free(o);
	host_canary_check(host);
	fx_close(&f);
}

/* A shell loop inside swaps /work/sw/d between a tree and a link to / while we remove it. */
static void case_swap(void)
{
	struct fx f;
	fx_open(&f, "swap");
	struct rung_err err = {0};
	sh_ok(f.sb, "mkdir -p /work/keep/in && echo k > /work/keep/in/f && mkdir -p /work/sw");
	const char *argv[] = {
	    "/bin/sh", "-c",
	    "cd /work/sw; while :; do mkdir -p d/s/t 2>/dev/null; "
	    "touch d/s/t/f d/s/g 2>/dev/null; rm -rf d; ln -s /work/keep d; rm -f d; "
	    "ln -s / d; rm -f d; done",
	    NULL};
	struct rung_proc_req req = {.argv = argv};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	ck_assert_msg(rung_proc_start(f.sb, &req, h, &err) == 0, "%s", err.msg);
	unsigned ok = 0;
	for (int i = 0; i < 300; i++) {
		int r = rung_fs_remove(f.sb, "/work/sw/d", true, &err);
		if (r == 0)
			ok++;
		else
			ck_assert_msg(r == -ENOENT || r == -ENOTEMPTY || r == -ENOTDIR ||
					  r == -EISDIR,
				      "%d %s", r, err.msg);
		struct rung_fs_entry *v;
		size_t n;
		if (rung_fs_list(f.sb, "/work/sw/d", &v, &n, &err) == 0)
			rung_fs_entries_free(v, n);
	}
	ck_assert_msg(rung_proc_kill(f.sb, h, &err) == 0, "%s", err.msg);
	char *o =
	    sh_out(f.sb, "cat /work/keep/in/f; test -f /etc/passwd && test -x /bin/sh && echo ok");
	ck_assert_str_eq(o, "k\nok");
	free(o);
	ck_assert_msg(ok > 0, "no remove succeeded in 300 tries");
	fx_close(&f);
}

/* Processes in the sandbox (its cgroup's pids.current; 0 where stats do not come from a
 * cgroup), once the agent's handlers of earlier requests have gone (they exit on their own). */
static uint64_t sandbox_pids(struct rung_sandbox *sb, uint64_t want)
{
	struct rung_stats st;
	struct rung_err err = {0};
	for (int i = 0; i < 50; i++) {
		ck_assert_msg(rung_stats(sb, &st, &err) == 0, "%s", err.msg);
		if (!st.from_cgroup || st.pids_current <= want)
			break;
		usleep(100000);
	}
	if (st.from_cgroup && st.pids_current > want) /* what stayed, for the failure's report */
		rung_test_cgroup_dump(rung_sandbox_id(sb));
	return st.from_cgroup ? st.pids_current : 0;
}

/* 100 cycles of every operation leave no fd in this (the calling) process and no process in
 * the sandbox. */
static void case_cycles(void)
{
	struct fx f;
	fx_open(&f, "cycles");
	struct rung_err err = {0};
	struct rung_fs_entry e, *v;
	size_t n;
	/* one warm-up cycle: lazily opened things (the store, the cgroup root) stay open */
	ck_assert_msg(rung_fs_mkdir(f.sb, "c/d", 0, true, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_fs_remove(f.sb, "c", true, &err) == 0, "%s", err.msg);
	int fds = rung_test_count_fds();
	uint64_t pids = sandbox_pids(f.sb, 1);
	for (int i = 0; i < 100; i++) {
		ck_assert_msg(rung_fs_mkdir(f.sb, "c/d", 0, true, &err) == 0, "%s", err.msg);
		ck_assert_msg(rung_fs_move(f.sb, "c/d", "c/e", &err) == 0, "%s", err.msg);
		ck_assert_msg(rung_fs_list(f.sb, "c", &v, &n, &err) == 0, "%s", err.msg);
		ck_assert_uint_eq(n, 1);
		rung_fs_entries_free(v, n);
		ck_assert_msg(rung_fs_stat(f.sb, "c/e", &e, &err) == 0, "%s", err.msg);
		rung_fs_entry_release(&e);
		ck_assert_int_eq(rung_fs_stat(f.sb, "c/nope", &e, &err), -ENOENT);
		ck_assert_msg(rung_fs_remove(f.sb, "c", true, &err) == 0, "%s", err.msg);
	}
	ck_assert_int_eq(rung_test_count_fds(), fds);
	ck_assert_uint_eq(sandbox_pids(f.sb, pids), pids);
	fx_close(&f);
}

void fs_cases_run(const struct fs_env *e, enum fs_case c)
{
	env = e;
	e->require();
	switch (c) {
	case FS_OPS:
		case_ops();
		break;
	case FS_ERRORS:
		case_errors();
		break;
	case FS_SYMLINKS:
		case_symlinks();
		break;
	case FS_SWAP:
		case_swap();
		break;
	case FS_CYCLES:
		case_cycles();
		break;
	}
}
