/*
 * tests/check_e2e_cp_basic.c: rung_cp_upload / rung_cp_download (docs/files.md, "Copying
 * trees") on the spine rung (spine_router: the vm rung in the nested stage). A tree with
 * modes, an empty dir and an inside symlink round-trips byte for byte; hostile tars are
 * refused naming the entry both ways; the download bound is -EFBIG naming it; 100 cycles
 * leak no fd.
 */
#include <archive.h>
#include <archive_entry.h>
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

struct ent {
	const char *name;
	unsigned type, mode;
	const char *data; /* file: contents; symlink: target */
};

/* A tar of v[0..n) in an unlinked temporary file, positioned at 0. */
static int make_tar(const struct ent *v, size_t n)
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

static struct rung_sandbox *open_sb(struct rung_router **r)
{
	*r = spine_router(NULL);
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(*r, "cp", "t", "k", &s, NULL);
	rung_spec_release(&s);
	return sb;
}

static void close_sb(struct rung_router *r, struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(r, rung_sandbox_id(sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(sb);
	rung_router_free(r);
}

static int sh(struct rung_sandbox *sb, const char *script)
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

START_TEST(test_round_trip)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r;
	struct rung_sandbox *sb = open_sb(&r);
	struct rung_err err = {0};
	int in = make_tar(tree, sizeof(tree) / sizeof(tree[0]));
	ck_assert_msg(rung_cp_upload(sb, in, "/tmp/up", NULL, &err) == 0, "%s", err.msg);
	close(in);
	ck_assert_int_eq(sh(sb, "test \"$(cat /tmp/up/d/a)\" = alpha && test -x /tmp/up/d/x && "
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
END_TEST

static void refused(struct rung_sandbox *sb, const struct ent *v, size_t n, int code,
		    const char *named)
{
	struct rung_err err = {0};
	int fd = make_tar(v, n);
	ck_assert_int_eq(rung_cp_upload(sb, fd, "/tmp/h", NULL, &err), -code);
	ck_assert_msg(strstr(err.msg, named), "'%s' does not name '%s'", err.msg, named);
	close(fd);
}

START_TEST(test_hostile)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r;
	struct rung_sandbox *sb = open_sb(&r);
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
	ck_assert_int_eq(sh(sb, "test ! -e /tmp/escape && test ! -e /etc/evil"), 0);

	/* download: links out of the tree, a fifo; the bound */
	struct rung_err err = {0};
	FILE *f = tmpfile();
	ck_assert_int_eq(sh(sb, "mkdir -p /tmp/o1 /tmp/o2 /tmp/o3 && ln -s /etc/passwd /tmp/o1/abs "
				"&& ln -s ../../etc /tmp/o2/rel && mkfifo /tmp/o3/ff"), 0);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o1", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'abs'"), "%s", err.msg);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o2", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'rel'"), "%s", err.msg);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o3", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'ff'"), "%s", err.msg);
	/* lexically inside, but l1/.. climbs from where l1 points (the root): out */
	ck_assert_int_eq(sh(sb, "mkdir -p /tmp/o4/d1/d2 && ln -s ../.. /tmp/o4/d1/d2/l1 && "
				"ln -s d1/d2/l1/.. /tmp/o4/l2"), 0);
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/o4", fileno(f), NULL, &err), -EPERM);
	ck_assert_msg(strstr(err.msg, "'l2'"), "%s", err.msg);
	ck_assert_int_eq(sh(sb, "mkdir -p /tmp/big && head -c 5000 /dev/zero > /tmp/big/f"), 0);
	struct rung_cp_opts o = {.max_bytes = 4096};
	ck_assert_int_eq(rung_cp_download(sb, "/tmp/big", fileno(f), &o, &err), -EFBIG);
	ck_assert_msg(strstr(err.msg, "4096 bytes"), "%s", err.msg);
	fclose(f);
	close_sb(r, sb);
}
END_TEST

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

