/*
 * cli/remote-attach.c: `rung attach` and `rung exec -t` through `rung serve`: a WebSocket
 * client (RFC 6455) of GET /v1/sandboxes/{id}/procs/{h}/attach on the daemon's Unix socket.
 * Our input goes out as masked binary frames, our window size as a text frame
 * {"type": "resize", "rows", "cols"}; the process's output comes back as binary frames, and
 * {"type": "exit", ...} then a close frame when it exits (server/README.md).
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA1_Init(): see below */
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/remote.h"
#include "common/cleanup.h"
#include "common/err.h"
#include "common/util.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

struct wsc {
	int fd;
	char *pre; /* bytes read past the response head */
	size_t pre_len;
	json_t *exit;
	char err[256];
	bool close_sent;
};

static int send_frame(struct wsc *w, int op, const void *data, size_t len)
{
	unsigned char h[14], mask[4];
	size_t hl = 2;
	if (getrandom(mask, 4, 0) != 4)
		memset(mask, 0x5a, 4);
	h[0] = (unsigned char)(0x80 | op);
	if (len < 126) {
		h[1] = (unsigned char)(0x80 | len);
	} else {
		h[1] = 0x80 | 126;
		h[2] = (unsigned char)(len >> 8);
		h[3] = (unsigned char)len;
		hl = 4;
	}
	memcpy(h + hl, mask, 4);
	hl += 4;
	unsigned char buf[65536];
	if (len > sizeof(buf))
		return -EMSGSIZE;
	for (size_t i = 0; i < len; i++)
		buf[i] = ((const unsigned char *)data)[i] ^ mask[i & 3];
	int r = rung_write_all(w->fd, h, hl);
	return r < 0 ? r : rung_write_all(w->fd, buf, len);
}

static int ws_read(struct wsc *w, void *buf, size_t n)
{
	size_t k = w->pre_len < n ? w->pre_len : n;
	if (k) {
		memcpy(buf, w->pre, k);
		memmove(w->pre, w->pre + k, w->pre_len - k);
		w->pre_len -= k;
	}
	return k == n ? 0 : rung_read_exact(w->fd, (char *)buf + k, n - k);
}

static void send_size(struct wsc *w)
{
	unsigned rows, cols;
	char msg[96];
	if (!cli_term_size(&rows, &cols))
		return;
	int n =
	    snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"rows\":%u,\"cols\":%u}", rows, cols);
	send_frame(w, 1, msg, (size_t)n);
}

