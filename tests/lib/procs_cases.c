/*
 * tests/lib/procs_cases.c: the background-process cases of e2e_procs_* (check_e2e_procs_*.c),
 * written once for every rung: each suite gives its rung's router and acquire.
 * A server started in the background answers a later exec; logs replay from offsets exactly;
 * follow ends at exit; stdin, signal, wait, kill (the whole tree); list and get; bad input
 * (unknown handle, another sandbox's handle, stdin to an exited process, resize of a process
 * without a terminal, 0x0 and 100000x100000, the live maximum); survival across closing the
 * handle (a new client opening it by id) and suspend/resume.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "tests/lib/procs_cases.h"

/* The rung under test: acquire(r, thread, idle_s) gives a running sandbox of it. */
static const struct procs_env *env;

#define fx procs_fx

void procs_fx_open(struct fx *f, const char *thread, unsigned idle_s)
{
	f->r = env->router();
	f->sb = env->acquire(f->r, thread, idle_s);
}

static void fx_open(struct fx *f, const char *thread)
{
	procs_fx_open(f, thread, 0);
}

void procs_fx_close(struct fx *f)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_dispose(f->r, rung_sandbox_id(f->sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(f->sb);
	rung_router_free(f->r);
}

/* `sh -c script` in sb, asserting the exec worked: its exit code, output in res. */
int procs_sh(struct rung_sandbox *sb, const char *script, struct rung_exec_res *res)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct rung_exec_req req = {.argv = argv, .timeout_ms = 60000};
	struct rung_err err = {0};
	ck_assert_msg(rung_exec(sb, &req, res, &err) == 0, "%s", err.msg);
	return res->exit_code;
}

void procs_start(struct rung_sandbox *sb, const char *script, char *h)
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

