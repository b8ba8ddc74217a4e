/*
 * tests/check_runtime_spec.c: the SandboxSpec (strict JSON, defaults, the CLI-flag path through
 * rung_spec_validate), key labels and ids, and egress entry syntax. Pure: no root needed.
 */
#include <check.h>
#include <string.h>

#include "runtime/rt-internal.h"
#include "tests/lib/testutil.h"

#define MIB (1ULL << 20)

/* Parse txt; expect failure with code and a message holding each of the given substrings. */
static void expect_bad(const char *txt, int code, const char *needle)
{
	struct rung_spec s;
	struct rung_err err = {0};
	int r = rung_spec_from_json(txt, strlen(txt), &s, &err);
	ck_assert_msg(r == -code, "%s: got %d (%s), want %d", txt, r, err.msg, -code);
	ck_assert_msg(strstr(err.msg, needle), "%s: message '%s' does not name '%s'", txt, err.msg,
		      needle);
	/* A failed parse leaves nothing to release (and releasing twice is harmless). */
	rung_spec_release(&s);
}

static void parse_ok(const char *txt, struct rung_spec *s)
{
	struct rung_err err = {0};
	int r = rung_spec_from_json(txt, strlen(txt), s, &err);
	ck_assert_msg(r == 0, "%s: %s", txt, err.msg);
}

START_TEST(test_defaults)
{
	struct rung_spec s;
	parse_ok("{\"kind\": \"pytest\"}", &s);
	ck_assert_str_eq(s.kind, "pytest");
	ck_assert_uint_eq(s.limits.memory_bytes, 512 * MIB);
	ck_assert_uint_eq(s.limits.pids, 256);
	ck_assert_uint_eq(s.limits.exec_timeout_s, 60);
	ck_assert_uint_eq(s.limits.output_bytes, 16 * MIB);
	ck_assert_uint_eq(s.limits.cpus_milli, 1000);
	ck_assert_uint_eq(s.limits.disk_bytes, 1024 * MIB);
	ck_assert_uint_eq(s.ttl_s, 3600);
	ck_assert_uint_eq(s.idle_suspend_s, 0);
	ck_assert_uint_eq(s.requires, RUNG_CAP_EXEC);
	ck_assert_int_eq(s.isolation, RUNG_ISO_PROCESS);
	/* A spec that forgets egress gets the closed configuration. */
	ck_assert(s.egress_allow == NULL || s.egress_allow[0] == NULL);
	ck_assert_ptr_null(s.image);
	ck_assert_ptr_null(s.env);
	rung_spec_release(&s);
	rung_spec_release(&s); /* idempotent */

	/* egress_allow: null and [] are also "no network". */
	parse_ok("{\"kind\": \"k\", \"egress_allow\": null}", &s);
	ck_assert(s.egress_allow == NULL || s.egress_allow[0] == NULL);
	rung_spec_release(&s);
	parse_ok("{\"kind\": \"k\", \"egress_allow\": []}", &s);
	ck_assert(s.egress_allow == NULL || s.egress_allow[0] == NULL);
	rung_spec_release(&s);

	struct rung_spec d;
	rung_spec_init(&d);
	ck_assert_uint_eq(d.limits.memory_bytes, 512 * MIB);
	ck_assert_uint_eq(d.limits.pids, 256);
	ck_assert_uint_eq(d.limits.exec_timeout_s, 60);
	ck_assert_uint_eq(d.limits.output_bytes, 16 * MIB);
	ck_assert(d.egress_allow == NULL);
	rung_spec_release(&d);
}
END_TEST

