/*
 * tests/check_e2e_cli_remote.c: the rung CLI as an unprivileged user, a client of a real `rung
 * serve` (started by the test on a socket in a temp dir) whose tokens file maps uids to
 * scopes: acquire/exec/write/read/ls/dispose/run through the CLI as that uid, another uid's
 * scope sees 404, an unmapped uid and unusable sockets get messages that say what to do.
 */
#include <grp.h>
#include <sys/stat.h>

#include "server/server.h"
#include "tests/lib/server.h"

#define U1 61001 /* "uid U1 scope-u1" */
#define U2 61002 /* "uid U2 scope-u2" */
#define U3 61003 /* no line */

struct out {
	int status; /* exit status, or 128+signal */
	char o[65536];
	char e[8192];
};

/* Run the test's copy of rung as uid (and gid) with no groups; env_socket: RUNG_SOCKET.
 * uid 0: build/rung itself, as root, in the test's environment (the local path). */
static void rung_as(const struct srvt *t, uid_t uid, const char *env_socket, const char *in,
		    struct out *res, const char *const *args)
{
	char bin[400];
	snprintf(bin, sizeof(bin), "%s/rung", t->dir);
	const char *argv[32] = {bin};
	int n = 1;
	for (; args && *args && n < 31; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	int pin[2], pout[2], perr[2];
	ck_assert_int_eq(pipe(pin), 0);
	ck_assert_int_eq(pipe(pout), 0);
	ck_assert_int_eq(pipe(perr), 0);
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		dup2(pin[0], 0);
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		close(pin[1]);
		close(pout[0]);
		close(perr[0]);
		if (uid == 0) {
			char local[4200];
			snprintf(local, sizeof(local), "%s/rung", rung_test_build_dir());
			execv(local, (char *const *)argv);
			_exit(127);
		}
		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
		    setresuid(uid, uid, uid) < 0 || geteuid() != uid)
			_exit(121); /* never run the CLI as root by mistake */
		char envs[400];
		snprintf(envs, sizeof(envs), "RUNG_SOCKET=%s", env_socket ? env_socket : "");
		char *envp[] = {"PATH=/usr/bin:/bin", env_socket ? envs : NULL, NULL};
		execve(bin, (char *const *)argv, envp);
		_exit(127);
	}
	close(pin[0]);
	close(pout[1]);
	close(perr[1]);
	if (in)
		ck_assert_int_eq(write(pin[1], in, strlen(in)), (ssize_t)strlen(in));
	close(pin[1]);
	char *o, *e;
	size_t ol, el;
	srvt_read_all(pout[0], &o, &ol, 60000);
	srvt_read_all(perr[0], &e, &el, 5000);
	close(pout[0]);
	close(perr[0]);
	int st;
	waitpid(p, &st, 0);
	res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	snprintf(res->o, sizeof(res->o), "%s", o);
	snprintf(res->e, sizeof(res->e), "%s", e);
	free(o);
	free(e);
	ck_assert_msg(res->status != 121, "could not drop to uid %u", (unsigned)uid);
}

#define RUNG(t, uid, in, res, ...)                                                                 \
	rung_as(t, uid, NULL, in, res, (const char *const[]){__VA_ARGS__, NULL})

