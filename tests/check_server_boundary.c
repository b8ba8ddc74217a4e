/*
 * tests/check_server_boundary.c: the daemon keeps the boundary's promises (issue 10): the
 * sandbox's granted set through HTTP (item 2), per-scope limits so one tenant cannot starve
 * another (item 3), output in one bounded encoding with bounded daemon memory (item 8), a
 * scoped /metrics and operator maxima on specs (item 11).
 */
#include "common/util.h"
#include "rung/rung.h"
#include "server/server.h"
#include "tests/lib/server.h"

#define KEYHDR(t) "X-Rung-Thread: " t "\r\nX-Rung-Agent: agent1\r\n"

static int count_in(const char *body, const char *needle)
{
	int n = 0;
	for (const char *p = body; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

static struct srvt_resp post(struct srvt *t, const char *token, const char *id, const char *op,
			     const char *body)
{
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", id, op);
	return srvt_req(t->sock[0], "POST", path, token, NULL, body);
}

static void expect(struct srvt_resp *r, int status, const char *needle)
{
	ck_assert_msg(r->status == status && (!needle || strstr(r->body, needle)),
		      "want %d with '%s', got %d: %.300s", status, needle ? needle : "", r->status,
		      r->body);
	srvt_resp_free(r);
}

/* Item 2 over HTTP: a run_code-only sandbox (allowed on the process rung when deployed)
 * refuses exec and run-code sh with 403 and the reason. */
START_TEST(grant_http)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	const char *extra[] = {"--deployed", NULL};
	srvt_start(&t, 0, extra);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", "{\"kind\":\"calc\",\"requires\":[\"run_code\"]}", id);
	struct srvt_resp r = post(&t, TOK_A, id, "exec", "{\"argv\":[\"sh\",\"-c\",\"id\"]}");
	expect(&r, 403, "exec: not granted");
	r = post(&t, TOK_A, id, "run-code", "{\"language\":\"sh\",\"code\":\"id\"}");
	expect(&r, 403, "shell language");
	/* streamed: refused before the stream starts */
	r = post(&t, TOK_A, id, "exec", "{\"argv\":[\"sh\",\"-c\",\"id\"],\"stream\":true}");
	expect(&r, 403, "exec: not granted");
	r = post(&t, TOK_A, id, "run-code",
		 "{\"language\":\"sh\",\"code\":\"id\",\"stream\":true}");
	expect(&r, 403, "shell language");
	r = post(&t, TOK_A, id, "run-code", "{\"language\":\"python\",\"code\":\"print(2+2)\"}");
	expect(&r, 200, "\"stdout\":\"4\\n\"");
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"exec_is_sink_under_untrusted_taint\":false"));
	ck_assert_ptr_nonnull(strstr(r.body, "\"granted\":[\"run_code\"]"));
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

