/*
 * tests/check_common_pid1.c: the setup message the runtime sends a sandbox's pid 1
 * (common/pid1.c): a round trip of every field and step kind, then damaged messages: every
 * truncation, a wrong magic, unknown flags and steps, a NUL inside a string, a filter that is
 * not whole instructions, lying lengths and counts, trailing bytes. Each is an error naming
 * what is wrong, never a crash. Pure: no root needed.
 */
#include <check.h>
#include <linux/filter.h>
#include <stdlib.h>
#include <string.h>

#include "common/pid1.h"
#include "common/util.h"
#include "tests/lib/testutil.h"

static struct sock_filter filt[3] = {{0x20, 0, 0, 4}, {0x15, 0, 1, 62}, {0x06, 0, 0, 0}};

/* A setup with one step of each kind, NULL sources and options among them. */
static void sample(struct rung_pid1_setup *s)
{
	memset(s, 0, sizeof(*s));
	s->new_session = true;
	s->first_conn = true;
	s->newroot = "/var/lib/rung/sandboxes/x/root";
	s->trace = "";
	s->bpf = filt;
	s->bpf_len = sizeof(filt);
	struct rung_mount_plan *p = &s->plan;
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_TMPFS, NULL, "/", "mode=0755", false), 0);
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_BIND_RO, "/usr", "/usr", NULL, true), 0);
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_FILE, "", "/etc/hosts", NULL, false), 0);
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_SYMLINK, "usr/bin", "/bin", NULL, false), 0);
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_DEV, NULL, "/dev", NULL, false), 0);
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_WAIT, NULL, "/work", NULL, false), 0);
	ck_assert_int_eq(rung_mount_plan_add(p, RUNG_M_BIND_RW, "/srv/w", "/work", NULL, false), 0);
}

static void encode(struct rung_pid1_setup *s, char **buf, size_t *len)
{
	struct rung_err err = {0};
	void *p;
	ck_assert_msg(rung_pid1_setup_encode(s, &p, len, &err) == 0, "%s", err.msg);
	*buf = p;
}

static void expect_bad(const char *buf, size_t len, const char *what)
{
	struct rung_pid1_setup d;
	struct rung_err err = {0};
	ck_assert_int_lt(rung_pid1_setup_decode(buf, len, &d, &err), 0);
	ck_assert_msg(strstr(err.msg, what), "want '%s' in: %s", what, err.msg);
	ck_assert_ptr_null(d.newroot); /* released: nothing half-filled stays */
	ck_assert_uint_eq(d.plan.n, 0);
}

START_TEST(test_round_trip)
{
	struct rung_pid1_setup s, d;
	sample(&s);
	char *buf;
	size_t len;
	encode(&s, &buf, &len);
	struct rung_err err = {0};
	ck_assert_msg(rung_pid1_setup_decode(buf, len, &d, &err) == 0, "%s", err.msg);
	ck_assert(d.new_session && !d.lo_up && d.first_conn);
	ck_assert_str_eq(d.newroot, s.newroot);
	ck_assert_str_eq(d.trace, "");
	ck_assert_uint_eq(d.bpf_len, sizeof(filt));
	ck_assert_int_eq(memcmp(d.bpf, filt, sizeof(filt)), 0);
	ck_assert_uint_eq(d.plan.n, s.plan.n);
	for (size_t i = 0; i < s.plan.n; i++) {
		const struct rung_mount *a = &s.plan.m[i], *b = &d.plan.m[i];
		ck_assert_int_eq(a->op, b->op);
		ck_assert_int_eq(a->optional, b->optional);
		ck_assert_str_eq(a->dst, b->dst);
		ck_assert(!a->src == !b->src && (!a->src || !strcmp(a->src, b->src)));
		ck_assert(!a->opts == !b->opts && (!a->opts || !strcmp(a->opts, b->opts)));
	}
	rung_pid1_setup_release(&d);
	rung_mount_plan_release(&s.plan);
	free(buf);
}
END_TEST