static void case_logs_offsets(void)
{
	env->require();
	struct fx f;
	fx_open(&f, "logs");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	/* 100 lines, then a pause, then 100 more and one on stderr: a known sequence */
	procs_start(f.sb, "i=0; while [ $i -lt 100 ]; do echo line$i; i=$((i+1)); done; "
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
	procs_fx_close(&f);
}

/* The sandbox's processes whose command line starts "sleep 100123" (ps differs by image). */
#define COUNT_SLEEP                                                                                \
	"for p in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $p; echo; done | grep -c '^sleep 100123'"

#define COUNT_SLEEP1000                                                                            \
	"for p in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $p; echo; done | grep -c '^sleep 100[01]'"

static void case_server_and_kill_tree(void)
{
	env->require();
	struct fx f;
	fx_open(&f, "srv");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	/* a one-shot responder loop on 127.0.0.1:8123, plus a setsid'd daemon child */
	/* a web server (python3's, else busybox's) on 127.0.0.1:8123, plus a setsid'd daemon */
	procs_start(f.sb, "setsid sleep 100123 & mkdir -p /tmp/www && cd /tmp/www && "
		    "echo hello-from-bg > index.html && if command -v python3 >/dev/null; then "
		    "exec python3 -m http.server --bind 127.0.0.1 8123; else "
		    "exec busybox httpd -f -p 127.0.0.1:8123 -h /tmp/www; fi", h);
	struct rung_exec_res res;
	const char *probe =
	    "get() { if command -v python3 >/dev/null; then python3 -c 'import urllib.request "
	    "as u; print(u.urlopen(\"http://127.0.0.1:8123/index.html\").read().decode())'; "
	    "else busybox wget -qO- http://127.0.0.1:8123/index.html; fi; }; "
	    "for i in $(seq 100); do get 2>/dev/null && exit 0; sleep 0.1; done; exit 1";
	ck_assert_int_eq(procs_sh(f.sb, probe, &res), 0);
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
	ck_assert_int_eq(procs_sh(f.sb, COUNT_SLEEP, &res), 0);
	ck_assert_msg(!strcmp(res.out, "1\n"), "%s", res.out);
	rung_exec_res_release(&res);
	ck_assert_msg(rung_proc_kill(f.sb, h, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(procs_sh(f.sb, COUNT_SLEEP, &res), 1);
	ck_assert_msg(!strcmp(res.out, "0\n"), "%s", res.out);
	rung_exec_res_release(&res);
	ck_assert_msg(rung_proc_list(f.sb, &v, &n, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(n, 0);
	free(v);
	procs_fx_close(&f);
}

static void case_bad_handles_and_limit(void)
{
	env->require();
	struct fx f, g;
	fx_open(&f, "bad1");
	g.r = f.r;
	g.sb = env->acquire(f.r, "bad2", 0);
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_get(f.sb, "0123456789abcdef", &in, &err), -ENOENT);
	ck_assert_int_eq(rung_proc_signal(f.sb, "../../etc/passwd", 9, &err), -ENOENT);
	procs_start(g.sb, "sleep 1000", h);
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
	/* the live maximum, also for starts that race for its last places: 6 clients at once
	 * for 2 places get exactly 2 */
	char hs[RUNG_PROC_MAX_LIVE][RUNG_PROC_HANDLE_LEN + 1];
	for (int i = 0; i < RUNG_PROC_MAX_LIVE - 2; i++)
		procs_start(f.sb, "sleep 1000", hs[i]);
	const char *argv[] = {"sleep", "1000", NULL};
	struct rung_proc_req req = {.argv = argv};
	pid_t racers[6];
	for (int i = 0; i < 6; i++)
		if ((racers[i] = fork()) == 0) {
			int r = rung_proc_start(f.sb, &req, h, &err);
			_exit(r == 0 ? 0 : r == -EAGAIN ? 1 : 2);
		}
	int won = 0, refused = 0;
	for (int i = 0; i < 6; i++) {
		int st = 0;
		ck_assert_int_eq(waitpid(racers[i], &st, 0), racers[i]);
		won += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		refused += WIFEXITED(st) && WEXITSTATUS(st) == 1;
	}
	ck_assert_msg(won == 2 && refused == 4, "6 racing starts for 2 places: %d started, %d "
		      "refused", won, refused);
	ck_assert_int_eq(rung_proc_start(f.sb, &req, h, &err), -EAGAIN);
	ck_assert_msg(strstr(err.msg, "64"), "%s", err.msg);
	ck_assert_msg(rung_proc_kill(f.sb, hs[0], &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_proc_start(f.sb, &req, h, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_dispose(f.r, rung_sandbox_id(g.sb), NULL, &err) == 0, "%s", err.msg);
	rung_sandbox_close(g.sb);
	procs_fx_close(&f);
}

static void case_survives_client_and_suspend(void)
{
	env->require();
	struct fx f;
	fx_open(&f, "surv");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	procs_start(f.sb, "i=0; while true; do echo tick$i; i=$((i+1)); sleep 0.05; done", h);
	char id[128];
	snprintf(id, sizeof(id), "%s", rung_sandbox_id(f.sb));
	struct rung_err err = {0};
	ck_assert_msg(rung_suspend(f.sb, &err) == 0, "%s", err.msg);
	/* a new client: another router, the sandbox opened by id */
	rung_sandbox_close(f.sb);
	ck_assert_msg(rung_sandbox_open(f.r, id, NULL, &f.sb, &err) == 0, "%s", err.msg);
	/* the first proc call resumes it, as exec does */
	struct rung_proc_info in;
	ck_assert_msg(rung_proc_get(f.sb, h, &in, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(in.state, RUNG_PROC_RUNNING);
	uint64_t e0 = in.end_offset;
	rung_proc_info_release(&in, 1);
	/* it runs on: more output comes (within 10 s: a loaded host schedules the loop late) */
	uint64_t e1 = e0;
	for (int i = 0; i < 100 && e1 == e0; i++) {
		usleep(100000);
		ck_assert_msg(rung_proc_get(f.sb, h, &in, &err) == 0, "%s", err.msg);
		e1 = in.end_offset;
		rung_proc_info_release(&in, 1);
	}
	ck_assert_uint_gt(e1, e0);
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 0, NULL, &err), 0);
	procs_fx_close(&f);
}

/* Everything the process wrote, gathered from 0, until needle appears after `from` bytes of
 * it (or timeout_ms): where it ends, or 0 if it never appeared. */
size_t procs_wait_output(struct rung_sandbox *sb, const char *h, size_t from, const char *needle,
			  unsigned timeout_ms)
{
	static struct col c;
	struct rung_proc_logs_res res;
	uint64_t t0 = rung_now_ms();
	for (;;) {
		logs(sb, h, 0, false, &c, &res);
		if (c.len > from) {
			const char *p = memmem(c.buf + from, c.len - from, needle, strlen(needle));
			if (p)
				return (size_t)(p - c.buf) + strlen(needle);
		}
		if (rung_now_ms() - t0 > timeout_ms) {
			fprintf(stderr, "no '%s' in: %.*s\n", needle, (int)c.len, c.buf);
			return 0;
		}
		usleep(30000);
	}
}

struct att {
	int wfd;
	bool seen, detached;
};

static int att_output(void *ud, enum rung_stream s, uint64_t off, const void *d, size_t n)
{
	struct att *a = ud;
	(void)s, (void)off;
	if (!a->seen && memmem(d, n, "attached-5", 10)) {
		a->seen = true;
		ck_assert_int_eq(write(a->wfd, "\x10\x11", 2), 2); /* the user's detach key */
	}
	return 0;
}

static int att_input(void *ud, void *data, size_t *len)
{
	struct att *a = ud;
	const char *k = memmem(data, *len, "\x10\x11", 2);
	if (!k)
		return 0;
	*len = (size_t)(k - (const char *)data);
	a->detached = true;
	return -1;
}

static void case_pty(void)
{
	env->require();
	struct fx f;
	fx_open(&f, "pty");
	const char *argv[] = {"/bin/sh", "-i", NULL};
	struct rung_proc_req req = {.argv = argv, .pty = true, .rows = 30, .cols = 100};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	ck_assert_msg(rung_proc_start(f.sb, &req, h, &err) == 0, "%s", err.msg);
	const char *size = "{ stty size 2>/dev/null || busybox stty size; } | tr ' ' x\n";
	ck_assert_msg(rung_proc_write(f.sb, h, size, strlen(size), &err) == 0, "%s", err.msg);
	size_t at = procs_wait_output(f.sb, h, 0, "30x100", 20000);
	ck_assert_msg(at, "stty size did not see 30x100");
	/* a resize: the program sees the new size */
	ck_assert_msg(rung_proc_resize(f.sb, h, 40, 120, &err) == 0, "%s", err.msg);
	ck_assert_msg(rung_proc_write(f.sb, h, size, strlen(size), &err) == 0, "%s", err.msg);
	at = procs_wait_output(f.sb, h, at, "40x120", 20000);
	ck_assert_msg(at, "stty size did not follow the resize to 40x120");
	/* Ctrl-C reaches the foreground job, not the shell */
	const char *job = "sleep 1000; echo job-ended-$((6*7))\n";
	ck_assert_msg(rung_proc_write(f.sb, h, job, strlen(job), &err) == 0, "%s", err.msg);
	usleep(500000);
	ck_assert_msg(rung_proc_write(f.sb, h, "\x03", 1, &err) == 0, "%s", err.msg);
	const char *after = "echo still-here-$((6*7))\n";
	ck_assert_msg(rung_proc_write(f.sb, h, after, strlen(after), &err) == 0, "%s", err.msg);
	ck_assert_msg(procs_wait_output(f.sb, h, at, "still-here-42", 20000),
		      "the shell did not survive Ctrl-C");
	struct rung_proc_info in;
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 0, &in, &err), 0);
	ck_assert(in.pty);
	rung_proc_info_release(&in, 1);
	/* attach: input from a pipe, output until the detach key (Ctrl-P Ctrl-Q) */
	struct att at_ = {.seen = false};
	int pp[2];
	ck_assert_int_eq(pipe(pp), 0);
	at_.wfd = pp[1];
	const char *cmd = "echo attached-$((2+3))\n";
	ck_assert_int_eq(write(pp[1], cmd, strlen(cmd)), (ssize_t)strlen(cmd));
	struct rung_proc_attach_req ar = {.since = in.end_offset, .in_fd = pp[0],
					  .on_input = att_input, .on_output = att_output, .ud = &at_};
	ck_assert_int_eq(rung_proc_attach(f.sb, h, &ar, &err), 0);
	ck_assert(at_.seen && at_.detached);
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 0, NULL, &err), 0); /* it runs on */
	/* attach again: `exit` ends the shell, and the attach with it */
	ck_assert_int_eq(write(pp[1], "exit 3\n", 7), 7);
	at_.detached = false;
	ck_assert_int_eq(rung_proc_attach(f.sb, h, &ar, &err), 1);
	ck_assert(!at_.detached);
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 20000, &in, &err), 1);
	ck_assert_int_eq(in.exit_code, 3);
	rung_proc_info_release(&in, 1);
	close(pp[0]);
	close(pp[1]);
	procs_fx_close(&f);
}

