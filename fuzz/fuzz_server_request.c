/*
 * fuzz/fuzz_server_request.c: the server's request parsing and validation (pure functions).
 *
 * Input: byte 0 picks the target (tokens file / request), then for a request:
 *   METHOD \n PATH \n (QUERY_KEY=VALUE \n)* \n (HEADER: VALUE \n)* \n BODY
 * The parsed request is routed and its body decoded exactly as the daemon would.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

#define MAX_KV 64

static char *next_line(char **p, char *end)
{
	if (*p >= end)
		return NULL;
	char *s = *p, *nl = memchr(s, '\n', (size_t)(end - s));
	if (!nl)
		nl = end;
	*nl = '\0';
	*p = nl + 1;
	return s;
}

/* The background-process bodies: a refusal names something; an accepted body is whole. */
static void proc_body(enum srv_route route, const char *body, size_t blen)
{
	struct srv_proc_body b;
	struct rung_err err = {0};
	int r;
	switch (route) {
	case SRV_R_PROC_START:
		r = srv_proc_start_parse(body, blen, &b, &err);
		if (r == 0 && (!b.argv || !b.argv[0] || (b.rows && !b.pty) || b.rows > 4096))
			abort();
		break;
	case SRV_R_SESSION_START:
		r = srv_session_start_parse(body, blen, &b, &err);
		break;
	case SRV_R_SESSION_RUN:
		r = srv_session_run_parse(body, blen, &b, &err);
		if (r == 0 && !b.command)
			abort();
		break;
	case SRV_R_PROC_SIGNAL:
		r = srv_signal_body_parse(body, blen, &b, &err);
		if (r == 0 && (b.sig < 1 || b.sig > 64))
			abort();
		break;
	case SRV_R_PROC_RESIZE:
		r = srv_resize_body_parse(body, blen, &b, &err);
		if (r == 0 && (!b.rows || !b.cols || b.rows > 4096 || b.cols > 4096))
			abort();
		break;
	case SRV_R_PROC_WAIT:
		r = srv_wait_body_parse(body, blen, &b, &err);
		break;
	default:
		return;
	}
	if (r < 0 && !err.msg[0])
		abort();
	if (r == 0)
		srv_proc_body_release(&b);
}

static void fuzz_request(char *p, char *end)
{
	struct srv_kv q[MAX_KV], h[MAX_KV];
	size_t nq = 0, nh = 0;
	char *method = next_line(&p, end), *path = next_line(&p, end), *l;
	if (!method || !path)
		return;
	while ((l = next_line(&p, end)) && *l && nq < MAX_KV) {
		char *eq = strchr(l, '=');
		if (eq)
			*eq = '\0';
		q[nq++] = (struct srv_kv){l, eq ? eq + 1 : ""};
	}
	while ((l = next_line(&p, end)) && *l && nh < MAX_KV) {
		char *c = strchr(l, ':');
		if (c)
			*c = '\0';
		const char *v = c ? c + 1 : "";
		while (*v == ' ')
			v++;
		h[nh++] = (struct srv_kv){l, v};
	}
	const char *body = p < end ? p : "";
	size_t blen = p < end ? (size_t)(end - p) : 0;
	struct srv_raw raw = {method, path, q, nq, h, nh};
	struct srv_req req;
	enum srv_code code;
	struct rung_err err = {0};
	if (srv_req_parse(&raw, &req, &code, &err) < 0) {
		if (code == SRV_OK || !err.msg[0] || srv_code_http(code) < 400)
			abort(); /* every refusal has a code and a message */
		return;
	}
	if (req.body_allowed && blen > req.body_max)
		return;
	struct srv_exec x;
	char *spec = NULL;
	switch (req.route) {
	case SRV_R_EXEC:
		if (srv_exec_body_parse(body, blen, &x, &err) == 0) {
			if (!x.argv || !x.argv[0] || !x.argv[0][0])
				abort();
			srv_exec_release(&x);
		}
		break;
	case SRV_R_RUN_CODE:
		if (srv_code_body_parse(body, blen, &x, &err) == 0) {
			if (!x.language || !x.code)
				abort();
			srv_exec_release(&x);
		}
		break;
	case SRV_R_CREATE:
		if (srv_create_body_parse(body, blen, &spec, &err) == 0)
			free(spec);
		break;
	default:
		proc_body(req.route, body, blen);
		break;
	}
	bool lossy;
	free(srv_utf8_sanitize(body, blen, &lossy));
	free(srv_base64(body, blen < 4096 ? blen : 4096));
	/* output encoding: one encoding, never more than base64, written in whole units */
	struct srv_enc e;
	srv_enc_pick(body, blen, &e);
	if (e.len > (blen + 2) / 3 * 4)
		abort();
	char chunk[7];
	size_t pos = 0, total = 0, k;
	while ((k = srv_enc_chunk(&e, body, blen, &pos, chunk, sizeof(chunk))) > 0)
		total += k;
	if (pos != blen || total != e.len)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > 1u << 20)
		return 0;
	char *buf = malloc(size);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, size - 1);
	buf[size - 1] = '\0';
	if (data[0] & 1) {
		fuzz_request(buf, buf + size - 1);
	} else {
		struct srv_tokens t = {0};
		struct rung_err err = {0};
		if (srv_tokens_parse(buf, size - 1, &t, &err) == 0) {
			struct srv_caller c = {.bearer = "tok-aaaaaaaaaaaaaaaa", .unix_peer = true};
			srv_auth(&t, &c);
			c.bearer = NULL;
			srv_auth(&t, &c);
			if (!srv_tokens_limits(&t, "scopeA")->requests)
				abort(); /* every limit line keeps requests >= 1 */
			srv_tokens_release(&t);
		}
	}
	free(buf);
	return 0;
}
