/*
 * server/encode.c: command output in JSON, in one encoding, written as it is sent.
 *
 * Output is either JSON text (when it is valid UTF-8 and its escapes cost no more than
 * base64 would) or base64 (NAME_b64): never both, never a sanitized copy, so a field is at
 * most 4/3 of the bytes (plus 3) whatever the command printed. A collected exec's reply is a
 * callback response that encodes from the result as MHD sends it: the daemon holds the
 * collected output once and 64 KiB of reply, not the whole reply beside it.
 */
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "server/encode.h"
#include "server/reply.h"
#include "server/srv-internal.h"

static const char b64_tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The JSON text of byte c (not a multi-byte sequence's): its length, written to o if non-NULL. */
static size_t esc_byte(unsigned char c, char *o)
{
	static const char hex[] = "0123456789abcdef";
	char e = 0;
	switch (c) {
	case '"': e = '"'; break;
	case '\\': e = '\\'; break;
	case '\n': e = 'n'; break;
	case '\r': e = 'r'; break;
	case '\t': e = 't'; break;
	case '\b': e = 'b'; break;
	case '\f': e = 'f'; break;
	default:
		if (c >= 0x20) {
			if (o)
				o[0] = (char)c;
			return 1;
		}
		if (o)
			memcpy(o, "\\u00", 4), o[4] = hex[c >> 4], o[5] = hex[c & 15];
		return 6;
	}
	if (o)
		o[0] = '\\', o[1] = e;
	return 2;
}

void srv_enc_pick(const void *data, size_t len, struct srv_enc *out)
{
	const unsigned char *p = data;
	size_t b64 = (len + 2) / 3 * 4, text = 0;
	for (size_t i = 0; i < len;) {
		size_t n = p[i] ? srv_utf8_seq(p + i, len - i) : 1; /* NUL: \u0000 */
		if (n == 0 || text > b64) {
			text = SIZE_MAX; /* not UTF-8, or control-heavy: base64 */
			break;
		}
		text += n == 1 ? esc_byte(p[i], NULL) : n;
		i += n;
	}
	out->b64 = text > b64;
	out->len = out->b64 ? b64 : text;
}

size_t srv_enc_chunk(const struct srv_enc *e, const void *data, size_t len, size_t *pos, char *buf,
		     size_t max)
{
	const unsigned char *p = data;
	size_t i = *pos, o = 0;
	if (!e->b64) {
		char tmp[6];
		while (i < len) {
			size_t k = esc_byte(p[i], tmp);
			if (o + k > max)
				break;
			memcpy(buf + o, tmp, k);
			o += k;
			i++;
		}
	} else {
		while (i < len && o + 4 <= max) {
			size_t left = len - i;
			unsigned v = (unsigned)p[i] << 16 | (left > 1 ? (unsigned)p[i + 1] << 8 : 0) |
				     (left > 2 ? p[i + 2] : 0);
			buf[o++] = b64_tbl[v >> 18];
			buf[o++] = b64_tbl[(v >> 12) & 63];
			buf[o++] = left > 1 ? b64_tbl[(v >> 6) & 63] : '=';
			buf[o++] = left > 2 ? b64_tbl[v & 63] : '=';
			i += left > 3 ? 3 : left;
		}
	}
	*pos = i;
	return o;
}

char *srv_enc_field(const char *name, const void *data, size_t len, size_t *out_len)
{
	struct srv_enc e;
	srv_enc_pick(data, len, &e);
	size_t nl = strlen(name), n = nl + (e.b64 ? 4 : 0) + e.len + 6;
	char *buf = malloc(n + 1);
	if (!buf)
		return NULL;
	size_t o = 0, pos = 0;
	buf[o++] = '"';
	memcpy(buf + o, name, nl), o += nl;
	if (e.b64)
		memcpy(buf + o, "_b64", 4), o += 4;
	memcpy(buf + o, "\":\"", 3), o += 3;
	o += srv_enc_chunk(&e, data, len, &pos, buf + o, e.len);
	buf[o++] = '"';
	buf[o] = '\0';
	*out_len = o;
	return buf;
}

/* ---- a collected exec's reply, encoded as it is sent ------------------------------------- */

#define REPLY_CHUNK (64 * 1024)

struct piece {
	const char *lit; /* a literal, or NULL: data encoded by enc */
	size_t len;	 /* of the literal, or of data */
	const char *data;
	struct srv_enc enc;
};

struct exec_reply {
	struct rung_exec_res res;
	char *head; /* {"exit_code":...,"duration_ms":... without its closing brace */
	char names[2][24];
	struct piece p[5];
	size_t idx, off; /* where the next byte comes from */
};

static void reply_free(void *cls)
{
	struct exec_reply *x = cls;
	rung_exec_res_release(&x->res);
	free(x->head);
	free(x);
}

static ssize_t reply_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct exec_reply *x = cls;
	size_t o = 0;
	while (o < max && x->idx < RUNG_ARRAY_SIZE(x->p)) {
		struct piece *p = &x->p[x->idx];
		if (p->lit) {
			size_t k = p->len - x->off < max - o ? p->len - x->off : max - o;
			memcpy(buf + o, p->lit + x->off, k);
			o += k;
			x->off += k;
		} else {
			size_t k = srv_enc_chunk(&p->enc, p->data, p->len, &x->off, buf + o, max - o);
			if (k == 0 && x->off < p->len)
				break; /* the next unit does not fit: the next call takes it */
			o += k;
		}
		if (x->off >= p->len)
			x->idx++, x->off = 0;
	}
	if (o == 0 && x->idx >= RUNG_ARRAY_SIZE(x->p))
		return MHD_CONTENT_READER_END_OF_STREAM;
	return (ssize_t)o;
}