START_TEST(test_every_field)
{
	struct rung_spec s;
	parse_ok(
	    "{\"kind\": \"py.test-1_x\", \"image\": \"docker.io/library/python:3.12\","
	    " \"egress_allow\": [\"pypi.org:443\", \"*.pythonhosted.org\", \"10.1.2.0/24\","
	    " \"[2001:db8::1]:8080\"], \"work_dir\": \"/src/app\","
	    " \"requires\": [\"exec\", \"run_code\", \"host_callbacks\", \"fs_persist\", "
	    "\"install\"],"
	    " \"isolation\": \"container\", \"limits\": {\"memory\": \"1G\", \"cpus\": 1.5,"
	    " \"pids\": 100, \"disk\": 2147483648, \"exec_timeout_s\": 30, \"output_bytes\": "
	    "\"64k\"},"
	    " \"idle_suspend_s\": 300, \"ttl_s\": 7200, \"env\": {\"A\": \"1\", \"B_2\": \"x=y\"}}",
	    &s);
	ck_assert_str_eq(s.kind, "py.test-1_x");
	ck_assert_str_eq(s.image, "docker.io/library/python:3.12");
	ck_assert_str_eq(s.egress_allow[0], "pypi.org:443");
	ck_assert_str_eq(s.egress_allow[1], "*.pythonhosted.org");
	ck_assert_str_eq(s.egress_allow[2], "10.1.2.0/24");
	ck_assert_str_eq(s.egress_allow[3], "[2001:db8::1]:8080");
	ck_assert_ptr_null(s.egress_allow[4]);
	ck_assert_str_eq(s.work_dir, "/src/app");
	ck_assert_uint_eq(s.requires, RUNG_CAP__ALL);
	ck_assert_int_eq(s.isolation, RUNG_ISO_CONTAINER);
	ck_assert_uint_eq(s.limits.memory_bytes, 1024 * MIB);
	ck_assert_uint_eq(s.limits.cpus_milli, 1500);
	ck_assert_uint_eq(s.limits.pids, 100);
	ck_assert_uint_eq(s.limits.disk_bytes, 2048 * MIB);
	ck_assert_uint_eq(s.limits.exec_timeout_s, 30);
	ck_assert_uint_eq(s.limits.output_bytes, 64 * 1024);
	ck_assert_uint_eq(s.idle_suspend_s, 300);
	ck_assert_uint_eq(s.ttl_s, 7200);
	ck_assert_str_eq(s.env[0], "A=1");
	ck_assert_str_eq(s.env[1], "B_2=x=y");
	ck_assert_ptr_null(s.env[2]);

	/* Canonical JSON round-trips to an identical spec. */
	char *j = rung_spec_to_json(&s);
	ck_assert_ptr_nonnull(j);
	struct rung_spec s2;
	parse_ok(j, &s2);
	char *j2 = rung_spec_to_json(&s2);
	ck_assert_str_eq(j, j2);
	free(j);
	free(j2);
	rung_spec_release(&s2);
	rung_spec_release(&s);

	/* env as an array of KEY=VALUE */
	parse_ok("{\"kind\": \"k\", \"env\": [\"X=1\", \"_Y=\"]}", &s);
	ck_assert_str_eq(s.env[0], "X=1");
	ck_assert_str_eq(s.env[1], "_Y=");
	rung_spec_release(&s);
	/* requires: [] means nothing at all */
	parse_ok("{\"kind\": \"k\", \"requires\": []}", &s);
	ck_assert_uint_eq(s.requires, 0);
	rung_spec_release(&s);
}
END_TEST

START_TEST(test_unknown_fields)
{
	expect_bad("{\"kind\": \"k\", \"bogus\": 1}", EINVAL, "bogus: unknown field");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memroy\": 1}}", EINVAL,
		   "limits.memroy: unknown field");
	expect_bad("{\"kind\": \"k\", \"Kind\": \"x\"}", EINVAL, "Kind: unknown field");
	expect_bad("{\"kind\": \"k\", \"requires\": [\"root\"]}", EINVAL, "requires[0]");
	expect_bad("{\"kind\": \"k\", \"requires\": [\"exec\", \"shell\"]}", EINVAL, "shell");
	expect_bad("{\"kind\": \"k\", \"isolation\": \"jail\"}", EINVAL, "isolation");
	/* Duplicate keys are refused, not "last wins". */
	expect_bad("{\"kind\": \"k\", \"kind\": \"j\"}", EINVAL, "spec: invalid JSON");
	expect_bad("{\"kind\": \"k\", ", EINVAL, "spec: invalid JSON");
	expect_bad("[]", EINVAL, "expected a JSON object");
	expect_bad("", EINVAL, "spec: invalid JSON");
}
END_TEST

