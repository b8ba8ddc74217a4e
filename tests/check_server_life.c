/*
 * tests/check_server_life.c: `rung serve` across processes and time: a daemon killed mid-exec and
 * restarted on the same store, the sweeper, two replicas on one store, token-less Unix peers,
 * the TCP listener and a graceful SIGTERM.
 */
#include <dirent.h>

#include "common/util.h"
#include "tests/lib/server.h"

#define KEYHDR1 "X-Rung-Thread: t1\r\nX-Rung-Agent: agent1\r\n"

static int count_in(const char *body, const char *needle)
{
	int n = 0;
	for (const char *p = body; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* POST an exec on a raw connection and leave it in flight; returns the connection. */
static int exec_in_flight(const char *sock, const char *id, const char *body)
{
	char path[256], *req;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	int fd = srvt_unix_connect(sock);
	ck_assert_int_gt(asprintf(&req,
				  "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOK_A
				  "\r\nContent-Length: %zu\r\n\r\n%s",
				  path, strlen(body), body),
			 0);
	send(fd, req, strlen(req), MSG_NOSIGNAL);
	free(req);
	return fd;
}

START_TEST(restart_mid_exec)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=keep.txt", id);
	struct srvt_resp r = srvt_req(t.sock[0], "PUT", path, TOK_A, NULL, "kept");
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);

	struct stat sst;
	ck_assert_int_eq(stat(t.sock[0], &sst), 0);
	ck_assert_uint_eq(sst.st_mode & 07777, 0660); /* the default --socket-mode */

	/* an exec in flight when the daemon dies */
	char marker[32];
	snprintf(marker, sizeof(marker), "7.%d", (int)(getpid() % 100000));
	char body[128];
	snprintf(body, sizeof(body), "{\"argv\":[\"sleep\",\"%s\"]}", marker);
	int fd = exec_in_flight(t.sock[0], id, body);
	char needle[64];
	snprintf(needle, sizeof(needle), "sleep %s", marker);
	for (int i = 0; i < 200 && srvt_count_procs_with(needle) == 0; i++)
		usleep(10000);
	ck_assert_int_eq(srvt_count_procs_with(needle), 1);
	srvt_stop(&t, 0, SIGKILL);
	char *raw;
	size_t len;
	srvt_read_all(fd, &raw, &len, 5000);
	ck_assert_msg(len == 0, "a killed daemon answered: %s", raw);
	free(raw);
	close(fd);

	/* nothing the exec started survives its daemon */
	for (int i = 0; i < 300 && srvt_count_procs_with(needle) > 0; i++)
		usleep(10000);
	ck_assert_int_eq(srvt_count_procs_with(needle), 0);

	/* the restarted daemon finds the sandbox in the store, intact and usable */
	srvt_start(&t, 0, NULL);
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_int_eq(count_in(r.body, "\"id\":"), 1);
	ck_assert_ptr_nonnull(strstr(r.body, id));
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=keep.txt", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "kept");
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL, "{\"argv\":[\"echo\",\"again\"]}");
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"stdout\":\"again\\n\""));
	srvt_resp_free(&r);
	/* the same key gets the same sandbox back (warm reuse), not a new one */
	char id2[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id2);
	ck_assert_str_eq(id, id2);
	srvt_teardown(&t);
}
END_TEST