static void case_pty_eof(void)
{
	env->require();
	struct fx f;
	fx_open(&f, "ptyeof");
	const char *argv[] = {"/bin/sh", "-i", NULL};
	struct rung_proc_req req = {.argv = argv, .pty = true};
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	struct rung_proc_info in;
	ck_assert_msg(rung_proc_start(f.sb, &req, h, &err) == 0, "%s", err.msg);
	/* its own devpts: this one terminal and ptmx, nothing of the host's */
	struct rung_exec_res res;
	ck_assert_int_eq(procs_sh(f.sb, "ls /dev/pts | tr '\\n' ' '", &res), 0);
	ck_assert_str_eq(res.out, "0 ptmx ");
	rung_exec_res_release(&res);
	/* the default size is 24x80 */
	const char *size = "{ stty size 2>/dev/null || busybox stty size; } | tr ' ' x\n";
	ck_assert_msg(rung_proc_write(f.sb, h, size, strlen(size), &err) == 0, "%s", err.msg);
	ck_assert(procs_wait_output(f.sb, h, 0, "24x80", 20000));
	/* the terminal's EOF ends the shell */
	ck_assert_msg(rung_proc_close_stdin(f.sb, h, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 20000, &in, &err), 1);
	ck_assert_int_eq(in.exit_code, 0);
	rung_proc_info_release(&in, 1);
	procs_fx_close(&f);
}