START_TEST(test_wrong_types)
{
	expect_bad("{\"kind\": 5}", EINVAL, "kind: expected a string");
	expect_bad("{\"kind\": \"k\", \"image\": 1}", EINVAL, "image: expected a string");
	expect_bad("{\"kind\": \"k\", \"egress_allow\": \"pypi.org\"}", EINVAL,
		   "egress_allow: expected an array");
	expect_bad("{\"kind\": \"k\", \"egress_allow\": [1]}", EINVAL, "egress_allow[0]");
	expect_bad("{\"kind\": \"k\", \"work_dir\": []}", EINVAL, "work_dir: expected a string");
	expect_bad("{\"kind\": \"k\", \"requires\": \"exec\"}", EINVAL, "requires");
	expect_bad("{\"kind\": \"k\", \"isolation\": 1}", EINVAL, "isolation");
	expect_bad("{\"kind\": \"k\", \"limits\": 5}", EINVAL, "limits: expected an object");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memory\": true}}", EINVAL, "limits.memory");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memory\": \"lots\"}}", EINVAL,
		   "limits.memory");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"pids\": \"8\"}}", EINVAL, "limits.pids");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"pids\": 1.5}}", EINVAL, "limits.pids");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"cpus\": \"2\"}}", EINVAL, "limits.cpus");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"disk\": [1]}}", EINVAL, "limits.disk");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"exec_timeout_s\": null}}", EINVAL,
		   "limits.exec_timeout_s");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"output_bytes\": {}}}", EINVAL,
		   "limits.output_bytes");
	expect_bad("{\"kind\": \"k\", \"ttl_s\": \"1\"}", EINVAL, "ttl_s");
	expect_bad("{\"kind\": \"k\", \"ttl_s\": -1}", EINVAL, "ttl_s");
	expect_bad("{\"kind\": \"k\", \"idle_suspend_s\": 1.5}", EINVAL, "idle_suspend_s");
	expect_bad("{\"kind\": \"k\", \"env\": \"A=1\"}", EINVAL, "env");
	expect_bad("{\"kind\": \"k\", \"env\": {\"A\": 1}}", EINVAL, "env.A");
	expect_bad("{\"kind\": \"k\", \"env\": [\"A=1\", 2]}", EINVAL, "env[1]");
}
END_TEST

START_TEST(test_out_of_range)
{
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memory\": \"1M\"}}", ERANGE, "limits.memory");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memory\": \"257G\"}}", ERANGE,
		   "limits.memory");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memory\": 0}}", ERANGE, "limits.memory");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"memory\": -5}}", EINVAL, "limits.memory");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"pids\": 0}}", ERANGE, "limits.pids");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"pids\": 1000001}}", ERANGE, "limits.pids");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"cpus\": 0}}", EINVAL, "limits.cpus");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"cpus\": 0.001}}", ERANGE, "limits.cpus");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"cpus\": 300}}", EINVAL, "limits.cpus");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"disk\": \"1M\"}}", ERANGE, "limits.disk");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"exec_timeout_s\": 0}}", ERANGE,
		   "limits.exec_timeout_s");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"exec_timeout_s\": 86401}}", ERANGE,
		   "limits.exec_timeout_s");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"output_bytes\": 10}}", ERANGE,
		   "limits.output_bytes");
	expect_bad("{\"kind\": \"k\", \"limits\": {\"output_bytes\": \"2G\"}}", ERANGE,
		   "limits.output_bytes");
	expect_bad("{\"kind\": \"k\", \"ttl_s\": 2592001}", ERANGE, "ttl_s");
	expect_bad("{\"kind\": \"k\", \"idle_suspend_s\": 2592001}", ERANGE, "idle_suspend_s");
}
END_TEST

