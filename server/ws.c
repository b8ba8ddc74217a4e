/*
 * server/ws.c: the WebSocket attach (RFC 6455) of a background process,
 * GET /v1/sandboxes/{id}/procs/{h}/attach[?since=N].
 *
 * libmicrohttpd answers the handshake (101, Sec-WebSocket-Accept) and hands over the socket;
 * a thread of ours then runs rung_proc_attach with the process's output going out as binary
 * frames, while a second thread reads the client's frames: binary (and continuation) payloads
 * become the process's input through a pipe, a text frame is a control message
 * ({"type": "resize", "rows": R, "cols": C}), ping is answered with pong, close detaches.
 * When the process exits the server sends a text frame {"type": "exit", ...info} and a close
 * frame (1000). A client frame that is not masked, or larger than WS_MAX_FRAME, closes the
 * connection with 1002 / 1009. server/README.md documents the protocol.
 */
#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"
#include "server/encode.h"
#include "server/pool.h"
#include "server/reply.h"
#include "server/ws.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_MAX_FRAME (1u << 20)
enum { WS_CONT = 0, WS_TEXT = 1, WS_BIN = 2, WS_CLOSE = 8, WS_PING = 9, WS_PONG = 10 };

struct srv_ws {
	struct srv *s;
	struct rung_router *router, *router2; /* the attach's, and the control reader's */
	struct rung_sandbox *sb, *sb2;
	char id[65], scope[300], handle[RUNG_PROC_HANDLE_LEN + 1];
	uint64_t since;
	int sock;
	struct MHD_UpgradeResponseHandle *urh;
	char *extra; /* bytes MHD read past the request head */
	size_t extra_len;
	int in[2];		  /* client input -> rung_proc_attach's in_fd */
	pthread_mutex_t write_mu; /* frames from both threads */
	bool closed_sent;
	char *text; /* a text message arriving in fragments (reader thread only) */
	size_t text_len;
	bool in_text;
	struct srv_ws *next; /* in s->ws, under s->ws_mu */
};

static int send_frame(struct srv_ws *w, int op, const void *data, size_t len)
{
	unsigned char h[10];
	size_t hl = 2;
	h[0] = (unsigned char)(0x80 | op);
	if (len < 126) {
		h[1] = (unsigned char)len;
	} else if (len <= 0xffff) {
		h[1] = 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		hl = 4;
	} else {
		h[1] = 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)len >> (56 - 8 * i));
		hl = 10;
	}
	pthread_mutex_lock(&w->write_mu);
	int r = w->closed_sent ? -EPIPE : 0;
	if (!r && (r = rung_write_all(w->sock, h, hl)) == 0)
		r = rung_write_all(w->sock, data, len);
	if (op == WS_CLOSE)
		w->closed_sent = true;
	pthread_mutex_unlock(&w->write_mu);
	return r;
}

static void send_close(struct srv_ws *w, unsigned code)
{
	unsigned char p[2] = {(unsigned char)(code >> 8), (unsigned char)code};
	send_frame(w, WS_CLOSE, p, 2);
}

/* Read exactly n bytes: first what MHD had read already, then the socket. */
static int ws_read(struct srv_ws *w, void *buf, size_t n)
{
	size_t k = w->extra_len < n ? w->extra_len : n;
	if (k) {
		memcpy(buf, w->extra, k);
		memmove(w->extra, w->extra + k, w->extra_len - k);
		w->extra_len -= k;
	}
	return k == n ? 0 : rung_read_exact(w->sock, (char *)buf + k, n - k);
}

/* A text frame: a control message. Only resize is defined; others are ignored. */
static void control(struct srv_ws *w, const char *p, size_t len)
{
	json_t *o = json_loadb(p, len, 0, NULL);
	const char *t = json_string_value(json_object_get(o, "type"));
	if (t && !strcmp(t, "resize")) {
		struct rung_err err = {0};
		json_int_t r = json_integer_value(json_object_get(o, "rows"));
		json_int_t c = json_integer_value(json_object_get(o, "cols"));
		if (rung_proc_resize(w->sb2, w->handle, r > 0 && r < 65536 ? (unsigned)r : 0,
				     c > 0 && c < 65536 ? (unsigned)c : 0, &err) < 0) {
			json_t *e = json_pack("{s:s, s:s}", "type", "error", "message", err.msg);
			cleanup_free char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
			if (s)
				send_frame(w, WS_TEXT, s, strlen(s));
			json_decref(e);
		}
	}
	json_decref(o);
}

