/*
 * tests/check_server_http.c: `rung serve` over its Unix socket: auth and scope isolation on every
 * endpoint, malformed and oversized requests, slow clients, path traversal, streaming, timeouts.
 */
#include "tests/lib/server.h"

struct ep {
	const char *method, *path_fmt, *body;
};

/* Every endpoint that needs a credential; %s is a sandbox id. */
static const struct ep endpoints[] = {
    {"POST", "/v1/sandboxes", "{\"spec\":{\"kind\":\"test\"}}"},
    {"GET", "/v1/sandboxes", NULL},
    {"DELETE", "/v1/sandboxes", NULL},
    {"GET", "/v1/sandboxes/{id}", NULL},
    {"DELETE", "/v1/sandboxes/{id}", NULL},
    {"POST", "/v1/sandboxes/{id}/exec", "{\"argv\":[\"/bin/echo\",\"pwned\"]}"},
    {"POST", "/v1/sandboxes/{id}/run-code", "{\"language\":\"sh\",\"code\":\"echo pwned\"}"},
    {"PUT", "/v1/sandboxes/{id}/files?path=pwned.txt", "pwned"},
    {"GET", "/v1/sandboxes/{id}/files?path=secret.txt", NULL},
    {"POST", "/v1/sandboxes/{id}/suspend", NULL},
    {"POST", "/v1/sandboxes/{id}/resume", NULL},
    {"GET", "/v1/sandboxes/{id}/fs/ls?path=.", NULL},
    {"GET", "/v1/sandboxes/{id}/fs/stat?path=secret.txt", NULL},
    {"POST", "/v1/sandboxes/{id}/fs/rm?path=secret.txt", NULL},
    {"POST", "/v1/sandboxes/{id}/fs/mkdir?path=pwned", NULL},
    {"POST", "/v1/sandboxes/{id}/fs/mv?path=secret.txt&to=pwned.txt", NULL},
    {"GET", "/v1/sandboxes/{id}/stats", NULL},
    {"GET", "/metrics", NULL},
};
#define N_EP (sizeof(endpoints) / sizeof(endpoints[0]))
#define KEYHDR "X-Rung-Thread: t1\r\nX-Rung-Agent: agent1\r\n"

static struct srvt_resp call_ep(struct srvt *t, const struct ep *e, const char *id,
				const char *token)
{
	char path[512];
	const char *at = strstr(e->path_fmt, "{id}");
	if (at)
		snprintf(path, sizeof(path), "%.*s%s%s", (int)(at - e->path_fmt), e->path_fmt, id,
			 at + 4);
	else
		snprintf(path, sizeof(path), "%s", e->path_fmt);
	return srvt_req(t->sock[0], e->method, path, token, KEYHDR, e->body);
}