/* A daemon on a world-connectable socket, and a copy of build/rung any uid can execute. */
static void setup(struct srvt *t)
{
	char tokens[512];
	snprintf(tokens, sizeof(tokens),
		 "uid %u scope-u1\n" TOK_A " scope-u1\n"
		 "unix-peer-uid:%u scope-u2   # the older spelling\n" TOK_B " scope-u2\n",
		 U1, U2);
	srvt_setup(t, tokens);
	/* the sweeper runs every second (srvt_start), as it would beside real users */
	const char *extra[] = {"--socket-mode", "0666", NULL};
	srvt_start(t, 0, extra);
	/* with rung-dyn beside it, as installed: a rung linked against musl runs it for the
	 * daemon's client (libcurl: cli/module.mk) */
	for (int i = 0; i < 2; i++) {
		const char *name = i ? "rung-dyn" : "rung";
		char src[4200], dst[400];
		snprintf(src, sizeof(src), "%s/%s", rung_test_build_dir(), name);
		snprintf(dst, sizeof(dst), "%s/%s", t->dir, name);
		pid_t p = fork();
		if (p == 0) {
			execl("/bin/cp", "cp", src, dst, (char *)NULL);
			_exit(127);
		}
		int st;
		waitpid(p, &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cp %s", src);
		ck_assert_int_eq(chmod(dst, 0755), 0);
	}
}

START_TEST(uid_scopes_through_the_cli)
{
	RUNG_REQUIRE_ROOT(); /* the daemon creates sandboxes; the clients drop to other uids */
	struct srvt t;
	setup(&t);
	const char *S = t.sock[0];
	struct out r;

	RUNG(&t, U1, NULL, &r, "--socket", S, "acquire", "--thread", "t1", "--agent", "a1");
	ck_assert_msg(r.status == 0, "acquire: %d %s", r.status, r.e);
	char id[65];
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.o, "\n"), r.o);
	ck_assert_int_ge(strlen(id), 16);

	/* the same key again: the same sandbox (--json: created false), RUNG_SOCKET this time */
	rung_as(
	    &t, U1, S, NULL, &r,
	    (const char *const[]){"--json", "acquire", "--thread", "t1", "--agent", "a1", NULL});
	ck_assert_msg(r.status == 0 && strstr(r.o, id) && strstr(r.o, "\"created\": false"),
		      "%d %s %s", r.status, r.o, r.e);

	RUNG(&t, U1, NULL, &r, "--socket", S, "exec", id, "--", "/bin/echo", "hi");
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "hi\n"), "%d [%s] %s", r.status, r.o, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "exec", id, "--", "/bin/sh", "-c",
	     "echo out; echo err >&2; exit 7");
	ck_assert_msg(r.status == 7 && !strcmp(r.o, "out\n") && !strcmp(r.e, "err\n"),
		      "%d [%s] [%s]", r.status, r.o, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "--json", "exec", id, "--", "/bin/echo", "hi");
	ck_assert_msg(r.status == 0 && strstr(r.o, "\"stdout\":\"hi\\n\"") &&
			  strstr(r.o, "\"exit_code\":0") && strstr(r.o, id),
		      "%d %s", r.status, r.o);

	/* bytes that are not text come through exactly (the daemon sends them base64) */
	RUNG(&t, U1, NULL, &r, "--socket", S, "exec", id, "--", "/usr/bin/printf", "a\\001\\377b");
	ck_assert_msg(r.status == 0 && r.o[0] == 'a' && r.o[1] == 1 &&
			  (unsigned char)r.o[2] == 0xff && r.o[3] == 'b' && !r.o[4],
		      "%d [%s] %s", r.status, r.o, r.e);
	/* a timeout is 124, with the same message as the local path */
	RUNG(&t, U1, NULL, &r, "--socket", S, "exec", "--timeout", "1", id, "--", "/bin/sleep",
	     "30");
	ck_assert_msg(r.status == 124 && strstr(r.e, "timed out after 1000 ms"), "%d %s", r.status,
		      r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "exec", "--env", "A=b c", "--cwd", "/tmp", id, "--",
	     "/bin/sh", "-c", "echo \"$A\" $(pwd)");
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "b c /tmp\n"), "%d [%s] %s", r.status, r.o,
		      r.e);

	RUNG(&t, U1, "hello file\n", &r, "--socket", S, "write", id, "dir/f.txt");
	ck_assert_msg(r.status == 0, "write: %d %s", r.status, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "read", id, "dir/f.txt");
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "hello file\n"), "%d [%s] %s", r.status, r.o,
		      r.e);
	RUNG(&t, U1, "echo $((6*7))\n", &r, "--socket", S, "run-code", id, "--lang", "sh");
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "42\n"), "%d [%s] %s", r.status, r.o, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "ls");
	ck_assert_msg(r.status == 0 && strstr(r.o, id) && strstr(r.o, "running"), "%d %s %s",
		      r.status, r.o, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "inspect", id);
	ck_assert_msg(r.status == 0 && strstr(r.o, id), "%d %s %s", r.status, r.o, r.e);

	/* another uid, another scope: the sandbox does not exist for it (404: exit 3) */
	RUNG(&t, U2, NULL, &r, "--socket", S, "exec", id, "--", "/bin/echo", "hi");
	ck_assert_msg(r.status == 3 && !r.o[0] && strstr(r.e, "rung: "), "%d [%s] %s", r.status,
		      r.o, r.e);
	RUNG(&t, U2, NULL, &r, "--socket", S, "read", id, "dir/f.txt");
	ck_assert_msg(r.status == 3 && !r.o[0], "%d [%s] %s", r.status, r.o, r.e);
	RUNG(&t, U2, NULL, &r, "--socket", S, "--json", "dispose", id);
	ck_assert_msg(r.status == 3 && strstr(r.o, "\"errno\": 2"), "%d [%s] %s", r.status, r.o,
		      r.e);
	RUNG(&t, U2, NULL, &r, "--socket", S, "ls");
	ck_assert_msg(r.status == 0 && !strstr(r.o, id), "%d %s", r.status, r.o);

	/* an unmapped uid: refused, and told what to ask for */
	RUNG(&t, U3, NULL, &r, "--socket", S, "ls");
	char want[128];
	snprintf(want, sizeof(want), "no scope for uid %u", U3);
	ck_assert_msg(r.status == 1 && strstr(r.e, want) && strstr(r.e, "uid 61003 SCOPE"), "%d %s",
		      r.status, r.e);

	/* run: a fresh sandbox for the command, gone afterwards */
	RUNG(&t, U1, NULL, &r, "--socket", S, "run", "--", "/bin/sh", "-c", "echo ran; exit 3");
	ck_assert_msg(r.status == 3 && !strcmp(r.o, "ran\n"), "%d [%s] %s", r.status, r.o, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "--json", "ls");
	const char *first = strstr(r.o, "\"id\"");
	ck_assert_msg(r.status == 0 && strstr(r.o, id) && first && !strstr(first + 1, "\"id\""),
		      "the run's sandbox is left: %d %s", r.status, r.o);

	RUNG(&t, U1, NULL, &r, "--socket", S, "dispose", id);
	ck_assert_msg(r.status == 0, "dispose: %d %s", r.status, r.e);
	RUNG(&t, U1, NULL, &r, "--socket", S, "exec", id, "--", "/bin/true");
	ck_assert_msg(r.status == 3, "exec after dispose: %d %s", r.status, r.e);
	srvt_teardown(&t);
}
END_TEST

