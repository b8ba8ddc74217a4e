/*
 * tests/check_runtime_meta.c: runtime/meta.c, a sandbox's metadata <-> JSON (meta.json, the
 * store's on-disk truth): every field round-trips (a claimed pool sandbox's aliased_by too);
 * what older versions wrote (no "granted", no "backend", no "aliased_by") still loads; and
 * every malformed file (bad JSON, wrong version, a missing or mistyped field, ids, labels and
 * aliased_by that are not exact lowercase hex, an unknown isolation, a bad spec) is refused
 * with a message naming the problem. Pure.
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

#define ID "0123456789abcdef0123456789abcdef"
#define HEX64 "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

static void fill(struct rt_meta *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->id, sizeof(m->id), "%s", ID);
	snprintf(m->labels.scope, sizeof(m->labels.scope), "%s", HEX64);
	memset(m->labels.thread, 'a', 64);
	memset(m->labels.agent, 'f', 64);
	m->iso = RUNG_ISO_CONTAINER;
	m->state = RUNG_STATE_SUSPENDED;
	m->created_ms = 1764600000123ULL;
	m->last_used_ms = 1764600009999ULL;
	m->sup_pid = 4242;
	m->sup_start = 987654321ULL;
	m->init_pid = 4343;
	m->uid_base = RT_UID_BASE0 + 3 * RT_UID_RANGE;
	rung_spec_init(&m->spec);
	m->spec.kind = strdup("pytest");
	m->spec.image = strdup("rung/python:3");
	m->spec.requires = RUNG_CAP_EXEC | RUNG_CAP_FS_PERSIST;
	m->spec.limits.memory_bytes = 256ULL << 20;
	m->spec.ttl_s = 77;
	m->granted = RUNG_CAP_EXEC;
	m->backend = json_pack("{s:s, s:i}", "upper", "/x/upper", "n", 3);
}

/* The JSON of a good record, as a jansson object the bad cases then break. */
static json_t *good_json(void)
{
	struct rt_meta m;
	fill(&m);
	char *txt = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rt_meta_to_json(&m, &txt, &err) == 0, "%s", err.msg);
	rt_meta_release(&m);
	json_error_t je;
	json_t *o = json_loads(txt, 0, &je);
	ck_assert_ptr_nonnull(o);
	free(txt);
	return o;
}

/* Parse o (consumed); expect -EINVAL and a message containing want. */
static void expect_bad(json_t *o, const char *want)
{
	char *txt = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	struct rt_meta m;
	struct rung_err err = {0};
	int r = rt_meta_from_json(txt, strlen(txt), &m, &err);
	ck_assert_msg(r == -EINVAL, "want EINVAL for %s, got %d", txt, r);
	ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s' (%s)", err.msg, want, txt);
	rt_meta_release(&m);
	free(txt);
}

