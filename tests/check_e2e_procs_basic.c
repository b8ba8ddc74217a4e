/*
 * tests/check_e2e_procs_basic.c: background processes through the C API on a real sandbox:
 * a server started in the background answers a later exec; logs replay from offsets exactly;
 * follow ends at exit; stdin, signal, wait, kill (the whole tree); list and get; bad input
 * (unknown handle, another sandbox's handle, stdin to an exited process, resize of a process
 * without a terminal, the live maximum); survival across closing the handle (a new router, a
 * new client) and suspend/resume. Tagged "root". RUNG_TEST_RUNG=vm runs it on the vm rung.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/sandbox.h"
#include "tests/lib/testutil.h"

struct fx {
	struct rung_router *r;
	struct rung_sandbox *sb;
};

static void fx_open(struct fx *f, const char *thread)
{
	f->r = spine_router(NULL);
	f->sb = spine_acquire(f->r, "procs", thread, "k", NULL, NULL);
}

static void fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
}

static void start(struct rung_sandbox *sb, const char *script, char *h)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_proc_req req = {.argv = argv};
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_start(sb, &req, h, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(strlen(h), RUNG_PROC_HANDLE_LEN);
}

/* Collected output: bytes in offset order, checked to be contiguous. */
struct col {
	char buf[1 << 16];
	size_t len;
	uint64_t first, next;
	bool any;
};

static int col_out(void *ud, enum rung_stream s, uint64_t off, const void *d, size_t n)
{
	struct col *c = ud;
	(void)s;
	if (!c->any)
		c->first = off, c->any = true;
	ck_assert_msg(off == c->next || !c->next, "offset %llu, expected %llu",
		      (unsigned long long)off, (unsigned long long)c->next);
	c->next = off + n;
	ck_assert(c->len + n <= sizeof(c->buf));
	memcpy(c->buf + c->len, d, n);
	c->len += n;
	return 0;
}

static void logs(struct rung_sandbox *sb, const char *h, uint64_t since, bool follow,
		 struct col *c, struct rung_proc_logs_res *res)
{
	memset(c, 0, sizeof(*c));
	c->next = since;
	struct rung_proc_logs_req req = {.since = since, .follow = follow, .on_output = col_out,
					 .ud = c};
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_logs(sb, h, &req, res, &err) == 0, "%s", err.msg);
}

START_TEST(test_logs_offsets)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, "logs");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	/* 100 lines, then a pause, then 100 more and one on stderr: a known sequence */
	start(f.sb, "i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done; "
		    "read x; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; "
		    "echo err >&2; exit 7", h);
	/* the first half is there once it is written */
	struct col c;
	struct rung_proc_logs_res res;
	uint64_t t0 = rung_now_ms();
	do {
		logs(f.sb, h, 0, false, &c, &res);
	} while (res.end_offset < 690 && rung_now_ms() - t0 < 20000 && !usleep(20000));
	char want[8192];
	size_t wl = 0;
	for (int i = 0; i < 100; i++)
		wl += (size_t)snprintf(want + wl, sizeof(want) - wl, "line%d\n", i);
	ck_assert_uint_eq(res.end_offset, wl);
	ck_assert_uint_eq(c.len, wl);
	ck_assert(!memcmp(c.buf, want, wl));
	ck_assert(!res.exited);
	ck_assert_uint_eq(res.dropped, 0);
	/* part of it from an offset in the middle */
	logs(f.sb, h, 300, false, &c, &res);
	ck_assert_uint_eq(c.first, 300);
	ck_assert(c.len == wl - 300 && !memcmp(c.buf, want + 300, c.len));
	uint64_t mark = res.end_offset;
	/* let it go on: stdin, then follow from the mark until it exits */
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_write(f.sb, h, "go\n", 3, &err) == 0, "%s", err.msg);
	logs(f.sb, h, mark, true, &c, &res);
	ck_assert(res.exited);
	size_t w2 = 0;
	char want2[8192];
	for (int i = 100; i < 200; i++)
		w2 += (size_t)snprintf(want2 + w2, sizeof(want2) - w2, "line%d\n", i);
	memcpy(want2 + w2, "err\n", 4);
	w2 += 4;
	ck_assert_uint_eq(c.len, w2);
	ck_assert(!memcmp(c.buf, want2, w2));
	ck_assert_uint_eq(res.end_offset, mark + w2);
	/* wait and get: exit status 7 */
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 10000, &in, &err), 1);
	ck_assert_int_eq(in.state, RUNG_PROC_EXITED);
	ck_assert_int_eq(in.exit_code, 7);
	ck_assert_uint_eq(in.end_offset, mark + w2);
	ck_assert_str_eq(in.argv[0], "/bin/sh");
	rung_proc_info_release(&in, 1);
	/* stdin to an exited process: -EPIPE */
	ck_assert_int_eq(rung_proc_write(f.sb, h, "x", 1, &err), -EPIPE);
	ck_assert_msg(strstr(err.msg, "exited"), "%s", err.msg);
	/* a process without a terminal cannot be resized; 0x0 is refused first */
	ck_assert_int_eq(rung_proc_resize(f.sb, h, 24, 80, &err), -ENOTTY);
	ck_assert_int_eq(rung_proc_resize(f.sb, h, 0, 0, &err), -EINVAL);
	ck_assert_msg(strstr(err.msg, "rows"), "%s", err.msg);
	ck_assert_int_eq(rung_proc_resize(f.sb, h, 100000, 100000, &err), -EINVAL);
	/* kill forgets it */
	ck_assert_msg(rung_proc_kill(f.sb, h, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rung_proc_get(f.sb, h, &in, &err), -ENOENT);
	fx_close(&f);
}
END_TEST