/* POST an exec on a raw connection and leave it in flight; returns the connection. */
static int exec_in_flight(const char *sock, const char *token, const char *id, const char *body)
{
	char path[256], *req;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	int fd = srvt_unix_connect(sock);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(asprintf(&req,
				  "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s"
				  "\r\nContent-Length: %zu\r\n\r\n%s",
				  path, token, strlen(body), body),
			 0);
	ck_assert_int_eq(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
	free(req);
	return fd;
}

/* Item 3: scope A saturates its limits; scope B is served; A gets 429 with the reason. */
START_TEST(scope_limits)
{
	struct srvt t;
	srvt_setup(&t, TOK_A " scopeA\n" TOK_B " scopeB\nlimits scopeA requests=3 sandboxes=1\n");
	srvt_start(&t, 0, NULL);
	char ida[65], idb[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, ida);
	/* a second sandbox is over A's limit; the same key again is not a new one */
	struct srvt_resp r = srvt_req(t.sock[0], "POST", "/v1/sandboxes", TOK_A, KEYHDR("t2"),
				      "{\"spec\":{\"kind\":\"test\"}}");
	ck_assert_ptr_nonnull(strstr(r.head, "Retry-After: 1"));
	expect(&r, 429, "this scope has 1 sandboxes (its limit is 1)");
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, ida);

	/* three requests in flight: A's limit (each a sleep this test can count) */
	char body[128], needle[64];
	snprintf(needle, sizeof(needle), "sleep 31.%d", (int)(getpid() % 100000));
	snprintf(body, sizeof(body), "{\"argv\":[\"sleep\",\"%s\"]}", needle + 6);
	int fds[3];
	for (int i = 0; i < 3; i++)
		fds[i] = exec_in_flight(t.sock[0], TOK_A, ida, body);
	for (int i = 0; i < 500 && srvt_count_procs_with(needle) < 3; i++)
		usleep(20000);
	ck_assert_int_eq(srvt_count_procs_with(needle), 3);
	struct srvt_resp m = {0};
	r = post(&t, TOK_A, ida, "exec", "{\"argv\":[\"true\"]}");
	ck_assert_msg(r.status == 429 && strstr(r.body, "too_many_requests") &&
			  strstr(r.body, "scope scopeA: this scope already has 3 requests in flight"),
		      "%d %s", r.status, r.body);
	ck_assert_ptr_nonnull(strcasestr(r.head, "Connection: close"));
	srvt_resp_free(&r);
	/* B is served meanwhile: acquire, exec, metrics */
	srvt_acquire(t.sock[0], TOK_B, "t1", NULL, idb);
	for (int i = 0; i < 5; i++) {
		r = post(&t, TOK_B, idb, "exec", "{\"argv\":[\"echo\",\"b\"]}");
		expect(&r, 200, "\"stdout\":\"b\\n\"");
	}
	/* A's clients give up: their execs end, and A is served again */
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	for (int i = 0; i < 300; i++) {
		r = post(&t, TOK_A, ida, "exec", "{\"argv\":[\"echo\",\"a\"]}");
		if (r.status == 200)
			break;
		srvt_resp_free(&r);
		usleep(20000);
	}
	expect(&r, 200, "\"stdout\":\"a\\n\"");
	/* A's /metrics shows its own limits and refusals */
	m = srvt_req(t.sock[0], "GET", "/metrics", TOK_A, NULL, NULL);
	ck_assert_int_eq(m.status, 200);
	ck_assert_ptr_nonnull(strstr(m.body, "rung_scope_requests_limit 3"));
	ck_assert_ptr_null(strstr(m.body, "rung_scope_refused_total 0"));
	srvt_resp_free(&m);
	srvt_teardown(&t);
}
END_TEST

/* One request on fd, keeping the connection open; returns the status. */
static int keepalive_get(int fd, const char *token, const char *path)
{
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path,
			 token);
	ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	char *raw;
	size_t len;
	srvt_read_all(fd, &raw, &len, 500); /* the answer, then the connection stays idle */
	int status = -1;
	sscanf(raw, "HTTP/1.%*d %d", &status);
	free(raw);
	return status;
}

/* Item 3: idle keep-alive connections count for their scope too: A cannot hold every
 * connection slot by parking connections between requests. */
START_TEST(scope_connections)
{
	struct srvt t;
	srvt_setup(&t, TOK_A " scopeA\n" TOK_B " scopeB\nlimits scopeA connections=2\n");
	srvt_start(&t, 0, NULL);
	int fds[2];
	for (int i = 0; i < 2; i++) {
		fds[i] = srvt_unix_connect(t.sock[0]);
		ck_assert_int_ge(fds[i], 0);
		ck_assert_int_eq(keepalive_get(fds[i], TOK_A, "/v1/sandboxes"), 200);
	}
	/* both parked: a third connection of A is refused, B is served */
	struct srvt_resp r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
	expect(&r, 429, "this scope holds 2 open connections (its limit)");
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_B, NULL, NULL);
	expect(&r, 200, "\"sandboxes\"");
	/* a parked connection is still A's to use */
	ck_assert_int_eq(keepalive_get(fds[0], TOK_A, "/v1/sandboxes"), 200);
	close(fds[1]);
	for (int i = 0; i < 100; i++) {
		r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
		if (r.status == 200)
			break;
		srvt_resp_free(&r);
		usleep(20000);
	}
	expect(&r, 200, "\"sandboxes\"");
	close(fds[0]);
	srvt_teardown(&t);
}
END_TEST

