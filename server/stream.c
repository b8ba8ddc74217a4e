/*
 * server/stream.c: exec / run-code streamed as NDJSON while the command runs.
 *
 * A worker thread runs rung_exec with an output callback that writes one JSON line per chunk
 * into a pipe; the HTTP response is a callback response reading that pipe (MHD runs one thread
 * per connection, so the reader may block). Lines:
 *   {"type":"stdout"|"stderr","data":"...","data_b64":"..." (only when not valid UTF-8)}
 *   {"type":"heartbeat"}                    every few seconds of silence
 *   {"type":"exit","exit_code":..,...}      last line on success (ExecResult without output)
 *   {"type":"error","error":{"code","message"}}  last line on failure
 * If the client goes away, the pipe breaks, the callback returns <0 and the exec is stopped.
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/err.h"
#include "common/log.h"
#include "common/util.h"
#include "server/callbacks.h"
#include "server/op.h"
#include "server/pool.h"
#include "server/reply.h"
#include "server/srv-internal.h"
#include "server/stream.h"

#define HEARTBEAT_MS 5000

struct stream_job {
	struct srv *s;
	struct rung_router *router;
	struct rung_sandbox *sb;
	struct srv_exec x;
	bool is_code;
	int wfd;
	pthread_mutex_t wlock; /* output and callback events are whole lines */
	struct srv_cb_exec cb;
};

static int write_line(int fd, json_t *o)
{
	cleanup_free char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
	json_decref(o);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	s[n] = '\n'; /* json_dumps' NUL becomes the line end; write n+1 bytes */
	return rung_write_all(fd, s, n + 1);
}

static int on_output(void *ud, enum rung_stream st, const void *data, size_t len)
{
	struct stream_job *j = ud;
	/* {"type":"stdout","data":"..."} or ...,"data_b64":"..."}: one encoding (encode.c) */
	size_t fl;
	cleanup_free char *field = srv_enc_field("data", data, len, &fl);
	if (!field)
		return -1;
	const char *type = st == RUNG_STDOUT ? "{\"type\":\"stdout\"," : "{\"type\":\"stderr\",";
	struct iovec iov[3] = {{(void *)type, strlen(type)}, {field, fl}, {(void *)"}\n", 2}};
	size_t total = iov[0].iov_len + fl + 2, done = 0;
	pthread_mutex_lock(&j->wlock);
	while (done < total) {
		ssize_t w = writev(j->wfd, iov, 3);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			pthread_mutex_unlock(&j->wlock);
			return -1;
		}
		done += (size_t)w;
		for (int i = 0; i < 3 && w > 0; i++) {
			size_t k = (size_t)w < iov[i].iov_len ? (size_t)w : iov[i].iov_len;
			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			w -= (ssize_t)k;
		}
	}
	pthread_mutex_unlock(&j->wlock);
	return 0;
}

static void *worker(void *arg)
{
	struct stream_job *j = arg;
	struct rung_exec_req q;
	srv_exec_req_fill(&j->x, &q);
	q.on_output = on_output;
	q.ud = j;
	q.no_collect = true;
	struct rung_exec_res res = {0};
	struct rung_err err = {0};
	int rc = 0;
	if (j->x.callbacks) {
		/* the client answers each call; its going away cancels the exec */
		rc = srv_cb_exec_init(&j->cb, j->x.callbacks, &err);
		q.callbacks = j->cb.tab;
		q.n_callbacks = j->cb.n;
		q.watch_fd = j->cb.conn_fd >= 0;
		q.cancel_fd = j->cb.conn_fd;
	}
	if (rc == 0)
		rc = j->is_code ? rung_run_code(j->sb, j->x.language, j->x.code, &q, &res, &err)
			    : rung_exec(j->sb, &q, &res, &err);
	srv_metrics_exec(&j->s->metrics, &res, rc);
	json_t *o;
	if (rc < 0) {
		enum srv_code code = srv_code_from_errno(rc);
		o = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code",
			      srv_code_name(code), "message", err.msg);
	} else {
		o = json_pack("{s:s, s:i, s:i, s:b, s:b, s:b, s:f}", "type", "exit", "exit_code",
			      res.exit_code, "signal", res.signal, "timed_out", res.timed_out,
			      "truncated", res.truncated, "oom", res.oom, "duration_ms",
			      (double)res.duration_us / 1000.0);
	}
	write_line(j->wfd, o);
	srv_cb_exec_release(&j->cb);
	pthread_mutex_destroy(&j->wlock);
	rung_exec_res_release(&res);
	close(j->wfd);
	rung_sandbox_close(j->sb);
	srv_router_put(j->s, j->router);
	srv_exec_release(&j->x);
	free(j);
	return NULL;
}

struct reader {
	int rfd;
	bool eof;
	int heartbeat_ms; /* well inside the connection's idle timeout */
};