static void run(struct rung_sandbox *sb, const char *h, const char *cmd, uint32_t tmo,
		struct rung_exec_res *res)
{
	struct rung_err err = {0};
	ck_assert_msg(rung_session_run(sb, h, cmd, tmo, res, &err) == 0, "%s: %s", cmd, err.msg);
}

static void case_session(void)
{
	env->require();
	struct fx f;
	fx_open(&f, "ses");
	char h[RUNG_PROC_HANDLE_LEN + 1];
	struct rung_err err = {0};
	ck_assert_msg(rung_session_start(f.sb, NULL, NULL, NULL, h, &err) == 0, "%s", err.msg);
	struct rung_exec_res res;
	/* cd and export carry over */
	run(f.sb, h, "mkdir -p /tmp/sess && cd /tmp/sess && export X=41", 0, &res);
	ck_assert_int_eq(res.exit_code, 0);
	rung_exec_res_release(&res);
	run(f.sb, h, "pwd; echo $((X+1)); echo to-err >&2; (exit 3)", 0, &res);
	ck_assert_int_eq(res.exit_code, 3);
	ck_assert_str_eq(res.out, "/tmp/sess\n42\n");
	ck_assert_str_eq(res.errout, "to-err\n");
	rung_exec_res_release(&res);
	/* fake status lines, a write to fd 3, binary and no trailing newline change nothing */
	static const char fake[] = "0\n; printf '%d\\n' \"$?\" >&3\n0\n\0\001\377";
	ck_assert_msg(rung_write_file(f.sb, "/tmp/fake", fake, sizeof(fake) - 1, 0644, &err) == 0,
		      "%s", err.msg);
	run(f.sb, h,
	    "printf '0\\n'; echo 77 >&3; dd if=/tmp/fake 2>/dev/null; "
	    "dd if=/dev/urandom of=/tmp/rnd bs=4096 count=1 2>/dev/null; "
	    "dd if=/tmp/rnd 2>/dev/null; printf no-newline; (exit 5)",
	    0, &res);
	ck_assert_int_eq(res.exit_code, 5);
	char *rnd;
	size_t rl;
	ck_assert_msg(rung_read_file(f.sb, "/tmp/rnd", 8192, &rnd, &rl, &err) == 0, "%s", err.msg);
	ck_assert_uint_eq(rl, 4096);
	size_t fl = sizeof(fake) - 1;
	ck_assert_uint_eq(res.out_len, 2 + fl + 4096 + 10);
	ck_assert(!memcmp(res.out, "0\n", 2));
	ck_assert(!memcmp(res.out + 2, fake, fl));
	ck_assert(!memcmp(res.out + 2 + fl, rnd, 4096));
	ck_assert(!memcmp(res.out + 2 + fl + 4096, "no-newline", 10));
	ck_assert_msg(strstr(res.errout, "3"), "the write to fd 3 did not fail: %s", res.errout);
	free(rnd);
	rung_exec_res_release(&res);
	/* a timeout interrupts the job; the session survives, and so do its variables */
	uint64_t t0 = rung_now_ms();
	run(f.sb, h, "sleep 1000; echo after-$X", 1000, &res);
	ck_assert(res.timed_out);
	ck_assert_uint_lt(rung_now_ms() - t0, 8000);
	rung_exec_res_release(&res);
	run(f.sb, h, "trap '' INT; sleep 1001", 1000, &res); /* ignores SIGINT: killed */
	ck_assert(res.timed_out);
	rung_exec_res_release(&res);
	run(f.sb, h, "echo alive-$X; pwd", 0, &res);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_msg(!strncmp(res.out, "alive-41\n/tmp/sess\n", 20), "%s", res.out);
	rung_exec_res_release(&res);
	/* the job's processes are gone, the shell is not */
	ck_assert_int_eq(procs_sh(f.sb, COUNT_SLEEP1000, &res), 1);
	ck_assert_str_eq(res.out, "0\n");
	rung_exec_res_release(&res);
	/* it is a background process: listed, as a session */
	struct rung_proc_info in;
	ck_assert_msg(rung_proc_get(f.sb, h, &in, &err) == 0, "%s", err.msg);
	ck_assert(in.session);
	ck_assert_int_eq(in.state, RUNG_PROC_RUNNING);
	rung_proc_info_release(&in, 1);
	/* exit ends the session: that run and the later ones are -EPIPE */
	ck_assert_int_eq(rung_session_run(f.sb, h, "exit 4", 0, &res, &err), -EPIPE);
	ck_assert_msg(strstr(err.msg, "session"), "%s", err.msg);
	ck_assert_int_eq(rung_session_run(f.sb, h, "echo x", 0, &res, &err), -EPIPE);
	ck_assert_int_eq(rung_proc_wait(f.sb, h, 10000, &in, &err), 1);
	ck_assert_int_eq(in.exit_code, 4);
	rung_proc_info_release(&in, 1);
	/* kill forgets it, and its command files' directory goes */
	ck_assert_int_eq(procs_sh(f.sb, "ls -a /dev/shm /tmp | grep -c rung-session", &res), 0);
	ck_assert_str_eq(res.out, "1\n");
	rung_exec_res_release(&res);
	ck_assert_int_eq(rung_proc_kill(f.sb, h, &err), 0);
	ck_assert_int_eq(procs_sh(f.sb, "ls -a /dev/shm /tmp | grep -c rung-session", &res), 1);
	ck_assert_str_eq(res.out, "0\n");
	rung_exec_res_release(&res);
	/* a plain process is no session */
	char p[RUNG_PROC_HANDLE_LEN + 1];
	procs_start(f.sb, "sleep 1000", p);
	ck_assert_int_eq(rung_session_run(f.sb, p, "true", 0, &res, &err), -EINVAL);
	procs_fx_close(&f);
}

void procs_cases_run(const struct procs_env *e, enum procs_case c)
{
	env = e;
	if (c >= PROCS_AGENTSIDE) {
		procs_life_run(e, c);
		return;
	}
	switch (c) {
	case PROCS_LOGS: case_logs_offsets(); break;
	case PROCS_SERVER: case_server_and_kill_tree(); break;
	case PROCS_BAD: case_bad_handles_and_limit(); break;
	case PROCS_SURVIVE: case_survives_client_and_suspend(); break;
	case PROCS_PTY: case_pty(); break;
	case PROCS_PTY_EOF: case_pty_eof(); break;
	case PROCS_SESSION: case_session(); break;
	default: break;
	}
}
