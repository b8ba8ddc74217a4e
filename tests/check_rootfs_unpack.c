/* tests/check_rootfs_unpack.c: layer unpacking: whiteouts and every hostile-layer case. */
#include <archive.h>
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/rootfs.h"
#include "tests/lib/testutil.h"

struct fixture {
	char *tmp;
	char root[4096], tar[4096], sentinel[4096];
	int n_before;
};

static void fx_init(struct fixture *f)
{
	f->tmp = rung_test_tmpdir("rfs-unpack");
	ck_assert_ptr_nonnull(f->tmp);
	snprintf(f->root, sizeof(f->root), "%s/root", f->tmp);
	snprintf(f->tar, sizeof(f->tar), "%s/layer.tar", f->tmp);
	snprintf(f->sentinel, sizeof(f->sentinel), "%s/sentinel", f->tmp);
	ck_assert_int_eq(mkdir(f->root, 0755), 0);
	int fd = open(f->sentinel, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "safe", 4), 4);
	close(fd);
}

static int fx_unpack(struct fixture *f, struct rfs_unpack_stats *st, struct rung_err *err)
{
	f->n_before = tb_count_dir(f->tmp);
	int fd = open(f->tar, O_RDONLY | O_CLOEXEC);
	int dfd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ck_assert(fd >= 0 && dfd >= 0);
	int r = rfs_layer_unpack(fd, dfd, st, err);
	close(fd);
	close(dfd);
	return r;
}

/* Nothing outside root changed: same entries in tmp, sentinel intact. */
static void fx_assert_untouched(struct fixture *f)
{
	char buf[64];
	ck_assert_int_eq(tb_count_dir(f->tmp), f->n_before);
	ck_assert_int_eq(tb_read(f->sentinel, buf, sizeof(buf)), 4);
	ck_assert_str_eq(buf, "safe");
	struct stat st;
	ck_assert_int_eq(stat(f->sentinel, &st), 0);
	ck_assert_int_eq(st.st_nlink, 1);
}

static void fx_done(struct fixture *f)
{
	struct rung_err err = { 0 };
	rung_rm_rf(f->tmp, &err);
	free(f->tmp);
}

static void refused(struct fixture *f, const char *entry_substr, const char *why_substr)
{
	struct rung_err err = { 0 };
	int r = fx_unpack(f, NULL, &err);
	ck_assert_msg(r < 0, "hostile layer was accepted (want error naming %s)", entry_substr);
	ck_assert_msg(strstr(err.msg, entry_substr), "error '%s' does not name '%s'", err.msg,
		      entry_substr);
	if (why_substr)
		ck_assert_msg(strstr(err.msg, why_substr), "error '%s' lacks '%s'", err.msg,
			      why_substr);
	fx_assert_untouched(f);
}

START_TEST(test_dotdot)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_file(a, "ok.txt", "fine", 0644);
	tb_file(a, "../sentinel", "pwned", 0644);
	tb_close(a);
	refused(&f, "../sentinel", "'..'");
	fx_done(&f);
}
END_TEST

START_TEST(test_dotdot_deep)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_dir(a, "a/", 0755);
	tb_file(a, "a/../../evil-new", "pwned", 0644);
	tb_close(a);
	refused(&f, "a/../../evil-new", NULL);
	fx_done(&f);
}
END_TEST

START_TEST(test_absolute)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	char abs[4200];
	snprintf(abs, sizeof(abs), "%s/abs-evil", f.tmp);
	struct archive *a = tb_open(f.tar);
	tb_file(a, abs, "pwned", 0644);
	tb_close(a);
	refused(&f, "abs-evil", "absolute");
	ck_assert_int_ne(access(abs, F_OK), 0);
	fx_done(&f);
}
END_TEST

START_TEST(test_symlink_out_then_write)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_symlink(a, "evil", f.tmp); /* absolute, points at the parent of the layer dir */
	tb_file(a, "evil/sentinel", "pwned", 0644);
	tb_close(a);
	refused(&f, "evil/sentinel", "symlink");
	fx_done(&f);
}
END_TEST

START_TEST(test_symlink_relative_out_then_write)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_dir(a, "d/", 0755);
	tb_symlink(a, "d/up", "../..");
	tb_file(a, "d/up/new-outside", "pwned", 0644);
	tb_close(a);
	refused(&f, "d/up/new-outside", "symlink");
	fx_done(&f);
}
END_TEST