/* Item 11: operator maxima on specs, per scope, naming the field. */
START_TEST(spec_bounds)
{
	struct srvt t;
	srvt_setup(&t, TOK_A " scopeA\n" TOK_B " scopeB\nlimits scopeB ttl=0 memory=1G\n");
	srvt_start(&t, 0, NULL);
	static const struct {
		const char *spec, *field;
	} bad[] = {
	    {"{\"kind\":\"k\",\"ttl_s\":0}", "spec.ttl_s: 0 (no TTL"},
	    {"{\"kind\":\"k\",\"limits\":{\"memory\":\"256G\"}}",
	     "spec.limits.memory: 256G is above this scope's maximum of 8G"},
	    {"{\"kind\":\"k\",\"limits\":{\"disk\":\"16T\"}}",
	     "spec.limits.disk: 16T is above this scope's maximum of 64G"},
	    {"{\"kind\":\"k\",\"limits\":{\"cpus\":64}}", "spec.limits.cpus"},
	    {"{\"kind\":\"k\",\"ttl_s\":2592000}", "spec.ttl_s: 2592000 is above"},
	};
	char body[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{\"spec\":%s}", bad[i].spec);
		struct srvt_resp r =
		    srvt_req(t.sock[0], "POST", "/v1/sandboxes", TOK_A, KEYHDR("t1"), body);
		expect(&r, 403, bad[i].field);
	}
	/* scopeB's own line: ttl 0 allowed, memory capped lower */
	struct srvt_resp r = srvt_req(t.sock[0], "POST", "/v1/sandboxes", TOK_B, KEYHDR("t1"),
				      "{\"spec\":{\"kind\":\"k\",\"limits\":{\"memory\":\"2G\"}}}");
	expect(&r, 403, "spec.limits.memory: 2G is above this scope's maximum of 1G");
	char id[65];
	srvt_acquire(t.sock[0], TOK_B, "t1", "{\"kind\":\"k\",\"ttl_s\":0}", id);
	/* nothing was created for A */
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
	expect(&r, 200, "{\"sandboxes\":[]}");
	srvt_teardown(&t);
}
END_TEST

/* Item 11: /metrics shows the caller's scope only; the admin credential sees every scope
 * and nothing else. */
START_TEST(metrics_scoped)
{
	struct srvt t;
	srvt_setup(&t, TOK_A " scopeA\n" TOK_B " scopeB\nadmin " TOK_ADMIN "\n");
	srvt_start(&t, 0, NULL);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	struct srvt_resp r = srvt_req(t.sock[0], "GET", "/metrics", TOK_B, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "rung_sandboxes{isolation=\"process\",state=\"running\"} 0"));
	ck_assert_ptr_null(strstr(r.body, "rung_http_requests_total"));
	ck_assert_ptr_null(strstr(r.body, "rung_exec_total"));
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/metrics", TOK_A, NULL, NULL);
	expect(&r, 200, "rung_sandboxes{isolation=\"process\",state=\"running\"} 1");
	r = srvt_req(t.sock[0], "GET", "/metrics", TOK_ADMIN, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "rung_sandboxes{isolation=\"process\",state=\"running\"} 1"));
	ck_assert_ptr_nonnull(strstr(r.body, "rung_http_requests_total{op=\"acquire\",code=\"ok\"} 1"));
	srvt_resp_free(&r);
	/* the admin credential is no scope: no sandbox operation */
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_ADMIN, NULL, NULL);
	expect(&r, 403, "/metrics only");
	srvt_teardown(&t);
}
END_TEST

/* The daemon's peak resident memory (kB). */
static long vm_hwm_kb(pid_t pid)
{
	char p[64], line[256];
	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	FILE *f = fopen(p, "re");
	long kb = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = atol(line + 6);
	if (f)
		fclose(f);
	return kb;
}

static void b64_decoded_len(const char *b64, size_t len, size_t *out)
{
	*out = len / 4 * 3;
	if (len >= 2 && b64[len - 1] == '=')
		(*out)--;
	if (len >= 2 && b64[len - 2] == '=')
		(*out)--;
}