START_TEST(auth_required_everywhere)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	static const char *const bad_tokens[] = {NULL, "tok-wrongwrongwrongwrong", "short"};
	for (size_t i = 0; i < N_EP; i++) {
		for (size_t k = 0; k < 3; k++) {
			struct srvt_resp r = call_ep(&t, &endpoints[i], id, bad_tokens[k]);
			ck_assert_msg(r.status == 401, "%s %s token %zu: %d %s",
				      endpoints[i].method, endpoints[i].path_fmt, k, r.status,
				      r.body);
			ck_assert_ptr_nonnull(strstr(r.body, "\"code\":\"unauthorized\""));
			srvt_resp_free(&r);
		}
		/* a non-Bearer scheme is refused too */
		struct srvt_resp r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", NULL,
					      "Authorization: Basic Zm9vOmJhcg==\r\n", NULL);
		ck_assert_int_eq(r.status, 401);
		srvt_resp_free(&r);
	}
	/* health needs nothing */
	struct srvt_resp r = srvt_req(t.sock[0], "GET", "/healthz", NULL, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_ptr_nonnull(strstr(r.body, "\"status\":\"ok\""));
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(cross_scope_everywhere)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	struct srvt_resp r =
	    srvt_req(t.sock[0], "PUT", "/v1/sandboxes/x/files?path=secret.txt", TOK_A, NULL, NULL);
	srvt_resp_free(&r);
	char path[256];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=secret.txt", id);
	r = srvt_req(t.sock[0], "PUT", path, TOK_A, NULL, "A's secret");
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);

	for (size_t i = 0; i < N_EP; i++) {
		const struct ep *e = &endpoints[i];
		r = call_ep(&t, e, id, TOK_B);
		if (strstr(e->path_fmt, "{id}")) {
			ck_assert_msg(r.status == 404, "%s %s as B: %d %s", e->method, e->path_fmt,
				      r.status, r.body);
			ck_assert_ptr_nonnull(strstr(r.body, "\"code\":\"not_found\""));
			ck_assert_ptr_null(strstr(r.body, "A's secret"));
		} else if (!strcmp(e->method, "POST")) {
			/* B's get-or-create with the same thread/agent/kind is B's own sandbox */
			char bid[65];
			srvt_json_str(r.body, "id", bid, sizeof(bid));
			ck_assert_int_eq(r.status, 200);
			ck_assert_str_ne(bid, id);
		} else if (!strcmp(e->method, "GET") && strstr(e->path_fmt, "sandboxes")) {
			ck_assert_int_eq(r.status, 200);
			ck_assert_ptr_null(strstr(r.body, id));
		} else if (!strcmp(e->method, "DELETE")) {
			ck_assert_int_eq(r.status, 200);
		}
		srvt_resp_free(&r);
	}
	/* Guessing ids: random and malformed ones are all not_found. */
	static const char *const guesses[] = {"0", "ffffffffffffffffffffffffffffffff", "..",
					      "%2e%2e", "a%2fb"};
	for (size_t i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", guesses[i]);
		r = srvt_req(t.sock[0], "GET", path, TOK_B, NULL, NULL);
		ck_assert_msg(r.status == 404, "%s: %d", path, r.status);
		srvt_resp_free(&r);
	}
	/* A's sandbox is intact: still there, file unchanged, not disposed by B's purge. */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=secret.txt", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	ck_assert_str_eq(r.body, "A's secret");
	srvt_resp_free(&r);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=pwned.txt", id);
	r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 404);
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(malformed_requests)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	static const struct {
		const char *body, *msg;
	} bad[] = {
	    {"{", "invalid JSON"},
	    {"[1,2]", "not a JSON object"},
	    {"{\"argv\":\"ls\"}", "argv: must be an array"},
	    {"{\"argv\":[\"ls\"],\"timeout\":\"x\"}", "timeout: must be a number"},
	    {"{\"argv\":[\"ls\"],\"scope\":\"scopeB\"}", "scope: unknown field"},
	    {"", "invalid JSON"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct srvt_resp r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL, bad[i].body);
		ck_assert_msg(r.status == 400, "case %zu: %d %s", i, r.status, r.body);
		ck_assert_ptr_nonnull(strstr(r.body, "\"code\":\"bad_request\""));
		ck_assert_msg(strstr(r.body, bad[i].msg), "case %zu: %s", i, r.body);
		srvt_resp_free(&r);
	}
	/* a strict spec: unknown fields and wrong types name the field */
	struct srvt_resp r = srvt_req(t.sock[0], "POST", "/v1/sandboxes", TOK_A, KEYHDR,
				      "{\"spec\":{\"kind\":\"k\",\"bogus\":1}}");
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_nonnull(strstr(r.body, "bogus"));
	srvt_resp_free(&r);
	static const char *const bad_specs[][2] = {
	    {"{\"spec\":{\"kind\":5}}", "kind"},
	    {"{\"spec\":{\"kind\":\"k\",\"ttl_s\":\"1h\"}}", "ttl_s"},
	    {"{\"spec\":{\"kind\":\"k\",\"limits\":{\"memory\":-1}}}", "memory"},
	    {"{\"spec\":{\"kind\":\"k\",\"egress_allow\":\"*\"}}", "egress_allow"},
	    {"{\"spec\":{\"kind\":\"k\",\"isolation\":\"jail\"}}", "isolation"},
	};
	for (size_t i = 0; i < sizeof(bad_specs) / sizeof(bad_specs[0]); i++) {
		r = srvt_req(t.sock[0], "POST", "/v1/sandboxes", TOK_A, KEYHDR, bad_specs[i][0]);
		ck_assert_msg(r.status == 400 && strstr(r.body, bad_specs[i][1]), "spec %zu: %d %s",
			      i, r.status, r.body);
		srvt_resp_free(&r);
	}
	r = srvt_req(t.sock[0], "POST", "/v1/sandboxes", TOK_A, "X-Rung-Thread: t\r\n",
		     "{\"spec\":{\"kind\":\"k\"}}");
	ck_assert_int_eq(r.status, 400);
	ck_assert_ptr_nonnull(strstr(r.body, "X-Rung-Agent"));
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/v1/nothing", TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 404);
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "PATCH", "/v1/sandboxes", TOK_A, NULL, NULL);
	ck_assert_int_eq(r.status, 405);
	ck_assert_ptr_nonnull(strstr(r.body, "method_not_allowed"));
	srvt_resp_free(&r);
	/* a body on a route that takes none: announced, and chunked (seen only mid-upload) */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/resume", id);
	r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL, "{}");
	ck_assert_msg(r.status == 400 && strstr(r.body, "takes no request body"), "%d %s", r.status,
		      r.body);
	srvt_resp_free(&r);
	char chunked[512];
	snprintf(chunked, sizeof(chunked),
		 "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOK_A
		 "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
		 path);
	int cfd = srvt_unix_connect(t.sock[0]);
	send(cfd, chunked, strlen(chunked), MSG_NOSIGNAL);
	char *craw;
	size_t clen;
	srvt_read_all(cfd, &craw, &clen, 5000);
	close(cfd);
	srvt_parse(craw, clen, &r);
	free(craw);
	ck_assert_msg(r.status == 400 && strstr(r.body, "takes no request body"), "chunked: %d %s",
		      r.status, r.body);
	srvt_resp_free(&r);
	/* garbage instead of HTTP: the connection is answered or closed, the daemon lives on */
	int fd = srvt_unix_connect(t.sock[0]);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(write(fd, "\x01\x02garbage\r\n\r\n", 13), 0);
	char *raw;
	size_t len;
	srvt_read_all(fd, &raw, &len, 5000);
	free(raw);
	close(fd);
	r = srvt_req(t.sock[0], "GET", "/healthz", NULL, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(oversized)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	size_t big = (1u << 20) + 10;
	char *body = malloc(big + 1);
	memset(body, ' ', big);
	body[big] = '\0';
	/* announced by Content-Length */
	struct srvt_resp r = {0};
	int fd = srvt_unix_connect(t.sock[0]);
	srvt_req_fd(fd, "POST", path, TOK_A, NULL, body, big, &r, 10000);
	close(fd);
	ck_assert_msg(r.status == 413, "%d %s", r.status, r.body);
	ck_assert_ptr_nonnull(strstr(r.body, "payload_too_large"));
	srvt_resp_free(&r);
	/* chunked, no length announced */
	fd = srvt_unix_connect(t.sock[0]);
	char *head;
	ck_assert_int_gt(asprintf(&head,
				  "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOK_A
				  "\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
				  path),
			 0);
	send(fd, head, strlen(head), MSG_NOSIGNAL);
	free(head);
	char chunk[70000];
	int hl = snprintf(chunk, sizeof(chunk), "%x\r\n", 65536);
	memset(chunk + hl, ' ', 65536);
	memcpy(chunk + hl + 65536, "\r\n", 2);
	for (int i = 0; i < 20; i++)
		if (send(fd, chunk, (size_t)hl + 65538, MSG_NOSIGNAL) < 0)
			break;
	send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL);
	char *raw;
	size_t len;
	srvt_read_all(fd, &raw, &len, 10000);
	close(fd);
	srvt_parse(raw, len, &r);
	free(raw);
	ck_assert_msg(r.status == 413, "chunked: %d %s", r.status, r.body);
	srvt_resp_free(&r);
	/* uploads have their own, larger limit: 2 MiB is fine for files */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=big.bin", id);
	body = realloc(body, 2u << 20);
	memset(body, 'x', 2u << 20);
	fd = srvt_unix_connect(t.sock[0]);
	srvt_req_fd(fd, "PUT", path, TOK_A, NULL, body, 2u << 20, &r, 10000);
	close(fd);
	ck_assert_msg(r.status == 200, "2 MiB upload: %d %s", r.status, r.body);
	srvt_resp_free(&r);
	free(body);
	/* an upload past 64 MiB is refused on its announced length, before any byte is read */
	snprintf(path, sizeof(path),
		 "PUT /v1/sandboxes/%s/files?path=huge.bin HTTP/1.1\r\nHost: x\r\n"
		 "Authorization: Bearer " TOK_A "\r\nContent-Length: %u\r\n\r\n",
		 id, (64u << 20) + 1);
	fd = srvt_unix_connect(t.sock[0]);
	send(fd, path, strlen(path), MSG_NOSIGNAL);
	srvt_read_all(fd, &raw, &len, 5000);
	close(fd);
	srvt_parse(raw, len, &r);
	free(raw);
	ck_assert_msg(r.status == 413, "64 MiB + 1 upload: %d %s", r.status, r.body);
	srvt_resp_free(&r);
	/* a path past 4 KiB */
	char *longpath = malloc(6000);
	strcpy(longpath, "/v1/sandboxes/");
	memset(longpath + 14, 'a', 5000);
	longpath[5014] = '\0';
	r = srvt_req(t.sock[0], "GET", longpath, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 413 || r.status == 414, "long path: %d", r.status);
	srvt_resp_free(&r);
	free(longpath);
	/* a huge header block */
	char *hdr = malloc(100000);
	strcpy(hdr, "X-Junk: ");
	memset(hdr + 8, 'j', 90000);
	strcpy(hdr + 90008, "\r\n");
	r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, hdr, NULL);
	ck_assert_msg(r.status == 413 || r.status == 431 || r.status == -1, "big header: %d",
		      r.status);
	srvt_resp_free(&r);
	free(hdr);
	r = srvt_req(t.sock[0], "GET", "/healthz", NULL, NULL, NULL);
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(slowloris)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	const char *extra[] = {"--header-timeout", "2", "--body-timeout", "2", NULL};
	srvt_start(&t, 0, extra);
	/* three clients trickle a request head one byte every 100 ms */
	static const char head[] =
	    "GET /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: "
	    "Bearer " TOK_A "\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaa\r\n\r\n";
	int fds[3];
	for (int i = 0; i < 3; i++) {
		fds[i] = srvt_unix_connect(t.sock[0]);
		ck_assert_int_ge(fds[i], 0);
	}
	uint64_t t0 = srvt_now_ms(), cut_at[3] = {0};
	size_t pos = 0;
	int n_cut = 0;
	while (n_cut < 3 && srvt_now_ms() - t0 < 8000) {
		for (int i = 0; i < 3; i++) {
			if (cut_at[i])
				continue;
			if (send(fds[i], head + pos, 1, MSG_NOSIGNAL) != 1) {
				cut_at[i] = srvt_now_ms() - t0;
				n_cut++;
				continue;
			}
			struct pollfd p = {fds[i], POLLIN | POLLRDHUP, 0};
			if (poll(&p, 1, 0) > 0) {
				char c;
				if (recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
					cut_at[i] = srvt_now_ms() - t0;
					n_cut++;
				}
			}
		}
		pos = pos + 1 < sizeof(head) - 5 ? pos + 1 : pos; /* never finish the head */
		/* meanwhile others are served promptly */
		uint64_t a = srvt_now_ms();
		struct srvt_resp r = srvt_req(t.sock[0], "GET", "/v1/sandboxes", TOK_A, NULL, NULL);
		ck_assert_int_eq(r.status, 200);
		ck_assert_msg(srvt_now_ms() - a < 1000, "a normal client waited %llu ms",
			      (unsigned long long)(srvt_now_ms() - a));
		srvt_resp_free(&r);
		usleep(100000);
	}
	for (int i = 0; i < 3; i++) {
		ck_assert_msg(cut_at[i] >= 1500 && cut_at[i] <= 5000,
			      "slow client %d cut at %llu ms (want ~2000)", i,
			      (unsigned long long)cut_at[i]);
		close(fds[i]);
	}
	/* a complete head, then a body trickled byte by byte: cut at the body deadline */
	char id[65], head2[512];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(head2, sizeof(head2),
		 "POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOK_A
		 "\r\nContent-Length: 1000\r\n\r\n",
		 id);
	int bfd = srvt_unix_connect(t.sock[0]);
	ck_assert_int_eq(send(bfd, head2, strlen(head2), MSG_NOSIGNAL), (ssize_t)strlen(head2));
	t0 = srvt_now_ms();
	uint64_t body_cut = 0;
	while (!body_cut && srvt_now_ms() - t0 < 8000) {
		if (send(bfd, " ", 1, MSG_NOSIGNAL) != 1)
			body_cut = srvt_now_ms() - t0;
		struct pollfd p = {bfd, POLLIN | POLLRDHUP, 0};
		char c;
		if (!body_cut && poll(&p, 1, 0) > 0 && recv(bfd, &c, 1, MSG_DONTWAIT) <= 0)
			body_cut = srvt_now_ms() - t0;
		usleep(100000);
	}
	close(bfd);
	ck_assert_msg(body_cut >= 1500 && body_cut <= 5000, "slow body cut at %llu ms",
		      (unsigned long long)body_cut);
	struct srvt_resp r = srvt_req(t.sock[0], "GET", "/metrics", TOK_ADMIN, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(r.body, "rung_http_request_timeouts_total 4"));
	srvt_resp_free(&r);
	srvt_teardown(&t);
}
END_TEST