START_TEST(test_bad_values)
{
	expect_bad("{}", EINVAL, "kind: required");
	expect_bad("{\"kind\": \"\"}", EINVAL, "kind");
	expect_bad("{\"kind\": \"a b\"}", EINVAL, "kind");
	expect_bad("{\"kind\": \"../x\"}", EINVAL, "kind");
	expect_bad("{\"kind\": \"k\", \"image\": \"bad image\"}", EINVAL, "image");
	expect_bad("{\"kind\": \"k\", \"image\": \"\"}", EINVAL, "image");
	expect_bad("{\"kind\": \"k\", \"work_dir\": \"work\"}", EINVAL, "work_dir");
	expect_bad("{\"kind\": \"k\", \"work_dir\": \"/a/../etc\"}", EINVAL, "work_dir");
	expect_bad("{\"kind\": \"k\", \"work_dir\": \"/a/./b\"}", EINVAL, "work_dir");
	expect_bad("{\"kind\": \"k\", \"work_dir\": \"/a\\nb\"}", EINVAL, "work_dir");
	expect_bad("{\"kind\": \"k\", \"egress_allow\": [\"pypi.org\", \"http://x\"]}", EINVAL,
		   "egress_allow[1]");
	expect_bad("{\"kind\": \"k\", \"env\": [\"NOEQUALS\"]}", EINVAL, "env[0]");
	expect_bad("{\"kind\": \"k\", \"env\": [\"1A=x\"]}", EINVAL, "env[0]");
	expect_bad("{\"kind\": \"k\", \"env\": {\"A-B\": \"x\"}}", EINVAL, "env[0]");
	expect_bad("{\"kind\": \"k\", \"env\": {\"\": \"x\"}}", EINVAL, "env[0]");
	/* A NUL hidden in a string never reaches the spec. */
	expect_bad("{\"kind\": \"k\\u0000x\"}", EINVAL, "invalid JSON");
}
END_TEST