START_TEST(test_server_and_kill_tree)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, "srv");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	/* a one-shot responder loop on 127.0.0.1:8123, plus a setsid'd daemon child */
	start(f.sb, "setsid sleep 100123 & cd /tmp && echo hello-from-bg > index.html && "
		    "exec python3 -m http.server --bind 127.0.0.1 8123", h);
	struct rung_exec_res res;
	const char *probe =
	    "for i in $(seq 100); do python3 -c 'import urllib.request as u; "
	    "print(u.urlopen(\"http://127.0.0.1:8123/index.html\").read().decode())' "
	    "2>/dev/null && exit 0; sleep 0.1; done; exit 1";
	ck_assert_int_eq(spine_sh(f.sb, probe, &res), 0);
	ck_assert_msg(strstr(res.out, "hello-from-bg"), "%s", res.out);
	rung_exec_res_release(&res);
	/* list shows it running */
	struct rung_proc_info *v;
	size_t n;
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].handle, h);
	ck_assert_int_eq(v[0].state, RUNG_PROC_RUNNING);
	ck_assert_int_gt(v[0].pid, 1);
	rung_proc_info_free(v, n);
	/* kill takes the server and its setsid'd daemon */
	ck_assert_msg(rung_proc_kill(f.sb, h, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(spine_sh(f.sb, "ps -eo args= | grep -c '^sleep 100123'", &res), 1);
	ck_assert_msg(!strncmp(res.out, "0", 1), "%s", res.out);
	rung_exec_res_release(&res);
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	free(v);
	fx_close(&f);
}
END_TEST

START_TEST(test_bad_handles_and_limit)
{
	RUNG_REQUIRE_ROOT();
	struct fx f, g;
	fx_open(&f, "bad1");
	g.r = f.r;
	g.sb = spine_acquire(f.r, "procs", "bad2", "k", NULL, NULL);
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_get(f.sb, "0123456789abcdef", &in, &err), -ENOENT);
	ck_assert_int_eq(rung_proc_signal(f.sb, "../../etc/passwd", 9, &err), -ENOENT);
	start(g.sb, "sleep 1000", h);
	/* another sandbox's handle does not exist here */
	ck_assert_int_eq(rung_proc_get(f.sb, h, &in, &err), -ENOENT);
	ck_assert_int_eq(rung_proc_kill(f.sb, h, &err), -ENOENT);
	ck_assert_msg(rung_proc_get(g.sb, h, &in, &err) == 0, "%s", err.msg);
	rung_proc_info_release(&in, 1);
	/* a signal ends it: wait reports the signal */
	ck_assert_msg(rung_proc_signal(g.sb, h, SIGTERM, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rung_proc_wait(g.sb, h, 10000, &in, &err), 1);
	ck_assert_int_eq(in.exit_code, -1);
	ck_assert_int_eq(in.signal, SIGTERM);
	rung_proc_info_release(&in, 1);
	/* the live maximum */
	char hs[RUNG_PROC_MAX_LIVE][RUNG_PROC_HANDLE_LEN + 1];
	for (int i = 0; i < RUNG_PROC_MAX_LIVE; i++)
		start(f.sb, "sleep 1000", hs[i]);
	const char *argv[] = {"sleep", "1000", NULL};
	struct rung_proc_req req = {.argv = argv};
	ck_assert_int_eq(rung_proc_start(f.sb, &req, h, &err), -EAGAIN);
	ck_assert_msg(strstr(err.msg, "64"), "%s", err.msg);
	ck_assert_msg(rung_proc_kill(f.sb, hs[0], &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_proc_start(f.sb, &req, h, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_dispose(f.r, rung_sandbox_id(g.sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(g.sb);
	fx_close(&f);
}
END_TEST

START_TEST(test_survives_client_and_suspend)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_open(&f, "surv");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	start(f.sb, "i=0; while true; do echo tick$i; i=$((i+1)); sleep 0.05; done", h);
	char id[128];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(f.sb));
	struct rung_err err = {0};
	ck_assert_msg(rung_suspend(f.sb, &err) == 0, "%s", err.msg);
	/* a new client: another router, the sandbox opened by id */
	rung_sandbox_close(f.sb);
	ck_assert_msg(rung_sandbox_open(f.r, id, NULL, &f.sb, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_resume(f.sb, &err) == 0, "%s", err.msg);
	struct rung_proc_info in;
	ck_assert_msg(rung_proc_get(f.sb, h, &in, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(in.state, RUNG_PROC_RUNNING);
	uint64_t e0 = in.end_offset;
	rung_proc_info_release(&in, 1);
	usleep(300000);
	ck_assert_msg(rung_proc_get(f.sb, h, &in, &err) == 0, "%s", err.msg);
	ck_assert_uint_gt(in.end_offset, e0); /* it runs on */
	rung_proc_info_release(&in, 1);
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 0, NULL, &err), 0);
	fx_close(&f);
}
END_TEST

Suite *e2e_procs_basic_suite(void)
{
	Suite *s = suite_create("e2e_procs_basic");
	TCase *tc = spine_tcase(s, "procs", 180);
	tcase_add_test(tc, test_logs_offsets);
	tcase_add_test(tc, test_server_and_kill_tree);
	tcase_add_test(tc, test_bad_handles_and_limit);
	tcase_add_test(tc, test_survives_client_and_suspend);
	return s;
}
