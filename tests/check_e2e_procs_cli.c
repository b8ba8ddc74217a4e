/*
 * tests/check_e2e_procs_cli.c: `rung proc`, `rung session`, `rung attach` and `rung exec -t`
 * as a user runs them, on the local store and through a real `rung serve` (RUNG_TOKEN on
 * its socket): the same output both ways; an unknown handle is a clear error (exit 3), bad
 * arguments a usage error (exit 2); a `logs --follow` killed mid-stream, then `logs --since`
 * from the bytes it had printed, gives exactly the missed bytes; attach replays, relays and
 * detaches on Ctrl-P Ctrl-Q; exec -t exits with the command's status; on the process rung and
 * on the container rung (busybox). Tagged "root".
 */
#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "tests/lib/container.h"
#include "tests/lib/server.h"

struct out {
	int status;
	char o[65536];
	char e[8192];
};

struct cli_env {
	const char *sock;  /* NULL: the local store (RUNG_STATE_DIR) */
	const char *token; /* with sock; NULL: TOK_A */
	char state[300];
};

static void child_env(const struct cli_env *ce)
{
	if (ce->sock) {
		setenv("RUNG_SOCKET", ce->sock, 1);
		setenv("RUNG_TOKEN", ce->token ? ce->token : TOK_A, 1);
		unsetenv("RUNG_STATE_DIR");
	} else {
		unsetenv("RUNG_SOCKET");
		unsetenv("RUNG_TOKEN");
		setenv("RUNG_STATE_DIR", ce->state, 1);
	}
}

