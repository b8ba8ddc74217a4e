/*
 * tests/check_e2e_process_hostetc.c: the host files a process-rung sandbox sees under /etc are the
 * documented ones that carry no secrets (issue 10, item 11): /etc/pip.conf (private index
 * credentials), /etc/xdg (pip's other site config), /etc/profile and /etc/bash.bashrc
 * (exported proxies), /etc/ssl/private are never bound. Tagged "root".
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

/* The README's list ("Host files in a process sandbox"). */
static const char *const documented[] = {
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/alternatives",
	"/etc/localtime", "/etc/mime.types", "/etc/python3", "/etc/python3.11", "/etc/protocols",
	"/etc/services", "/etc/debian_version", "/etc/os-release", "/etc/timezone"};

static bool is_documented(const char *p)
{
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(documented); i++)
		if (!strcmp(p, documented[i]))
			return true;
	return false;
}

START_TEST(test_only_documented_etc_binds)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("host files are bound on the process rung only");
	char *dir = NULL;
	struct rung_router *r = spine_router(&dir);
	struct rung_sandbox *sb = spine_acquire(r, "hostetc", "t", "k", NULL, NULL);
	/* every mount point under /etc, from inside */
	char *out = spine_sh_ok(sb, "while read a b c d mp rest; do case $mp in /etc/*) "
				    "echo $mp;; esac; done < /proc/self/mountinfo");
	int n = 0;
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(is_documented(l), "%s is bound from the host but not documented", l);
		n++;
	}
	ck_assert_int_gt(n, 3); /* the probe saw the binds */
	free(out);
	out = spine_sh_ok(sb, "for p in /etc/xdg /etc/profile /etc/bash.bashrc /etc/ssl/private; "
			      "do [ -e $p ] && echo PRESENT $p; done; cat /etc/pip.conf");
	ck_assert_str_eq(out, "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n");
	free(out);
	rung_sandbox_close(sb);
	rung_router_free(r);
	free(dir);
}
END_TEST

Suite *e2e_process_hostetc_suite(void)
{
	Suite *s = suite_create("e2e_process_hostetc");
	TCase *tc = tcase_create("hostetc");
	tcase_set_tags(tc, "root");
	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, spine_base_setup, spine_base_teardown);
	tcase_add_test(tc, test_only_documented_etc_binds);
	suite_add_tcase(s, tc);
	return s;
}
