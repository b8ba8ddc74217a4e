/*
 * tests/check_e2e_process_hostetc.c: the host files a process-rung sandbox sees under /etc are the
 * documented ones that carry no secrets (issue 10, item 11): /etc/pip.conf (private index
 * credentials), /etc/xdg (pip's other site config), /etc/profile and /etc/bash.bashrc
 * (exported proxies), /etc/ssl/private are never seen. /etc is one read-only mount of the
 * store's prepared copy (runtime/hostetc.c); where none can be made, the entries are bound one
 * by one, and the sandbox sees the same. Tagged "root".
 */
#include <check.h>
#include <fcntl.h>
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

/* The part of a documented path below /etc that names an entry of /etc itself. */
static bool top_documented(const char *name)
{
	static const char *const ours[] = {"pip.conf", "passwd",   "group",
					   "hosts",    "hostname", "resolv.conf"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(ours); i++)
		if (!strcmp(name, ours[i]))
			return true;
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(documented); i++) {
		const char *in = documented[i] + strlen("/etc/");
		size_t n = strcspn(in, "/");
		if (strlen(name) == n && !strncmp(in, name, n))
			return true;
	}
	return false;
}

/* What a sandbox sees of /etc, whichever way it was built: the documented entries and rung's
 * own files only, the host's secrets never, the host's contents (nsswitch.conf compared). */
static void check_etc_seen(struct rung_sandbox *sb)
{
	char *out = spine_sh_ok(sb, "ls -A /etc");
	int n = 0;
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(top_documented(l), "/etc/%s is in the sandbox but not documented", l);
		n++;
	}
	ck_assert_int_gt(n, 10);
	free(out);
	out = spine_sh_ok(sb, "ls -A /etc/ssl");
	ck_assert_str_eq(out, "certs\nopenssl.cnf\n");
	free(out);
	out = spine_sh_ok(sb,
			  "for p in /etc/xdg /etc/profile /etc/bash.bashrc /etc/ssl/private "
			  "/etc/shadow; do [ -e $p ] && echo PRESENT $p; done; cat /etc/pip.conf");
	ck_assert_str_eq(out, "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n");
	free(out);
	char *host = NULL;
	struct rung_err err = {0};
	ck_assert_int_eq(rung_file_load(AT_FDCWD, "/etc/nsswitch.conf", 1 << 20, &host, NULL, &err),
			 0);
	out = spine_sh_ok(sb, "cat /etc/nsswitch.conf");
	ck_assert_str_eq(out, host);
	free(out);
	free(host);
}

/* Mount points at or below /etc, from inside. */
static char *etc_mounts(struct rung_sandbox *sb)
{
	return spine_sh_ok(sb, "while read a b c d mp rest; do case $mp in /etc|/etc/*) "
			       "echo $mp;; esac; done < /proc/self/mountinfo");
}

START_TEST(test_prepared_etc)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("host files are seen on the process rung only");
	char *dir = NULL;
	struct rung_router *r = spine_router(&dir);
	struct rung_sandbox *sb = spine_acquire(r, "hostetc", "t", "k", NULL, NULL);
	/* one read-only mount, the prepared tree: none of the host's entries bound below */
	char *out = etc_mounts(sb);
	ck_assert_str_eq(out, "/etc\n");
	free(out);
	struct rung_exec_res res;
	ck_assert_int_ne(spine_sh(sb, "touch /etc/x", &res), 0); /* read-only */
	rung_exec_res_release(&res);
	check_etc_seen(sb);
	/* the tree in the store: <state>/etc/<host>-<variant>, one */
	char p[4200];
	snprintf(p, sizeof(p), "%s/etc", dir);
	ck_assert_int_eq(rung_test_count_entries(p), 2); /* the tree and the host file */
	rung_sandbox_close(sb);
	rung_router_free(r);
	free(dir);
}
END_TEST

START_TEST(test_etc_bound_when_unprepared)
{
	RUNG_REQUIRE_ROOT();
	if (spine_vm())
		RUNG_SKIP("host files are bound on the process rung only");
	char *dir = NULL;
	struct rung_router *r = spine_router(&dir);
	/* <state>/etc cannot hold a tree (a file there): the entries are bound one by one */
	char p[4200];
	snprintf(p, sizeof(p), "%s/etc", dir);
	FILE *f = fopen(p, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	struct rung_sandbox *sb = spine_acquire(r, "hostetc", "t", "k", NULL, NULL);
	char *out = etc_mounts(sb);
	int n = 0;
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(is_documented(l), "%s is bound from the host but not documented", l);
		n++;
	}
	ck_assert_int_gt(n, 3); /* the probe saw the binds */
	free(out);
	check_etc_seen(sb);
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
	tcase_add_test(tc, test_prepared_etc);
	tcase_add_test(tc, test_etc_bound_when_unprepared);
	suite_add_tcase(s, tc);
	return s;
}
