/*
 * tests/check_e2e_container_kernel.c: the container rung where the kernel lacks something newer
 * than rung's floor (Linux 6.1, Debian 12). Run on the host's kernel by check-unit and on
 * Debian 12's own 6.1 by check-distro, so each case is exercised on both sides of the line.
 */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "rootfs/rfs.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

/* "6.1.0-57-cloud-amd64" >= major.minor */
static bool kernel_at_least(unsigned x, unsigned y)
{
	struct utsname u;
	unsigned a = 0, b = 0;
	ck_assert_int_eq(uname(&u), 0);
	ck_assert_int_eq(sscanf(u.release, "%u.%u", &a, &b), 2);
	return a > x || (a == x && b >= y);
}

/*
 * A state dir on tmpfs: the image's layers are idmapped into the sandbox's user namespace,
 * which tmpfs supports from Linux 6.3. Before that (Debian 12's 6.1) the kernel's bare
 * EINVAL used to surface as "idmap layer ...: Invalid argument"; now acquire fails with
 * EOPNOTSUPP naming tmpfs, 6.3 and this kernel. From 6.3 on the sandbox simply works.
 * In a private mount namespace, so a failing test leaves no tmpfs mounted on the host.
 */
START_TEST(test_store_on_tmpfs)
{
	CT_REQUIRE();
	ck_assert_int_eq(unshare(CLONE_NEWNS), 0);
	ck_assert_int_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	char state[4200], layout[4200];
	snprintf(state, sizeof(state), "%s/tmpfs-state", ct_tmp());
	snprintf(layout, sizeof(layout), "%s/layout", ct_tmp());
	ck_assert_int_eq(mkdir(state, 0711), 0);
	ck_assert_int_eq(mount("tmpfs", state, "tmpfs", 0, "mode=0711,size=256m"), 0);
	struct rung_err err = {0};
	struct rfs_store *st = NULL;
	struct rfs_image_info info = {0};
	ck_assert_msg(rfs_store_open(state, &st, &err) == 0 &&
			  rfs_image_import(st, layout, CT_IMAGE, NULL, NULL, &info, &err) == 0,
		      "import into the tmpfs store: %s", err.msg);
	rfs_image_info_release(&info);
	rfs_store_free(st);

	struct rung_router *r = ct_router(state);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_key k = {.scope = "kernel", .thread = "t", .agent = "tmpfs"};
	struct rung_sandbox *sb = NULL;
	bool created = false;
	int rc = rung_acquire(r, &k, &s, &sb, &created, &err);
	if (kernel_at_least(6, 3)) {
		ck_assert_msg(rc == 0, "acquire on a tmpfs store (Linux >= 6.3): %s", err.msg);
		char *out = ct_sh(sb, "echo ok; id -u");
		ck_assert_str_eq(out, "ok\n0\n");
		free(out);
		ck_assert_int_eq(rung_dispose(r, rung_sandbox_id(sb), "kernel", &err), 0);
		rung_sandbox_close(sb);
	} else {
		ck_assert_msg(rc == -EOPNOTSUPP, "acquire on a tmpfs store: %d %s", rc, err.msg);
		ck_assert_msg(strstr(err.msg, "idmapped mounts on tmpfs need Linux 6.3") &&
				  strstr(err.msg, "this kernel"),
			      "%s", err.msg);
		/* nothing of it is left: no sandbox listed, no cgroup */
		struct rung_sandbox_info *v = NULL;
		size_t n = 9;
		ck_assert_int_eq(rung_list(r, NULL, NULL, &v, &n, &err), 0);
		ck_assert_int_eq(n, 0);
		free(v);
	}
	struct rung_gc_report rep;
	rung_gc(r, &rep, &err);
	rung_spec_release(&s);
	rung_router_free(r);
	ck_assert_int_eq(umount2(state, MNT_DETACH), 0);
}
END_TEST

Suite *e2e_container_kernel_suite(void)
{
	Suite *s = suite_create("e2e_container_kernel");
	TCase *tc = tcase_create("tmpfs_store");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, ct_setup, ct_teardown);
	tcase_add_test(tc, test_store_on_tmpfs);
	suite_add_tcase(s, tc);
	return s;
}
