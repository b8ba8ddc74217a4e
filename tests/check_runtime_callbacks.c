/*
 * tests/check_runtime_callbacks.c: the host's callback engine (runtime/callbacks.c) without a
 * sandbox: bytes in (split anywhere, several lines per chunk), answers out. Oversize lines are
 * refused with their id and skipped to their newline, depth is counted outside strings, a
 * malformed or unknown call reaches no handler, the rate limit refuses the excess, a timeout
 * is answered while the handler still runs, and freeing waits for running handlers.
 */
#include <check.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/callbacks.h"

static atomic_int calls;

static int echo(void *ud, const struct rung_callback_call *c, char **result, struct rung_err *err)
{
	atomic_fetch_add(&calls, 1);
	*result = strdup(c->args);
	return 0;
}

static int sleepy(void *ud, const struct rung_callback_call *c, char **result,
		  struct rung_err *err)
{
	atomic_fetch_add(&calls, 1);
	usleep(400000);
	return rung_err_set(err, EIO, "late");
}

static const struct rung_callback tab[] = {{"echo", echo, NULL}, {"sleepy", sleepy, NULL}};

/* Poll the engine until out holds `lines` answer lines (or 5 s). */
static void collect(struct rt_cb *cb, struct rung_buf *out, int lines)
{
	uint64_t end = rung_now_ms() + 5000;
	for (;;) {
		int n = 0;
		for (size_t i = 0; i < out->len; i++)
			n += out->data[i] == '\n';
		if (n >= lines || rung_now_ms() > end)
			break;
		struct pollfd p = {rt_cb_wake_fd(cb), POLLIN, 0};
		poll(&p, 1, 20);
		rt_cb_poll(cb, out);
	}
	rung_buf_append(out, "", 1);
	out->len--;
}

static struct rt_cb *engine(struct rung_callback_limits lim)
{
	struct rung_exec_req req = {.callbacks = tab, .n_callbacks = 2, .cb_limits = lim};
	struct rt_cb *cb = NULL;
	struct rung_err err = {0};
	ck_assert_msg(rt_cb_new(&req, &cb, &err) == 0, "%s", err.msg);
	return cb;
}

START_TEST(test_split_and_refusals)
{
	atomic_store(&calls, 0);
	struct rt_cb *cb = engine((struct rung_callback_limits){.max_bytes = 100, .max_depth = 3});
	struct rung_buf out = {0};
	/* one call split in three chunks, then two lines in one chunk */
	const char *a = "{\"id\":1,\"na", *b = "me\":\"echo\",\"args\":{\"s\":\"[[[[\"}", *c = "}\n";
	rt_cb_input(cb, (const uint8_t *)a, strlen(a), &out);
	rt_cb_input(cb, (const uint8_t *)b, strlen(b), &out);
	rt_cb_input(cb, (const uint8_t *)c, strlen(c), &out);
	const char *two = "{\"id\":2,\"name\":\"nosuch\"}\n{\"id\":3,\"name\":\"echo\",\"args\":"
			  "[[[[1]]]]}\n";
	rt_cb_input(cb, (const uint8_t *)two, strlen(two), &out);
	/* 300 bytes on one line, arriving in pieces, then a good call after it */
	char big[300];
	memset(big, 'x', sizeof(big));
	memcpy(big, "{\"id\":4,\"name\":\"echo\",\"args\":\"", 31);
	rt_cb_input(cb, (const uint8_t *)big, 150, &out);
	rt_cb_input(cb, (const uint8_t *)big + 150, 150, &out);
	const char *tail = "\"}\nnot json\n{\"id\":5,\"name\":\"echo\"}\n";
	rt_cb_input(cb, (const uint8_t *)tail, strlen(tail), &out);
	collect(cb, &out, 6);
	const char *s = (const char *)out.data;
	ck_assert_msg(strstr(s, "{\"id\":1,\"ok\":true,\"result\":{\"s\":\"[[[[\"}}\n"), "%s", s);
	ck_assert_msg(strstr(s, "{\"id\":2,\"ok\":false,") && strstr(s, "\"code\":\"unknown\""), "%s",
		      s);
	ck_assert_msg(strstr(s, "{\"id\":3,\"ok\":false,\"error\":\"arguments nested too deeply\""),
		      "%s", s);
	ck_assert_msg(strstr(s, "{\"id\":4,\"ok\":false,\"error\":\"a call is limited to 100 bytes\""),
		      "%s", s);
	ck_assert_msg(strstr(s, "{\"id\":0,\"ok\":false,") && strstr(s, "bad_request"), "%s", s);
	ck_assert_msg(strstr(s, "{\"id\":5,\"ok\":true,\"result\":{}}"), "%s", s);
	ck_assert_int_eq(atomic_load(&calls), 2); /* ids 1 and 5 only */
	struct rt_cb_stats st;
	rt_cb_stats(cb, &st);
	ck_assert_uint_eq(st.calls, 6);
	ck_assert_uint_eq(st.refused, 4);
	rung_buf_release(&out);
	rt_cb_free(cb);
}
END_TEST

START_TEST(test_rate_and_timeout)
{
	atomic_store(&calls, 0);
	struct rt_cb *cb = engine((struct rung_callback_limits){.rate_per_s = 5, .timeout_ms = 100});
	struct rung_buf out = {0};
	for (int i = 1; i <= 8; i++) {
		char l[80];
		int n = snprintf(l, sizeof(l), "{\"id\":%d,\"name\":\"echo\"}\n", i);
		rt_cb_input(cb, (const uint8_t *)l, (size_t)n, &out);
	}
	collect(cb, &out, 8);
	const char *s = (const char *)out.data;
	int limited = 0;
	for (const char *p = s; (p = strstr(p, "rate_limited")); p++)
		limited++;
	ck_assert_int_eq(limited, 3);
	ck_assert_int_eq(atomic_load(&calls), 5);
	rung_buf_release(&out);
	out = (struct rung_buf){0};
	/* a handler past its deadline: "timeout" while it still runs; free waits for it */
	usleep(1100000); /* the bucket refills */
	const char *l = "{\"id\":9,\"name\":\"sleepy\"}\n";
	rt_cb_input(cb, (const uint8_t *)l, strlen(l), &out);
	uint64_t t0 = rung_now_ms();
	collect(cb, &out, 1);
	ck_assert_msg(strstr((const char *)out.data, "{\"id\":9,\"ok\":false,") &&
			  strstr((const char *)out.data, "\"code\":\"timeout\""),
		      "%s", (const char *)out.data);
	ck_assert_uint_lt(rung_now_ms() - t0, 350);
	rt_cb_free(cb); /* joins the sleeper */
	ck_assert_uint_ge(rung_now_ms() - t0, 350);
	rung_buf_release(&out);
}
END_TEST

START_TEST(test_bad_table)
{
	static const struct rung_callback bad[] = {{"has space", echo, NULL}};
	struct rung_exec_req req = {.callbacks = bad, .n_callbacks = 1};
	struct rt_cb *cb = NULL;
	struct rung_err err = {0};
	ck_assert_int_eq(rt_cb_new(&req, &cb, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "callbacks[0]"), "%s", err.msg);
}
END_TEST

Suite *runtime_callbacks_suite(void)
{
	Suite *s = suite_create("runtime_callbacks");
	TCase *tc = tcase_create("engine");
	tcase_add_test(tc, test_split_and_refusals);
	tcase_add_test(tc, test_rate_and_timeout);
	tcase_add_test(tc, test_bad_table);
	suite_add_tcase(s, tc);
	return s;
}
