/*
 * tests/lib/cp_cases.c: `rung cp` cases shared by the e2e_cp_* suites (rung_cp_upload /
 * rung_cp_download, docs/files.md "Copying trees"), on the rung the suite's env gives: a tree
 * with modes, mtimes, an empty dir and symlinks inside round-trips byte for byte; hostile tars
 * are refused naming the entry both ways; the download bound is -EFBIG naming it; 100 cycles
 * leak no fd, thread or process (host side and inside).
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/cp_cases.h"
#include "tests/lib/testutil.h"

static const struct cp_env *env;

struct ent {
	const char *name;
	unsigned type, mode;
	const char *data; /* file: contents; symlink: target */
};

static int cp_make_tar(const struct ent *v, size_t n)
{
	FILE *f = tmpfile();
	ck_assert_ptr_nonnull(f);
	int fd = dup(fileno(f));
	fclose(f);
	struct archive *w = archive_write_new();
	archive_write_set_format_pax_restricted(w);
	ck_assert_int_eq(archive_write_open_fd(w, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, v[i].name);
		archive_entry_set_filetype(e, v[i].type);
		archive_entry_set_perm(e, v[i].mode);
		archive_entry_set_mtime(e, 1500000000, 0);
		size_t len = v[i].type == AE_IFREG && v[i].data ? strlen(v[i].data) : 0;
		archive_entry_set_size(e, (la_int64_t)len);
		if (v[i].type == AE_IFLNK)
			archive_entry_set_symlink(e, v[i].data);
		if (v[i].type == AE_IFREG && !strcmp(v[i].name, "hard"))
			archive_entry_set_hardlink(e, "a");
		ck_assert_int_eq(archive_write_header(w, e), ARCHIVE_OK);
		if (len)
			archive_write_data(w, v[i].data, len);
		archive_entry_free(e);
	}
	archive_write_close(w);
	archive_write_free(w);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The entry called name in the tar on fd: its type, mode and contents (or target). */
static bool find_entry(int fd, const char *name, unsigned *type, unsigned *mode, char *buf,
		       size_t cap)
{
	lseek(fd, 0, SEEK_SET);
	struct archive *a = archive_read_new();
	archive_read_support_format_tar(a);
	ck_assert_int_eq(archive_read_open_fd(a, fd, 4096), ARCHIVE_OK);
	struct archive_entry *e;
	bool found = false;
	while (!found && archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *p = archive_entry_pathname(e);
		size_t pl = strlen(p), nl = strlen(name);
		if (!(pl == nl || (pl == nl + 1 && p[nl] == '/')) || strncmp(p, name, nl))
			continue; /* a directory's name ends with '/' */
		found = true;
		*type = archive_entry_filetype(e);
		*mode = archive_entry_perm(e);
		memset(buf, 0, cap);
		if (*type == AE_IFLNK)
			snprintf(buf, cap, "%s", archive_entry_symlink(e));
		else
			archive_read_data(a, buf, cap - 1);
	}
	archive_read_free(a);
	return found;
}

static struct rung_sandbox *open_sb(struct rung_router **r, const char *thread)
{
	*r = env->router();
	return env->acquire(*r, thread);
}

static void close_sb(struct rung_router *r, struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
}

static int cp_sh(struct rung_sandbox *sb, const char *script)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
	struct rung_exec_res res = {0};
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &req, &res, &err) == 0, "%s", err.msg);
	int code = res.exit_code;
	rung_exec_res_release(&res);
	return code;
}

static const struct ent tree[] = {
	{"d", AE_IFDIR, 0750, NULL},
	{"d/a", AE_IFREG, 0640, "alpha\n"},
	{"d/x", AE_IFREG, 0755, "#!/bin/sh\necho x\n"},
	{"d/empty", AE_IFDIR, 0700, NULL},
	{"./top", AE_IFREG, 0600, ""},
	{"deep/er/f", AE_IFREG, 0644, "parents made"},
	{"d/link", AE_IFLNK, 0777, "a"},
	{"d/up", AE_IFLNK, 0777, "../top"},
	{"d/dl", AE_IFLNK, 0777, "empty"},
};