/* Item 8: 32 MiB of control bytes through a collected exec: one encoding (base64 only, about
 * 4/3), truncated at the collected maximum, and the daemon's memory grows by less than the
 * bound server/README.md states (2 x 16 MiB of collected output + 16 MiB). */
START_TEST(output_amplification)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", "{\"kind\":\"k\",\"limits\":{\"output_bytes\":\"64M\"}}",
		     id);
	/* text stays text, in one copy */
	struct srvt_resp r = post(&t, TOK_A, id, "exec",
				  "{\"argv\":[\"printf\",\"hello world h\\u00e9llo\\\\n\\\\001\"]}");
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.body, "\"stdout\":\"hello world h\xc3\xa9llo\\n\\u0001\""), "%s",
		      r.body);
	ck_assert_ptr_null(strstr(r.body, "stdout_b64"));
	srvt_resp_free(&r);
	/* invalid UTF-8: base64 only, no sanitized copy */
	r = post(&t, TOK_A, id, "exec", "{\"argv\":[\"printf\",\"\\\\377\\\\000A\"]}");
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"stdout_b64\":\"/wBB\""));
	ck_assert_ptr_null(strstr(r.body, "\"stdout\":"));
	srvt_resp_free(&r);
	/* a collected reply may not ask for more than its maximum, naming the field */
	r = post(&t, TOK_A, id, "exec", "{\"argv\":[\"true\"],\"output_bytes\":67108864}");
	expect(&r, 400, "output_bytes: 67108864 is above 16777216");

	long before = vm_hwm_kb(t.pid[0]);
	ck_assert_int_gt(before, 0);
	r = post(&t, TOK_A, id, "exec",
		 "{\"argv\":[\"sh\",\"-c\",\"head -c 33554432 /dev/zero | tr '\\\\000' '\\\\001'\"],"
		 "\"timeout\":60}");
	long after = vm_hwm_kb(t.pid[0]);
	ck_assert_msg(r.status == 200, "%d %.300s", r.status, r.body);
	ck_assert_ptr_nonnull(strstr(r.body, "\"truncated\":true"));
	ck_assert_ptr_null(strstr(r.body, "\"stdout\":"));
	const char *b = strstr(r.body, "\"stdout_b64\":\"");
	ck_assert_ptr_nonnull(b);
	b += strlen("\"stdout_b64\":\"");
	size_t blen = strcspn(b, "\""), dec;
	b64_decoded_len(b, blen, &dec);
	ck_assert_uint_eq(dec, 16u << 20); /* the collected maximum per stream */
	ck_assert_msg(r.len < (16u << 20) / 3 * 4 + 4096, "reply %zu bytes", r.len);
	ck_assert_uint_eq(count_in(b, "AQEB"), blen / 4 - 1); /* \001\001\001, then AQ== */
	srvt_resp_free(&r);
	long grew_mb = (after - before) / 1024;
	fprintf(stderr, "output_amplification: daemon VmHWM %ld -> %ld kB (+%ld MiB)\n", before,
		after, grew_mb);
	ck_assert_msg(grew_mb < 48, "the daemon grew by %ld MiB for one collected exec", grew_mb);

	/* streamed: each chunk in one encoding */
	r = post(&t, TOK_A, id, "exec",
		 "{\"argv\":[\"sh\",\"-c\",\"head -c 100000 /dev/zero\"],\"stream\":true}");
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"data_b64\":\"AAAA"));
	ck_assert_ptr_null(strstr(r.body, "\"data\":"));
	ck_assert_ptr_nonnull(strstr(r.body, "\"type\":\"exit\""));
	ck_assert_msg(r.len < 100000 / 3 * 4 + 4096, "stream %zu bytes", r.len);
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