/* The CLI builds a struct by hand; rung_spec_validate applies the same checks. */
START_TEST(test_validate_by_hand)
{
	struct rung_spec s;
	struct rung_err err = {0};
	rung_spec_init(&s);
	ck_assert_int_eq(rung_spec_validate(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "kind"));
	s.kind = strdup("default");
	ck_assert_msg(rung_spec_validate(&s, &err) == 0, "%s", err.msg);

	s.limits.memory_bytes = 1024;
	ck_assert_int_eq(rung_spec_validate(&s, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.memory"));
	s.limits.memory_bytes = 512 * MIB;
	s.limits.pids = 2;
	ck_assert_int_eq(rung_spec_validate(&s, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.pids"));
	s.limits.pids = 256;
	s.limits.cpus_milli = 0;
	ck_assert_int_eq(rung_spec_validate(&s, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.cpus"));
	s.limits.cpus_milli = 1000;
	s.limits.exec_timeout_s = 0;
	ck_assert_int_eq(rung_spec_validate(&s, &err), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err.msg, "limits.exec_timeout_s"));
	s.limits.exec_timeout_s = 60;
	s.requires = 1u << 7;
	ck_assert_int_eq(rung_spec_validate(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "requires"));
	s.requires = RUNG_CAP_EXEC;
	s.isolation = (enum rung_isolation)7;
	ck_assert_int_eq(rung_spec_validate(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "isolation"));
	s.isolation = RUNG_ISO_PROCESS;
	s.work_dir = strdup("relative");
	ck_assert_int_eq(rung_spec_validate(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "work_dir"));
	free(s.work_dir);
	s.work_dir = NULL;
	s.egress_allow = calloc(3, sizeof(char *));
	s.egress_allow[0] = strdup("example.com");
	s.egress_allow[1] = strdup("example.com:99999");
	ck_assert_int_eq(rung_spec_validate(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "egress_allow[1]"));
	free(s.egress_allow[1]);
	s.egress_allow[1] = NULL;
	ck_assert_msg(rung_spec_validate(&s, &err) == 0, "%s", err.msg);
	s.env = calloc(2, sizeof(char *));
	s.env[0] = strdup("=x");
	ck_assert_int_eq(rung_spec_validate(&s, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "env[0]"));
	rung_spec_release(&s);

	unsigned caps = 0;
	ck_assert_int_eq(rung_caps_parse("exec,run_code", &caps, &err), 0);
	ck_assert_uint_eq(caps, RUNG_CAP_EXEC | RUNG_CAP_RUN_CODE);
	ck_assert_int_eq(rung_caps_parse("exec,sudo", &caps, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "sudo"));
}
END_TEST

/* ---- labels and ids -------------------------------------------------------------------- */

static bool is_hex(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

START_TEST(test_labels)
{
	char l[65];
	/* FIPS 180-2 test vector: the label is the full SHA-256 of the part. */
	rt_label_of("abc", l);
	ck_assert_str_eq(l, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

	struct rung_key k = {"scope-1", "thread-1", "agent-1"};
	struct rt_labels a, b;
	rt_labels_compute(&k, &a);
	ck_assert(is_hex(a.scope, 64) && is_hex(a.thread, 64) && is_hex(a.agent, 64));
	char want[65];
	rt_label_of("scope-1", want);
	ck_assert_str_eq(a.scope, want);
	rt_label_of("thread-1", want);
	ck_assert_str_eq(a.thread, want);
	rt_label_of("agent-1", want);
	ck_assert_str_eq(a.agent, want);
	/* Different parts, different labels; the same part in any slot, the same label. */
	ck_assert_str_ne(a.scope, a.thread);
	struct rung_key k2 = {"scope-2", "thread-1", "agent-1"};
	rt_labels_compute(&k2, &b);
	ck_assert_str_ne(a.scope, b.scope);
	ck_assert_str_eq(a.thread, b.thread);
	/* Parts that share a long prefix still differ in the label (no truncation). */
	char p1[300], p2[300];
	memset(p1, 'x', 255);
	p1[255] = 0;
	strcpy(p2, p1);
	p2[254] = 'y';
	char l1[65], l2[65];
	rt_label_of(p1, l1);
	rt_label_of(p2, l2);
	ck_assert_str_ne(l1, l2);
	ck_assert_uint_eq(strlen(l1), 64);
}
END_TEST

START_TEST(test_ids)
{
	struct rung_key k = {"s", "t", "a"};
	char id1[RT_ID_LEN + 1], id2[RT_ID_LEN + 1], id3[RT_ID_LEN + 1];
	rt_id_compute(&k, "pytest", id1);
	rt_id_compute(&k, "pytest", id2);
	ck_assert_str_eq(id1, id2); /* stable */
	ck_assert(rt_id_valid(id1));
	ck_assert(is_hex(id1, RT_ID_LEN));
	rt_id_compute(&k, "shell", id3);
	ck_assert_str_ne(id1, id3); /* distinct per kind */
	/* Part boundaries matter: ("ab","c") is not ("a","bc"). */
	struct rung_key x = {"ab", "c", "a"}, y = {"a", "bc", "a"};
	rt_id_compute(&x, "k", id1);
	rt_id_compute(&y, "k", id2);
	ck_assert_str_ne(id1, id2);
	/* Every part feeds the id. */
	struct rung_key z = {"s", "t", "b"};
	rt_id_compute(&k, "k", id1);
	rt_id_compute(&z, "k", id2);
	ck_assert_str_ne(id1, id2);

	ck_assert(!rt_id_valid(NULL));
	ck_assert(!rt_id_valid(""));
	ck_assert(!rt_id_valid("../../../../etc/passwd"));
	ck_assert(!rt_id_valid("0123456789ABCDEF0123456789abcdef"));
	ck_assert(!rt_id_valid("0123456789abcdef0123456789abcde"));

	struct rung_err err = {0};
	struct rung_key bad = {"", "t", "a"};
	ck_assert_int_eq(rt_key_validate(&bad, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "key.scope"));
	bad = (struct rung_key){"s", NULL, "a"};
	ck_assert_int_eq(rt_key_validate(&bad, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "key.thread"));
	bad = (struct rung_key){"s", "t", "a\nb"};
	ck_assert_int_eq(rt_key_validate(&bad, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "key.agent"));
	char big[300];
	memset(big, 'a', 257);
	big[257] = 0;
	bad = (struct rung_key){big, "t", "a"};
	ck_assert_int_eq(rt_key_validate(&bad, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "256"));
	ck_assert_int_eq(rt_key_validate(&k, &err), 0);
}
END_TEST

/* ---- egress entries ----------------------------------------------------------------------- */

START_TEST(test_egress_syntax)
{
	static const char *const good[] = {"example.com",
					   "pypi.org:443",
					   "*.pythonhosted.org",
					   "*.example.com:8443",
					   "files.pythonhosted.org",
					   "a-b.c_d.example",
					   "10.0.0.0/8",
					   "192.168.1.10",
					   "192.168.1.10:53",
					   "0.0.0.0/0",
					   "::1",
					   "2001:db8::/32",
					   "[::1]:443",
					   "[2001:db8::/48]:80",
					   "[2001:db8::1]",
					   "localhost",
					   "example.com."};
	static const char *const bad[] = {"",
					  "http://example.com",
					  "example.com/path",
					  "example.com:0",
					  "example.com:65536",
					  "example.com:",
					  "example.com:http",
					  ":80",
					  "*.",
					  "*",
					  "a.*.com",
					  "-a.com",
					  "a-.com",
					  "a..b",
					  ".com",
					  "exa mple.com",
					  "1.2.3.4/33",
					  "300.1.1.1",
					  "1.2.3",
					  "123",
					  "[::1",
					  "[::1]:x",
					  "[::1]x",
					  "2001:db8::/129",
					  "[1.2.3.4]:80",
					  "example.com:80:90",
					  "ex\nample.com",
					  "user@example.com"};
	struct rung_err err = {0};
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(good); i++)
		ck_assert_msg(rt_egress_entry_check(good[i], &err) == 0, "'%s' refused: %s",
			      good[i], err.msg);
	char accepted[2048] = "";
	for (size_t i = 0; i < RUNG_ARRAY_SIZE(bad); i++) {
		rung_err_clear(&err);
		if (rt_egress_entry_check(bad[i], &err) != -EINVAL) {
			size_t l = strlen(accepted);
			snprintf(accepted + l, sizeof(accepted) - l, " '%s'", bad[i]);
		} else {
			ck_assert_msg(err.msg[0], "'%s': no message", bad[i]);
		}
	}
	ck_assert_msg(!accepted[0], "accepted:%s", accepted);
	char longname[400];
	memset(longname, 'a', 350);
	longname[350] = 0;
	ck_assert_int_eq(rt_egress_entry_check(longname, &err), -EINVAL);
	/* a label longer than 63 characters */
	char lab[100];
	memset(lab, 'b', 64);
	strcpy(lab + 64, ".com");
	ck_assert_int_eq(rt_egress_entry_check(lab, &err), -EINVAL);
}
END_TEST

Suite *runtime_spec_suite(void)
{
	Suite *s = suite_create("runtime_spec");
	TCase *tc = tcase_create("spec");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_defaults);
	tcase_add_test(tc, test_every_field);
	tcase_add_test(tc, test_unknown_fields);
	tcase_add_test(tc, test_wrong_types);
	tcase_add_test(tc, test_out_of_range);
	tcase_add_test(tc, test_bad_values);
	tcase_add_test(tc, test_validate_by_hand);
	suite_add_tcase(s, tc);
	tc = tcase_create("labels");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_labels);
	tcase_add_test(tc, test_ids);
	tcase_add_test(tc, test_egress_syntax);
	suite_add_tcase(s, tc);
	return s;
}
