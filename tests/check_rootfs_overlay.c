/*
 * tests/check_rootfs_overlay.c: an overlay whose layers are given relative to a base dir
 * (rfs_overlay_relative): it mounts through both paths (lowerdir+ and the classic mount(2)
 * option), its line in /proc/self/mountinfo names no host path, and the caller's working
 * directory is its own again afterwards. The same for the idmapped stack
 * (rfs_overlay_apply_idmapped, rung-oci's over containerd's snapshots), staged and made
 * relative by rootfs itself.
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "rootfs/rfs.h"
#include "tests/lib/testutil.h"

static void mk(const char *base, const char *rel)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s", p);
}

static void touch(const char *base, const char *rel)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "create %s", p);
	close(fd);
}

/* The mountinfo line whose mount point is target (malloc'd), or NULL. */
static char *mountinfo_line(const char *target)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	ck_assert_ptr_nonnull(f);
	char line[8192], *found = NULL;
	while (!found && fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX];
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && !strcmp(mp, target))
			found = strdup(line);
	}
	fclose(f);
	return found;
}

/* A two-layer stack under base, at the paths relative to base that rel names (the top layer,
 * holding "top"; the bottom one, holding "bottom"; the upper dir; the work dir; the mount
 * point), all made: their full paths in s, its plan in plan. */
struct stack {
	char l0[PATH_MAX], l1[PATH_MAX], up[PATH_MAX], wk[PATH_MAX], root[PATH_MAX];
};

static void stack_make(const char *base, const char *const rel[5], struct stack *s,
		       struct rfs_mount_plan *plan)
{
	char *const at[] = {s->l0, s->l1, s->up, s->wk, s->root};
	struct rung_err err = {0};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(at); i++) {
		snprintf(at[i], PATH_MAX, "%s/%s", base, rel[i]);
		ck_assert_msg(rung_mkdir_p(at[i], 0755, &err) == 0, "%s", err.msg);
	}
	touch(s->l0, "top");
	touch(s->l1, "bottom");
	const char *lowers[] = {s->l0, s->l1, NULL};
	ck_assert_msg(rfs_overlay_plan(lowers, s->up, s->wk, s->root, plan, &err) == 0, "%s",
		      err.msg);
}

START_TEST(test_relative_layers)
{
	RUNG_REQUIRE_ROOT();
	char *base = rung_test_tmpdir("ovl-rel");
	ck_assert_ptr_nonnull(base);
	struct stack stk;
	struct rfs_mount_plan plan;
	struct rung_err err = {0};
	stack_make(base, (const char *const[]){"lower/0", "lower/1", "disk/upper", "disk/ovlwork",
					       "root"},
		   &stk, &plan);
	const char *up = stk.up, *root = stk.root;
	char p[PATH_MAX + 64];
	ck_assert_msg(rfs_overlay_relative(&plan, base, &err) == 0, "%s", err.msg);
	ck_assert_str_eq(plan.data,
			 "lowerdir=lower/0:lower/1,upperdir=disk/upper,workdir=disk/ovlwork");
	plan.classic = _i; /* 1: the classic mount(2) option, as kernels before 6.8 take */
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	char cwd[PATH_MAX], after[PATH_MAX];
	ck_assert_int_eq(chdir("/"), 0);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_msg(rfs_overlay_apply(&plan, &err) == 0, "%s", err.msg);
	ck_assert_ptr_nonnull(getcwd(after, sizeof(after)));
	ck_assert_str_eq(after, cwd);
	/* both layers and the upper dir are in use */
	struct stat st;
	snprintf(p, sizeof(p), "%s/top", root);
	ck_assert_int_eq(stat(p, &st), 0);
	snprintf(p, sizeof(p), "%s/bottom", root);
	ck_assert_int_eq(stat(p, &st), 0);
	touch(root, "new");
	snprintf(p, sizeof(p), "%s/new", up);
	ck_assert_int_eq(stat(p, &st), 0);
	/* the mount's options name the layers relative to base, never base itself */
	char *line = mountinfo_line(root);
	ck_assert_ptr_nonnull(line);
	char *opts = strstr(line, " - overlay ");
	ck_assert_msg(opts, "not an overlay: %s", line);
	ck_assert_msg(strstr(opts, "lower/0") && strstr(opts, "lower/1") &&
			  strstr(opts, "upperdir=disk/upper") &&
			  strstr(opts, "workdir=disk/ovlwork"),
		      "mountinfo: %s", line);
	ck_assert_msg(!strstr(opts, base), "mountinfo names the host path %s: %s", base, line);
	free(line);
	ck_assert_int_eq(umount2(root, MNT_DETACH), 0);
	ck_assert_int_eq(rung_test_rmtree(base), 0);
	free(base);
}
END_TEST

/* mountinfo's options for the layers relative to a staging dir: one lowerdir+ each (Linux
 * 6.8), or the classic lowerdir=A:B. */
static bool relative_options(const char *line)
{
	const char *opts = strstr(line, " - overlay ");
	return opts && (strstr(opts, "lowerdir+=0,lowerdir+=1,") || strstr(opts, "lowerdir=0:1,")) &&
	       strstr(opts, "upperdir=u/fs,workdir=u/work");
}

/* The idmapped stack as rung-oci makes it over containerd's snapshot (two lowers, the upper
 * and work dirs side by side in one snapshot dir): the lowers seen through the user
 * namespace's mapping, the upper written as it is, the mount's options relative to the
 * staging dir (no host path), nothing staged left there, only the overlay mounted, the
 * working directory the caller's again. Both mount paths (_i: classic). */
