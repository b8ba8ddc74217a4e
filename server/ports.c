/*
 * server/ports.c: the preview route (server/README.md). A request to
 * /v1/sandboxes/{id}/ports/{port}/REST becomes "METHOD /REST?QUERY" on a connection to that port
 * inside (rung_port_connect: the agent channel, no network): headers pass but the hop-by-hop
 * ones and the caller's Authorization (the daemon's credential, never the app's); the body is
 * the one collected. A plain request goes as HTTP/1.0 (the app answers without chunking and
 * closes), its answer streamed back as it comes. A request with Upgrade goes as HTTP/1.1; a 101
 * answer switches the client's connection (MHD's upgrade) to a raw relay of both streams.
 */
#include <ctype.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"
#include "common/relay.h"
#include "common/util.h"
#include "server/ports.h"
#include "server/reply.h"

#define HEAD_MAX (64u << 10) /* the app's response head */
#define HEAD_TIMEOUT_S 60    /* for the app to start answering */
#define SEND_TIMEOUT_S 30    /* for the app to take the request */

static const char *const hop[] = {
    "connection", "keep-alive",	   "proxy-authenticate", "proxy-authorization",
    "te",	  "trailer",	   "trailers",		 "transfer-encoding",
    "upgrade",	  "authorization", "content-length",	 "date",
    NULL};

static bool hop_by_hop(const char *k)
{
	for (size_t i = 0; hop[i]; i++)
		if (!strcasecmp(k, hop[i]))
			return true;
	return false;
}

/* A growing string of the request head. */
struct head {
	char *p;
	size_t len, cap;
	bool oom;
};

static void put(struct head *h, const char *s, size_t n)
{
	if (h->oom)
		return;
	if (h->len + n + 1 > h->cap) {
		size_t nc = (h->len + n + 1) * 2;
		char *np = realloc(h->p, nc);
		if (!np) {
			h->oom = true;
			return;
		}
		h->p = np;
		h->cap = nc;
	}
	memcpy(h->p + h->len, s, n);
	h->len += n;
	h->p[h->len] = 0;
}

static void puts_(struct head *h, const char *s) { put(h, s, strlen(s)); }

/* Percent-encode what is not safe in a path (keep_slash) or a query component. */
static void put_escaped(struct head *h, const char *s, bool keep_slash)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || strchr("-._~!$&'()*+,;=:@", *p) || (keep_slash && *p == '/')) {
			if (!keep_slash && (*p == '&' || *p == '=' || *p == '+'))
				goto esc;
			put(h, (const char *)p, 1);
			continue;
		}
	esc:;
		char e[4];
		snprintf(e, sizeof(e), "%%%02X", *p);
		put(h, e, 3);
	}
}

static enum MHD_Result add_query(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	(void)kind;
	struct head *h = cls;
	put(h, h->p[h->len - 1] == '?' ? "" : "&", h->p[h->len - 1] == '?' ? 0 : 1);
	put_escaped(h, k, false);
	if (v) {
		put(h, "=", 1);
		put_escaped(h, v, false);
	}
	return MHD_YES;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *k, const char *v)
{
	(void)kind;
	struct head *h = cls;
	if (hop_by_hop(k) || strpbrk(k, "\r\n") || (v && strpbrk(v, "\r\n")))
		return MHD_YES;
	puts_(h, k);
	puts_(h, ": ");
	puts_(h, v ? v : "");
	puts_(h, "\r\n");
	return MHD_YES;
}