START_TEST(test_cycles)
{
	RUNG_REQUIRE_ROOT();
	struct rung_router *r;
	struct rung_sandbox *sb = open_sb(&r);
	struct rung_err err = {0};
	int before = count_fds();
	for (int i = 0; i < 100; i++) {
		int in = make_tar(tree, sizeof(tree) / sizeof(tree[0]));
		ck_assert_msg(rung_cp_upload(sb, in, "/tmp/cy", NULL, &err) == 0, "%s", err.msg);
		close(in);
		FILE *f = tmpfile();
		ck_assert_msg(rung_cp_download(sb, "/tmp/cy", fileno(f), NULL, &err) == 0, "%s",
			      err.msg);
		fclose(f);
	}
	ck_assert_int_eq(count_fds(), before);
	close_sb(r, sb);
}
END_TEST

/* `rung cp` with host directories: a round trip; a refused download leaves nothing. */
START_TEST(test_cli_dirs)
{
	RUNG_REQUIRE_ROOT();
	char *sd = NULL;
	struct rung_router *r = spine_router(&sd);
	struct rung_spec sp;
	rung_spec_init(&sp);
	sp.kind = strdup("k");
	struct rung_sandbox *sb = spine_acquire(r, "cp", "cli", "k", &sp, NULL);
	rung_spec_release(&sp);
	char src[256], out[256], bad[256], up[300], cmd[4096];
	snprintf(src, sizeof(src), "%s/src", spine_base());
	snprintf(out, sizeof(out), "%s/out", spine_base());
	snprintf(bad, sizeof(bad), "%s/bad", spine_base());
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/a/e && printf one > %s/a/f && chmod 701 %s/a/f && "
		 "ln -s f %s/a/l && ln -s ../a %s/a/e/up && i=0 && while [ $i -lt 300 ]; do "
		 "mkdir -p %s/m/d$((i %% 17)) && head -c $((i * 37)) /dev/urandom > "
		 "%s/m/d$((i %% 17))/f$i; i=$((i + 1)); done", src, src, src, src, src, src, src);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(up, sizeof(up), "%s:/tmp/cli", rung_sandbox_id(sb));
	const char *a1[] = {"--state-dir", sd, "cp", src, up, NULL};
	struct spine_run res;
	spine_cli_run(&res, NULL, a1);
	/* symlinks inside the tree travel; no progress display when stderr is no terminal */
	ck_assert_msg(res.status == 0, "%d %s", res.status, res.err);
	ck_assert_msg(!strstr(res.err, "entries"), "%s", res.err);
	spine_run_release(&res);
	const char *a2[] = {"--state-dir", sd, "cp", up, out, NULL};
	spine_cli_run(&res, NULL, a2);
	ck_assert_msg(res.status == 0, "%d %s", res.status, res.err);
	spine_run_release(&res);
	snprintf(cmd, sizeof(cmd), "cd %s && test \"$(cat a/f)\" = one && test -d a/e && "
		 "test \"$(stat -c %%a a/f)\" = 701 && test \"$(readlink a/l)\" = f && "
		 "test \"$(readlink a/e/up)\" = ../a && diff -r --no-dereference %s %s", out, src,
		 out);
	ck_assert_int_eq(system(cmd), 0);
	const char *a4[] = {"--state-dir", sd, "cp", "--max-bytes", "2", up, bad, NULL};
	spine_cli_run(&res, NULL, a4);
	ck_assert_msg(res.status == 1 && strstr(res.err, "bound of 2 bytes"), "%d %s", res.status,
		      res.err);
	spine_run_release(&res);
	ck_assert_int_eq(sh(sb, "ln -s /etc /tmp/cli/a/out"), 0);
	const char *a3[] = {"--state-dir", sd, "cp", up, bad, NULL};
	spine_cli_run(&res, NULL, a3);
	ck_assert_msg(res.status == 1 && strstr(res.err, "'a/out'"), "%d %s", res.status, res.err);
	spine_run_release(&res);
	snprintf(cmd, sizeof(cmd), "ls -d %s* 2>/dev/null | grep -q .", bad);
	ck_assert_int_ne(system(cmd), 0); /* nothing partial beside it */
	free(sd);
	close_sb(r, sb);
}
END_TEST

Suite *e2e_cp_basic_suite(void)
{
	Suite *s = suite_create("e2e_cp_basic");
	TCase *tc = spine_tcase(s, "cp", 300);
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_hostile);
	tcase_add_test(tc, test_cycles);
	tcase_add_test(tc, test_cli_dirs);
	return s;
}