/* One client frame; <0 ends the reading (close, error, protocol violation). */
/* A data frame's payload: input, or (a text message, maybe fragmented) a control message. */
static int data_frame(struct srv_ws *w, int op, bool fin, unsigned char *buf, size_t len)
{
	if (op == WS_BIN || (op == WS_CONT && !w->in_text)) {
		if (op == WS_BIN && w->in_text)
			return send_close(w, 1002), -1; /* a new message inside a text one */
		return rung_write_all(w->in[1], buf, len) < 0 ? -1 : 0;
	}
	if (op == WS_TEXT && w->in_text)
		return send_close(w, 1002), -1;
	if (w->text_len + len > WS_MAX_FRAME)
		return send_close(w, 1009), -1;
	char *t = realloc(w->text, w->text_len + len + 1);
	if (!t)
		return send_close(w, 1011), -1;
	memcpy(t + w->text_len, buf, len);
	w->text = t;
	w->text_len += len;
	w->in_text = !fin;
	if (fin) {
		control(w, w->text, w->text_len);
		w->text_len = 0;
	}
	return 0;
}

/* One client frame; <0 ends the reading (close, error, protocol violation). */
static int read_frame(struct srv_ws *w, unsigned char *buf)
{
	unsigned char h[2], ext[8], mask[4];
	if (ws_read(w, h, 2) < 0)
		return -1;
	int op = h[0] & 0x0f;
	bool fin = h[0] & 0x80;
	uint64_t len = h[1] & 0x7f;
	if (!(h[1] & 0x80) || (h[0] & 0x70)) /* masked, no extension bits (none negotiated) */
		return send_close(w, 1002), -1;
	if (op >= 8 && (!fin || len > 125)) /* control frames: whole and short */
		return send_close(w, 1002), -1;
	if (len >= 126) {
		size_t n = len == 126 ? 2 : 8;
		if (ws_read(w, ext, n) < 0)
			return -1;
		len = 0;
		for (size_t i = 0; i < n; i++)
			len = len << 8 | ext[i];
	}
	if (len > WS_MAX_FRAME)
		return send_close(w, 1009), -1;
	if (ws_read(w, mask, 4) < 0 || ws_read(w, buf, (size_t)len) < 0)
		return -1;
	for (uint64_t i = 0; i < len; i++)
		buf[i] ^= mask[i & 3];
	switch (op) {
	case WS_CONT:
	case WS_BIN:
	case WS_TEXT:
		return data_frame(w, op, fin, buf, (size_t)len);
	case WS_PING:
		send_frame(w, WS_PONG, buf, (size_t)len);
		return 0;
	case WS_CLOSE:
		send_close(w, 1000);
		return -1;
	case WS_PONG:
		return 0;
	default:
		return send_close(w, 1002), -1;
	}
}

static void *reader_main(void *arg)
{
	struct srv_ws *w = arg;
	unsigned char *buf = malloc(WS_MAX_FRAME);
	while (buf && read_frame(w, buf) == 0)
		;
	free(buf);
	close(w->in[1]); /* EOF on in_fd: rung_proc_attach detaches */
	w->in[1] = -1;
	return NULL;
}

static int on_output(void *ud, enum rung_stream s, uint64_t offset, const void *data, size_t len)
{
	return send_frame(ud, WS_BIN, data, len) < 0 ? -1 : 0;
}

static void exit_message(struct srv_ws *w)
{
	struct rung_err err = {0};
	struct rung_proc_info pi;
	if (rung_proc_get(w->sb, w->handle, &pi, &err) < 0)
		return;
	json_t *o = srv_proc_info_json(&pi);
	rung_proc_info_release(&pi, 1);
	json_object_set_new(o, "type", json_string("exit"));
	cleanup_free char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s)
		send_frame(w, WS_TEXT, s, strlen(s));
}

static void ws_free(struct srv_ws *w)
{
	pthread_mutex_lock(&w->s->ws_mu);
	for (struct srv_ws **p = &w->s->ws; *p; p = &(*p)->next)
		if (*p == w) {
			*p = w->next;
			break;
		}
	pthread_mutex_unlock(&w->s->ws_mu);
	if (w->in[0] >= 0)
		close(w->in[0]);
	if (w->in[1] >= 0)
		close(w->in[1]);
	rung_sandbox_close(w->sb);
	rung_sandbox_close(w->sb2);
	if (w->router)
		srv_router_put(w->s, w->router);
	if (w->router2)
		srv_router_put(w->s, w->router2);
	pthread_mutex_destroy(&w->write_mu);
	free(w->extra);
	free(w->text);
	free(w);
}

static void *attach_main(void *arg)
{
	struct srv_ws *w = arg;
	pthread_t rt;
	bool reading = pthread_create(&rt, NULL, reader_main, w) == 0;
	struct rung_proc_attach_req q = {
	    .since = w->since, .in_fd = w->in[0], .on_output = on_output, .ud = w};
	struct rung_err err = {0};
	int r = reading ? rung_proc_attach(w->sb, w->handle, &q, &err) : -EAGAIN;
	if (r == 1)
		exit_message(w);
	if (r < 0) {
		json_t *e = json_pack("{s:s, s:s}", "type", "error", "message",
				      err.msg[0] ? err.msg : "attach failed");
		cleanup_free char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
		if (s)
			send_frame(w, WS_TEXT, s, strlen(s));
		json_decref(e);
	}
	send_close(w, r < 0 ? 1011 : 1000);
	shutdown(w->sock, SHUT_RDWR); /* the reader's read ends */
	if (reading)
		pthread_join(rt, NULL);
	MHD_upgrade_action(w->urh, MHD_UPGRADE_ACTION_CLOSE);
	ws_free(w);
	return NULL;
}

