/*
 * tests/check_e2e_commit_vm.c: image commit on the vm rung (nested stage only:
 * RUNG_TEST_RUNG=vm, vmm/guest/l1-rung.sh; it skips elsewhere): the guest's upper dir
 * becomes a layer on its image; a VM from the new tag sees the file written and not the
 * image file deleted. The tag is removed after. Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rootfs/rfs.h"
#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

START_TEST(test_vm_commit)
{
	RUNG_REQUIRE_ROOT();
	if (!spine_vm())
		RUNG_SKIP("the vm rung's image commit runs in the nested stage (RUNG_TEST_RUNG=vm)");
	char *dir;
	struct rung_router *r = spine_router(&dir);
	struct rung_err err = {0};
	bool created;
	struct rung_sandbox *a = spine_acquire(r, "vmcommit", "t", "k", NULL, &created);
	char *victim = spine_sh_ok(a, "for f in /etc/*; do [ -f \"$f\" ] && [ ! -L \"$f\" ] && "
				      "! grep -q \" $f \" /proc/mounts && { echo $f; break; }; "
				      "done");
	victim[strcspn(victim, "\n")] = '\0';
	ck_assert_msg(victim[0] == '/', "no image file to delete in /etc");
	char script[512];
	snprintf(script, sizeof(script), "rm %s && mkdir -p /opt/mod && echo 42 > /opt/mod/v",
		 victim);
	free(spine_sh_ok(a, script));
	struct rung_changes *ch = NULL;
	struct rfs_store *st = NULL;
	ck_assert_msg(rfs_store_open(rung_router_state_dir(r), &st, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_changes_open(r, rung_sandbox_id(a), "vmcommit", &ch, &err) == 0, "%s",
		      err.msg);
	ck_assert_ptr_nonnull(rung_changes_base_image(ch));
	struct rfs_commit_stats cs;
	struct rfs_image_info info = {0};
	int rc = rfs_image_commit_tree(st, rung_changes_base_image(ch), rung_changes_dirfd(ch),
				       rung_changes_prefix(ch), rung_changes_id_base(ch),
				       "test/vmcommit:1", &cs, &info, &err);
	rung_changes_close(ch);
	ck_assert_msg(rc == 0, "%s", err.msg);
	ck_assert_uint_ge(cs.whiteouts, 1);
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("k2");
	s.isolation = RUNG_ISO_VM;
	s.image = strdup("test/vmcommit:1");
	struct rung_key k = {"vmcommit", "t2", "agent"};
	struct rung_sandbox *b = NULL;
	ck_assert_msg(rung_acquire(r, &k, &s, &b, NULL, &err) == 0, "%s", err.msg);
	snprintf(script, sizeof(script), "cat /opt/mod/v; [ -e %s ] || echo gone", victim);
	char *out = spine_sh_ok(b, script);
	ck_assert_str_eq(out, "42\ngone\n");
	free(out);
	size_t n = 0;
	ck_assert_msg(rung_dispose_scope(r, "vmcommit", NULL, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 2);
	ck_assert_msg(rfs_image_remove(st, "test/vmcommit:1", NULL, NULL, &err) == 0, "%s",
		      err.msg);
	rfs_image_info_release(&info);
	rfs_store_free(st);
	rung_spec_release(&s);
	free(victim);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *e2e_commit_vm_suite(void)
{
	Suite *s = suite_create("e2e_commit_vm");
	TCase *tc = spine_tcase(s, "vm", 900);
	tcase_add_test(tc, test_vm_commit);
	return s;
}