enum MHD_Result srv_reply_exec(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_exec_res *res)
{
	struct exec_reply *x = calloc(1, sizeof(*x));
	json_t *o = json_pack("{s:i, s:i, s:b, s:b, s:b, s:f}", "exit_code", res->exit_code,
			      "signal", res->signal, "timed_out", res->timed_out, "truncated",
			      res->truncated, "oom", res->oom, "duration_ms",
			      (double)res->duration_us / 1000.0);
	char *head = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(o);
	if (!x || !head) {
		free(x);
		free(head);
		rung_exec_res_release(res);
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "exec reply: out of memory");
	}
	x->res = *res;
	memset(res, 0, sizeof(*res));
	x->head = head;
	size_t hl = strlen(head) - 1; /* without '}' */
	const char *data[2] = {x->res.out ? x->res.out : "", x->res.errout ? x->res.errout : ""};
	size_t dlen[2] = {x->res.out ? x->res.out_len : 0, x->res.errout ? x->res.err_len : 0};
	static const char *const key[2] = {"stdout", "stderr"};
	struct srv_enc enc[2];
	for (int i = 0; i < 2; i++) {
		srv_enc_pick(data[i], dlen[i], &enc[i]);
		snprintf(x->names[i], sizeof(x->names[i]), "%s\"%s%s\":\"", i ? "\"," : ",",
			 key[i], enc[i].b64 ? "_b64" : "");
	}
	x->p[0] = (struct piece){.lit = head, .len = hl};
	x->p[1] = (struct piece){.lit = NULL, .len = dlen[0], .data = data[0], .enc = enc[0]};
	x->p[2] = (struct piece){.lit = x->names[1], .len = strlen(x->names[1])};
	x->p[3] = (struct piece){.lit = NULL, .len = dlen[1], .data = data[1], .enc = enc[1]};
	x->p[4] = (struct piece){.lit = "\"}", .len = 2};
	/* the head's comma and the first name go in front of stdout */
	size_t n1 = strlen(x->names[0]);
	char *h2 = realloc(head, hl + n1 + 1);
	if (!h2) {
		reply_free(x);
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "exec reply: out of memory");
	}
	memcpy(h2 + hl, x->names[0], n1 + 1);
	x->head = h2;
	x->p[0] = (struct piece){.lit = h2, .len = hl + n1};
	uint64_t total = hl + n1 + enc[0].len + x->p[2].len + enc[1].len + 2;
	if (total <= REPLY_CHUNK) { /* small (most execs): one buffer, one write */
		char *buf = malloc(total + 1);
		ssize_t k = buf ? reply_cb(x, 0, buf, total) : -1;
		reply_free(x);
		if (k != (ssize_t)total) {
			free(buf);
			return srv_reply_error(call, c, SRV_E_INTERNAL, "exec reply: encoding");
		}
		return srv_reply_bytes(call, c, 200, "application/json", buf, total);
	}
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(total, REPLY_CHUNK, reply_cb, x, reply_free);
	if (!resp) {
		reply_free(x);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
	call->status = 200;
	enum MHD_Result r = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

json_t *srv_proc_info_json(const struct rung_proc_info *pi)
{
	json_t *argv = json_array();
	for (char **a = pi->argv; a && *a; a++)
		json_array_append_new(argv, json_string(*a));
	bool exited = pi->state == RUNG_PROC_EXITED;
	return json_pack("{s:s, s:s, s:o, s:b, s:b, s:s, s:o, s:o, s:I, s:I, s:I, s:I, s:I}",
			 "handle", pi->handle, "name", pi->name, "argv", argv, "pty", pi->pty,
			 "session", pi->session, "state", exited ? "exited" : "running",
			 "exit_code", exited ? json_integer(pi->exit_code) : json_null(),
			 "signal", exited ? json_integer(pi->signal) : json_null(), "pid",
			 (json_int_t)pi->pid, "started_ms", (json_int_t)pi->started_ms,
			 "end_offset", (json_int_t)pi->end_offset, "dropped_out",
			 (json_int_t)pi->dropped_out, "dropped_err", (json_int_t)pi->dropped_err);
}
