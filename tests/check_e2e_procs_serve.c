/*
 * tests/check_e2e_procs_serve.c: background processes and sessions through `rung serve`'s
 * HTTP routes (/v1/sandboxes/{id}/procs, /sessions) on real sandboxes: the routes answer what
 * server/README.md says; bad input is 400 naming the field, an unknown or foreign handle 404
 * (another scope's, another sandbox's), a process outlives the daemon's restart, a follower
 * killed mid-stream then asking from its offset gets exactly the missed bytes, and the
 * WebSocket upgrade of attach follows RFC 6455's handshake. Tagged "root".
 */
#include <jansson.h>

#include "server/server.h"
#include "tests/lib/server.h"

#define JSON_HDR "Content-Type: application/json\r\n"

struct fx {
	struct srvt t;
	char id[65];
	char path[256]; /* /v1/sandboxes/ID */
};

static void fx_up(struct fx *f)
{
	srvt_setup(&f->t, NULL);
	srvt_start(&f->t, 0, NULL);
	srvt_acquire(f->t.sock[0], TOK_A, "procs", NULL, f->id);
	snprintf(f->path, sizeof(f->path), "/v1/sandboxes/%s", f->id);
}

/* method PATH-TAIL (after /v1/sandboxes/ID) as token; the response. */
static struct srvt_resp call(struct fx *f, const char *token, const char *method, const char *tail,
			     const char *body)
{
	char p[512];
	snprintf(p, sizeof(p), "%s%s", f->path, tail);
	return srvt_req(f->t.sock[0], method, p, token, body ? JSON_HDR : NULL, body);
}

static void expect(struct fx *f, const char *token, const char *method, const char *tail,
		   const char *body, int status, const char *needle)
{
	struct srvt_resp r = call(f, token, method, tail, body);
	ck_assert_msg(r.status == status && (!needle || strstr(r.body, needle)),
		      "%s %s %s: %d %s (want %d, '%s')", method, tail, body ? body : "", r.status,
		      r.body, status, needle ? needle : "");
	srvt_resp_free(&r);
}

static void start(struct fx *f, const char *body, char h[17])
{
	struct srvt_resp r = call(f, TOK_A, "POST", "/procs", body);
	ck_assert_msg(r.status == 200, "start %s: %d %s", body, r.status, r.body);
	srvt_json_str(r.body, "handle", h, 17);
	ck_assert_uint_eq(strlen(h), 16);
	srvt_resp_free(&r);
}

/* The bytes of an NDJSON logs body (chunks checked contiguous from since); *end the end
 * line's end_offset (or the offset after the last whole chunk line when there is none). */
static size_t ndjson_bytes(const char *body, uint64_t since, char *out, size_t cap, uint64_t *end,
			   bool *ended)
{
	size_t n = 0;
	uint64_t next = since;
	*ended = false;
	for (const char *p = body; *p;) {
		const char *nl = strchr(p, '\n');
		if (!nl)
			break; /* a partial last line: not counted */
		json_t *o = json_loadb(p, (size_t)(nl - p), 0, NULL);
		const char *t = json_string_value(json_object_get(o, "type"));
		if (t && (!strcmp(t, "stdout") || !strcmp(t, "stderr"))) {
			json_t *d = json_object_get(o, "data");
			ck_assert_msg(d, "not text: %.*s", (int)(nl - p), p);
			ck_assert_uint_eq(json_integer_value(json_object_get(o, "offset")), next);
			size_t k = json_string_length(d);
			ck_assert(n + k <= cap);
			memcpy(out + n, json_string_value(d), k);
			n += k;
			next += k;
		} else if (t && !strcmp(t, "end")) {
			*ended = true;
			ck_assert_uint_eq(json_integer_value(json_object_get(o, "end_offset")),
					  next);
		}
		json_decref(o);
		p = nl + 1;
	}
	*end = next;
	return n;
}

static size_t logs(struct fx *f, const char *h, uint64_t since, char *out, size_t cap,
		   uint64_t *end)
{
	char tail[128];
	snprintf(tail, sizeof(tail), "/procs/%s/logs?since=%llu", h, (unsigned long long)since);
	struct srvt_resp r = call(f, TOK_A, "GET", tail, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.head, "application/x-ndjson"), "%d %s", r.status,
		      r.body);
	bool ended;
	size_t n = ndjson_bytes(r.body, since, out, cap, end, &ended);
	ck_assert_msg(ended, "no end line: %s", r.body);
	srvt_resp_free(&r);
	return n;
}