/* Start build/rung args with stdin from a pipe (*in_w) and stdout/stderr pipes. */
static pid_t spawn(const struct cli_env *ce, const char *const *args, int *in_w, int *out_r,
		   int *err_r)
{
	char bin[4200];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	const char *argv[32] = {bin};
	int n = 1;
	for (; *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	int pin[2], pout[2], perr[2];
	ck_assert(!pipe2(pin, O_CLOEXEC) && !pipe2(pout, O_CLOEXEC) && !pipe2(perr, O_CLOEXEC));
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		child_env(ce);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	*in_w = pin[1];
	*out_r = pout[0];
	*err_r = perr[0];
	return p;
}

static void run(const struct cli_env *ce, const char *in, struct out *res, const char *const *args)
{
	int in_w, out_r, err_r;
	pid_t p = spawn(ce, args, &in_w, &out_r, &err_r);
	if (in)
		ck_assert_int_eq(write(in_w, in, strlen(in)), (ssize_t)strlen(in));
	close(in_w);
	char *o, *e;
	size_t ol, el;
	srvt_read_all(out_r, &o, &ol, 60000);
	srvt_read_all(err_r, &e, &el, 5000);
	close(out_r);
	close(err_r);
	int st;
	waitpid(p, &st, 0);
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	snprintf(res->o, sizeof(res->o), "%s", o);
	snprintf(res->e, sizeof(res->e), "%s", e);
	free(o);
	free(e);
}

#define RUNG(ce, in, res, ...) run(ce, in, res, (const char *const[]){__VA_ARGS__, NULL})

static void first_line(const char *s, char *out, size_t n)
{
	snprintf(out, n, "%.*s", (int)strcspn(s, "\n"), s);
}

/* The end line's end_offset in `rung --json proc logs` output. */
static unsigned long long end_offset(const char *o)
{
	const char *p = strstr(o, "\"end_offset\": ");
	ck_assert_msg(p, "no end line: %s", o);
	return strtoull(p + 14, NULL, 10);
}

/* Every case, against ce (local or the daemon). */
static void cases(const struct cli_env *ce, const char *id)
{
	struct out r;
	char h[64];
	RUNG(ce, NULL, &r, "proc", "start", id, "--name", "echoer", "--", "sh", "-c",
	     "echo hi; echo err >&2; read x; echo got $x; sleep 100");
	ck_assert_msg(r.status == 0 && strlen(r.o) == 17, "%d [%s] %s", r.status, r.o, r.e);
	first_line(r.o, h, sizeof(h));
	RUNG(ce, NULL, &r, "proc", "ls", id);
	ck_assert_msg(r.status == 0 && strstr(r.o, h) && strstr(r.o, "echoer") &&
			  strstr(r.o, "running"),
		      "%d %s %s", r.status, r.o, r.e);
	RUNG(ce, NULL, &r, "--json", "proc", "ls", id);
	ck_assert_msg(r.status == 0 && strstr(r.o, "\"exit_code\":null"), "%s", r.o);
	for (int i = 0; i < 200; i++, usleep(20000)) {
		RUNG(ce, NULL, &r, "--json", "proc", "logs", id, h);
		if (end_offset(r.o) >= 7)
			break;
	}
	RUNG(ce, "yes\n", &r, "proc", "stdin", id, h);
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	for (int i = 0; i < 200; i++, usleep(20000)) {
		RUNG(ce, NULL, &r, "--json", "proc", "logs", id, h);
		if (end_offset(r.o) >= 15)
			break;
	}
	RUNG(ce, NULL, &r, "proc", "logs", id, h);
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "hi\ngot yes\n") && !strcmp(r.e, "err\n"),
		      "%d [%s] [%s]", r.status, r.o, r.e);
	RUNG(ce, NULL, &r, "--json", "proc", "logs", id, h, "--since", "3");
	ck_assert_msg(strstr(r.o, "{\"type\":\"stderr\",\"offset\":3,\"data\":\"err\\n\"}") &&
			  strstr(r.o, "\"end_offset\": 15"),
		      "%s", r.o);
	RUNG(ce, NULL, &r, "proc", "wait", id, h, "--timeout", "0.2");
	ck_assert_msg(r.status == 124 && strstr(r.e, "still running"), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "proc", "resize", id, h, "0", "0");
	ck_assert_msg(r.status != 0 && strstr(r.e, "rows"), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "proc", "signal", id, h, "TERM");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "--json", "proc", "wait", id, h);
	ck_assert_msg(r.status == 128 + 15 && strstr(r.o, "\"signal\":15"), "%d %s %s", r.status,
		      r.o, r.e);
	RUNG(ce, "late\n", &r, "proc", "stdin", id, h);
	ck_assert_msg(r.status != 0 && strstr(r.e, "rung: "), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "proc", "kill", id, h);
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	/* an unknown handle: a message naming it, exit 3, on every subcommand */
	const char *subs[] = {"logs", "wait", "kill", "stdin"};
	for (int i = 0; i < 4; i++) {
		RUNG(ce, "", &r, "proc", subs[i], id, h);
		ck_assert_msg(r.status == 3 && strstr(r.e, h), "%s: %d %s", subs[i], r.status, r.e);
	}
	RUNG(ce, NULL, &r, "proc", "signal", id, "0123456789abcdef", "KILL");
	ck_assert_msg(r.status == 3 && strstr(r.e, "0123456789abcdef"), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "--json", "proc", "ls", id);
	ck_assert_msg(r.status == 0 && strstr(r.o, "\"procs\":[]"), "%s", r.o);
	/* usage errors: exit 2 before anything runs */
	RUNG(ce, NULL, &r, "proc", "start", id, "sleep", "1");
	ck_assert_msg(r.status == 2 && strstr(r.e, "--"), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "proc", "signal", id, h, "NOPE");
	ck_assert_msg(r.status == 2 && strstr(r.e, "NOPE"), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "proc", "start", id, "--rows", "10", "--", "true");
	ck_assert_msg(r.status == 2 && strstr(r.e, "--pty"), "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "proc", "frob", id);
	ck_assert_msg(r.status == 2 && strstr(r.e, "frob"), "%d %s", r.status, r.e);
}