START_TEST(test_round_trip)
{
	struct rt_meta a, b;
	fill(&a);
	char *txt = NULL;
	struct rung_err err = {0};
	ck_assert_int_eq(rt_meta_to_json(&a, &txt, &err), 0);
	ck_assert_msg(strstr(txt, "\"version\": 1"), "%s", txt);
	ck_assert_msg(strstr(txt, "\"state\": \"suspended\""), "%s", txt);
	ck_assert_msg(strstr(txt, "\"isolation\": \"container\""), "%s", txt);
	ck_assert_int_eq(rt_meta_from_json(txt, strlen(txt), &b, &err), 0);
	ck_assert_str_eq(b.id, a.id);
	ck_assert_str_eq(b.labels.scope, a.labels.scope);
	ck_assert_str_eq(b.labels.thread, a.labels.thread);
	ck_assert_str_eq(b.labels.agent, a.labels.agent);
	ck_assert_int_eq(b.iso, RUNG_ISO_CONTAINER);
	ck_assert_int_eq(b.state, RUNG_STATE_SUSPENDED);
	ck_assert_uint_eq(b.created_ms, a.created_ms);
	ck_assert_uint_eq(b.last_used_ms, a.last_used_ms);
	ck_assert_int_eq(b.sup_pid, 4242);
	ck_assert_uint_eq(b.sup_start, 987654321ULL);
	ck_assert_int_eq(b.init_pid, 4343);
	ck_assert_uint_eq(b.uid_base, a.uid_base);
	ck_assert_uint_eq(b.granted, RUNG_CAP_EXEC);
	ck_assert_str_eq(b.spec.kind, "pytest");
	ck_assert_str_eq(b.spec.image, "rung/python:3");
	ck_assert_uint_eq(b.spec.requires, RUNG_CAP_EXEC | RUNG_CAP_FS_PERSIST);
	ck_assert_uint_eq(b.spec.limits.memory_bytes, 256ULL << 20);
	ck_assert_uint_eq(b.spec.ttl_s, 77);
	ck_assert_ptr_nonnull(b.backend);
	ck_assert(json_equal(b.backend, a.backend));
	ck_assert_str_eq(b.aliased_by, ""); /* not claimed from a pool: no key written */
	ck_assert_msg(!strstr(txt, "aliased_by"), "%s", txt);
	/* the same record serializes to the same bytes (sorted keys) */
	char *again = NULL;
	ck_assert_int_eq(rt_meta_to_json(&b, &again, &err), 0);
	ck_assert_str_eq(again, txt);
	free(again);
	free(txt);
	rt_meta_release(&a);
	rt_meta_release(&b);
	ck_assert_ptr_null(b.backend);
	rt_meta_release(NULL); /* harmless */
	/* a claimed pool sandbox names its key's id (docs/pools.md) */
	fill(&a);
	snprintf(a.aliased_by, sizeof(a.aliased_by), "%s", "fedcba9876543210fedcba9876543210");
	ck_assert_int_eq(rt_meta_to_json(&a, &txt, &err), 0);
	ck_assert_int_eq(rt_meta_from_json(txt, strlen(txt), &b, &err), 0);
	ck_assert_str_eq(b.aliased_by, "fedcba9876543210fedcba9876543210");
	free(txt);
	rt_meta_release(&a);
	rt_meta_release(&b);
}
END_TEST

START_TEST(test_every_state)
{
	static const char *names[] = {"creating", "running", "suspended", "dead"};
	for (int st = RUNG_STATE_CREATING; st <= RUNG_STATE_DEAD; st++) {
		ck_assert_str_eq(rung_state_name((enum rung_state)st), names[st]);
		struct rt_meta a, b;
		fill(&a);
		a.state = (enum rung_state)st;
		char *txt = NULL;
		struct rung_err err = {0};
		ck_assert_int_eq(rt_meta_to_json(&a, &txt, &err), 0);
		ck_assert_int_eq(rt_meta_from_json(txt, strlen(txt), &b, &err), 0);
		ck_assert_int_eq(b.state, st);
		free(txt);
		rt_meta_release(&a);
		rt_meta_release(&b);
	}
	ck_assert_str_eq(rung_state_name((enum rung_state)17), "?");
	ck_assert_str_eq(rung_state_name((enum rung_state)-1), "?");
}
END_TEST