static void case_round_trip(const char *thread)
{
	env->require();
	struct rung_router *r;
	struct rung_sandbox *sb = open_sb(&r, thread);
	struct rung_err err = {0};
	int in = cp_make_tar(tree, sizeof(tree) / sizeof(tree[0]));
	ck_assert_msg(rung_cp_upload(sb, in, "/tmp/up", NULL, &err) == 0, "%s", err.msg);
	close(in);
	ck_assert_int_eq(cp_sh(sb, "test \"$(cat /tmp/up/d/a)\" = alpha && test -x /tmp/up/d/x && "
				"test -d /tmp/up/d/empty && test -f /tmp/up/top && "
				"test \"$(cat /tmp/up/d/link)\" = alpha && test -L /tmp/up/d/up && "
				"test -d /tmp/up/d/dl && test \"$(readlink /tmp/up/d/up)\" = ../top && "
				"test \"$(stat -c %a /tmp/up/d)\" = 750 && "
				"test \"$(stat -c %a /tmp/up/d/empty)\" = 700 && "
				"test \"$(stat -c %Y /tmp/up/d)\" = 1500000000 && "
				"test \"$(stat -c %Y /tmp/up/d/a)\" = 1500000000 && "
				"test \"$(stat -c %Y /tmp/up/d/empty)\" = 1500000000"), 0);
	FILE *f = tmpfile();
	int out = fileno(f);
	ck_assert_msg(rung_cp_download(sb, "/tmp/up", out, NULL, &err) == 0, "%s", err.msg);
	unsigned type, mode;
	char buf[256];
	for (size_t i = 0; i < sizeof(tree) / sizeof(tree[0]); i++) {
		const char *name = tree[i].name[0] == '.' ? tree[i].name + 2 : tree[i].name;
		ck_assert_msg(find_entry(out, name, &type, &mode, buf, sizeof(buf)), "%s", name);
		ck_assert_uint_eq(type, tree[i].type);
		ck_assert_uint_eq(mode, tree[i].mode);
		if (type == AE_IFREG || type == AE_IFLNK)
			ck_assert_str_eq(buf, tree[i].data);
	}
	fclose(f);
	close_sb(r, sb);
}

static void refused(struct rung_sandbox *sb, const struct ent *v, size_t n, int code,
		    const char *named)
{
	struct rung_err err = {0};
	int fd = cp_make_tar(v, n);
	ck_assert_int_eq(rung_cp_upload(sb, fd, "/tmp/h", NULL, &err), -code);
	ck_assert_msg(strstr(err.msg, named), "'%s' does not name '%s'", err.msg, named);
	close(fd);
}