START_TEST(test_idmapped_stack)
{
	RUNG_REQUIRE_ROOT();
	char *base = rung_test_tmpdir("ovl-idmap");
	ck_assert_ptr_nonnull(base);
	struct stack stk;
	struct rfs_mount_plan plan;
	struct rung_err err = {0};
	stack_make(base, (const char *const[]){"l0", "l1", "snap/fs", "snap/work", "root"}, &stk,
		   &plan);
	const char *l0 = stk.l0, *up = stk.up, *wk = stk.wk, *root = stk.root;
	char scratch[PATH_MAX], p[PATH_MAX + 64];
	snprintf(scratch, sizeof(scratch), "%s/scratch", base);
	mk(base, "scratch");
	plan.classic = _i;
	pid_t kid = 0;
	int ufd = rung_test_userns(&kid);
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	char cwd[PATH_MAX], after[PATH_MAX];
	ck_assert_int_eq(chdir("/"), 0);
	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	int mounts = rung_test_count_mounts();
	/* a layer that is not there: named, and nothing staged or mounted is left */
	const char *bad[] = {l0, "/nonexistent-layer", NULL};
	struct rfs_mount_plan badplan;
	ck_assert_int_eq(rfs_overlay_plan(bad, up, wk, root, &badplan, &err), 0);
	ck_assert_int_eq(rfs_overlay_apply_idmapped(&badplan, ufd, scratch, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "lowerdir /nonexistent-layer"), "%s", err.msg);
	ck_assert_int_eq(rung_test_count_entries(scratch), 0);
	ck_assert_int_eq(rung_test_count_mounts(), mounts);
	int r = rfs_overlay_apply_idmapped(&plan, ufd, scratch, &err);
	kill(kid, SIGKILL);
	waitpid(kid, NULL, 0);
	close(ufd);
	ck_assert_msg(r == 0, "%s", err.msg);
	ck_assert_int_eq(rung_test_count_mounts(), mounts + 1); /* only the overlay */
	ck_assert_int_eq(rung_test_count_entries(scratch), 0);
	ck_assert_ptr_nonnull(getcwd(after, sizeof(after)));
	ck_assert_str_eq(after, cwd);
	struct stat st;
	snprintf(p, sizeof(p), "%s/top", root);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 100000); /* the layer's root, through the mapping */
	snprintf(p, sizeof(p), "%s/bottom", root);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 100000);
	touch(root, "new");
	snprintf(p, sizeof(p), "%s/new", up);
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 0); /* the upper is not idmapped */
	snprintf(p, sizeof(p), "%s/top", l0); /* the shared layer itself is unchanged */
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_uid, 0);
	char *line = mountinfo_line(root);
	ck_assert_ptr_nonnull(line);
	ck_assert_msg(relative_options(line), "mountinfo: %s", line);
	ck_assert_msg(!strstr(strstr(line, " - "), base), "mountinfo names the host path %s: %s",
		      base, line);
	free(line);
	ck_assert_int_eq(umount2(root, MNT_DETACH), 0);
	ck_assert_int_eq(rung_test_rmtree(base), 0);
	free(base);
}
END_TEST

START_TEST(test_relative_refused)
{
	const char *lowers[] = {"/a/l0", "/b/l1", NULL};
	struct rfs_mount_plan plan;
	struct rung_err err = {0};
	ck_assert_int_eq(rfs_overlay_plan(lowers, "/a/u", "/a/w", "/a/root", &plan, &err), 0);
	/* a layer outside base is named in the error, and the plan stays absolute */
	ck_assert_int_eq(rfs_overlay_relative(&plan, "/a", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "/b/l1") && strstr(err.msg, "'/a'"), "%s", err.msg);
	ck_assert_str_eq(plan.base, "");
	ck_assert_int_eq(rfs_overlay_relative(&plan, "/a/", &err), -EINVAL);
	ck_assert_int_eq(rfs_overlay_relative(&plan, "rel", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "base dir 'rel'"), "%s", err.msg);
	/* "/ab/x" is not below "/a" */
	const char *l2[] = {"/ab/x", NULL};
	ck_assert_int_eq(rfs_overlay_plan(l2, "/a/u", "/a/w", "/a/root", &plan, &err), 0);
	ck_assert_int_eq(rfs_overlay_relative(&plan, "/a", &err), -EINVAL);
	/* an idmapped stack takes absolute layers only */
	const char *l3[] = {"/a/l0", "/a/l1", NULL};
	ck_assert_int_eq(rfs_overlay_plan(l3, "/a/u", "/a/w", "/a/root", &plan, &err), 0);
	ck_assert_int_eq(rfs_overlay_relative(&plan, "/a", &err), 0);
	ck_assert_int_eq(rfs_overlay_apply_idmapped(&plan, 0, "/a/scratch", &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "relative to /a"), "%s", err.msg);
}
END_TEST

Suite *rootfs_overlay_suite(void)
{
	Suite *s = suite_create("rootfs_overlay");
	TCase *tc = tcase_create("relative");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_relative_layers, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("idmapped");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_idmapped_stack, 0, 2);
	suite_add_tcase(s, tc);
	tc = tcase_create("refused");
	tcase_add_test(tc, test_relative_refused);
	suite_add_tcase(s, tc);
	return s;
}