START_TEST(test_routes_and_bad_input)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	char h[17], tail[160], buf[4096];
	start(&f,
	      "{\"argv\": [\"sh\", \"-c\", \"echo hi; read x; echo got $x; sleep 100\"], "
	      "\"name\": \"web\"}",
	      h);
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	expect(&f, TOK_A, "GET", "/procs", NULL, 200, h);
	expect(&f, TOK_A, "GET", tail, NULL, 200, "\"state\":\"running\"");
	uint64_t end = 0;
	for (int i = 0; i < 200 && end < 3; i++, usleep(20000))
		logs(&f, h, 0, buf, sizeof(buf), &end);
	ck_assert_uint_eq(logs(&f, h, 0, buf, sizeof(buf), &end), 3);
	ck_assert(!memcmp(buf, "hi\n", 3));
	/* stdin: raw bytes */
	snprintf(tail, sizeof(tail), "/procs/%s/stdin", h);
	char p[512];
	snprintf(p, sizeof(p), "%s%s", f.path, tail);
	struct srvt_resp r = srvt_req(f.t.sock[0], "POST", p, TOK_A,
				      "Content-Type: application/octet-stream\r\n", "yes\n");
	ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	for (int i = 0; i < 200 && end < 11; i++, usleep(20000))
		logs(&f, h, 0, buf, sizeof(buf), &end);
	ck_assert_uint_eq(logs(&f, h, 3, buf, sizeof(buf), &end), 8);
	ck_assert(!memcmp(buf, "got yes\n", 8));

	/* unknown and malformed handles: 404 on every route */
	const char *routes[][2] = {
	    {"GET", ""}, {"DELETE", ""}, {"GET", "/logs"}, {"POST", "/wait"}, {"POST", "/stdin"}};
	for (size_t i = 0; i < 5; i++) {
		snprintf(tail, sizeof(tail), "/procs/0123456789abcdef%s", routes[i][1]);
		expect(&f, TOK_A, routes[i][0], tail, NULL, 404, "not_found");
		snprintf(tail, sizeof(tail), "/procs/XYZ%s", routes[i][1]);
		expect(&f, TOK_A, routes[i][0], tail, NULL, 404, "not_found");
	}
	expect(&f, TOK_A, "POST", "/procs/0123456789abcdef/signal", "{\"signal\": 9}", 404, NULL);
	/* another scope: neither the sandbox nor the handle exists for it; the process lives */
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	expect(&f, TOK_B, "GET", tail, NULL, 404, "not_found");
	expect(&f, TOK_B, "DELETE", tail, NULL, 404, "not_found");
	expect(&f, TOK_B, "GET", "/procs", NULL, 404, "not_found");
	expect(&f, TOK_B, "POST", "/procs", "{\"argv\": [\"true\"]}", 404, "not_found");
	expect(&f, TOK_A, "GET", tail, NULL, 200, "\"state\":\"running\"");
	/* another sandbox of the same scope: the handle is not its */
	char id2[65], p2[256];
	srvt_acquire(f.t.sock[0], TOK_A, "procs-other", NULL, id2);
	snprintf(p2, sizeof(p2), "/v1/sandboxes/%s/procs/%s", id2, h);
	r = srvt_req(f.t.sock[0], "GET", p2, TOK_A, NULL, NULL);
	ck_assert_msg(r.status == 404, "%d %s", r.status, r.body);
	srvt_resp_free(&r);

	/* malformed bodies: 400 naming the field */
	expect(&f, TOK_A, "POST", "/procs", "{", 400, "body");
	expect(&f, TOK_A, "POST", "/procs", "{\"argv\": 5}", 400, "argv");
	expect(&f, TOK_A, "POST", "/procs", "{}", 400, "argv: required");
	expect(&f, TOK_A, "POST", "/procs", "{\"argv\": [\"true\"], \"nope\": 1}", 400, "nope");
	expect(&f, TOK_A, "POST", "/procs", "{\"argv\": [\"true\"], \"rows\": 5}", 400, "rows");
	expect(&f, TOK_A, "POST", "/procs", "{\"argv\": [\"true\"], \"buffer_bytes\": 1}", 400,
	       "buffer_bytes");
	snprintf(tail, sizeof(tail), "/procs/%s/signal", h);
	expect(&f, TOK_A, "POST", tail, "{\"signal\": \"NOPE\"}", 400, "signal");
	expect(&f, TOK_A, "POST", tail, "{\"signal\": 65}", 400, "signal");
	snprintf(tail, sizeof(tail), "/procs/%s/resize", h);
	expect(&f, TOK_A, "POST", tail, "{\"rows\": 0, \"cols\": 0}", 400, "rows");
	expect(&f, TOK_A, "POST", tail, "{\"rows\": 100000, \"cols\": 100000}", 400, "rows");
	expect(&f, TOK_A, "POST", tail, "{\"rows\": 24}", 400, "cols");
	expect(&f, TOK_A, "POST", tail, "{\"rows\": 24, \"cols\": 80}", 400, "terminal");
	snprintf(tail, sizeof(tail), "/procs/%s/logs?since=abc", h);
	expect(&f, TOK_A, "GET", tail, NULL, 400, "since");
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	expect(&f, TOK_A, "PUT", tail, NULL, 405, NULL);
	/* a body over the limit: 413 */
	size_t big = SRV_MAX_JSON_BODY + 10;
	char *huge = malloc(big + 1);
	memset(huge, 'x', big);
	huge[big] = '\0';
	snprintf(p, sizeof(p), "%s/procs/%s/stdin", f.path, h);
	r = srvt_req(f.t.sock[0], "POST", p, TOK_A, NULL, huge);
	ck_assert_msg(r.status == 413, "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	free(huge);

	/* wait, signal, wait; stdin to the exited process is 409; kill forgets the handle */
	snprintf(tail, sizeof(tail), "/procs/%s/wait", h);
	expect(&f, TOK_A, "POST", tail, "{\"timeout\": 0.2}", 200, "\"exited\":false");
	snprintf(tail, sizeof(tail), "/procs/%s/signal", h);
	expect(&f, TOK_A, "POST", tail, "{\"signal\": \"TERM\"}", 200, "signalled");
	snprintf(tail, sizeof(tail), "/procs/%s/wait", h);
	expect(&f, TOK_A, "POST", tail, "{\"timeout\": 20}", 200, "\"signal\":15");
	snprintf(tail, sizeof(tail), "/procs/%s/stdin", h);
	expect(&f, TOK_A, "POST", tail, "{}", 409, "conflict");
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	expect(&f, TOK_A, "DELETE", tail, NULL, 200, "killed");
	expect(&f, TOK_A, "GET", tail, NULL, 404, "not_found");
	srvt_teardown(&f.t);
}
END_TEST