/* Cut anywhere short of the end: always an error. */
START_TEST(test_every_truncation)
{
	struct rung_pid1_setup s;
	sample(&s);
	char *buf;
	size_t len;
	encode(&s, &buf, &len);
	for (size_t n = 0; n < len; n++) {
		struct rung_pid1_setup d;
		struct rung_err err = {0};
		ck_assert_msg(rung_pid1_setup_decode(buf, n, &d, &err) < 0, "%zu of %zu bytes", n,
			      len);
		ck_assert_ptr_nonnull(strstr(err.msg, "pid 1 setup: bad message"));
	}
	rung_mount_plan_release(&s.plan);
	free(buf);
}
END_TEST

static void set32(char *p, uint32_t v) { memcpy(p, &v, 4); }

START_TEST(test_damaged_fields)
{
	struct rung_pid1_setup s;
	sample(&s);
	char *buf;
	size_t len;
	encode(&s, &buf, &len);
	size_t root_len = strlen(s.newroot);
	/* offsets: magic 0, flags 4, new root's length 8 and bytes 12, trace's length, filter */
	size_t trace_at = 12 + root_len, bpf_at = trace_at + 4;
	size_t steps_at = bpf_at + 4 + sizeof(filt);
	char *c = malloc(len + 1);

	memcpy(c, buf, len);
	c[0] = 'X';
	expect_bad(c, len, "not a setup message");
	memcpy(c, buf, len);
	set32(c + 4, 0x80);
	expect_bad(c, len, "flags");
	memcpy(c, buf, len);
	c[12] = '\0'; /* a NUL inside the new root */
	expect_bad(c, len, "new root");
	memcpy(c, buf, len);
	c[12] = 'v'; /* not absolute */
	expect_bad(c, len, "new root");
	memcpy(c, buf, len);
	set32(c + 8, 0xfffffff0); /* a length past the end */
	expect_bad(c, len, "new root");
	memcpy(c, buf, len);
	set32(c + trace_at, 0xffffffff); /* no trace: required */
	expect_bad(c, len, "trace");
	memcpy(c, buf, len);
	set32(c + bpf_at, sizeof(filt) - 1); /* not whole instructions */
	expect_bad(c, len, "seccomp filter");
	memcpy(c, buf, len);
	set32(c + bpf_at, 0);
	expect_bad(c, len, "seccomp filter");
	memcpy(c, buf, len);
	set32(c + steps_at, 5000); /* more steps than allowed */
	expect_bad(c, len, "step count");
	memcpy(c, buf, len);
	set32(c + steps_at, s.plan.n + 1); /* more steps than sent */
	expect_bad(c, len, "a mount step");
	memcpy(c, buf, len);
	c[steps_at + 4] = (char)(RUNG_M_WAIT + 1); /* an unknown step */
	expect_bad(c, len, "a mount step");
	memcpy(c, buf, len);
	c[steps_at + 5] = 2; /* optional is a boolean */
	expect_bad(c, len, "a mount step");
	memcpy(c, buf, len);
	c[len] = 0; /* a trailing byte */
	expect_bad(c, len + 1, "trailing bytes");
	expect_bad(c, RUNG_PID1_SETUP_MAX + 1, "not a setup message");

	free(c);
	rung_mount_plan_release(&s.plan);
	free(buf);
}
END_TEST

/* A step without a destination cannot be sent as one: the decoder refuses a missing dst. */
START_TEST(test_missing_destination)
{
	struct rung_pid1_setup s;
	sample(&s);
	char *buf;
	size_t len;
	encode(&s, &buf, &len);
	size_t steps_at = 12 + strlen(s.newroot) + 4 + 4 + sizeof(filt);
	/* first step: op, optional, src (none: 4 bytes), then dst's length */
	set32(buf + steps_at + 4 + 2 + 4, 0xffffffff);
	expect_bad(buf, len, "a mount step");
	rung_mount_plan_release(&s.plan);
	free(buf);
}
END_TEST

Suite *common_pid1_suite(void)
{
	Suite *s = suite_create("common_pid1");
	TCase *tc = tcase_create("setup");
	tcase_add_test(tc, test_round_trip);
	tcase_add_test(tc, test_every_truncation);
	tcase_add_test(tc, test_damaged_fields);
	tcase_add_test(tc, test_missing_destination);
	suite_add_tcase(s, tc);
	return s;
}