/* The request head for the app. upgrade: the client's Upgrade value, or NULL. */
static char *build_head(struct srv_call *call, struct MHD_Connection *c, const char *upgrade)
{
	struct head h = {0};
	puts_(&h, call->method);
	puts_(&h, " /");
	const char *rest = call->req.port_path;
	put_escaped(&h, rest[0] == '/' ? rest + 1 : rest, true);
	if (MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, NULL, NULL) > 0) {
		puts_(&h, "?");
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_query, &h);
	}
	puts_(&h, upgrade ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n");
	MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &h);
	char line[160];
	snprintf(line, sizeof(line), "X-Forwarded-Prefix: /v1/sandboxes/%s/ports/%u\r\n",
		 call->req.id, call->req.port);
	puts_(&h, line);
	if (upgrade && !strpbrk(upgrade, "\r\n")) {
		puts_(&h, "Connection: Upgrade\r\nUpgrade: ");
		puts_(&h, upgrade);
		puts_(&h, "\r\n");
	} else {
		puts_(&h, "Connection: close\r\n");
	}
	if (call->body_len || !strcmp(call->method, "POST") || !strcmp(call->method, "PUT") ||
	    !strcmp(call->method, "PATCH")) {
		snprintf(line, sizeof(line), "Content-Length: %zu\r\n", call->body_len);
		puts_(&h, line);
	}
	puts_(&h, "\r\n");
	if (h.oom) {
		free(h.p);
		return NULL;
	}
	return h.p;
}

/* The app's answer head: up to "\r\n\r\n" (NUL-terminated in *head); bytes past it in *more. */
static int read_head(int fd, char **head, char **more, size_t *more_len, struct rung_err *err)
{
	char *b = malloc(HEAD_MAX + 1);
	size_t got = 0;
	uint64_t end = rung_now_ms() + HEAD_TIMEOUT_S * 1000u;
	if (!b)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (;;) {
		char *e = got >= 4 ? memmem(b, got, "\r\n\r\n", 4) : NULL;
		if (e) {
			size_t hl = (size_t)(e - b) + 4;
			*more_len = got - hl;
			*more = malloc(*more_len + 1);
			if (!*more) {
				free(b);
				return rung_err_set(err, ENOMEM, "out of memory");
			}
			memcpy(*more, b + hl, *more_len);
			b[hl - 2] = 0;
			*head = b;
			return 0;
		}
		uint64_t now = rung_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int n = got == HEAD_MAX || now >= end ? 0 : poll(&p, 1, (int)(end - now));
		ssize_t k = n > 0 ? read(fd, b + got, HEAD_MAX - got) : -1;
		if (k <= 0) {
			free(b);
			if (got == HEAD_MAX)
				return rung_err_set(err, EMSGSIZE,
						    "the app's answer head is over %u "
						    "bytes",
						    HEAD_MAX);
			if (n == 0)
				return rung_err_set(err, ETIMEDOUT,
						    "the app did not answer within "
						    "%d s",
						    HEAD_TIMEOUT_S);
			return rung_err_set(err, EPROTO,
					    "the app closed the connection without "
					    "an HTTP answer");
		}
		got += (size_t)k;
	}
}

/* "HTTP/1.x NNN ...": the status, 0 if malformed. */
static unsigned status_of(const char *head)
{
	if (strncmp(head, "HTTP/1.", 7) || !head[7] || head[8] != ' ')
		return 0;
	unsigned v = 0;
	for (int i = 9; i < 12; i++) {
		if (!isdigit((unsigned char)head[i]))
			return 0;
		v = v * 10 + (unsigned)(head[i] - '0');
	}
	return v >= 100 && v <= 599 ? v : 0;
}

/* The app's Content-Length (MHD_SIZE_UNKNOWN without a valid one). */
static uint64_t content_length(const char *head)
{
	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		if (strncasecmp(l + 2, "content-length:", 15))
			continue;
		const char *v = l + 17;
		while (*v == ' ' || *v == '\t')
			v++;
		char *e;
		unsigned long long n = strtoull(v, &e, 10);
		return e != v && (*e == '\r' || !*e) && isdigit((unsigned char)*v)
			   ? n
			   : MHD_SIZE_UNKNOWN;
	}
	return MHD_SIZE_UNKNOWN;
}