/* start with "follow": one request, {"type":"started"} then the output from 0, then the end. */
START_TEST(test_start_follow)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	struct srvt_resp r = call(&f, TOK_A, "POST", "/procs",
				  "{\"argv\": [\"sh\", \"-c\", \"echo one; echo two >&2\"], "
				  "\"follow\": true}");
	ck_assert_msg(r.status == 200 && strstr(r.head, "application/x-ndjson"), "%d %s", r.status,
		      r.body);
	char h[17];
	ck_assert_msg(!strncmp(r.body, "{\"type\":\"started\",", 18), "%s", r.body);
	srvt_json_str(r.body, "handle", h, sizeof(h));
	ck_assert_uint_eq(strlen(h), 16);
	static char out[256];
	uint64_t end;
	bool ended;
	size_t n = ndjson_bytes(strchr(r.body, '\n') + 1, 0, out, sizeof(out), &end, &ended);
	ck_assert_msg(ended && n == 8 && !memcmp(out, "one\ntwo\n", 8), "%s", r.body);
	ck_assert_msg(strstr(r.body, "\"exited\":true"), "%s", r.body);
	srvt_resp_free(&r);
	/* a start that fails is a plain error answer, not a stream */
	expect(&f, TOK_A, "POST", "/procs", "{\"argv\": [\"true\"], \"follow\": 1}", 400, "follow");
	expect(&f, TOK_B, "POST", "/procs", "{\"argv\": [\"true\"], \"follow\": true}", 404,
	       "not_found");
	srvt_teardown(&f.t);
}
END_TEST