static ssize_t read_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct reader *rd = cls;
	if (rd->eof)
		return MHD_CONTENT_READER_END_OF_STREAM;
	for (;;) {
		struct pollfd p = {rd->rfd, POLLIN, 0};
		int n = poll(&p, 1, rd->heartbeat_ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (n == 0) {
			static const char hb[] = "{\"type\":\"heartbeat\"}\n";
			if (max < sizeof(hb) - 1)
				continue;
			memcpy(buf, hb, sizeof(hb) - 1);
			return (ssize_t)(sizeof(hb) - 1);
		}
		ssize_t r = read(rd->rfd, buf, max);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (r == 0) {
			rd->eof = true;
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		return r;
	}
}

static void free_cb(void *cls)
{
	struct reader *rd = cls;
	close(rd->rfd); /* a worker still writing now gets EPIPE and stops the exec */
	free(rd);
}

/* The response reading rfd (rd takes it), fed by feed(job) on a detached thread. If either
 * cannot be made, undo(job) releases the job, its pipe's write end included. */
static enum MHD_Result ndjson_serve(struct srv_call *call, struct MHD_Connection *c,
				    struct reader *rd, int rfd, void *(*feed)(void *), void *job,
				    void (*undo)(void *job))
{
	unsigned idle_ms = call->s->o.idle_timeout_s * 1000u;
	rd->rfd = rfd;
	rd->heartbeat_ms = idle_ms && idle_ms / 3 < HEARTBEAT_MS ? (int)(idle_ms / 3) : HEARTBEAT_MS;
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, read_cb, rd, free_cb);
	if (!resp) {
		free_cb(rd);
		undo(job);
		return MHD_NO;
	}
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &attr, feed, job);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		MHD_destroy_response(resp); /* calls free_cb */
		undo(job);
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "stream: cannot start worker");
	}
	MHD_add_response_header(resp, "Content-Type", "application/x-ndjson");
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	call->status = 200;
	enum MHD_Result r = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return r;
}

static void stream_job_undo(void *p)
{
	struct stream_job *j = p;
	close(j->wfd);
	rung_sandbox_close(j->sb);
	srv_router_put(j->s, j->router);
	srv_exec_release(&j->x);
	free(j);
}

enum MHD_Result srv_exec_stream(struct srv_call *call, struct MHD_Connection *c,
				struct rung_sandbox *sb, struct rung_router *router,
				struct srv_exec *x, bool is_code)
{
	struct srv *s = call->s;
	int p[2];
	struct stream_job *j = calloc(1, sizeof(*j));
	struct reader *rd = calloc(1, sizeof(*rd));
	if (!j || !rd || pipe2(p, O_CLOEXEC) < 0) {
		free(j);
		free(rd);
		rung_sandbox_close(sb);
		srv_router_put(s, router);
		srv_exec_release(x);
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "stream: out of resources");
	}
	*j = (struct stream_job){.s = s, .router = router, .sb = sb, .x = *x, .is_code = is_code,
				 .wfd = p[1]};
	memset(x, 0, sizeof(*x));
	pthread_mutex_init(&j->wlock, NULL);
	j->cb = (struct srv_cb_exec){.wfd = p[1], .wlock = &j->wlock, .conn_fd = -1};
	snprintf(j->cb.scope, sizeof(j->cb.scope), "%s", call->scope ? call->scope : "");
	snprintf(j->cb.sb_id, sizeof(j->cb.sb_id), "%s", rung_sandbox_id(sb));
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		j->cb.conn_fd = ci->connect_fd;
	return ndjson_serve(call, c, rd, p[0], worker, j, stream_job_undo);
}

/* ---- a generic NDJSON response fed by a thread (procs.c's logs) ------------------------ */

struct gen_job {
	void (*fn)(void *arg, int wfd);
	void (*done)(void *arg);
	void *arg;
	int wfd;
};

static void *gen_worker(void *p)
{
	struct gen_job *j = p;
	j->fn(j->arg, j->wfd);
	close(j->wfd);
	j->done(j->arg);
	free(j);
	return NULL;
}

static void gen_job_undo(void *p)
{
	struct gen_job *j = p;
	close(j->wfd);
	j->done(j->arg);
	free(j);
}

enum MHD_Result srv_ndjson_thread(struct srv_call *call, struct MHD_Connection *c,
				  void (*fn)(void *arg, int wfd), void (*done)(void *arg),
				  void *arg)
{
	int p[2];
	struct gen_job *j = calloc(1, sizeof(*j));
	struct reader *rd = calloc(1, sizeof(*rd));
	if (!j || !rd || pipe2(p, O_CLOEXEC) < 0) {
		free(j);
		free(rd);
		done(arg);
		return srv_reply_error(call, c, SRV_E_UNAVAILABLE, "stream: out of resources");
	}
	*j = (struct gen_job){fn, done, arg, p[1]};
	return ndjson_serve(call, c, rd, p[0], gen_worker, j, gen_job_undo);
}