/* `logs --follow` killed mid-stream; `logs --since N` (N: the bytes it printed) is the rest. */
static void follow_killed(const struct cli_env *ce, const char *id)
{
	struct out r;
	char h[64];
	RUNG(ce, NULL, &r, "proc", "start", id, "--", "sh", "-c",
	     "i=0; while [ $i -lt 60 ]; do echo line$i; i=$((i+1)); sleep 0.05; done");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, h, sizeof(h));
	int in_w, out_r, err_r;
	pid_t p = spawn(ce, (const char *const[]){"proc", "logs", id, h, "--follow", NULL}, &in_w,
			&out_r, &err_r);
	close(in_w);
	static char seen[8192];
	size_t n = 0;
	while (n < 60) { /* a dozen lines, then the client dies */
		ssize_t k = read(out_r, seen + n, sizeof(seen) - 1 - n);
		ck_assert_int_gt(k, 0);
		n += (size_t)k;
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	for (ssize_t k; (k = read(out_r, seen + n, sizeof(seen) - 1 - n)) > 0;)
		n += (size_t)k; /* what was in the pipe was printed */
	seen[n] = '\0';
	close(out_r);
	close(err_r);
	RUNG(ce, NULL, &r, "proc", "wait", id, h, "--timeout", "30");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	char since[32];
	snprintf(since, sizeof(since), "%zu", n);
	RUNG(ce, NULL, &r, "proc", "logs", id, h, "--since", since);
	static char full[8192];
	size_t fl = 0;
	for (int i = 0; i < 60; i++)
		fl += (size_t)snprintf(full + fl, sizeof(full) - fl, "line%d\n", i);
	ck_assert_msg(n < fl && !memcmp(full, seen, n), "printed [%s]", seen);
	ck_assert_msg(r.status == 0 && !strcmp(r.o, full + n), "missed [%s], want [%s]", r.o,
		      full + n);
}

static void attach_and_exec_t(const struct cli_env *ce, const char *id)
{
	struct out r;
	char h[64];
	RUNG(ce, NULL, &r, "proc", "start", id, "--pty", "--rows", "30", "--cols", "90", "--", "sh",
	     "-c", "echo ready; stty -echo; while read l; do echo \"got $l $(stty size)\"; done");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, h, sizeof(h));
	usleep(300000);
	/* stdin is no terminal here: no raw mode, the size stays; the keys still detach */
	int in_w, out_r, err_r;
	pid_t p = spawn(ce, (const char *const[]){"attach", id, h, NULL}, &in_w, &out_r, &err_r);
	ck_assert_int_eq(write(in_w, "hi\n", 3), 3);
	char *o = calloc(1, 65536);
	size_t n = 0;
	uint64_t end = srvt_now_ms() + 20000;
	while (!strstr(o, "got hi 30 90") && srvt_now_ms() < end) {
		struct pollfd pf = {out_r, POLLIN, 0};
		if (poll(&pf, 1, 500) <= 0)
			continue;
		ssize_t k = read(out_r, o + n, 65535 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	ck_assert_msg(strstr(o, "ready") && strstr(o, "got hi 30 90"), "attach printed [%s]", o);
	ck_assert_int_eq(write(in_w, "\x10\x11", 2), 2);
	int st;
	waitpid(p, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "attach: %d", st);
	close(in_w);
	close(out_r);
	close(err_r);
	free(o);
	RUNG(ce, NULL, &r, "proc", "ls", id);
	ck_assert_msg(strstr(r.o, h) && strstr(r.o, "running"), "detach killed it: %s", r.o);
	/* exec -t: the command's exit status; our EOF is the terminal's; the handle is gone */
	RUNG(ce, "echo in-$((40+2)); exit 5\n", &r, "exec", "-t", id, "--", "sh");
	ck_assert_msg(r.status == 5 && strstr(r.o, "in-42"), "%d [%s] %s", r.status, r.o, r.e);
	RUNG(ce, NULL, &r, "--json", "proc", "ls", id);
	ck_assert_msg(!strstr(r.o, "\"argv\":[\"sh\"]"), "exec -t left its handle: %s", r.o);
}

static void sessions(const struct cli_env *ce, const char *id)
{
	struct out r;
	char s[64];
	RUNG(ce, NULL, &r, "session", "start", id);
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, s, sizeof(s));
	RUNG(ce, NULL, &r, "session", "run", id, s, "--", "cd /tmp && export X=1");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	RUNG(ce, NULL, &r, "session", "run", id, s, "--", "pwd; echo $X; echo e >&2; (exit 4)");
	ck_assert_msg(r.status == 4 && !strcmp(r.o, "/tmp\n1\n") && !strcmp(r.e, "e\n"),
		      "%d [%s] %s", r.status, r.o, r.e);
	RUNG(ce, NULL, &r, "--json", "session", "run", id, s, "--timeout", "0.5", "--", "sleep 30");
	ck_assert_msg(r.status == 124 && strstr(r.o, "\"timed_out\":true"), "%d [%s] %s", r.status,
		      r.o, r.e);
	RUNG(ce, NULL, &r, "session", "run", id, s, "--", "echo $X");
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "1\n"), "%d [%s] %s", r.status, r.o, r.e);
	RUNG(ce, NULL, &r, "proc", "ls", id);
	ck_assert_msg(strstr(r.o, s) && strstr(r.o, "[session]"), "%s", r.o);
	RUNG(ce, NULL, &r, "session", "run", id, "0123456789abcdef", "--", "true");
	ck_assert_msg(r.status == 3, "%d %s", r.status, r.e);
}