/* A follower killed mid-stream; from its last whole chunk's offset, exactly the rest. */
START_TEST(test_follow_killed_then_since)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	char h[17];
	start(&f,
	      "{\"argv\": [\"sh\", \"-c\", \"i=0; while [ $i -lt 60 ]; do echo line$i; "
	      "i=$((i+1)); sleep 0.05; done\"]}",
	      h);
	int fd = srvt_unix_connect(f.t.sock[0]);
	ck_assert_int_ge(fd, 0);
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET %s/procs/%s/logs?since=0&follow=1 HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\n\r\n",
			 f.path, h);
	ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	char *raw = malloc(1 << 16);
	size_t got = 0;
	while (got < (1 << 16) - 1) { /* until a dozen lines came, then hang up */
		ssize_t k = read(fd, raw + got, (1 << 16) - 1 - got);
		ck_assert_int_gt(k, 0);
		got += (size_t)k;
		raw[got] = '\0';
		char *p = raw;
		int lines = 0;
		while ((p = strstr(p, "line")))
			lines++, p++;
		if (lines >= 12)
			break;
	}
	close(fd);
	struct srvt_resp part;
	srvt_parse(raw, got, &part);
	free(raw);
	ck_assert_int_eq(part.status, 200);
	static char seen[8192], rest[8192], full[8192];
	uint64_t cut, end;
	bool ended;
	size_t sl = ndjson_bytes(part.body, 0, seen, sizeof(seen), &cut, &ended);
	srvt_resp_free(&part);
	ck_assert(!ended && sl >= 6 * 6 && cut == sl);
	char tail[128];
	snprintf(tail, sizeof(tail), "/procs/%s/wait", h);
	expect(&f, TOK_A, "POST", tail, "{\"timeout\": 30}", 200, "\"exit_code\":0");
	size_t rl = logs(&f, h, cut, rest, sizeof(rest), &end);
	size_t fl = logs(&f, h, 0, full, sizeof(full), &end);
	ck_assert_uint_eq(sl + rl, fl);
	ck_assert(!memcmp(full, seen, sl) && !memcmp(full + sl, rest, rl));
	ck_assert(!memcmp(full + fl - 7, "line59\n", 7));
	srvt_teardown(&f.t);
}
END_TEST

/* One masked client frame (RFC 6455 5.3). */
static void ws_send_fin(int fd, int op, bool fin, const void *data, size_t len)
{
	unsigned char fr[256] = {
	    (unsigned char)((fin ? 0x80 : 0) | op), (unsigned char)(0x80 | len), 7, 1, 9, 3};
	ck_assert(len < 126);
	for (size_t i = 0; i < len; i++)
		fr[6 + i] = ((const unsigned char *)data)[i] ^ fr[2 + (i & 3)];
	ck_assert_int_eq(send(fd, fr, 6 + len, MSG_NOSIGNAL), (ssize_t)(6 + len));
}

static void ws_send(int fd, int op, const void *data, size_t len)
{
	ws_send_fin(fd, op, true, data, len);
}

/* Read from fd until a close frame with code (its two bytes) shows up. */
static bool ws_closed_with(int fd, unsigned code)
{
	unsigned char fr[4096];
	size_t n = 0;
	for (int i = 0; i < 50 && n < sizeof(fr); i++) {
		ssize_t k = read(fd, fr + n, sizeof(fr) - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		for (size_t j = 0; j + 3 < n; j++)
			if (fr[j] == 0x88 && fr[j + 1] == 2 && fr[j + 2] == code >> 8 &&
			    fr[j + 3] == (code & 0xff))
				return true;
	}
	return false;
}

/* Read from fd (appending to buf, NUL-terminated, got its length) until needle shows up. */
static bool ws_until(int fd, char *buf, size_t cap, size_t *got, const char *needle)
{
	uint64_t end = srvt_now_ms() + 20000;
	while (!memmem(buf, *got, needle, strlen(needle)) && srvt_now_ms() < end) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, 500) <= 0)
			continue;
		ssize_t k = read(fd, buf + *got, cap - 1 - *got);
		if (k <= 0)
			break;
		*got += (size_t)k;
		buf[*got] = '\0';
	}
	return memmem(buf, *got, needle, strlen(needle)) != NULL;
}

static const char ws_hdrs[] = "Upgrade: websocket\r\nConnection: Upgrade\r\n"
			      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			      "Sec-WebSocket-Version: 13\r\n";