/* The app's headers onto resp: hop-by-hop ones dropped (on a 101 its Upgrade kept). */
static void copy_headers(char *head, struct MHD_Response *resp, bool upgrade)
{
	char *save, *line = strtok_r(head, "\r\n", &save); /* the status line */
	while ((line = strtok_r(NULL, "\r\n", &save))) {
		char *colon = strchr(line, ':');
		if (!colon || colon == line)
			continue;
		*colon = 0;
		char *v = colon + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		if (hop_by_hop(line) && !(upgrade && !strcasecmp(line, "upgrade")))
			continue;
		MHD_add_response_header(resp, line, v);
	}
}

/* A plain answer, streamed: the bytes read past the head first, then the connection's. */
struct pxy {
	struct rung_port_conn pc;
	char *more;
	size_t more_len, more_off;
	int client_fd;
};

static ssize_t pxy_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct pxy *x = cls;
	if (x->more_off < x->more_len) {
		size_t n = x->more_len - x->more_off < max ? x->more_len - x->more_off : max;
		memcpy(buf, x->more + x->more_off, n);
		x->more_off += n;
		return (ssize_t)n;
	}
	for (;;) {
		struct pollfd p[2] = {{.fd = x->pc.fd, .events = POLLIN},
				      {.fd = x->client_fd, .events = POLLRDHUP}};
		if (poll(p, x->client_fd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (x->client_fd >= 0 && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return MHD_CONTENT_READER_END_WITH_ERROR; /* the client went away */
		if (!p[0].revents)
			continue;
		ssize_t n = read(x->pc.fd, buf, max);
		if (n > 0)
			return n;
		if (n == 0)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (errno != EINTR && errno != EAGAIN)
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

static void pxy_free(void *cls)
{
	struct pxy *x = cls;
	rung_port_conn_close(&x->pc);
	free(x->more);
	free(x);
}

/* An upgraded connection: the bytes past the head to the client, the client's extra bytes to
 * the app, then a raw relay in a thread of its own until either side ends. */
struct upx {
	struct rung_port_conn pc;
	char *more;
	size_t more_len;
	MHD_socket sock;
	struct MHD_UpgradeResponseHandle *urh;
	struct upx *next;
};

/* The live upgraded relays: srv_ports_shutdown ends them before the daemon stops (MHD waits
 * for every upgraded connection to be closed). */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t live_cv = PTHREAD_COND_INITIALIZER;
static struct upx *live;

static void live_add(struct upx *u)
{
	pthread_mutex_lock(&live_mu);
	u->next = live;
	live = u;
	pthread_mutex_unlock(&live_mu);
}

static void live_remove(struct upx *u)
{
	pthread_mutex_lock(&live_mu);
	for (struct upx **p = &live; *p; p = &(*p)->next)
		if (*p == u) {
			*p = u->next;
			break;
		}
	pthread_cond_broadcast(&live_cv);
	pthread_mutex_unlock(&live_mu);
}

void srv_ports_shutdown(void)
{
	pthread_mutex_lock(&live_mu);
	for (struct upx *u = live; u; u = u->next)
		shutdown(u->pc.fd, SHUT_RDWR); /* its relay ends, and closes the client's */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	while (live && pthread_cond_timedwait(&live_cv, &live_mu, &until) == 0)
		;
	pthread_mutex_unlock(&live_mu);
}

static void *upx_main(void *arg)
{
	struct upx *u = arg;
	struct rung_err err = {0};
	if (!u->more_len || rung_write_all(u->sock, u->more, u->more_len) == 0)
		rung_relay(u->sock, u->pc.fd, -1, NULL, &err);
	live_remove(u);
	MHD_upgrade_action(u->urh, MHD_UPGRADE_ACTION_CLOSE);
	rung_port_conn_close(&u->pc);
	free(u->more);
	free(u);
	return NULL;
}

static void upgraded(void *cls, struct MHD_Connection *c, void *req_cls, const char *extra_in,
		     size_t extra_len, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	(void)c;
	(void)req_cls;
	struct upx *u = cls;
	u->sock = sock;
	u->urh = urh;
	int fl = fcntl(sock, F_GETFL);
	if (fl >= 0)
		fcntl(sock, F_SETFL, fl & ~O_NONBLOCK);
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	live_add(u);
	if ((extra_len && rung_write_all(u->pc.fd, extra_in, extra_len) < 0) ||
	    pthread_create(&t, &a, upx_main, u) != 0) {
		live_remove(u);
		MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
		rung_port_conn_close(&u->pc);
		free(u->more);
		free(u);
	}
	pthread_attr_destroy(&a);
}

static enum MHD_Result queue(struct srv_call *call, struct MHD_Connection *c, unsigned status,
			     struct MHD_Response *resp)
{
	call->status = status;
	enum MHD_Result r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return r;
}

/* Send the request (head and collected body) on the port connection. */
static int send_request(struct srv_call *call, struct MHD_Connection *c, int fd,
			const char *upgrade, struct rung_err *err)
{
	char *head = build_head(call, c, upgrade);
	if (!head)
		return rung_err_set(err, ENOMEM, "out of memory");
	struct timeval tv = {.tv_sec = SEND_TIMEOUT_S};
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int r = rung_write_all(fd, head, strlen(head));
	free(head);
	if (r == 0 && call->body_len)
		r = rung_write_all(fd, call->body, call->body_len);
	if (r < 0)
		return rung_err_sys(err, -r, "send the request to the app");
	return 0;
}

enum MHD_Result srv_port_proxy(struct srv_call *call, struct MHD_Connection *c,
			       struct rung_sandbox *sb)
{
	struct rung_err err = {0};
	struct rung_port_conn pc;
	int r = rung_port_connect(sb, call->req.port, &pc, &err);
	if (r < 0)
		return srv_reply_rung_err(call, c, r, &err);
	const char *upgrade = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Upgrade");
	char *head = NULL, *more = NULL;
	size_t more_len = 0;
	if ((r = send_request(call, c, pc.fd, upgrade, &err)) < 0 ||
	    (r = read_head(pc.fd, &head, &more, &more_len, &err)) < 0) {
		rung_port_conn_close(&pc);
		return srv_reply_error(call, c, r == -ETIMEDOUT ? SRV_E_TIMEOUT : SRV_E_UNAVAILABLE,
				       "port %u: %s", call->req.port, err.msg);
	}
	unsigned status = status_of(head);
	struct MHD_Response *resp = NULL;
	if (status == 101 && upgrade) {
		struct upx *u = calloc(1, sizeof(*u));
		if (u && (resp = MHD_create_response_for_upgrade(upgraded, u))) {
			*u = (struct upx){.pc = pc, .more = more, .more_len = more_len};
			copy_headers(head, resp, true);
			free(head);
			return queue(call, c, 101, resp);
		}
		free(u);
	} else if (status >= 200) { /* 1xx but an upgrade's 101: not relayed */
		struct pxy *x = calloc(1, sizeof(*x));
		const union MHD_ConnectionInfo *ci =
		    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		if (x) {
			*x = (struct pxy){.pc = pc,
					  .more = more,
					  .more_len = more_len,
					  .client_fd = ci ? ci->connect_fd : -1};
			resp = MHD_create_response_from_callback(content_length(head), 64 << 10,
								 pxy_read, x, pxy_free);
			if (!resp)
				pxy_free(x);
		}
		if (resp)
			copy_headers(head, resp, false);
		free(head);
		if (!x) {
			free(more);
			rung_port_conn_close(&pc);
		}
		if (!resp)
			return srv_reply_error(call, c, SRV_E_INTERNAL, "out of memory");
		return queue(call, c, status, resp);
	}
	free(head);
	free(more);
	rung_port_conn_close(&pc);
	return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "port %u: %s", call->req.port,
			       status ? "an upgrade the client did not ask for"
				      : "the app's answer is not HTTP/1.x");
}
