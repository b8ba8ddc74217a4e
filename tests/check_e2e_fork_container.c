/*
 * tests/check_e2e_fork_container.c: rung_fork on the container rung: a fork starts with the
 * source's overlay upper dir (files added, image files changed and deleted: whiteouts kept),
 * with its owners remapped into the fork's uid range (the fork can write what it inherited),
 * then diverges; a fresh sandbox of the image still sees the image as it was; everything
 * disposes cleanly (no cgroup, no lease, no loop device). Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/diskimg.h"
#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

START_TEST(test_container_fork)
{
	CT_REQUIRE();
	struct rung_router *r = ct_router(NULL);
	struct rung_spec s;
	ct_spec(&s, NULL);
	struct rung_err err = {0};
	struct rung_sandbox *a = ct_acquire(r, "cfork", "a", &s, NULL);
	/* the image file deleted: the first regular file of /etc the image has */
	char *victim = ct_sh(a, "for f in /etc/*; do [ -f \"$f\" ] && [ ! -L \"$f\" ] && "
				"! grep -q \" $f \" /proc/mounts && { echo $f; break; }; done");
	victim[strcspn(victim, "\n")] = '\0';
	ck_assert_msg(victim[0] == '/', "no image file to delete in /etc");
	char script[512];
	snprintf(script, sizeof(script),
		 "rm %s && mkdir -p /opt/new && echo added > /opt/new/f && echo w > /work/w && "
		 "chown 1:1 /opt/new/f 2>/dev/null; stat -c '%%u %%a' /opt/new/f",
		 victim);
	char *owner_a = ct_sh(a, script);
	char **ids = NULL;
	ck_assert_msg(rung_fork(r, rung_sandbox_id(a), "cfork", 1, &ids, NULL, &err) == 1, "%s",
		      err.msg);
	struct rung_sandbox *b = NULL;
	ck_assert_msg(rung_sandbox_open(r, ids[0], "cfork", &b, &err) == 0, "%s", err.msg);
	snprintf(script, sizeof(script),
		 "[ ! -e %s ] && cat /opt/new/f /work/w && stat -c '%%u %%a' /opt/new/f && "
		 "echo more >> /opt/new/f && echo b > /opt/new/b && rm /work/w && echo ok",
		 victim);
	char *in_b = ct_sh(b, script);
	char want[256];
	snprintf(want, sizeof(want), "added\nw\n%sok\n", owner_a);
	ck_assert_str_eq(in_b, want);
	/* the source did not see the fork's changes */
	char *in_a = ct_sh(a, "cat /opt/new/f /work/w; ls /opt/new");
	ck_assert_str_eq(in_a, "added\nw\nf\n");
	/* a fresh sandbox of the image has the deleted file and none of the additions */
	struct rung_sandbox *c = ct_acquire(r, "cfork", "c", &s, NULL);
	snprintf(script, sizeof(script), "[ -f %s ] && [ ! -e /opt/new ] && echo pristine", victim);
	char *in_c = ct_sh(c, script);
	ck_assert_str_eq(in_c, "pristine\n");
	size_t n = 0;
	ck_assert_msg(rung_dispose_scope(r, "cfork", NULL, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 3);
	ck_assert(!ct_cg_exists_any(ids[0]));
	ck_assert_int_eq(ct_count_leases(ct_state()), 0);
	for (int i = 0; i < 100 && rt_disk_loops_under(ct_state()) > 0; i++)
		usleep(20000);
	ck_assert_int_eq(rt_disk_loops_under(ct_state()), 0);
	free(victim);
	free(owner_a);
	free(in_a);
	free(in_b);
	free(in_c);
	free(ids[0]);
	free(ids);
	rung_sandbox_close(a);
	rung_sandbox_close(b);
	rung_sandbox_close(c);
	rung_spec_release(&s);
	rung_router_free(r);
}
END_TEST

Suite *e2e_fork_container_suite(void)
{
	Suite *s = suite_create("e2e_fork_container");
	ct_add(s, "fork", test_container_fork, 180);
	return s;
}