START_TEST(test_older_records)
{
	/* before "granted" was recorded: the spec's requires; no "backend": none */
	json_t *o = good_json();
	json_object_del(o, "granted");
	json_object_del(o, "backend");
	char *txt = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	struct rt_meta m;
	struct rung_err err = {0};
	ck_assert_msg(rt_meta_from_json(txt, strlen(txt), &m, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(m.granted, RUNG_CAP_EXEC | RUNG_CAP_FS_PERSIST);
	ck_assert_ptr_null(m.backend);
	rt_meta_release(&m);
	free(txt);
	/* granted bits past the known capabilities are dropped; a non-object backend ignored */
	o = good_json();
	json_object_set_new(o, "granted", json_integer(0xffff));
	json_object_set_new(o, "backend", json_string("junk"));
	txt = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	ck_assert_int_eq(rt_meta_from_json(txt, strlen(txt), &m, &err), 0);
	ck_assert_uint_eq(m.granted, RUNG_CAP__ALL);
	ck_assert_ptr_null(m.backend);
	rt_meta_release(&m);
	free(txt);
	/* a state name this version does not know reads as dead (gc then removes it) */
	o = good_json();
	json_object_set_new(o, "state", json_string("hibernating"));
	txt = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	ck_assert_int_eq(rt_meta_from_json(txt, strlen(txt), &m, &err), 0);
	ck_assert_int_eq(m.state, RUNG_STATE_DEAD);
	rt_meta_release(&m);
	free(txt);
}
END_TEST

START_TEST(test_bad_json)
{
	static const char *const bad[] = {"", "{", "[]", "null", "{\"version\": 1", "\x01\x02"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bad); i++) {
		struct rt_meta m;
		struct rung_err err = {0};
		ck_assert_int_eq(rt_meta_from_json(bad[i], strlen(bad[i]), &m, &err), -EINVAL);
		ck_assert_msg(strstr(err.msg, "metadata"), "%s", err.msg);
		rt_meta_release(&m);
	}
	/* a good record cut short anywhere is refused, never read past its length */
	json_t *o = good_json();
	char *txt = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	size_t n = strlen(txt);
	for (size_t cut = 0; cut < n; cut += 7) {
		struct rt_meta m;
		struct rung_err err = {0};
		ck_assert_msg(rt_meta_from_json(txt, cut, &m, &err) == -EINVAL, "cut %zu", cut);
		rt_meta_release(&m);
	}
	free(txt);
}
END_TEST

START_TEST(test_bad_fields)
{
	json_t *o = good_json();
	json_object_set_new(o, "version", json_integer(2));
	expect_bad(o, "unsupported version 2");

	static const char *const required[] = {"version", "id", "isolation", "state", "labels",
					       "created_ms", "last_used_ms", "supervisor_pid",
					       "supervisor_start", "init_pid", "uid_base", "spec"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(required); i++) {
		o = good_json();
		json_object_del(o, required[i]);
		expect_bad(o, required[i]);
	}
	/* wrong types */
	o = good_json();
	json_object_set_new(o, "created_ms", json_string("yesterday"));
	expect_bad(o, "metadata");
	o = good_json();
	json_object_set_new(o, "spec", json_string("{}"));
	expect_bad(o, "spec is not an object"); /* once reported as out of memory */
	o = good_json();
	json_object_set_new(o, "spec", json_pack("[s]", "kind"));
	expect_bad(o, "spec is not an object");
	o = good_json();
	json_object_set_new(o, "granted", json_string("all"));
	expect_bad(o, "metadata");
}
END_TEST

START_TEST(test_bad_ids_and_labels)
{
	static const char *const ids[] = {"", "0123456789abcdef0123456789abcde",
					  "0123456789abcdef0123456789abcdef0",
					  "0123456789ABCDEF0123456789abcdef",
					  "0123456789abcdef0123456789abcdeg",
					  "../../../../../../../../etc/pass"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(ids); i++) {
		json_t *o = good_json();
		json_object_set_new(o, "id", json_string(ids[i]));
		expect_bad(o, "bad id");
		o = good_json(); /* the same rule for a claim's key id */
		json_object_set_new(o, "aliased_by", json_string(ids[i]));
		expect_bad(o, "bad aliased_by");
	}
	static const char *const parts[] = {"scope", "thread", "agent"};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(parts); i++) {
		char want[32];
		snprintf(want, sizeof(want), "bad labels.%s", parts[i]);
		json_t *o = good_json();
		json_object_set_new(json_object_get(o, "labels"), parts[i], json_string(ID));
		expect_bad(o, want);
		o = good_json();
		json_object_set_new(json_object_get(o, "labels"), parts[i],
				    json_string(HEX64 "0"));
		expect_bad(o, want);
	}
}
END_TEST

START_TEST(test_bad_isolation_and_spec)
{
	json_t *o = good_json();
	json_object_set_new(o, "isolation", json_string("chroot"));
	expect_bad(o, "bad isolation");
	/* the spec is parsed strictly: a missing kind, an unknown field */
	o = good_json();
	json_object_del(json_object_get(o, "spec"), "kind");
	expect_bad(o, "metadata spec");
	o = good_json();
	json_object_set_new(json_object_get(o, "spec"), "no_such_field", json_true());
	expect_bad(o, "metadata spec");
}
END_TEST

Suite *runtime_meta_suite(void)
{
	Suite *s = suite_create("runtime_meta");
	TCase *tc = tcase_create("pure");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_every_state);
	tcase_add_test(tc, test_older_records);
	tcase_add_test(tc, test_bad_json);
	tcase_add_test(tc, test_bad_fields);
	tcase_add_test(tc, test_bad_ids_and_labels);
	tcase_add_test(tc, test_bad_isolation_and_spec);
	suite_add_tcase(s, tc);
	return s;
}