/* "id": "…" -> "id": "ID", "duration_ms": N -> 0: what may differ between two runs. */
static void mask(char *s, const char *id)
{
	char *p;
	while ((p = strstr(s, id)))
		memcpy(p, "ID", 2), memmove(p + 2, p + strlen(id), strlen(p + strlen(id)) + 1);
	if ((p = strstr(s, "\"duration_ms\":"))) {
		char *q = p + strlen("\"duration_ms\":");
		char *e = q + strspn(q, "0123456789");
		*q = '0';
		memmove(q + 1, e, strlen(e) + 1);
	}
}

/* The same commands print the same things, locally as root and through the daemon. */
START_TEST(same_output_local_and_remote)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	setup(&t);
	const char *S = t.sock[0];
	struct out l, r;
	RUNG(&t, 0, NULL, &l, "--state-dir", t.state, "--json", "acquire", "--scope", "loc",
	     "--thread", "t", "--agent", "a");
	RUNG(&t, U1, NULL, &r, "--socket", S, "--json", "acquire", "--thread", "t", "--agent", "a");
	ck_assert_msg(l.status == 0 && r.status == 0, "%d %s / %d %s", l.status, l.e, r.status,
		      r.e);
	char lid[65], rid[65];
	srvt_json_str(l.o, "id", lid, sizeof(lid));
	srvt_json_str(r.o, "id", rid, sizeof(rid));
	if (!lid[0]) /* the CLI prints "id": "X" (a space after the colon) */
		sscanf(strstr(l.o, "\"id\": \"") + 7, "%64[0-9a-f]", lid);
	if (!rid[0])
		sscanf(strstr(r.o, "\"id\": \"") + 7, "%64[0-9a-f]", rid);
	ck_assert_msg(lid[0] && rid[0] && strcmp(lid, rid), "%s / %s", l.o, r.o);
	mask(l.o, lid);
	mask(r.o, rid);
	ck_assert_str_eq(l.o, r.o);
	const char *const cmds[][8] = {
	    {"--json", "exec", "X", "--", "/bin/sh", "-c", "echo o; echo e >&2; exit 5"},
	    {"exec", "X", "--", "/bin/sh", "-c", "echo o; echo e >&2; exit 5"},
	    {"--json", "suspend", "X"},
	    {"--json", "resume", "X"},
	    {"read", "X", "nope.txt"},
	    {"--json", "read", "X", "nope.txt"},
	};
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		const char *la[12] = {"--state-dir", t.state}, *ra[12] = {"--socket", S};
		for (int k = 0; k < 8 && cmds[i][k]; k++) {
			bool x = !strcmp(cmds[i][k], "X");
			la[2 + k] = x ? lid : cmds[i][k];
			ra[2 + k] = x ? rid : cmds[i][k];
		}
		rung_as(&t, 0, NULL, NULL, &l, la);
		rung_as(&t, U1, NULL, NULL, &r, ra);
		mask(l.o, lid);
		mask(r.o, rid);
		ck_assert_msg(l.status == r.status, "case %zu: exit %d locally, %d remotely (%s / %s)",
			      i, l.status, r.status, l.e, r.e);
		if (i < 4) {
			ck_assert_msg(!strcmp(l.o, r.o), "case %zu: [%s] / [%s]", i, l.o, r.o);
			ck_assert_msg(!strcmp(l.e, r.e), "case %zu: [%s] / [%s]", i, l.e, r.e);
		} else { /* the messages may be worded differently: errno and exit status agree */
			ck_assert_msg(!strncmp(l.o, r.o, 22), "case %zu: [%s] / [%s]", i, l.o, r.o);
		}
	}
	rung_as(&t, 0, NULL, NULL, &l,
		(const char *const[]){"--state-dir", t.state, "dispose", lid, NULL});
	ck_assert_int_eq(l.status, 0);
	srvt_teardown(&t);
}
END_TEST