static void world(struct srvt *t, struct cli_env *local, struct cli_env *remote, char *lid,
		  char *rid)
{
	srvt_setup(t, NULL);
	srvt_start(t, 0, NULL);
	memset(local, 0, sizeof(*local));
	snprintf(local->state, sizeof(local->state), "%s/local", t->dir);
	*remote = (struct cli_env){.sock = t->sock[0]};
	struct out r;
	RUNG(local, NULL, &r, "acquire", "--scope", "s", "--thread", "t", "--agent", "a");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, lid, 65);
	srvt_acquire(t->sock[0], TOK_A, "procs-cli", NULL, rid);
}

static void world_down(struct srvt *t, const struct cli_env *local, const char *lid)
{
	struct out r;
	RUNG(local, NULL, &r, "dispose", lid);
	srvt_teardown(t);
}

START_TEST(test_proc_commands)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	struct cli_env local, remote;
	char lid[65], rid[65];
	world(&t, &local, &remote, lid, rid);
	cases(&local, lid);
	cases(&remote, rid);
	sessions(&local, lid);
	sessions(&remote, rid);
	/* another scope through the daemon: its sandbox and handle do not exist for us */
	struct out r;
	char h[64];
	RUNG(&remote, NULL, &r, "proc", "start", rid, "--", "sleep", "100");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, h, sizeof(h));
	struct cli_env other = {.sock = t.sock[0], .token = TOK_B};
	RUNG(&other, NULL, &r, "proc", "kill", rid, h);
	ck_assert_msg(r.status == 3, "%d %s", r.status, r.e);
	RUNG(&other, NULL, &r, "proc", "ls", rid);
	ck_assert_msg(r.status == 3 && !strstr(r.o, h), "%d %s", r.status, r.o);
	RUNG(&remote, NULL, &r, "proc", "ls", rid);
	ck_assert_msg(strstr(r.o, h) && strstr(r.o, "running"), "%s", r.o);
	world_down(&t, &local, lid);
}
END_TEST

START_TEST(test_follow_killed_then_since)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	struct cli_env local, remote;
	char lid[65], rid[65];
	world(&t, &local, &remote, lid, rid);
	follow_killed(&local, lid);
	follow_killed(&remote, rid);
	world_down(&t, &local, lid);
}
END_TEST

