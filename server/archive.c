/*
 * server/archive.c: PUT/GET /v1/sandboxes/{id}/archive?path=P, a directory tree as a tar stream
 * (docs/files.md), on top of rung_cp_upload / rung_cp_download, which check every entry.
 *
 * Neither direction holds the tree in memory. A worker thread runs the library call on one
 * end of a pipe; the request's connection thread feeds the other end (PUT: MHD's upload
 * callback writes each piece of the body as it arrives) or drains it (GET: a callback
 * response, chunked). The worker is joined when the request ends, however it ends: no thread
 * or fd outlives the request.
 *
 * GET holds back the stream's last HOLD bytes until the worker has succeeded: an error before
 * the first block is a plain JSON error (404 for a missing path); one after it ends the
 * response without its last chunk and closes the connection, so the client sees a truncated
 * transfer and a tar without its end-of-archive blocks, never a short tree that looks whole.
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "server/archive.h"
#include "server/pool.h"
#include "server/reply.h"

#define HOLD 1024	/* libarchive's end of archive: two 512-byte zero blocks */
#define BUF (64u << 10) /* GET: what one read takes from the pipe */
/* libarchive writes whole 10240-byte blocks until it closes: a tree that fails before its
 * first block arrives whole at the worker's end, so up to one block and the end-of-archive
 * blocks is waited for before the status is chosen. */
#define FIRST (10240 + HOLD)
#define DISCARD_MAX (64u << 20) /* PUT: body bytes dropped past the limit before giving up */

struct srv_archive {
	struct srv *s;
	struct rung_router *router;
	struct rung_sandbox *sb;
	char sb_id[65];
	char *path;
	bool upload;
	int fd;	       /* ours: PUT the pipe's write end, GET its read end; -1 once closed */
	int worker_fd; /* the worker's end, which it closes when done */
	pthread_t thread;
	bool started, joined;
	int rc;
	struct rung_err err;
	/* PUT */
	bool stopped;	    /* the worker reads no more: the rest of the body is dropped */
	uint64_t discarded; /* past the limit */
	/* GET */
	char *buf;
	size_t len;
	bool eof;
};

static void *worker(void *arg)
{
	struct srv_archive *a = arg;
	if (a->upload)
		a->rc = rung_cp_upload(a->sb, a->worker_fd, a->path, NULL, &a->err);
	else
		a->rc = rung_cp_download(a->sb, a->path, a->worker_fd, NULL, &a->err);
	close(a->worker_fd); /* the other end now sees EOF (GET) or EPIPE (PUT) */
	a->worker_fd = -1;
	return NULL;
}

static void join(struct srv_archive *a)
{
	if (a->fd >= 0)
		close(a->fd); /* unblocks a worker still reading or writing its end */
	a->fd = -1;
	if (a->started && !a->joined)
		pthread_join(a->thread, NULL);
	a->joined = true;
}

void srv_archive_free(struct srv_archive *a)
{
	if (!a)
		return;
	join(a);
	if (a->worker_fd >= 0) /* never started */
		close(a->worker_fd);
	rung_sandbox_close(a->sb);
	if (a->router)
		srv_router_put(a->s, a->router);
	free(a->path);
	free(a->buf);
	free(a);
}

/* A transfer on sb (taken) with its worker running; NULL on failure (sb released, *msg set). */
static struct srv_archive *start(struct srv_call *call, struct rung_sandbox *sb,
				 struct rung_router *router, bool upload, const char **msg)
{
	struct srv_archive *a = calloc(1, sizeof(*a));
	int p[2] = {-1, -1};
	if (!a || !(a->path = strdup(call->req.file_path)) ||
	    (!upload && !(a->buf = malloc(BUF + HOLD))) || pipe2(p, O_CLOEXEC) < 0) {
		*msg = "archive: out of resources";
		if (a)
			free(a->path), free(a->buf);
		free(a);
		rung_sandbox_close(sb);
		srv_router_put(call->s, router);
		return NULL;
	}
	a->s = call->s;
	a->sb = sb;
	a->router = router;
	a->upload = upload;
	snprintf(a->sb_id, sizeof(a->sb_id), "%s", call->req.id);
	a->fd = upload ? p[1] : p[0];
	a->worker_fd = upload ? p[0] : p[1];
	if (pthread_create(&a->thread, NULL, worker, a) != 0) {
		*msg = "archive: cannot start a worker";
		srv_archive_free(a);
		return NULL;
	}
	a->started = true;
	return a;
}

/* ---- PUT ------------------------------------------------------------------------------- */