/* Connect, upgrade; 0 or <0 with err (the daemon's error answer as for any request). */
static int ws_open(struct cli *c, struct wsc *w, const char *path, struct rung_err *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", c->socket);
	w->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (w->fd < 0 || connect(w->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = cli_remote_check(c, err);
		return r < 0 ? r : rung_err_sys(err, errno, "connect %s", c->socket);
	}
	unsigned char nonce[16];
	char key[32] = {0}, want[64] = {0}, cat[128], auth[600] = "";
	if (getrandom(nonce, sizeof(nonce), 0) != sizeof(nonce))
		return rung_err_sys(err, errno, "getrandom");
	EVP_EncodeBlock((unsigned char *)key, nonce, sizeof(nonce));
	snprintf(cat, sizeof(cat), "%s%s", key, WS_GUID);
	/* The low-level SHA-1 calls, as common/digest.c's SHA-256: EVP_Digest (and SHA1(), built
	 * on it) would link OpenSSL's provider machinery into build/rung, ~340 KiB of pointer
	 * tables relocated at every start of every command (bench/README.md "pool"). */
	unsigned char md[SHA_DIGEST_LENGTH];
	SHA_CTX sc;
	SHA1_Init(&sc);
	SHA1_Update(&sc, cat, strlen(cat));
	SHA1_Final(md, &sc);
	EVP_EncodeBlock((unsigned char *)want, md, (int)sizeof(md));
	if (c->token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", c->token);
	cleanup_free char *req = NULL;
	if (asprintf(&req,
		     "GET %s HTTP/1.1\r\nHost: rung\r\n%sUpgrade: websocket\r\nConnection: "
		     "Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n",
		     path, auth, key) < 0 ||
	    rung_write_all(w->fd, req, strlen(req)) < 0)
		return rung_err_set(err, EIO, "attach: cannot send the request");
	char head[8192];
	size_t n = 0;
	char *end = NULL;
	while (!end && n < sizeof(head) - 1) {
		ssize_t k = read(w->fd, head + n, sizeof(head) - 1 - n);
		if (k <= 0)
			return rung_err_set(err, EIO, "attach: the daemon closed the connection");
		n += (size_t)k;
		head[n] = '\0';
		end = strstr(head, "\r\n\r\n");
	}
	if (!end)
		return rung_err_set(err, EPROTO, "attach: no response head");
	long status = strtol(head + 9, NULL, 10);
	char *body = end + 4;
	size_t rest = n - (size_t)(body - head);
	if (status != 101) { /* an error answer: its JSON body (read whatever else came) */
		struct cli_http h = {.status = status};
		h.body = malloc(rest + 65536);
		memcpy(h.body, body, rest);
		h.len = rest;
		ssize_t k;
		while (h.len < rest + 65535 && (k = read(w->fd, h.body + h.len, 1024)) > 0 &&
		       !json_loadb(h.body, h.len, JSON_DISABLE_EOF_CHECK, NULL))
			h.len += (size_t)k;
		int r = cli_http_error(c, &h, err);
		free(h.body);
		return r;
	}
	if (!strcasestr(head, want))
		return rung_err_set(err, EPROTO,
				    "attach: the daemon's Sec-WebSocket-Accept is wrong");
	if (rest && (w->pre = malloc(rest))) {
		memcpy(w->pre, body, rest);
		w->pre_len = rest;
	}
	return 0;
}

/* One server frame: 1 the connection is over, 0 go on, <0 broken. */
static int on_frame(struct wsc *w)
{
	unsigned char h[2], ext[8];
	if (ws_read(w, h, 2) < 0)
		return 1;
	uint64_t len = h[1] & 0x7f;
	if (len >= 126) {
		size_t k = len == 126 ? 2 : 8;
		if (ws_read(w, ext, k) < 0)
			return 1;
		len = 0;
		for (size_t i = 0; i < k; i++)
			len = len << 8 | ext[i];
	}
	if (len > (1u << 24) || (h[1] & 0x80))
		return -EPROTO;
	char *p = malloc(len + 1);
	if (!p || ws_read(w, p, (size_t)len) < 0) {
		free(p);
		return 1;
	}
	int op = h[0] & 0x0f, r = 0;
	if (op == 2 || op == 0) {
		rung_write_all(1, p, (size_t)len);
	} else if (op == 1) {
		json_t *o = json_loadb(p, (size_t)len, 0, NULL);
		const char *t = json_string_value(json_object_get(o, "type"));
		const char *m = json_string_value(json_object_get(o, "message"));
		if (t && !strcmp(t, "exit")) {
			json_decref(w->exit);
			w->exit = json_incref(o);
		} else if (t && !strcmp(t, "error")) {
			snprintf(w->err, sizeof(w->err), "%s", m ? m : "attach failed");
		}
		json_decref(o);
	} else if (op == 9) {
		send_frame(w, 10, p, (size_t)len);
	} else if (op == 8) {
		if (!w->close_sent)
			send_frame(w, 8, p, len >= 2 ? 2 : 0);
		w->close_sent = true;
		r = 1;
	}
	free(p);
	return r;
}

/* The relay; 1 the process exited (w->exit), 0 detached, <0 with err. */
static int relay(struct wsc *w, bool eof_eot, struct rung_err *err)
{
	sigset_t winch, prev;
	sigemptyset(&winch);
	sigaddset(&winch, SIGWINCH);
	sigprocmask(SIG_BLOCK, &winch, &prev);
	int sfd = signalfd(-1, &winch, SFD_CLOEXEC);
	struct cli_detach d = {0};
	bool in_open = true;
	int r = 0;
	send_size(w);
	cli_term_raw();
	while (r == 0) {
		struct pollfd p[3] = {
		    {w->fd, POLLIN, 0}, {in_open ? 0 : -1, POLLIN, 0}, {sfd, POLLIN, 0}};
		if (w->pre_len) { /* frames that came with the head */
			r = on_frame(w);
			continue;
		}
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[2].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) > 0)
				send_size(w);
		}
		if (p[1].revents & (POLLIN | POLLHUP)) {
			char buf[4096], out[4097];
			ssize_t n = read(0, buf, sizeof(buf));
			if (n == 0 && eof_eot) { /* exec -t: the terminal's EOF character */
				in_open = false;
				send_frame(w, 2, "\x04", 1);
				continue;
			}
			ssize_t k = n > 0 ? cli_detach_filter(&d, buf, (size_t)n, out) : -1;
			if (k > 0)
				send_frame(w, 2, out, (size_t)k);
			if (k < 0) { /* EOF or the detach keys: close, then wait for its close */
				in_open = false;
				send_frame(w, 8, "\x03\xe8", 2);
				w->close_sent = true;
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			r = on_frame(w);
	}
	cli_term_restore();
	if (sfd >= 0)
		close(sfd);
	sigprocmask(SIG_SETMASK, &prev, NULL);
	if (r < 0)
		return rung_err_set(err, -r, "attach: a frame the protocol does not allow");
	if (w->err[0])
		return rung_err_set(err, EIO, "%s", w->err);
	return w->exit ? 1 : 0;
}

static int exit_status(json_t *o)
{
	int sig = (int)json_integer_value(json_object_get(o, "signal"));
	return sig ? 128 + sig : (int)json_integer_value(json_object_get(o, "exit_code"));
}

int cli_remote_attach(struct cli *c, const char *id, const char *h, uint64_t since, bool forget)
{
	char path[512], tail[128];
	struct rung_err err = {0};
	struct wsc w = {.fd = -1};
	snprintf(tail, sizeof(tail), "/procs/");
	cli_url_pct(tail, sizeof(tail), h);
	snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), "/attach?since=%llu",
		 (unsigned long long)since);
	cli_url_sb(path, sizeof(path), id, tail);
	struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
	sigaction(SIGPIPE, &ign, &old_pipe); /* the daemon may close before our last frame */
	int r = ws_open(c, &w, path, &err);
	if (r == 0)
		r = relay(&w, forget, &err);
	sigaction(SIGPIPE, &old_pipe, NULL);
	int st = r < 0 ? cli_fail(c, &err) : r == 1 ? exit_status(w.exit) : 0;
	if (r == 0)
		fprintf(stderr, "\r\nrung: detached from %s; it runs on\n", h);
	if (r == 1 && forget) { /* exec -t: the handle is forgotten once it exited */
		struct cli_http hh = {0};
		char p[512];
		snprintf(tail, sizeof(tail), "/procs/");
		cli_url_pct(tail, sizeof(tail), h);
		cli_url_sb(p, sizeof(p), id, tail);
		if (cli_http_call(c, &hh, "DELETE", p, NULL, NULL, 0, &err) < 0)
			fprintf(stderr, "rung: forget %s: %s\n", h, err.msg);
		cli_http_release(&hh);
	}
	if (w.fd >= 0)
		close(w.fd);
	free(w.pre);
	json_decref(w.exit);
	return st;
}