/* An upgraded attach to h; what came behind the 101's head is in buf (*got bytes). */
static int ws_connect(struct fx *f, const char *h, char *buf, size_t cap, size_t *got)
{
	int fd = srvt_unix_connect(f->t.sock[0]);
	ck_assert_int_ge(fd, 0);
	char req[1024];
	int n = snprintf(req, sizeof(req),
			 "GET %s/procs/%s/attach HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\n%s\r\n",
			 f->path, h, ws_hdrs);
	ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	size_t k = 0;
	char *end = NULL;
	while (!end && k < cap - 1) {
		ssize_t r = read(fd, buf + k, cap - 1 - k);
		ck_assert_int_gt(r, 0);
		k += (size_t)r;
		buf[k] = '\0';
		end = strstr(buf, "\r\n\r\n");
	}
	ck_assert_msg(end && !strncmp(buf, "HTTP/1.1 101", 12), "%s", buf);
	*got = k - (size_t)(end + 4 - buf);
	memmove(buf, end + 4, *got);
	buf[*got] = '\0';
	return fd;
}

START_TEST(test_survives_daemon_restart)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	char h[17], tail[128], buf[1024];
	start(&f, "{\"argv\": [\"sh\", \"-c\", \"echo before; sleep 100\"], \"name\": \"keep\"}",
	      h);
	uint64_t end = 0;
	for (int i = 0; i < 200 && end < 7; i++, usleep(20000))
		logs(&f, h, 0, buf, sizeof(buf), &end);
	/* a client attached while the daemon stops: cut, the daemon does not wait for it */
	static char wb[4096];
	size_t wn;
	int wfd = ws_connect(&f, h, wb, sizeof(wb), &wn);
	ck_assert_msg(ws_until(wfd, wb, sizeof(wb), &wn, "before"), "no replay: %s", wb);
	uint64_t t0 = srvt_now_ms();
	srvt_stop(&f.t, 0, SIGTERM);
	ck_assert_msg(srvt_now_ms() - t0 < 5000, "the daemon took %llu ms to stop",
		      (unsigned long long)(srvt_now_ms() - t0));
	char rest[256];
	struct pollfd pf = {wfd, POLLIN, 0};
	ck_assert_msg(poll(&pf, 1, 5000) == 1 && read(wfd, rest, sizeof(rest)) >= 0,
		      "the attach was not cut");
	close(wfd);
	srvt_start(&f.t, 0, NULL);
	expect(&f, TOK_A, "GET", "/procs", NULL, 200, "\"name\":\"keep\"");
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	expect(&f, TOK_A, "GET", tail, NULL, 200, "\"state\":\"running\"");
	ck_assert_uint_eq(logs(&f, h, 0, buf, sizeof(buf), &end), 7);
	ck_assert(!memcmp(buf, "before\n", 7));
	srvt_teardown(&f.t);
}
END_TEST

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

/* A process flooding its output to a follower that does not read, then reads: the daemon
 * holds a chunk at a time (its memory stays flat); what fell out of the replay buffer is
 * reported as dropped. */
START_TEST(test_flood_bounded)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	char h[17], tail[160];
	start(&f,
	      "{\"argv\": [\"sh\", \"-c\", \"head -c 40000000 /dev/zero; echo done >&2; "
	      "sleep 100\"]}",
	      h);
	long before = vm_hwm_kb(f.t.pid[0]);
	int fd = srvt_unix_connect(f.t.sock[0]);
	char req[512];
	int n = snprintf(req, sizeof(req),
			 "GET %s/procs/%s/logs?since=0&follow=1 HTTP/1.1\r\nHost: rung\r\n"
			 "Authorization: Bearer " TOK_A "\r\n\r\n",
			 f.path, h);
	ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	sleep(3); /* a follower that does not read while the flood goes on */
	char *buf = malloc(1 << 20);
	size_t total = 0;
	uint64_t end = srvt_now_ms() + 20000;
	while (srvt_now_ms() < end && total < (64u << 20)) {
		struct pollfd pf = {fd, POLLIN, 0};
		if (poll(&pf, 1, 1000) <= 0)
			break; /* nothing more (it sleeps) */
		ssize_t k = read(fd, buf, 1 << 20);
		if (k <= 0)
			break;
		total += (size_t)k;
	}
	free(buf);
	close(fd);
	long after = vm_hwm_kb(f.t.pid[0]);
	fprintf(stderr, "flood: followed %zu bytes of NDJSON; daemon VmHWM %ld -> %ld kB\n", total,
		before, after);
	ck_assert_msg(total > (1u << 20), "the follower got only %zu bytes", total);
	ck_assert_msg(after - before < 16 * 1024, "the daemon grew by %ld kB", after - before);
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	struct srvt_resp r = call(&f, TOK_A, "GET", tail, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.body, "\"end_offset\":40000005"), "%s", r.body);
	ck_assert_msg(!strstr(r.body, "\"dropped_out\":0,"), "nothing dropped: %s", r.body);
	srvt_resp_free(&r);
	/* a replay from 0 now: what fell out is reported, not skipped silently */
	snprintf(tail, sizeof(tail), "/procs/%s/logs?since=0", h);
	r = call(&f, TOK_A, "GET", tail, NULL);
	ck_assert_msg(r.status == 200 && strstr(r.body, "\"type\":\"end\"") &&
			  !strstr(r.body, "\"dropped\":0,"),
		      "%.300s", r.body + (r.len > 300 ? r.len - 300 : 0));
	srvt_resp_free(&r);
	srvt_teardown(&f.t);
}
END_TEST