START_TEST(test_attach_and_exec_t)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	struct cli_env local, remote;
	char lid[65], rid[65];
	world(&t, &local, &remote, lid, rid);
	attach_and_exec_t(&local, lid);
	attach_and_exec_t(&remote, rid);
	world_down(&t, &local, lid);
}
END_TEST

/* The same on the container rung: the busybox image of tests/lib/container.c, in the
 * fixture's store, which the daemon serves too. */
static void ct_world(struct srvt *t, struct cli_env *local, struct cli_env *remote, char *lid,
		     char *rid)
{
	srvt_setup(t, NULL);
	snprintf(t->state, sizeof(t->state), "%s", ct_state());
	srvt_start(t, 0, NULL);
	memset(local, 0, sizeof(*local));
	snprintf(local->state, sizeof(local->state), "%s", ct_state());
	*remote = (struct cli_env){.sock = t->sock[0]};
	struct out r;
	RUNG(local, NULL, &r, "acquire", "--scope", "s", "--thread", "t", "--agent", "a",
	     "--isolation", "container", "--image", CT_IMAGE, "--kind", "ct-cli");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, lid, 65);
	RUNG(local, NULL, &r, "inspect", lid);
	ck_assert_msg(strstr(r.o, "\"isolation\": \"container\"") ||
			  strstr(r.o, "\"isolation\":\"container\""),
		      "not a container: %.400s", r.o);
	srvt_acquire(t->sock[0], TOK_A, "procs-cli",
		     "{\"kind\": \"ct-cli\", \"isolation\": \"container\", \"image\": \"" CT_IMAGE
		     "\"}",
		     rid);
}

START_TEST(test_container_rung)
{
	CT_REQUIRE();
	struct srvt t;
	struct cli_env local, remote;
	char lid[65], rid[65];
	ct_world(&t, &local, &remote, lid, rid);
	cases(&local, lid);
	cases(&remote, rid);
	follow_killed(&local, lid);
	follow_killed(&remote, rid);
	attach_and_exec_t(&local, lid);
	attach_and_exec_t(&remote, rid);
	sessions(&local, lid);
	sessions(&remote, rid);
	world_down(&t, &local, lid);
}
END_TEST

/* `rung attach` on a real terminal: raw while attached; restored after the detach keys, and
 * after a SIGTERM. */
static pid_t attach_on_pty(const struct cli_env *ce, const char *id, const char *h, int *master)
{
	int slave;
	struct winsize ws = {.ws_row = 20, .ws_col = 60};
	ck_assert_int_eq(openpty(master, &slave, NULL, NULL, &ws), 0);
	char bin[4200];
	snprintf(bin, sizeof(bin), "%s/rung", rung_test_build_dir());
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		setsid();
		ioctl(slave, TIOCSCTTY, 0);
		dup2(slave, 0);
		dup2(slave, 1);
		dup2(slave, 2);
		child_env(ce);
		execl(bin, bin, "attach", id, h, (char *)NULL);
		_exit(127);
	}
	close(slave);
	return p;
}

static bool term_raw(int master)
{
	struct termios t;
	ck_assert_int_eq(tcgetattr(master, &t), 0);
	return !(t.c_lflag & ICANON) && !(t.c_lflag & ECHO);
}

/* Read the master until needle shows up (the terminal's output). */
static bool pty_until(int master, const char *needle)
{
	static char buf[65536];
	size_t n = 0;
	uint64_t end = srvt_now_ms() + 20000;
	while (srvt_now_ms() < end && n < sizeof(buf) - 1) {
		struct pollfd pf = {master, POLLIN, 0};
		if (poll(&pf, 1, 200) <= 0)
			continue;
		ssize_t k = read(master, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, needle))
			return true;
	}
	return false;
}