/* A client that hangs up mid-exec cancels it: the command is killed, not left to its timeout. */
START_TEST(client_gone_cancels_exec)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[256], marker[32], body[160], needle[64];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(marker, sizeof(marker), "58.%d", (int)(getpid() % 100000)); /* seconds */
	snprintf(body, sizeof(body), "{\"argv\":[\"sleep\",\"%s\"],\"timeout\":60}", marker);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	snprintf(needle, sizeof(needle), "sleep %s", marker);
	int fd = exec_in_flight(t.sock[0], id, body);
	for (int i = 0; i < 300 && srvt_count_procs_with(needle) == 0; i++)
		usleep(10000);
	ck_assert_int_eq(srvt_count_procs_with(needle), 1);
	uint64_t t0 = rung_now_ms();
	close(fd);
	while (srvt_count_procs_with(needle) > 0 && rung_now_ms() - t0 < 5000)
		usleep(10000);
	ck_assert_msg(srvt_count_procs_with(needle) == 0, "the exec outlived its client by 5 s");
	/* the sandbox is fine afterwards */
	struct srvt_resp r =
	    srvt_req(t.sock[0], "POST", path, TOK_A, NULL, "{\"argv\":[\"echo\",\"after\"]}");
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"stdout\":\"after\\n\""));
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(sweeper)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL); /* --gc-interval 1 */
	char short_id[65], idle_id[65], keep_id[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "ttl", "{\"kind\":\"k\",\"ttl_s\":2}", short_id);
	srvt_acquire(t.sock[0], TOK_A, "idle", "{\"kind\":\"k\",\"idle_suspend_s\":1}", idle_id);
	srvt_acquire(t.sock[0], TOK_A, "keep", "{\"kind\":\"k\"}", keep_id);
	bool gone = false, suspended = false;
	uint64_t t0 = srvt_now_ms();
	while (srvt_now_ms() - t0 < 10000 && !(gone && suspended)) {
		usleep(250000);
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", short_id);
		struct srvt_resp r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
		gone = r.status == 404;
		srvt_resp_free(&r);
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", idle_id);
		r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
		suspended = strstr(r.body, "\"state\":\"suspended\"") != NULL;
		srvt_resp_free(&r);
	}
	ck_assert_msg(gone, "the sandbox past its ttl was not disposed");
	ck_assert_msg(suspended, "the idle sandbox was not suspended");
	/* a sandbox the sweeper suspended is resumed by its next use */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", idle_id);
	struct srvt_resp r =
	    srvt_req(t.sock[0], "POST", path, TOK_A, NULL, "{\"argv\":[\"echo\",\"awake\"]}");
	ck_assert_msg(r.status == 200 && strstr(r.body, "awake"), "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", keep_id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);
	/*
	 * TTL and idleness are also enforced by each sandbox's supervisor; a sandbox whose
	 * supervisor died is the sweeper's alone: it must be disposed from the store.
	 */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", keep_id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	const char *sp = strstr(r.body, "\"supervisor_pid\":");
	ck_assert_ptr_nonnull(sp);
	pid_t sup = (pid_t)atoi(sp + strlen("\"supervisor_pid\":"));
	srvt_resp_free(&r);
	ck_assert_int_gt(sup, 1);
	ck_assert_int_eq(kill(sup, SIGKILL), 0); /* started by this test's daemon */
	gone = false;
	t0 = srvt_now_ms();
	while (!gone && srvt_now_ms() - t0 < 10000) {
		usleep(250000);
		r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
		gone = r.status == 404;
		srvt_resp_free(&r);
	}
	ck_assert_msg(gone, "the sandbox whose supervisor died was not swept");
	/* The sweep counts what it disposed once its whole pass is done (the kernel objects'
	 * gc comes after the store's): the sandbox may be gone a while before the counter
	 * moves, longer on a loaded machine (a CI run failed here reading it at once). */
	r = srvt_req(t.sock[0], "GET", "/metrics", TOK_ADMIN, NULL, NULL);
	for (t0 = srvt_now_ms();
	     strstr(r.body, "rung_gc_disposed_total 0\n") && srvt_now_ms() - t0 < 10000;) {
		srvt_resp_free(&r);
		usleep(100000);
		r = srvt_req(t.sock[0], "GET", "/metrics", TOK_ADMIN, NULL, NULL);
	}
	ck_assert_ptr_null(strstr(r.body, "rung_gc_runs_total 0\n"));
	ck_assert_ptr_null(strstr(r.body, "rung_gc_disposed_total 0\n"));
	ck_assert_ptr_nonnull(strstr(r.body, "rung_gc_errors_total 0\n"));
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(multi_replica)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	srvt_start(&t, 1, NULL); /* same --state-dir, another socket */
	char a1[65], a2[65], b1[65], other[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, a1);
	srvt_acquire(t.sock[0], TOK_A, "t2", NULL, a2);
	srvt_acquire(t.sock[0], TOK_B, "t1", NULL, other);
	/* replica B sees A's sandboxes and reuses them */
	srvt_acquire(t.sock[1], TOK_A, "t1", NULL, b1);
	ck_assert_str_eq(a1, b1);
	/* replica B disposes by scope+thread what replica A created */
	struct srvt_resp r =
	    srvt_req(t.sock[1], "DELETE", "/v1/sandboxes?thread=t1", TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "{\"disposed\":1}");
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
	ck_assert_ptr_null(strstr(r.body, a1));
	ck_assert_ptr_nonnull(strstr(r.body, a2));
	srvt_resp_free(&r);
	/* and the whole scope; scope B is untouched */
	r = srvt_req(t.sock[1], "DELETE", "/v1/sandboxes", TOK_A, NULL, NULL);
	ck_assert_str_eq(r.body, "{\"disposed\":1}");
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
	ck_assert_str_eq(r.body, "{\"sandboxes\":[]}");
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_B, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(r.body, other));
	srvt_resp_free(&r);
	/* a single dispose by id through the other replica */
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", other);
	r = srvt_req(t.sock[1], "DELETE", path, TOK_B, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", path, TOK_B, NULL, NULL);
	ck_assert_int_eq(r.status, 404);
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(unix_peers_tcp_and_sigterm)
{
	RUNG_REQUIRE_ROOT(); /* the nobody-uid client below needs setuid */
	struct srvt t;
	char tokens[256];
	snprintf(tokens, sizeof(tokens), TOK_A " scopeA\nunix-peer-uid:%u mine\n- anon\n",
		 (unsigned)getuid());
	srvt_setup(&t, tokens);
	const char *extra[] = {"--listen", "127.0.0.1:0", "--socket-mode", "0666", NULL};
	srvt_start(&t, 0, extra);
	/* token-less, as this uid: scope "mine" */
	struct srvt_resp r = srvt_req(t.sock[0], "POST", "/v1/sandboxes", NULL, KEYHDR1,
				      "{\"spec\":{\"kind\":\"k\"}}");
	ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
	char mine[65];
	srvt_json_str(r.body, "id", mine, sizeof(mine));
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
	ck_assert_ptr_null(strstr(r.body, mine)); /* scopeA does not see "mine" */
	srvt_resp_free(&r);
	/* token-less as another uid: the "-" entry, scope "anon" */
	int pfd[2];
	ck_assert_int_eq(pipe(pfd), 0);
	pid_t p = fork();
	if (p == 0) {
		close(pfd[0]);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(2);
		struct srvt_resp rr = {0};
		int fd = srvt_unix_connect(t.sock[0]);
		if (fd < 0)
			_exit(3);
		srvt_req_fd(fd, "GET", "/v1/sandboxes", NULL, NULL, NULL, 0, &rr, 5000);
		dprintf(pfd[1], "%d %s", rr.status, rr.body);
		_exit(0);
	}
	close(pfd[1]);
	char buf[4096] = {0};
	ck_assert_int_gt(read(pfd[0], buf, sizeof(buf) - 1), 0);
	close(pfd[0]);
	waitpid(p, NULL, 0);
	ck_assert_msg(!strncmp(buf, "200 ", 4), "%s", buf);
	ck_assert_ptr_null(strstr(buf, mine));

	/* TCP: the port is in the log; no Unix-peer identity there */
	char *log;
	size_t len;
	int lfd = open(t.log[0], O_RDONLY);
	srvt_read_all(lfd, &log, &len, 500);
	close(lfd);
	const char *at = strstr(log, "tcp=127.0.0.1:");
	ck_assert_ptr_nonnull(at);
	int port = atoi(at + strlen("tcp=127.0.0.1:"));
	free(log);
	ck_assert_int_gt(port, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (int k = 0; k < 2; k++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		srvt_req_fd(fd, "GET", "/v1/sandboxes", k ? TOK_A : NULL, NULL, NULL, 0, &r, 5000);
		close(fd);
		ck_assert_int_eq(r.status, k ? 200 : 401);
		srvt_resp_free(&r);
	}
	/* SIGTERM: clean exit, socket removed */
	kill(t.pid[0], SIGTERM);
	int st;
	ck_assert_int_eq(waitpid(t.pid[0], &st, 0), t.pid[0]);
	t.pid[0] = 0;
	ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct stat sst;
	ck_assert_int_lt(stat(t.sock[0], &sst), 0);
	srvt_teardown(&t);
}
END_TEST

static int status_of(struct srvt *t, const char *token)
{
	struct srvt_resp r = srvt_req(t->sock[0], "GET", "/v1/sandboxes", token, NULL, NULL);
	int st = r.status;
	srvt_resp_free(&r);
	return st;
}

/* SIGHUP re-reads the tokens file; a bad file keeps the previous credentials. */
START_TEST(reload_tokens)
{
	struct srvt t;
	srvt_setup(&t, TOK_A " scopeA\n");
	srvt_start(&t, 0, NULL);
	ck_assert_int_eq(status_of(&t, TOK_A), 200);
	ck_assert_int_eq(status_of(&t, TOK_B), 401);
	/* add B, revoke A */
	srvt_write(t.tokens, TOK_B " scopeB\n", 0600);
	kill(t.pid[0], SIGHUP);
	int a = 0, b = 0;
	for (int i = 0; i < 100 && !(a == 401 && b == 200); i++) {
		usleep(20000);
		a = status_of(&t, TOK_A);
		b = status_of(&t, TOK_B);
	}
	ck_assert_int_eq(a, 401);
	ck_assert_int_eq(b, 200);
	/* a world-readable file is refused: B keeps working */
	srvt_write(t.tokens, TOK_A " scopeA\n", 0644);
	kill(t.pid[0], SIGHUP);
	usleep(300000);
	ck_assert_int_eq(status_of(&t, TOK_B), 200);
	ck_assert_int_eq(status_of(&t, TOK_A), 401);
	char *log;
	size_t len;
	int lfd = open(t.log[0], O_RDONLY);
	srvt_read_all(lfd, &log, &len, 200);
	close(lfd);
	ck_assert_msg(strstr(log, "keeping the previous 1 credentials"), "%s", log);
	free(log);
	srvt_teardown(&t);
}
END_TEST

START_TEST(refuses_bad_config)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	chmod(t.tokens, 0644);
	char bin[4096], cmd[8192];
	snprintf(bin, sizeof(bin), "%s/rung-serve", rung_test_build_dir());
	const char *cases[][2] = {
	    {"--socket none", "world-accessible"},
	    {"--bogus 1", "unknown option --bogus"},
	    {"", "world-accessible"},
	};
	for (size_t i = 0; i < 3; i++) {
		pid_t p;
		int pfd[2];
		ck_assert_int_eq(pipe(pfd), 0);
		snprintf(cmd, sizeof(cmd), "%s", cases[i][0]);
		const char *argv[16] = {bin, "--tokens", t.tokens, "--state-dir", t.state};
		int n = 5;
		char *save, *tok = strtok_r(cmd, " ", &save);
		while (tok && n < 7) {
			argv[n++] = tok;
			tok = strtok_r(NULL, " ", &save);
		}
		argv[n] = NULL;
		if (i == 0)
			argv[n++] = "--listen", argv[n++] = "127.0.0.1:0", argv[n] = NULL;
		if ((p = fork()) == 0) {
			dup2(pfd[1], 2);
			dup2(pfd[1], 1);
			execv(bin, (char *const *)argv);
			_exit(127);
		}
		close(pfd[1]);
		char buf[8192] = {0};
		ssize_t k, off = 0;
		while ((k = read(pfd[0], buf + off, sizeof(buf) - 1 - (size_t)off)) > 0)
			off += k;
		close(pfd[0]);
		int st;
		waitpid(p, &st, 0);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "case %zu exited 0", i);
		ck_assert_msg(strstr(buf, cases[i][1]), "case %zu: %s", i, buf);
	}
	srvt_teardown(&t);
}
END_TEST

Suite *server_life_suite(void)
{
	Suite *s = suite_create("server_life");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, restart_mid_exec);
	tcase_add_test(tc, client_gone_cancels_exec);
	tcase_add_test(tc, sweeper);
	tcase_add_test(tc, multi_replica);
	tcase_add_test(tc, refuses_bad_config);
	tcase_add_test(tc, reload_tokens);
	suite_add_tcase(s, tc);
	TCase *tr = tcase_create("daemon-root");
	tcase_set_timeout(tr, 60);
	tcase_set_tags(tr, "root");
	tcase_add_test(tr, unix_peers_tcp_and_sigterm);
	suite_add_tcase(s, tr);
	return s;
}