/* `rung run` interrupted (SIGINT while the command runs): the sandbox is disposed, exit 130. */
START_TEST(run_interrupted_disposes)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	setup(&t);
	const char *S = t.sock[0];
	char bin[400], errlog[400];
	snprintf(bin, sizeof(bin), "%s/rung", t.dir);
	snprintf(errlog, sizeof(errlog), "%s/run.err", t.dir);
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0) {
		int fd = open(errlog, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0 || dup2(fd, 2) < 0 || setgroups(0, NULL) < 0 ||
		    setresgid(U1, U1, U1) < 0 || setresuid(U1, U1, U1) < 0)
			_exit(121);
		char *envp[] = {"PATH=/usr/bin:/bin", NULL};
		execve(bin,
		       (char *const[]){bin, "--socket", (char *)S, "run", "--", "/bin/sleep", "30",
				       NULL},
		       envp);
		_exit(127);
	}
	struct out r;
	bool running = false;
	for (int k = 0; k < 200 && !running; k++) {
		RUNG(&t, U1, NULL, &r, "--socket", S, "--json", "ls");
		running = strstr(r.o, "\"state\": \"running\""); /* the only sandbox of U1 */
		if (!running)
			usleep(50000);
	}
	ck_assert_msg(running, "the run's sandbox never showed up: %s", r.o);
	usleep(300000); /* the exec is under way */
	uint64_t t0 = srvt_now_ms();
	kill(p, SIGINT);
	int st;
	waitpid(p, &st, 0);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status %d", st);
	ck_assert_msg(srvt_now_ms() - t0 < 10000, "took %llu ms",
		      (unsigned long long)(srvt_now_ms() - t0));
	RUNG(&t, U1, NULL, &r, "--socket", S, "--json", "ls");
	ck_assert_msg(r.status == 0 && !strcmp(r.o, "[]\n"), "left behind: %s", r.o);
	int fd = open(errlog, O_RDONLY | O_CLOEXEC);
	char *e;
	size_t el;
	srvt_read_all(fd, &e, &el, 1000);
	close(fd);
	ck_assert_msg(strstr(e, "interrupted by signal 2; disposing the sandbox"), "%s", e);
	free(e);
	srvt_teardown(&t);
}
END_TEST