/* Past the sandbox's maximum of live processes: 429 naming the limit; a kill makes room. */
START_TEST(test_live_maximum)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	char h[17], first[17];
	for (int i = 0; i < RUNG_PROC_MAX_LIVE; i++)
		start(&f, "{\"argv\": [\"sleep\", \"100\"]}", i ? h : first);
	expect(&f, TOK_A, "POST", "/procs", "{\"argv\": [\"sleep\", \"100\"]}", 429, "64");
	expect(&f, TOK_A, "POST", "/sessions", "{}", 429, "64");
	char tail[64];
	snprintf(tail, sizeof(tail), "/procs/%s", first);
	expect(&f, TOK_A, "DELETE", tail, NULL, 200, "killed");
	start(&f, "{\"argv\": [\"sleep\", \"100\"]}", h);
	srvt_teardown(&f.t);
}
END_TEST

START_TEST(test_sessions)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	struct srvt_resp r = call(&f, TOK_A, "POST", "/sessions", "{}");
	ck_assert_msg(r.status == 200, "%d %s", r.status, r.body);
	char s[17], tail[128];
	srvt_json_str(r.body, "handle", s, sizeof(s));
	srvt_resp_free(&r);
	snprintf(tail, sizeof(tail), "/sessions/%s/run", s);
	expect(&f, TOK_A, "POST", tail, "{\"command\": \"cd /tmp && export X=1\"}", 200,
	       "\"exit_code\":0");
	expect(&f, TOK_A, "POST", tail, "{\"command\": \"pwd; echo $X\"}", 200,
	       "\"stdout\":\"/tmp\\n1\\n\"");
	expect(&f, TOK_A, "POST", tail, "{\"command\": 5}", 400, "command");
	expect(&f, TOK_A, "POST", tail, "{}", 400, "command: required");
	expect(&f, TOK_A, "POST", "/sessions", "{\"shell\": 1}", 400, "shell");
	expect(&f, TOK_B, "POST", tail, "{\"command\": \"true\"}", 404, "not_found");
	expect(&f, TOK_A, "POST", "/sessions/0123456789abcdef/run", "{\"command\": \"true\"}", 404,
	       "not_found");
	srvt_teardown(&f.t);
}
END_TEST