static void upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in,
		     size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct srv_ws *w = cls;
	w->sock = sock;
	w->urh = urh;
	if (extra_in_size && (w->extra = malloc(extra_in_size))) {
		memcpy(w->extra, extra_in, extra_in_size);
		w->extra_len = extra_in_size;
	}
	int fl = fcntl(sock, F_GETFL);
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl & ~O_NONBLOCK);
	pthread_mutex_lock(&w->s->ws_mu);
	w->next = w->s->ws;
	w->s->ws = w;
	pthread_mutex_unlock(&w->s->ws_mu);
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, attach_main, w) != 0) {
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		ws_free(w);
	}
	pthread_attr_destroy(&attr);
}

void srv_ws_shutdown(struct srv *s)
{
	pthread_mutex_lock(&s->ws_mu);
	for (struct srv_ws *w = s->ws; w; w = w->next)
		shutdown(w->sock, SHUT_RDWR);
	pthread_mutex_unlock(&s->ws_mu);
}

/* Sec-WebSocket-Accept for key: base64(SHA-1(key + GUID)). */
static char *accept_value(const char *key)
{
	cleanup_free char *cat = NULL;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	if (asprintf(&cat, "%s%s", key, WS_GUID) < 0 ||
	    !EVP_Digest(cat, strlen(cat), md, &n, EVP_sha1(), NULL))
		return NULL;
	return srv_base64(md, n);
}

struct header_find {
	const char *name, *token;
	bool found;
};

static enum MHD_Result header_it(void *cls, enum MHD_ValueKind kind, const char *key,
				 const char *value)
{
	struct header_find *f = cls;
	if (key && value && !strcasecmp(key, f->name) && strcasestr(value, f->token))
		f->found = true;
	return MHD_YES;
}

/* Whether any header name (it may come more than once) holds token. */
static bool header_has(struct MHD_Connection *c, const char *name, const char *token)
{
	struct header_find f = {name, token, false};
	MHD_get_connection_values(c, MHD_HEADER_KIND, header_it, &f);
	return f.found;
}

enum MHD_Result srv_ws_attach(struct srv_call *call, struct MHD_Connection *c,
			      struct rung_sandbox **sb, struct rung_router **router)
{
	struct rung_err err = {0};
	struct rung_proc_info pi; /* an unknown handle is a 404 before the upgrade */
	int rc = rung_proc_get(*sb, call->req.handle, &pi, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	rung_proc_info_release(&pi, 1);
	const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	const char *ver = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	if (!header_has(c, "Upgrade", "websocket") || !header_has(c, "Connection", "upgrade") ||
	    !key || strlen(key) != 24 || !ver || strcmp(ver, "13"))
		return srv_reply_error(call, c, SRV_E_BAD_REQUEST,
				       "attach: a WebSocket upgrade (RFC 6455, version 13) is "
				       "required: Upgrade, Connection, Sec-WebSocket-Key, "
				       "Sec-WebSocket-Version");
	struct srv_ws *w = calloc(1, sizeof(*w));
	cleanup_free char *acc = accept_value(key);
	if (!w || !acc || pipe2(w->in, O_CLOEXEC) < 0) {
		free(w);
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "attach: out of resources");
	}
	pthread_mutex_init(&w->write_mu, NULL);
	w->s = call->s;
	snprintf(w->handle, sizeof(w->handle), "%s", call->req.handle);
	w->since = call->req.since;
	/* the control reader's own router and handle: none is shared between two threads */
	if ((rc = srv_router_get(call->s, &w->router2, &err)) < 0 ||
	    (rc = rung_sandbox_open(w->router2, call->req.id, call->scope, &w->sb2, &err)) < 0) {
		ws_free(w);
		return srv_reply_rung_err(call, c, rc, &err);
	}
	struct MHD_Response *resp = MHD_create_response_for_upgrade(upgraded, w);
	if (!resp) {
		ws_free(w);
		return MHD_NO;
	}
	w->sb = rung_steal_ptr(sb);
	w->router = rung_steal_ptr(router);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(resp, "Sec-WebSocket-Accept", acc);
	call->status = 101;
	enum MHD_Result r = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
	MHD_destroy_response(resp);
	if (r != MHD_YES)
		ws_free(w); /* no upgrade will come: give back the handles and routers */
	return r;
}