/* Pure: the tokens file's limits and admin lines, the spec maxima, the output encoding. */
START_TEST(limits_and_encoding)
{
	struct srv_tokens t = {0};
	struct rung_err err = {0};
	const char *txt = TOK_A " a\nadmin " TOK_ADMIN "\nlimits a requests=2 memory=1G ttl=0\n"
			  "limits * sandboxes=5\n";
	ck_assert_msg(srv_tokens_parse(txt, strlen(txt), &t, &err) == 0, "%s", err.msg);
	const struct srv_limits *la = srv_tokens_limits(&t, "a"), *lb = srv_tokens_limits(&t, "b");
	ck_assert_uint_eq(la->requests, 2);
	ck_assert_uint_eq(la->memory_bytes, 1u << 30);
	ck_assert_uint_eq(la->ttl_s, 0);
	ck_assert_uint_eq(la->sandboxes, srv_limits_default.sandboxes); /* not named: default */
	ck_assert_uint_eq(lb->sandboxes, 5);
	ck_assert_uint_eq(lb->requests, srv_limits_default.requests);
	struct srv_caller c = {.bearer = TOK_ADMIN};
	ck_assert_str_eq(srv_auth(&t, &c), SRV_ADMIN_SCOPE);
	struct rung_spec spec;
	rung_spec_init(&spec);
	spec.ttl_s = 0;
	ck_assert_int_eq(srv_spec_check(&spec, la, &err), 0);
	ck_assert_int_eq(srv_spec_check(&spec, lb, &err), -EACCES);
	ck_assert_ptr_nonnull(strstr(err.msg, "spec.ttl_s"));
	spec.ttl_s = 60;
	spec.limits.memory_bytes = 2u << 30;
	ck_assert_int_eq(srv_spec_check(&spec, la, &err), -EACCES);
	ck_assert_msg(strstr(err.msg, "spec.limits.memory: 2G is above this scope's maximum of 1G"),
		      "%s", err.msg);
	rung_spec_release(&spec);
	srv_tokens_release(&t);
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"limits a requests=0\n", "line 1: limits: requests: expected a number 1..65536"},
	    {"limits a colour=red\n", "unknown limit \"colour\""},
	    {"limits a memory=lots\n", "memory: expected a size"},
	    {"limits a\nlimits a pids=9\n", "line 2: limits for a already on line 1"},
	    {"admin short\n", "token must be"},
	    {"admin " TOK_A "\n" TOK_A " a\n", "already given on line 1"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		ck_assert_int_lt(srv_tokens_parse(bad[i].text, strlen(bad[i].text), &t, &err), 0);
		ck_assert_msg(strstr(err.msg, bad[i].want), "'%s': %s", bad[i].text, err.msg);
	}

	static const struct {
		const char *in;
		size_t len;
		bool b64;
		const char *field;
	} enc[] = {
	    {"", 0, false, "\"out\":\"\""},
	    {"hello \"x\"\n", 10, false, "\"out\":\"hello \\\"x\\\"\\n\""},
	    {"h\xc3\xa9", 3, false, "\"out\":\"h\xc3\xa9\""},
	    {"\x01\x01\x01", 3, true, "\"out_b64\":\"AQEB\""},
	    {"\xff\x00" "A", 3, true, "\"out_b64\":\"/wBB\""},
	    {"abcdefghijklmnopqrstuvwxyz\x01", 27, false, "\\u0001\""},
	    {"ab\x01", 3, true, "\"out_b64\":\"YWIB\""},
	};
	for (size_t i = 0; i < sizeof(enc) / sizeof(enc[0]); i++) {
		struct srv_enc e;
		srv_enc_pick(enc[i].in, enc[i].len, &e);
		ck_assert_msg(e.b64 == enc[i].b64, "case %zu", i);
		ck_assert_uint_le(e.len, (enc[i].len + 2) / 3 * 4);
		size_t fl;
		char *f = srv_enc_field("out", enc[i].in, enc[i].len, &fl);
		ck_assert_uint_eq(fl, strlen(f));
		ck_assert_msg(strstr(f, enc[i].field), "case %zu: %s", i, f);
		free(f);
	}
}
END_TEST

Suite *server_boundary_suite(void)
{
	Suite *s = suite_create("server_boundary");
	TCase *pure = tcase_create("pure");
	tcase_set_timeout(pure, 10);
	tcase_add_test(pure, limits_and_encoding);
	suite_add_tcase(s, pure);
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, grant_http);
	tcase_add_test(tc, scope_limits);
	tcase_add_test(tc, scope_connections);
	tcase_add_test(tc, spec_bounds);
	tcase_add_test(tc, metrics_scoped);
	tcase_add_test(tc, output_amplification);
	suite_add_tcase(s, tc);
	return s;
}