enum MHD_Result srv_archive_put_begin(struct srv_call *call, struct MHD_Connection *c)
{
	struct rung_err err = {0};
	struct rung_router *r = NULL;
	struct rung_sandbox *sb = NULL;
	int rc = srv_router_get(call->s, &r, &err);
	if (rc < 0)
		return srv_reply_rung_err(call, c, rc, &err);
	/* Another scope's sandbox is 404 here, before a byte of the body is read. */
	if ((rc = rung_sandbox_open(r, call->req.id, call->scope, &sb, &err)) < 0) {
		srv_router_put(call->s, r);
		return srv_reply_rung_err(call, c, rc, &err);
	}
	const char *msg = NULL;
	if (!(call->archive = start(call, sb, r, true, &msg)))
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "%s", msg);
	return MHD_YES;
}

enum MHD_Result srv_archive_put_data(struct srv_call *call, const char *data, size_t n)
{
	struct srv_archive *a = call->archive;
	if (!call->pending && n > call->req.body_max - call->body_len) {
		call->pending = SRV_E_TOO_LARGE;
		join(a); /* the worker sees a truncated tar and stops */
	}
	if (call->pending) {
		/* MHD answers only once the body is in: drop the rest, up to a bound */
		a->discarded += n;
		return a->discarded > DISCARD_MAX ? MHD_NO : MHD_YES;
	}
	/* The whole body counts against the limit, what the worker took or not. After the
	 * worker stopped (a refused entry, or the tar's end came early) the rest is read and
	 * dropped, so that the client gets the answer (MHD queues none mid-upload). */
	call->body_len += n;
	if (!a->stopped && rung_write_all(a->fd, data, n) < 0)
		a->stopped = true; /* EPIPE: the worker is done */
	return MHD_YES;
}

enum MHD_Result srv_archive_put_finish(struct srv_call *call, struct MHD_Connection *c)
{
	struct srv_archive *a = call->archive;
	call->archive = NULL;
	join(a);
	enum MHD_Result res;
	if (call->pending == SRV_E_TOO_LARGE)
		res = srv_reply_error(call, c, SRV_E_TOO_LARGE,
				      "body: larger than %zu bytes (the daemon's --max-archive)",
				      call->req.body_max);
	else if (a->rc < 0)
		res = srv_reply_rung_err(call, c, a->rc, &a->err);
	else
		res = srv_reply_json(call, c, 200,
				     json_pack("{s:s, s:I}", "path", call->req.file_path, "bytes",
					       (json_int_t)call->body_len));
	srv_archive_free(a);
	return res;
}

/* ---- GET ------------------------------------------------------------------------------- */

/* Read from the pipe until more than want bytes wait or the worker is done (joined).
 * Returns 0, or -1 when the pipe failed. */
static int fill(struct srv_archive *a, size_t want)
{
	while (!a->eof && a->len <= want) {
		ssize_t r = read(a->fd, a->buf + a->len, BUF + HOLD - a->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			a->eof = true;
			join(a);
		}
		a->len += (size_t)(r > 0 ? r : 0);
	}
	return 0;
}

static ssize_t read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct srv_archive *a = cls;
	if (fill(a, HOLD) < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	if (a->eof && a->rc < 0) {
		/* mid-stream: no last chunk, the connection closes (the client sees a cut) */
		LOG_WARN("op=archive_get id=%s cut mid-stream: %s", a->sb_id, a->err.msg);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	if (a->eof && !a->len)
		return MHD_CONTENT_READER_END_OF_STREAM;
	size_t n = a->eof ? a->len : a->len - HOLD;
	if (n > max)
		n = max;
	memcpy(buf, a->buf, n);
	memmove(a->buf, a->buf + n, a->len - n);
	a->len -= n;
	return (ssize_t)n;
}

static void free_cb(void *cls) { srv_archive_free(cls); }

enum MHD_Result srv_archive_get(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb, struct rung_router *router)
{
	const char *msg = NULL;
	struct srv_archive *a = start(call, sb, router, false, &msg);
	if (!a)
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "%s", msg);
	if (fill(a, FIRST) < 0) {
		srv_archive_free(a);
		return srv_reply_error(call, c, SRV_E_INTERNAL, "archive: pipe read failed");
	}
	if (a->eof && a->rc < 0) { /* before the first byte: a plain error answer */
		enum MHD_Result res = srv_reply_rung_err(call, c, a->rc, &a->err);
		srv_archive_free(a);
		return res;
	}
	if (a->eof) { /* the whole tar is in the buffer */
		char *data = a->buf;
		size_t len = a->len;
		a->buf = NULL;
		srv_archive_free(a);
		return srv_reply_bytes(call, c, 200, "application/x-tar", data, len);
	}
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, BUF, read_cb, a, free_cb);
	if (!resp) {
		srv_archive_free(a);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/x-tar");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	call->status = 200;
	enum MHD_Result r = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return r;
}