START_TEST(path_traversal)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[512], host_target[300];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(host_target, sizeof(host_target), "%s/escaped.txt", t.dir);
	static const char *const evil[] = {"../../../../../../../../", "/../../../../../../",
					   "..%2f..%2f..%2f..%2f..%2f..%2f..%2f..%2f"};
	for (size_t i = 0; i < 3; i++) {
		char p[400];
		snprintf(p, sizeof(p), "%s%s", evil[i], host_target + 1);
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=%s", id, p);
		struct srvt_resp r = srvt_req(t.sock[0], "PUT", path, TOK_A, NULL, "escape");
		srvt_resp_free(&r);
		struct stat st;
		ck_assert_msg(stat(host_target, &st) < 0, "case %zu escaped to the host", i);
	}
	/*
	 * Reading: a host file that the sandbox cannot see (in this test's temp dir) is not
	 * reachable through the file API either, by "..", by an absolute path, or by a symlink
	 * planted inside the sandbox. (/etc/passwd is no test: a rung may show the sandbox its
	 * own or a read-only view of the host's /etc.)
	 */
	char secret_path[300], secret[64], body[700];
	snprintf(secret_path, sizeof(secret_path), "%s/hostsecret.txt", t.dir);
	snprintf(secret, sizeof(secret), "HOST-SECRET-%d", (int)getpid());
	srvt_write(secret_path, secret, 0644);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	snprintf(body, sizeof(body), "{\"argv\":[\"cat\",\"%s\"]}", secret_path);
	struct srvt_resp r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL, body);
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(!strstr(r.body, secret), "the sandbox sees the test dir: %s", r.body);
	srvt_resp_free(&r);
	snprintf(body, sizeof(body), "{\"argv\":[\"ln\",\"-s\",\"%s\",\"hostdir\"]}", t.dir);
	r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL, body);
	ck_assert_int_eq(r.status, 200);
	srvt_resp_free(&r);
	const char *reads[3][2] = {{"../../../../../../../..", secret_path},
				   {"", secret_path},
				   {"hostdir/hostsecret.txt", ""}};
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=%s%s", id, reads[i][0],
			 reads[i][1]);
		r = srvt_req(t.sock[0], "GET", path, TOK_A, NULL, NULL);
		ck_assert_msg(!strstr(r.body, secret), "read %zu escaped: %s", i, path);
		ck_assert_int_ne(r.status, 200);
		srvt_resp_free(&r);
	}
	/* writing through the planted link stays inside too */
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=hostdir/planted.txt", id);
	r = srvt_req(t.sock[0], "PUT", path, TOK_A, NULL, "planted");
	srvt_resp_free(&r);
	snprintf(secret_path, sizeof(secret_path), "%s/planted.txt", t.dir);
	struct stat st;
	ck_assert_msg(stat(secret_path, &st) < 0, "write through a planted link escaped");
	srvt_teardown(&t);
}
END_TEST