START_TEST(no_way_in_says_what_to_do)
{
	RUNG_REQUIRE_ROOT();
	struct srvt t;
	setup(&t);
	struct out r;
	char missing[400];
	snprintf(missing, sizeof(missing), "%s/none.sock", t.dir);
	RUNG(&t, U1, NULL, &r, "--socket", missing, "ls");
	ck_assert_msg(r.status == 1 && strstr(r.e, "no rung daemon listens on") &&
			  strstr(r.e, "rung serve"),
		      "%d %s", r.status, r.e);
	/* a socket this uid may not connect to: join its group */
	const char *extra[] = {"--socket-mode", "0660", NULL};
	srvt_start(&t, 1, extra);
	RUNG(&t, U1, NULL, &r, "--socket", t.sock[1], "ls");
	ck_assert_msg(r.status == 1 && strstr(r.e, "permission denied") &&
			  strstr(r.e, "usermod -aG") && strstr(r.e, "as root"),
		      "%d %s", r.status, r.e);
	/* nothing given, not root: the default socket, or what to do without it */
	struct stat st;
	if (stat("/run/rung/rung.sock", &st) < 0) {
		RUNG(&t, U1, NULL, &r, "ls");
		ck_assert_msg(r.status == 1 && strstr(r.e, "not root") &&
				  strstr(r.e, "sudo rung") && strstr(r.e, "--socket"),
			      "%d %s", r.status, r.e);
	} else {
		fprintf(stderr, "no_way_in_says_what_to_do: /run/rung/rung.sock exists here: "
				"the no-socket message is not checked\n");
	}
	srvt_teardown(&t);
}
END_TEST

START_TEST(uid_line_parses)
{
	struct srv_tokens tk;
	struct rung_err err = {0};
	const char *text = "uid 1000 dev-box\nunix-peer-uid:1001 other\n";
	ck_assert_int_eq(srv_tokens_parse(text, strlen(text), &tk, &err), 0);
	struct srv_caller c = {.unix_peer = true, .uid = 1000};
	ck_assert_str_eq(srv_auth(&tk, &c), "dev-box");
	c.uid = 1001;
	ck_assert_str_eq(srv_auth(&tk, &c), "other");
	c.uid = 1002;
	ck_assert_ptr_null(srv_auth(&tk, &c));
	srv_tokens_release(&tk);
	const char *bad[] = {"uid x dev\n", "uid 1000\n", "uid 1000 a b\n",
			     "uid 7 a\nunix-peer-uid:7 b\n"};
	for (size_t i = 0; i < 4; i++) {
		int r = srv_tokens_parse(bad[i], strlen(bad[i]), &tk, &err);
		ck_assert_msg(r < 0, "accepted: %s", bad[i]);
	}
	ck_assert_ptr_nonnull(strstr(err.msg, "already given"));
}
END_TEST

Suite *e2e_cli_remote_suite(void)
{
	Suite *s = suite_create("e2e_cli_remote");
	TCase *tp = tcase_create("parse");
	tcase_set_timeout(tp, 10);
	tcase_add_test(tp, uid_line_parses);
	suite_add_tcase(s, tp);
	TCase *tc = tcase_create("daemon-root");
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "root");
	tcase_add_test(tc, uid_scopes_through_the_cli);
	tcase_add_test(tc, same_output_local_and_remote);
	tcase_add_test(tc, run_interrupted_disposes);
	tcase_add_test(tc, no_way_in_says_what_to_do);
	suite_add_tcase(s, tc);
	return s;
}