static void case_hostile(const char *thread)
{
	env->require();
	struct rung_router *r;
	struct rung_sandbox *sb = open_sb(&r, thread);
	const struct ent dotdot[] = {{"ok/../../escape", AE_IFREG, 0644, "x"}};
	const struct ent abs[] = {{"/etc/evil", AE_IFREG, 0644, "x"}};
	const struct ent fifo[] = {{"pipe", AE_IFIFO, 0644, NULL}};
	const struct ent chr[] = {{"null", AE_IFCHR, 0644, NULL}};
	const struct ent hard[] = {{"a", AE_IFREG, 0644, "x"}, {"hard", AE_IFREG, 0644, NULL}};
	const struct ent sym[] = {{"s", AE_IFLNK, 0777, "/etc/passwd"}};
	const struct ent symup[] = {{"d", AE_IFDIR, 0755, NULL}, {"d/s2", AE_IFLNK, 0777, "../.."}};
	const struct ent symvia[] = {{"d/s3", AE_IFLNK, 0777, "x/../../y"}};
	refused(sb, dotdot, 1, EPERM, "ok/../../escape");
	refused(sb, abs, 1, EPERM, "/etc/evil");
	refused(sb, fifo, 1, EPERM, "pipe");
	refused(sb, chr, 1, EPERM, "null");
	refused(sb, hard, 2, EPERM, "hard");
	refused(sb, sym, 1, EPERM, "'s'");
	refused(sb, symup, 2, EPERM, "'d/s2'");
	refused(sb, symvia, 1, EPERM, "'d/s3'");
	ck_assert_int_eq(cp_sh(sb, "test ! -e /tmp/escape && test ! -e /etc/evil"), 0);
	/* a destination under a file: the agent's answer, not a broken connection */
	struct rung_err derr = {0};
	int tfd = cp_make_tar(tree, sizeof(tree) / sizeof(tree[0]));
	ck_assert_int_eq(rung_cp_upload(sb, tfd, "/etc/passwd/x", NULL, &derr), -ENOTDIR);
	ck_assert_msg(strstr(derr.msg, "/etc/passwd/x"), "%s", derr.msg);
	close(tfd);

	/* download: links out of the tree, a fifo; the bound */
	struct rung_err err = {0};
	FILE *f = tmpfile();
	ck_assert_int_eq(cp_sh(sb, "mkdir -p /tmp/o1 /tmp/o2 /tmp/o3 && ln -s /etc/passwd /tmp/o1/abs "
				"&& ln -s ../../etc /tmp/o2/rel && mkfifo /tmp/o3/ff"), 0);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o1", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'abs'"), "%s", err.msg);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o2", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'rel'"), "%s", err.msg);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o3", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'ff'"), "%s", err.msg);
	/* lexically inside, but l1/.. climbs from where l1 points (the root): out */
	ck_assert_int_eq(cp_sh(sb, "mkdir -p /tmp/o4/d1/d2 && ln -s ../.. /tmp/o4/d1/d2/l1 && "
				"ln -s d1/d2/l1/.. /tmp/o4/l2"), 0);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o4", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'l2'"), "%s", err.msg);
	ck_assert_int_eq(cp_sh(sb, "mkdir -p /tmp/big && head -c 5000 /dev/zero > /tmp/big/f"), 0);
	struct rung_cp_opts o = {.max_bytes = 4096};
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/big", fileno(f), &o, &err), -EFBIG);
	ck_assert_msg(strstr(err.msg, "4096 bytes"), "%s", err.msg);
	fclose(f);
	close_sb(r, sb);
}

static void case_cycles(const char *thread)
{
	env->require();
	struct rung_router *r;
	struct rung_sandbox *sb = open_sb(&r, thread);
	struct rung_err err = {0};
	/* the sandbox's processes now (the counting shell's own included, as after) */
	ck_assert_int_eq(cp_sh(sb, "n=$(" RUNG_TEST_PROCS_SH "); echo $n > /tmp/procs0"), 0);
	int before = rung_test_count_fds(), tasks = rung_test_count_tasks(getpid());
	for (int i = 0; i < 100; i++) {
		int in = cp_make_tar(tree, sizeof(tree) / sizeof(tree[0]));
		ck_assert_msg(rung_cp_upload(sb, in, "/tmp/cy", NULL, &err) == 0, "%s", err.msg);
		close(in);
		FILE *f = tmpfile();
		ck_assert_msg(rung_cp_download(sb, "/tmp/cy", fileno(f), NULL, &err) == 0, "%s",
			      err.msg);
		fclose(f);
	}
	ck_assert_int_eq(rung_test_count_fds(), before);
	ck_assert_int_eq(rung_test_count_tasks(getpid()), tasks);
	/* every handler gone (reaped a moment after its connection closed) */
	ck_assert_int_eq(cp_sh(sb, "i=0; while [ $i -lt 50 ]; do "
				   "n=$(" RUNG_TEST_PROCS_SH "); [ $n -le $(cat /tmp/procs0) ] && exit 0; "
				   "sleep 0.1; i=$((i + 1)); done; exit 1"), 0);
	close_sb(r, sb);
}

void cp_cases_run(const struct cp_env *e, enum cp_case c)
{
	env = e;
	switch (c) {
	case CP_ROUND_TRIP:
		case_round_trip("rt");
		break;
	case CP_HOSTILE:
		case_hostile("hostile");
		break;
	case CP_CYCLES:
		case_cycles("cycles");
		break;
	}
}