START_TEST(test_attach_handshake)
{
	RUNG_REQUIRE_ROOT();
	struct fx f;
	fx_up(&f);
	char h[17], tail[160];
	start(&f,
	      "{\"argv\": [\"sh\", \"-c\", \"echo ready; stty -echo; while read l; do "
	      "echo \\\"got $l $(stty size)\\\"; done\"], \"pty\": true}",
	      h);
	/* not an upgrade: 400 naming what is missing; an unknown handle: 404 before upgrading */
	snprintf(tail, sizeof(tail), "/procs/%s/attach", h);
	expect(&f, TOK_A, "GET", tail, NULL, 400, "Sec-WebSocket-Key");
	const char *ws = "Upgrade: websocket\r\nConnection: Upgrade\r\n"
			 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
			 "Sec-WebSocket-Version: 13\r\n";
	char p[512];
	snprintf(p, sizeof(p), "%s/procs/0123456789abcdef/attach", f.path);
	struct srvt_resp r = srvt_req(f.t.sock[0], "GET", p, TOK_A, ws, NULL);
	ck_assert_msg(r.status == 404, "%d %s", r.status, r.body);
	srvt_resp_free(&r);
	snprintf(p, sizeof(p), "%s/procs/%s/attach", f.path, h);
	r = srvt_req(f.t.sock[0], "GET", p, TOK_B, ws, NULL);
	ck_assert_msg(r.status == 404, "another scope: %d %s", r.status, r.body);
	srvt_resp_free(&r);
	/* RFC 6455 section 1.3's example key and its accept value */
	int fd = srvt_unix_connect(f.t.sock[0]);
	char req[1024];
	int n = snprintf(
	    req, sizeof(req),
	    "GET %s HTTP/1.1\r\nHost: rung\r\nAuthorization: Bearer " TOK_A "\r\n%s\r\n", p, ws);
	ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	char head[2048] = {0};
	size_t got = 0;
	while (got < sizeof(head) - 1 && !strstr(head, "\r\n\r\n")) {
		ssize_t k = read(fd, head + got, sizeof(head) - 1 - got);
		ck_assert_int_gt(k, 0);
		got += (size_t)k;
	}
	ck_assert_msg(strstr(head, "HTTP/1.1 101") &&
			  strcasestr(head, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
		      "%s", head);
	/* the replay first, then input as binary frames, a resize as a text frame */
	static char buf[65536];
	size_t n_in = got - (size_t)(strstr(head, "\r\n\r\n") + 4 - head);
	memcpy(buf, strstr(head, "\r\n\r\n") + 4, n_in);
	ck_assert_msg(ws_until(fd, buf, sizeof(buf), &n_in, "ready"), "no replay");
	const char *resize = "{\"type\":\"resize\",\"rows\":33,\"cols\":77}";
	ws_send(fd, 1, resize, strlen(resize));
	usleep(200000);
	ws_send(fd, 2, "hi\n", 3);
	ck_assert_msg(ws_until(fd, buf, sizeof(buf), &n_in, "got hi 33 77"), "no echo: %s", buf);
	/* a control message in two fragments */
	const char *part1 = "{\"type\":\"resize\",", *part2 = "\"rows\":35,\"cols\":70}";
	ws_send_fin(fd, 1, false, part1, strlen(part1));
	ws_send_fin(fd, 0, true, part2, strlen(part2));
	usleep(200000);
	ws_send(fd, 2, "x\n", 2);
	ck_assert_msg(ws_until(fd, buf, sizeof(buf), &n_in, "got x 35 70"), "no echo: %s", buf);
	/* a masked close frame: the server answers with a close frame of its own, 1000 */
	ws_send(fd, 8, "", 0);
	ck_assert_msg(ws_closed_with(fd, 1000), "no close frame 1000");
	close(fd);
	/* a hostile client: an unmasked frame is a protocol error, close 1002 */
	size_t got2;
	fd = ws_connect(&f, h, buf, sizeof(buf), &got2);
	unsigned char unmasked[] = {0x82, 0x02, 'h', 'i'};
	ck_assert_int_eq(send(fd, unmasked, sizeof(unmasked), MSG_NOSIGNAL), 4);
	ck_assert_msg(ws_closed_with(fd, 1002), "no close frame 1002");
	close(fd);
	/* and one over the frame limit: close 1009 */
	fd = ws_connect(&f, h, buf, sizeof(buf), &got2);
	unsigned char big[] = {0x82, 0xff, 0, 0, 0, 0, 0, 0x20, 0, 0, 1, 2, 3, 4};
	ck_assert_int_eq(send(fd, big, sizeof(big), MSG_NOSIGNAL), (ssize_t)sizeof(big));
	ck_assert_msg(ws_closed_with(fd, 1009), "no close frame 1009");
	close(fd);
	snprintf(tail, sizeof(tail), "/procs/%s", h);
	expect(&f, TOK_A, "GET", tail, NULL, 200, "\"state\":\"running\""); /* detach only */
	srvt_teardown(&f.t);
}
END_TEST

Suite *e2e_procs_serve_suite(void)
{
	Suite *s = suite_create("e2e_procs_serve");
	TCase *tc = tcase_create("daemon-root");
	tcase_set_timeout(tc, 120);
	tcase_set_tags(tc, "root");
	tcase_add_test(tc, test_routes_and_bad_input);
	tcase_add_test(tc, test_follow_killed_then_since);
	tcase_add_test(tc, test_start_follow);
	tcase_add_test(tc, test_survives_daemon_restart);
	tcase_add_test(tc, test_sessions);
	tcase_add_test(tc, test_flood_bounded);
	tcase_add_test(tc, test_live_maximum);
	tcase_add_test(tc, test_attach_handshake);
	suite_add_tcase(s, tc);
	return s;
}
