/*
 * tests/check_e2e_ladder_policy.c: the deployed policy reads the ladder's evidence
 * (runtime/ladder.c, docs/ladder.md). A saved result whose process column has an escaped
 * probe in a critical family makes a deployed router refuse the process rung, naming the
 * probe; a critical-family-free result does not; a result saved under another host key (a
 * kernel, rung or configuration change) is stale and ignored; rung_inspect cites the summary.
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/lib/container.h"
#include "tests/lib/testutil.h"

static struct rung_router *router(bool deployed)
{
	char rel[PATH_MAX], agent[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/rung-agent", rung_test_build_dir());
	ck_assert_ptr_nonnull(realpath(rel, agent));
	struct rung_router_opts o = {
	    .state_dir = ct_state(), .agent_path = agent, .deployed = deployed};
	rung_test_router_env(&o);
	struct rung_router *r = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_router_new(&o, &r, &err) == 0, "%s", err.msg);
	return r;
}

/* A ladder result: the process and container columns with these results for two probes. */
static char *result(const char *fs_result, const char *kernel_result)
{
	json_t *d = json_pack("{s:i,s:[{s:s,s:s},{s:s,s:s}],s:[]}", "version", 1, "probes", "name",
			      "fs.host_marker_write", "family", "filesystem", "name", "kernel.bpf",
			      "family", "kernel", "targets");
	static const char *const rungs[] = {"process", "container"};
	for (int i = 0; i < 2; i++)
		json_array_append_new(
		    json_object_get(d, "targets"),
		    json_pack("{s:s,s:s,s:b,s:{s:i,s:i,s:i,s:i,s:i},s:{s:{s:s},s:{s:s}}}", "name",
			      rungs[i], "kind", "rung", "available", 1, "summary", "blocked", 0,
			      "escaped", 2, "na", 0, "total", 2, "reachable_syscalls", 285,
			      "results", "fs.host_marker_write", "result", fs_result, "kernel.bpf",
			      "result", kernel_result));
	char *s = json_dumps(d, 0);
	json_decref(d);
	return s;
}

/* acquire a deployed run_code process sandbox: 0 (disposed again) or the refusal */
static int acquire_deployed(struct rung_router *r, struct rung_err *err)
{
	struct rung_spec s;
	rung_spec_init(&s);
	s.kind = strdup("ladder-policy");
	s.requires = RUNG_CAP_RUN_CODE;
	struct rung_key key = {"ladder-policy", "t", "a"};
	struct rung_sandbox *sb = NULL;
	bool created;
	int rc = rung_acquire(r, &key, &s, &sb, &created, err);
	rung_spec_release(&s);
	if (rc == 0) {
		struct rung_err e2 = {0};
		char id[80];
		snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
		rung_sandbox_close(sb);
		ck_assert_msg(rung_dispose(r, id, NULL, &e2) == 0, "%s", e2.msg);
	}
	return rc;
}

START_TEST(test_deployed_reads_the_evidence)
{
	CT_REQUIRE();
	struct rung_router *plain = router(false), *dep = router(true);
	struct rung_err err = {0};
	/* no ladder result yet: deployed run_code on the process rung is allowed */
	ck_assert_msg(acquire_deployed(dep, &err) == 0, "%s", err.msg);
	/* a kernel-family escape only: not critical, still allowed */
	char *s = result("blocked", "escaped");
	ck_assert_msg(rung_ladder_cache_save(plain, s, &err) == 0, "%s", err.msg);
	free(s);
	ck_assert_msg(acquire_deployed(dep, &err) == 0, "%s", err.msg);
	/* a filesystem escape in both shared-kernel rungs: refused, naming the probe (the vm
	 * rung, the only other, cannot run here or needs an image this spec has not) */
	s = result("escaped", "escaped");
	ck_assert_msg(rung_ladder_cache_save(plain, s, &err) == 0, "%s", err.msg);
	free(s);
	memset(&err, 0, sizeof(err));
	int rc = acquire_deployed(dep, &err);
	ck_assert_msg(rc == -ENOTSUP || rc == -EINVAL, "%d: %s", rc, err.msg);
	if (rc == -EINVAL) /* a vm rung here: the process and container rungs were refused */
		ck_assert_msg(strstr(err.msg, "image"), "%s", err.msg);
	else
		ck_assert_msg(strstr(err.msg, "process (deployed): the ladder on this host saw "
					      "probe fs.host_marker_write (filesystem) escape") &&
				  strstr(err.msg, "container (deployed): the ladder"),
			      "%s", err.msg);
	/* the same result under another host key (kernel, rung or configuration changed):
	 * stale, ignored */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/ladder.json", ct_state());
	json_t *d = json_load_file(p, 0, NULL);
	ck_assert_ptr_nonnull(d);
	ck_assert_ptr_nonnull(json_string_value(json_object_get(d, "cache_key")));
	json_object_set_new(d, "cache_key", json_string("0000"));
	ck_assert_int_eq(json_dump_file(d, p, 0), 0);
	json_decref(d);
	ck_assert_msg(acquire_deployed(dep, &err) == 0, "stale result still applied: %s", err.msg);
	rung_router_free(dep);
	rung_router_free(plain);
}
END_TEST

static json_t *inspect_ladder(struct rung_router *r, const char *id)
{
	char *js = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rung_inspect(r, id, NULL, &js, &err) == 0, "%s", err.msg);
	json_t *d = json_loads(js, 0, NULL);
	free(js);
	json_t *l = json_incref(json_object_get(json_object_get(d, "security"), "ladder"));
	json_decref(d);
	ck_assert_ptr_nonnull(l);
	return l;
}

START_TEST(test_inspect_cites_the_summary)
{
	CT_REQUIRE();
	struct rung_router *r = router(false);
	struct rung_spec sp;
	rung_spec_init(&sp);
	sp.kind = strdup("ladder-inspect");
	struct rung_key key = {"ladder-policy", "i", "a"};
	struct rung_sandbox *sb = NULL;
	bool created;
	struct rung_err err = {0};
	ck_assert_msg(rung_acquire(r, &key, &sp, &sb, &created, &err) == 0, "%s", err.msg);
	rung_spec_release(&sp);
	json_t *l = inspect_ladder(r, rung_sandbox_id(sb));
	ck_assert_msg(strstr(json_string_value(json_object_get(l, "status")), "no ladder result"),
		      "%s", json_string_value(json_object_get(l, "status")));
	json_decref(l);
	char *s = result("escaped", "blocked");
	ck_assert_msg(rung_ladder_cache_save(r, s, &err) == 0, "%s", err.msg);
	free(s);
	l = inspect_ladder(r, rung_sandbox_id(sb));
	ck_assert_str_eq(json_string_value(json_object_get(l, "status")), "current");
	ck_assert_str_eq(json_string_value(json_object_get(l, "critical_escape")),
			 "fs.host_marker_write");
	ck_assert_int_eq(json_integer_value(json_object_get(l, "reachable_syscalls")), 285);
	ck_assert_int_eq(json_array_size(json_object_get(l, "escaped")), 1);
	json_decref(l);
	char id[80];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(sb));
	rung_sandbox_close(sb);
	ck_assert_msg(rung_dispose(r, id, NULL, &err) == 0, "%s", err.msg);
	rung_router_free(r);
}
END_TEST

Suite *e2e_ladder_policy_suite(void)
{
	Suite *s = suite_create("e2e_ladder_policy");
	ct_add(s, "deployed", test_deployed_reads_the_evidence, 120);
	ct_add(s, "inspect", test_inspect_cites_the_summary, 120);
	return s;
}