START_TEST(test_hardlink_out)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	/* Absolute target. */
	struct archive *a = tb_open(f.tar);
	tb_hardlink(a, "hl-abs", f.sentinel);
	tb_close(a);
	refused(&f, "hl-abs", NULL);
	/* ".." target. */
	a = tb_open(f.tar);
	tb_hardlink(a, "hl-dotdot", "../sentinel");
	tb_close(a);
	refused(&f, "hl-dotdot", NULL);
	/* Through a symlink that leaves the tree. */
	a = tb_open(f.tar);
	tb_symlink(a, "out", f.tmp);
	tb_hardlink(a, "hl-sym", "out/sentinel");
	tb_close(a);
	refused(&f, "hl-sym", "not inside");
	fx_done(&f);
}
END_TEST

START_TEST(test_hardlink_inside_ok)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_file(a, "a", "content", 0644);
	tb_hardlink(a, "b", "a");
	tb_close(a);
	struct rung_err err = { 0 };
	ck_assert_msg(fx_unpack(&f, NULL, &err) == 0, "%s", err.msg);
	char p[4200];
	struct stat st;
	snprintf(p, sizeof(p), "%s/b", f.root);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_nlink, 2);
	fx_done(&f);
}
END_TEST

START_TEST(test_device_node)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_dir(a, "dev/", 0755);
	tb_chardev(a, "dev/mem", 1, 1);
	tb_close(a);
	refused(&f, "dev/mem", "device");
	/* A 0:0 char device in the tar is not a whiteout we made: refused too. */
	a = tb_open(f.tar);
	tb_chardev(a, "fake-whiteout", 0, 0);
	tb_close(a);
	refused(&f, "fake-whiteout", "device");
	fx_done(&f);
}
END_TEST

START_TEST(test_setuid_stripped)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_file(a, "su", "#!/bin/false\n", 04755);
	tb_file(a, "wall", "#!/bin/false\n", 02755);
	tb_close(a);
	struct rung_err err = { 0 };
	struct rfs_unpack_stats st;
	ck_assert_msg(fx_unpack(&f, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(st.stripped_suid, 2);
	char p[4200];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/su", f.root);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/wall", f.root);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0755);
	fx_done(&f);
}
END_TEST