START_TEST(stream_and_timeout)
{
	struct srvt t;
	srvt_setup(&t, NULL);
	srvt_start(&t, 0, NULL);
	char id[65], path[256];
	srvt_acquire(t.sock[0], TOK_A, "t1", NULL, id);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	/* streamed: the first line arrives while the command still runs */
	int fd = srvt_unix_connect(t.sock[0]);
	const char *body = "{\"argv\":[\"sh\",\"-c\",\"echo first; sleep 1.5; echo second >&2\"],"
			   "\"stream\":true}";
	char *req;
	ck_assert_int_gt(asprintf(&req,
				  "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " TOK_A
				  "\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
				  path, strlen(body), body),
			 0);
	uint64_t t0 = srvt_now_ms();
	send(fd, req, strlen(req), MSG_NOSIGNAL);
	free(req);
	char buf[65536];
	size_t n = 0;
	uint64_t first_at = 0;
	for (;;) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = '\0';
		if (!first_at && strstr(buf, "\"data\":\"first\\n\""))
			first_at = srvt_now_ms() - t0;
	}
	close(fd);
	uint64_t total = srvt_now_ms() - t0;
	ck_assert_msg(first_at > 0 && first_at < 1000, "first chunk at %llu ms",
		      (unsigned long long)first_at);
	ck_assert_msg(total >= 1400, "total %llu ms", (unsigned long long)total);
	ck_assert_ptr_nonnull(strstr(buf, "application/x-ndjson"));
	ck_assert_ptr_nonnull(strstr(buf, "{\"type\":\"stderr\",\"data\":\"second\\n\"}"));
	ck_assert_ptr_nonnull(strstr(buf, "\"type\":\"exit\",\"exit_code\":0"));
	/* a timeout over HTTP: killed, reported, promptly */
	t0 = srvt_now_ms();
	struct srvt_resp r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL,
				      "{\"argv\":[\"sleep\",\"30\"],\"timeout\":1}");
	uint64_t took = srvt_now_ms() - t0;
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(strstr(r.body, "\"timed_out\":true"), "%s", r.body);
	ck_assert_msg(took >= 900 && took < 5000, "timeout took %llu ms", (unsigned long long)took);
	srvt_resp_free(&r);
	/* a streamed timeout ends with an exit line saying so */
	r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL,
		     "{\"argv\":[\"sleep\",\"30\"],\"timeout\":0.5,\"stream\":true}");
	ck_assert_msg(strstr(r.body, "\"type\":\"exit\"") && strstr(r.body, "\"timed_out\":true"),
		      "%s", r.body);
	srvt_resp_free(&r);
	r = srvt_req(t.sock[0], "GET", "/metrics", TOK_ADMIN, NULL, NULL);
	ck_assert_ptr_nonnull(strstr(r.body, "rung_exec_total{outcome=\"timed_out\"} 2"));
	ck_assert_ptr_nonnull(strstr(r.body, "rung_exec_duration_seconds_count 3"));
	srvt_resp_free(&r);
	/* the daemon keeps its agent connections (docs/protocol.md, "Kept connections"): the
	 * next exec is served by the same handler, the command's parent */
	char ppid[2][64];
	for (int i = 0; i < 2; i++) {
		r = srvt_req(t.sock[0], "POST", path, TOK_A, NULL,
			     "{\"argv\":[\"sh\",\"-c\",\"echo ppid=$PPID\"]}");
		const char *p = strstr(r.body, "ppid=");
		ck_assert_msg(r.status == 200 && p, "%s", r.body);
		snprintf(ppid[i], sizeof(ppid[i]), "%.*s", (int)strcspn(p, "\\\""), p);
		srvt_resp_free(&r);
	}
	ck_assert_str_eq(ppid[0], ppid[1]);
	srvt_teardown(&t);
}
END_TEST

Suite *server_http_suite(void)
{
	Suite *s = suite_create("server_http");
	TCase *tc = tcase_create("daemon");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, auth_required_everywhere);
	tcase_add_test(tc, cross_scope_everywhere);
	tcase_add_test(tc, malformed_requests);
	tcase_add_test(tc, oversized);
	tcase_add_test(tc, slowloris);
	tcase_add_test(tc, path_traversal);
	tcase_add_test(tc, stream_and_timeout);
	suite_add_tcase(s, tc);
	return s;
}