static void tty_cases(const struct cli_env *ce, const char *id)
{
	struct out r;
	char h[64];
	RUNG(ce, NULL, &r, "proc", "start", id, "--pty", "--", "sh", "-c",
	     "echo ready; while read l; do echo \"got $l $(stty size)\"; done");
	ck_assert_msg(r.status == 0, "%d %s", r.status, r.e);
	first_line(r.o, h, sizeof(h));
	for (int round = 0; round < 2; round++) {
		int m;
		pid_t p = attach_on_pty(ce, id, h, &m);
		ck_assert_msg(pty_until(m, "ready"), "no replay");
		ck_assert_msg(term_raw(m), "the terminal is not raw while attached");
		/* our size went to its terminal: 20 x 60 */
		ck_assert_int_eq(write(m, "hi\r", 3), 3);
		ck_assert_msg(pty_until(m, "got hi 20 60"), "no echo with our size");
		/* our window changes (SIGWINCH): so does its terminal */
		struct winsize ws2 = {.ws_row = 30, .ws_col = 70};
		ck_assert_int_eq(ioctl(m, TIOCSWINSZ, &ws2), 0);
		usleep(300000);
		ck_assert_int_eq(write(m, "ho\r", 3), 3);
		ck_assert_msg(pty_until(m, "got ho 30 70"), "the resize did not follow");
		if (round == 0)
			ck_assert_int_eq(write(m, "\x10\x11", 2), 2); /* the detach keys */
		else
			kill(p, SIGTERM);
		int st;
		waitpid(p, &st, 0);
		ck_assert_msg(round == 0 ? WIFEXITED(st) && WEXITSTATUS(st) == 0
					 : WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
			      "round %d: status %d", round, st);
		ck_assert_msg(!term_raw(m), "round %d: the terminal was left raw", round);
		close(m);
	}
	RUNG(ce, NULL, &r, "proc", "ls", id);
	ck_assert_msg(strstr(r.o, h) && strstr(r.o, "running"), "%s", r.o);
}

START_TEST(test_attach_terminal)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	struct cli_env local, remote;
	char lid[65], rid[65];
	world(&t, &local, &remote, lid, rid);
	tty_cases(&local, lid);
	tty_cases(&remote, rid);
	world_down(&t, &local, lid);
}
END_TEST

START_TEST(test_help)
{
	struct cli_env ce = {0};
	snprintf(ce.state, sizeof(ce.state), "/nonexistent-rung-state");
	struct out r;
	RUNG(&ce, NULL, &r, "proc", "--help");
	ck_assert_msg(r.status == 0 && strstr(r.o, "rung proc start") && strstr(r.o, "--follow"),
		      "%d %s", r.status, r.o);
	RUNG(&ce, NULL, &r, "session", "--help");
	ck_assert_msg(r.status == 0 && strstr(r.o, "session run"), "%d %s", r.status, r.o);
	RUNG(&ce, NULL, &r, "attach", "--help");
	ck_assert_msg(r.status == 0 && strstr(r.o, "Ctrl-P Ctrl-Q"), "%d %s", r.status, r.o);
	RUNG(&ce, NULL, &r, "exec", "--help");
	ck_assert_msg(r.status == 0 && strstr(r.o, "-t"), "%d %s", r.status, r.o);
}
END_TEST

Suite *e2e_procs_cli_suite(void)
{
	Suite *s = suite_create("e2e_procs_cli");
	TCase *tp = tcase_create("help");
	tcase_set_timeout(tp, 30);
	tcase_add_test(tp, test_help);
	suite_add_tcase(s, tp);
	TCase *tc = tcase_create("cli-root");
	tcase_set_timeout(tc, 240);
	tcase_set_tags(tc, "root");
	tcase_add_test(tc, test_proc_commands);
	tcase_add_test(tc, test_follow_killed_then_since);
	tcase_add_test(tc, test_attach_and_exec_t);
	tcase_add_test(tc, test_attach_terminal);
	suite_add_tcase(s, tc);
	ct_add(s, "container-root", test_container_rung, 300);
	return s;
}