START_TEST(test_ids)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_file_owned(a, "owned", "x", 0600, 1234, 5678);
	tb_close(a);
	struct rung_err err = { 0 };
	ck_assert_msg(fx_unpack(&f, NULL, &err) == 0, "%s", err.msg);
	char p[4200];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/owned", f.root);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_uid, 1234);
	ck_assert_int_eq(sb.st_gid, 5678);
	/* Shift for a user namespace based at 100000. */
	ck_assert_msg(rfs_layer_chown_shift(f.root, 100000, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(sb.st_uid, 101234);
	ck_assert_int_eq(sb.st_gid, 105678);
	/* Out of range ids are refused. */
	fx_done(&f);
	fx_init(&f);
	a = tb_open(f.tar);
	tb_file_owned(a, "bigid", "x", 0600, 70000, 0);
	tb_close(a);
	refused(&f, "bigid", "uid/gid");
	fx_done(&f);
}
END_TEST

START_TEST(test_whiteouts)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_dir(a, "etc/", 0755);
	tb_file(a, "etc/.wh.hostname", "", 0644);
	tb_dir(a, "opq/", 0755);
	tb_file(a, "opq/.wh..wh..opq", "", 0644);
	tb_file(a, "opq/kept", "new", 0644);
	tb_file(a, "deep/dir/.wh.gone", "", 0644); /* parents missing from the tar */
	tb_dir(a, ".wh..wh.plnk/", 0700);               /* aufs bookkeeping: skipped */
	tb_file(a, ".wh..wh.plnk/123.456", "x", 0644);
	tb_file(a, ".wh..wh.aufs", "", 0644);
	tb_close(a);
	struct rung_err err = { 0 };
	struct rfs_unpack_stats st;
	ck_assert_msg(fx_unpack(&f, &st, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(st.whiteouts, 2);
	ck_assert_int_eq(st.opaque_dirs, 1);
	char p[4200], v[8];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/etc/hostname", f.root);
	ck_assert_int_eq(lstat(p, &sb), 0);
	ck_assert(S_ISCHR(sb.st_mode));
	ck_assert_int_eq(sb.st_rdev, makedev(0, 0));
	snprintf(p, sizeof(p), "%s/etc/.wh.hostname", f.root);
	ck_assert_int_ne(lstat(p, &sb), 0);
	snprintf(p, sizeof(p), "%s/opq", f.root);
	ck_assert_int_eq(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
	ck_assert_int_eq(v[0], 'y');
	snprintf(p, sizeof(p), "%s/deep/dir/gone", f.root);
	ck_assert_int_eq(lstat(p, &sb), 0);
	ck_assert(S_ISCHR(sb.st_mode));
	ck_assert_int_eq(tb_count_dir(f.root), 3); /* etc, opq, deep: nothing from aufs */
	fx_done(&f);
}
END_TEST

/* A rootless store: whiteouts still work, opaque dirs use user.overlay.opaque. */
START_TEST(test_unprivileged)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	struct archive *a = tb_open(f.tar);
	tb_dir(a, "etc/", 0755);
	tb_file(a, "etc/.wh.hostname", "", 0644);
	tb_dir(a, "opq/", 0755);
	tb_file(a, "opq/.wh..wh..opq", "", 0644);
	tb_file_owned(a, "owned", "x", 0644, 1234, 1234);
	tb_close(a);
	ck_assert_int_eq(chown(f.root, 65534, 65534), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct rung_err err = { 0 };
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		int r = fx_unpack(&f, NULL, &err);
		if (r < 0)
			fprintf(stderr, "unprivileged unpack: %s\n", err.msg);
		_exit(r < 0 ? 1 : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unprivileged unpack failed");
	char p[4200], v[8];
	struct stat sb;
	snprintf(p, sizeof(p), "%s/etc/hostname", f.root);
	ck_assert_int_eq(lstat(p, &sb), 0);
	ck_assert(S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0));
	snprintf(p, sizeof(p), "%s/opq", f.root);
	ck_assert_int_eq(getxattr(p, "user.overlay.opaque", v, sizeof(v)), 1);
	ck_assert_int_lt(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 0);
	snprintf(p, sizeof(p), "%s/owned", f.root);
	ck_assert_int_eq(lstat(p, &sb), 0);
	ck_assert_int_eq(sb.st_uid, 65534); /* ownership left to the caller */
	fx_done(&f);
}
END_TEST

START_TEST(test_replace_symlink_with_file)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	/* A later entry replaces a symlink; the write must not follow the old link. */
	struct archive *a = tb_open(f.tar);
	tb_symlink(a, "x", f.sentinel);
	tb_file(a, "x", "replaced", 0644);
	tb_close(a);
	struct rung_err err = { 0 };
	ck_assert_msg(fx_unpack(&f, NULL, &err) == 0, "%s", err.msg);
	fx_assert_untouched(&f);
	char p[4200], buf[32];
	snprintf(p, sizeof(p), "%s/x", f.root);
	ck_assert_int_eq(tb_read(p, buf, sizeof(buf)), 8);
	ck_assert_str_eq(buf, "replaced");
	fx_done(&f);
}
END_TEST

START_TEST(test_garbage)
{
	RUNG_REQUIRE_ROOT();
	struct fixture f;
	fx_init(&f);
	int fd = open(f.tar, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	char junk[3000];
	memset(junk, 'Z', sizeof(junk));
	ck_assert_int_eq(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	struct rung_err err = { 0 };
	ck_assert_int_lt(fx_unpack(&f, NULL, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "layer"));
	fx_done(&f);
}
END_TEST

Suite *rootfs_unpack_suite(void)
{
	Suite *s = suite_create("rootfs_unpack");
	TCase *tc = tcase_create("unpack");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_dotdot);
	tcase_add_test(tc, test_dotdot_deep);
	tcase_add_test(tc, test_absolute);
	tcase_add_test(tc, test_symlink_out_then_write);
	tcase_add_test(tc, test_symlink_relative_out_then_write);
	tcase_add_test(tc, test_hardlink_out);
	tcase_add_test(tc, test_hardlink_inside_ok);
	tcase_add_test(tc, test_device_node);
	tcase_add_test(tc, test_setuid_stripped);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_whiteouts);
	tcase_add_test(tc, test_replace_symlink_with_file);
	tcase_add_test(tc, test_unprivileged);
	tcase_add_test(tc, test_garbage);
	suite_add_tcase(s, tc);
	return s;
}