int cli_remote_exec_tty(struct cli *c, const char *id, const struct rung_proc_req *req)
{
	json_t *o = json_pack("{s:[], s:b, s:i, s:i}", "argv", "pty", 1, "rows", req->rows, "cols",
			      req->cols);
	for (const char *const *a = req->argv; *a; a++)
		json_array_append_new(json_object_get(o, "argv"), json_string(*a));
	if (req->cwd)
		json_object_set_new(o, "cwd", json_string(req->cwd));
	if (req->env)
		json_object_set_new(o, "env", cli_env_json(req->env));
	cleanup_free char *body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	char path[512];
	cli_url_sb(path, sizeof(path), id, "/procs");
	const char *hdrs[] = {"Content-Type: application/json", NULL};
	struct cli_http h = {0};
	struct rung_err err = {0};
	if (!body || cli_http_call(c, &h, "POST", path, hdrs, body, strlen(body), &err) < 0) {
		cli_http_release(&h);
		return cli_fail(c, &err);
	}
	json_t *j = json_loadb(h.body ? h.body : "", h.len, 0, NULL);
	cli_http_release(&h);
	char handle[RUNG_PROC_HANDLE_LEN + 1] = "";
	const char *hv = json_string_value(json_object_get(j, "handle"));
	snprintf(handle, sizeof(handle), "%s", hv ? hv : "");
	json_decref(j);
	if (!handle[0]) {
		rung_err_set(&err, EPROTO, "the daemon answered no handle");
		return cli_fail(c, &err);
	}
	return cli_remote_attach(c, id, handle, 0, true);
}
