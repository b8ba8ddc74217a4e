/*
 * runtime/procs.c: the host side of background processes, terminals and shell sessions
 * (rung_proc_* and rung_session_* of rung.h; docs/procs.md). Every entry point checks the
 * sandbox's exec grant and resumes a suspended sandbox (rt_sandbox_agent), then speaks one
 * PROC_* request to the agent, which relays it to the process's keeper inside the sandbox.
 * The host keeps no state: a handle is all a later client needs.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/agent-io.h"
#include "runtime/rt-internal.h"

#define OP_TIMEOUT_MS 30000u
#define LONG_TIMEOUT_MS 0x7fffffffu /* follow: until the process exits or we leave (24 days) */
#define BUFFER_MAX RUNG_PROTO_BUFFER_MAX

_Static_assert(RUNG_PROC_HANDLE_LEN == RUNG_PROTO_HANDLE_LEN, "handle length");
_Static_assert(RUNG_PROC_NAME_MAX == RUNG_PROTO_NAME_MAX, "name length");

/* An operation's budget: its own time plus the agent's grace, within an int of ms. */
static unsigned budget(uint32_t ms)
{
	return ms > LONG_TIMEOUT_MS - OP_TIMEOUT_MS ? LONG_TIMEOUT_MS : ms + OP_TIMEOUT_MS;
}

/* One connection to the agent for one request. */
struct call {
	struct rung_sandbox *s;
	int fd, busy;
	struct rt_agent_io io;
	bool io_ok;
};

static void call_end(struct call *c)
{
	if (c->io_ok)
		rt_agent_io_release(&c->io);
	if (c->fd >= 0)
		close(c->fd);
	if (c->busy >= 0)
		close(c->busy);
	c->fd = c->busy = -1;
	c->io_ok = false;
}

static int bad_handle(struct rung_sandbox *s, const char *h, struct rung_err *err)
{
	return rung_err_set(err, ENOENT, "no process %.32s in sandbox %s", h ? h : "(null)",
			    rt_sandbox_inner(s)->meta.id);
}

static int call_begin(struct call *c, struct rung_sandbox *s, const struct rung_proto_proc *q,
		      unsigned timeout_ms, int cancel_fd, struct rung_err *err)
{
	*c = (struct call){.s = s, .fd = -1, .busy = -1};
	if (q->type != RUNG_MSG_PROC_START && !(q->type == RUNG_MSG_PROC_LIST && !q->handle[0]) &&
	    !rung_proto_handle_valid(q->handle))
		return bad_handle(s, q->handle, err);
	c->fd = rt_sandbox_agent(s, &c->busy, err);
	if (c->fd < 0)
		return c->fd;
	struct rung_buf b = {0};
	int r = rung_proto_proc_encode(q, &b);
	if (r < 0)
		r = rung_err_set(err, ENOMEM, "out of memory encoding the request");
	if (r == 0 && (r = rt_agent_io_init(&c->io, c->fd, timeout_ms, cancel_fd, err)) == 0) {
		c->io_ok = true;
		r = rt_agent_io_queue(&c->io, q->type, &b, err);
	}
	rung_buf_release(&b);
	if (r < 0)
		call_end(c);
	return r;
}

/* An ERROR frame's error; anything but `want` is a protocol error. */
static int expect(const struct rung_frame *f, uint8_t want, struct rung_err *err)
{
	if (f->type == RUNG_MSG_ERROR) {
		rung_proto_error_decode(f->payload, f->len, err);
		return -(err->code ? err->code : EIO);
	}
	if (f->type != want)
		return rung_err_set(err, EPROTO, "unexpected frame type %u from the agent (want %u)",
				    f->type, want);
	return 0;
}

/* A RESULT frame's fields. */
struct result {
	char handle[RUNG_PROTO_HANDLE_LEN + 1];
	uint64_t end_offset, dropped, exited, pid;
};

static int result_decode(const struct rung_frame *f, struct result *out, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	memset(out, 0, sizeof(*out));
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		if (tag == RUNG_TAG_HANDLE) {
			if (l != RUNG_PROTO_HANDLE_LEN)
				return rung_err_set(err, EPROTO, "malformed handle from the agent");
			memcpy(out->handle, v, l);
			out->handle[l] = 0;
			if (!rung_proto_handle_valid(out->handle))
				return rung_err_set(err, EPROTO, "malformed handle from the agent");
			continue;
		}
		uint64_t u;
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			return r;
		if (tag == RUNG_TAG_END_OFFSET)
			out->end_offset = u;
		else if (tag == RUNG_TAG_DROPPED)
			out->dropped = u;
		else if (tag == RUNG_TAG_STATE)
			out->exited = u;
		else if (tag == RUNG_TAG_PID)
			out->pid = u;
	}
	return r;
}

/* One request whose answer is a single frame of type want; *f is the caller's to release. */
static int simple_call(struct rung_sandbox *s, const struct rung_proto_proc *q, uint8_t want,
		       unsigned timeout_ms, struct rung_frame *f, struct rung_err *err)
{
	struct call c;
	int r = call_begin(&c, s, q, timeout_ms, rt_sandbox_cancel_fd(s), err);
	if (r < 0)
		return r;
	r = rt_agent_io_next(&c.io, f, err);
	call_end(&c);
	if (r == 0 && (r = expect(f, want, err)) < 0)
		rung_frame_release(f);
	rt_sandbox_touch(s);
	return r;
}

static int info_from(struct rung_proc_info *o, const struct rung_frame *f, struct rung_err *err)
{
	struct rung_proto_proc_info in;
	int r = rung_proto_proc_info_decode(f->payload, f->len, &in, err);
	if (r < 0)
		return rung_err_wrap(err, "process info from the agent");
	memset(o, 0, sizeof(*o));
	memcpy(o->handle, in.handle, sizeof(o->handle));
	if (in.name)
		snprintf(o->name, sizeof(o->name), "%s", in.name);
	o->argv = in.argv;
	in.argv = NULL;
	o->pty = in.pty;
	o->session = in.session;
	o->state = in.exited ? RUNG_PROC_EXITED : RUNG_PROC_RUNNING;
	o->exit_code = (int)in.exit_code;
	o->signal = (int)in.signal;
	o->pid = (pid_t)in.pid;
	o->started_ms = in.started_ms;
	o->end_offset = in.end_offset;
	o->dropped_out = in.dropped_out;
	o->dropped_err = in.dropped_err;
	rung_proto_proc_info_release(&in);
	return 0;
}

void rung_proc_info_release(struct rung_proc_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		rung_strvfreep(&v[i].argv);
	}
}

void rung_proc_info_free(struct rung_proc_info *v, size_t n)
{
	rung_proc_info_release(v, n);
	free(v);
}

static int check_start(const struct rung_proc_req *req, struct rung_err *err)
{
	if (!req || !req->argv || !req->argv[0] || !req->argv[0][0])
		return rung_err_set(err, EINVAL, "argv: at least one non-empty element required");
	if (req->name && strlen(req->name) > RUNG_PROC_NAME_MAX)
		return rung_err_set(err, EINVAL, "name: longer than %d bytes", RUNG_PROC_NAME_MAX);
	if (req->pty && (req->rows > RUNG_PROTO_TTY_MAX || req->cols > RUNG_PROTO_TTY_MAX))
		return rung_err_set(err, EINVAL, "rows x cols %ux%u: each must be 1..%d",
				    req->rows, req->cols, RUNG_PROTO_TTY_MAX);
	if (req->buffer_bytes > BUFFER_MAX)
		return rung_err_set(err, EINVAL, "buffer_bytes: %llu exceeds %llu",
				    (unsigned long long)req->buffer_bytes, BUFFER_MAX);
	return 0;
}

/* A PROC_START request q, answered with the new process's handle. */
static int start_call(struct rung_sandbox *s, const struct rung_proto_proc *q, const char *what,
		      char handle[RUNG_PROC_HANDLE_LEN + 1], struct rung_err *err)
{
	struct rung_frame f;
	if (simple_call(s, q, RUNG_MSG_RESULT, OP_TIMEOUT_MS, &f, err) < 0)
		return rung_err_wrap(err, "%s", what);
	struct result res;
	int r = result_decode(&f, &res, err);
	rung_frame_release(&f);
	if (r == 0 && !res.handle[0])
		r = rung_err_set(err, EPROTO, "the agent answered without a handle");
	if (r < 0)
		return rung_err_wrap(err, "%s", what);
	memcpy(handle, res.handle, RUNG_PROC_HANDLE_LEN + 1);
	return 0;
}

int rung_proc_start(struct rung_sandbox *s, const struct rung_proc_req *req, char *handle,
		    struct rung_err *err)
{
	int r = check_start(req, err);
	if (r < 0)
		return r;
	struct rt_sandbox *sb = rt_sandbox_inner(s);
	char cwd[4096];
	cleanup_strv char **env = NULL;
	cleanup_strv char **ienv = rt_sandbox_image_env(s);
	if ((r = rt_exec_seccomp_check(req->seccomp_bpf, req->seccomp_bpf_len, err)) < 0 ||
	    (r = rt_exec_env(req->env, req->cwd, &sb->meta.spec, (const char *const *)ienv, &env,
			     cwd, sizeof(cwd), err)) < 0)
		return r;
	struct rung_proto_proc q = {
		.type = RUNG_MSG_PROC_START,
		.x = {.argv = (char **)req->argv, .env = env, .cwd = cwd,
		      .seccomp = (uint8_t *)req->seccomp_bpf,
		      .seccomp_len = (uint32_t)req->seccomp_bpf_len},
		.name = (char *)req->name,
		.pty = req->pty,
		.rows = req->rows,
		.cols = req->cols,
		.buffer = req->buffer_bytes ? req->buffer_bytes : 1u << 20,
	};
	return start_call(s, &q, "proc start", handle, err);
}

int rung_proc_list(struct rung_sandbox *s, struct rung_proc_info **out, size_t *n,
		   struct rung_err *err)
{
	*out = NULL;
	*n = 0;
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_LIST};
	struct call c;
	int r = call_begin(&c, s, &q, OP_TIMEOUT_MS, -1, err);
	if (r < 0)
		return rung_err_wrap(err, "proc list");
	struct rung_proc_info *v = NULL;
	size_t k = 0;
	for (;;) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&c.io, &f, err)) < 0)
			break;
		if (f.type == RUNG_MSG_RESULT) {
			rung_frame_release(&f);
			break;
		}
		r = expect(&f, RUNG_MSG_PROC_INFO, err);
		if (r == 0 && k >= 4 * RUNG_PROC_MAX_LIVE)
			r = rung_err_set(err, EPROTO, "the agent lists too many processes");
		struct rung_proc_info *nv = r == 0 ? realloc(v, (k + 1) * sizeof(*v)) : NULL;
		if (r == 0 && !nv)
			r = rung_err_set(err, ENOMEM, "out of memory");
		if (r == 0 && (r = info_from(&(v = nv)[k], &f, err)) == 0)
			k++;
		rung_frame_release(&f);
		if (r < 0)
			break;
	}
	call_end(&c);
	rt_sandbox_touch(s);
	if (r < 0) {
		rung_proc_info_free(v, k);
		return rung_err_wrap(err, "proc list");
	}
	*out = v;
	*n = k;
	return 0;
}

int rung_proc_get(struct rung_sandbox *s, const char *handle, struct rung_proc_info *out,
		  struct rung_err *err)
{
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_LIST};
	snprintf(q.handle, sizeof(q.handle), "%s", handle ? handle : "");
	if (!rung_proto_handle_valid(handle))
		return bad_handle(s, handle, err);
	struct rung_frame f;
	int r = simple_call(s, &q, RUNG_MSG_PROC_INFO, OP_TIMEOUT_MS, &f, err);
	if (r == 0) {
		r = info_from(out, &f, err);
		rung_frame_release(&f);
	}
	return r < 0 ? rung_err_wrap(err, "proc %.16s", handle) : 0;
}

/* A STDOUT/STDERR frame of a process: DATA and OFFSET. */
static int chunk_frame(const struct rung_frame *f, rung_proc_output_fn fn, void *ud,
		       uint64_t *next, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v, *data = NULL;
	uint32_t l, dlen = 0;
	uint64_t off = 0;
	bool have_off = false;
	int r;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		if (tag == RUNG_TAG_DATA)
			data = v, dlen = l;
		else if (tag == RUNG_TAG_OFFSET && (r = rung_tlv_u64(v, l, &off, err)) == 0)
			have_off = true;
		if (r < 0)
			return r;
	}
	if (r < 0)
		return r;
	if (!have_off || off < *next)
		return rung_err_set(err, EPROTO, "output chunk without a fresh offset");
	*next = off + dlen;
	enum rung_stream st = f->type == RUNG_MSG_STDOUT ? RUNG_STDOUT : RUNG_STDERR;
	if (dlen && fn(ud, st, off, data, dlen) < 0)
		return rung_err_set(err, ECANCELED, "output consumer stopped");
	return 0;
}

int rung_proc_logs(struct rung_sandbox *s, const char *handle, const struct rung_proc_logs_req *req,
		   struct rung_proc_logs_res *res, struct rung_err *err)
{
	memset(res, 0, sizeof(*res));
	if (!req || !req->on_output)
		return rung_err_set(err, EINVAL, "on_output: required");
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_LOGS, .since = req->since,
				    .follow = req->follow};
	snprintf(q.handle, sizeof(q.handle), "%s", handle ? handle : "");
	struct call c;
	int r = call_begin(&c, s, &q, req->follow ? LONG_TIMEOUT_MS : OP_TIMEOUT_MS,
			   req->watch_fd ? req->cancel_fd : -1, err);
	if (r < 0)
		return rung_err_wrap(err, "proc logs");
	uint64_t next = 0;
	for (;;) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&c.io, &f, err)) < 0)
			break;
		if (f.type == RUNG_MSG_STDOUT || f.type == RUNG_MSG_STDERR) {
			r = chunk_frame(&f, req->on_output, req->ud, &next, err);
			rung_frame_release(&f);
			if (r < 0)
				break;
			continue;
		}
		struct result rs;
		if ((r = expect(&f, RUNG_MSG_RESULT, err)) == 0 &&
		    (r = result_decode(&f, &rs, err)) == 0) {
			res->end_offset = rs.end_offset;
			res->dropped = rs.dropped;
			res->exited = rs.exited != 0;
		}
		rung_frame_release(&f);
		break;
	}
	call_end(&c);
	rt_sandbox_touch(s);
	return r < 0 ? rung_err_wrap(err, "proc logs %.16s", q.handle) : 0;
}

static int ack_call(struct rung_sandbox *s, struct rung_proto_proc *q, const char *handle,
		    const char *what, struct rung_err *err)
{
	snprintf(q->handle, sizeof(q->handle), "%s", handle ? handle : "");
	struct rung_frame f;
	int r = simple_call(s, q, RUNG_MSG_RESULT, OP_TIMEOUT_MS, &f, err);
	if (r == 0)
		rung_frame_release(&f);
	return r < 0 ? rung_err_wrap(err, "proc %s %.16s", what, q->handle) : 0;
}

int rung_proc_write(struct rung_sandbox *s, const char *handle, const void *data, size_t len,
		    struct rung_err *err)
{
	const uint8_t *p = data;
	do { /* frames of at most 64 KiB */
		size_t n = len > 65536 ? 65536 : len;
		struct rung_proto_proc q = {.type = RUNG_MSG_PROC_STDIN, .data = p,
					    .data_len = (uint32_t)n};
		int r = ack_call(s, &q, handle, "stdin", err);
		if (r < 0)
			return r;
		p += n;
		len -= n;
	} while (len);
	return 0;
}

int rung_proc_close_stdin(struct rung_sandbox *s, const char *handle, struct rung_err *err)
{
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_STDIN, .eof = true, .data = (const uint8_t *)""};
	return ack_call(s, &q, handle, "stdin", err);
}

int rung_proc_signal(struct rung_sandbox *s, const char *handle, int sig, struct rung_err *err)
{
	if (sig < 1 || sig > 64)
		return rung_err_set(err, EINVAL, "signal: %d out of range (1..64)", sig);
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_SIGNAL, .sig = (uint64_t)sig};
	return ack_call(s, &q, handle, "signal", err);
}

int rung_proc_resize(struct rung_sandbox *s, const char *handle, unsigned rows, unsigned cols,
		     struct rung_err *err)
{
	if (rows < 1 || rows > RUNG_PROTO_TTY_MAX)
		return rung_err_set(err, EINVAL, "rows: %u out of range (1..%d)", rows,
				    RUNG_PROTO_TTY_MAX);
	if (cols < 1 || cols > RUNG_PROTO_TTY_MAX)
		return rung_err_set(err, EINVAL, "cols: %u out of range (1..%d)", cols,
				    RUNG_PROTO_TTY_MAX);
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_RESIZE, .rows = rows, .cols = cols};
	return ack_call(s, &q, handle, "resize", err);
}

int rung_proc_wait(struct rung_sandbox *s, const char *handle, uint32_t timeout_ms,
		   struct rung_proc_info *out, struct rung_err *err)
{
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_WAIT, .timeout_ms = timeout_ms};
	snprintf(q.handle, sizeof(q.handle), "%s", handle ? handle : "");
	struct rung_frame f;
	int r = simple_call(s, &q, RUNG_MSG_PROC_INFO, budget(timeout_ms), &f, err);
	if (r < 0)
		return rung_err_wrap(err, "proc wait %.16s", q.handle);
	struct rung_proc_info tmp;
	r = info_from(&tmp, &f, err);
	rung_frame_release(&f);
	if (r < 0)
		return r;
	r = tmp.state == RUNG_PROC_EXITED ? 1 : 0;
	if (out)
		*out = tmp;
	else
		rung_proc_info_release(&tmp, 1);
	return r;
}

int rung_proc_kill(struct rung_sandbox *s, const char *handle, struct rung_err *err)
{
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_KILL};
	return ack_call(s, &q, handle, "kill", err);
}

/* A frame from the keeper during an attach: 1 when the process exited, 0 to go on. */
static int attach_frame(int fd, const struct rung_proc_attach_req *req, uint64_t *next,
			struct rung_err *err)
{
	struct rung_frame f;
	int r = rung_frame_read(fd, &f, rung_now_ms() + OP_TIMEOUT_MS, err);
	if (r < 0)
		return r;
	if (f.type == RUNG_MSG_STDOUT || f.type == RUNG_MSG_STDERR)
		r = chunk_frame(&f, req->on_output, req->ud, next, err);
	else if ((r = expect(&f, RUNG_MSG_RESULT, err)) == 0)
		r = 1;
	rung_frame_release(&f);
	return r;
}

/* Input from in_fd to the process: 0 to go on, 1 to detach, <0 on error. */
static int attach_input(int fd, const struct rung_proc_attach_req *req, struct rung_err *err)
{
	char buf[65536];
	ssize_t n = read(req->in_fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return 1; /* EOF (or an error) on in_fd: detach */
	size_t len = (size_t)n;
	int stop = req->on_input ? req->on_input(req->ud, buf, &len) : 0;
	if (len > sizeof(buf))
		len = sizeof(buf);
	if (len) {
		struct rung_buf b = {0};
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, buf, len);
		int r = rung_frame_write_buf(fd, RUNG_MSG_STDIN, &b, err);
		rung_buf_release(&b);
		if (r < 0)
			return r;
	}
	return stop < 0 ? 1 : 0;
}

int rung_proc_attach(struct rung_sandbox *s, const char *handle,
		     const struct rung_proc_attach_req *req, struct rung_err *err)
{
	if (!req || !req->on_output)
		return rung_err_set(err, EINVAL, "on_output: required");
	struct rung_proto_proc q = {.type = RUNG_MSG_PROC_ATTACH, .since = req->since};
	snprintf(q.handle, sizeof(q.handle), "%s", handle ? handle : "");
	if (!rung_proto_handle_valid(q.handle))
		return bad_handle(s, handle, err);
	int busy = -1;
	cleanup_close int fd = rt_sandbox_agent(s, &busy, err);
	if (busy >= 0)
		close(busy); /* an attach may last: it does not keep the sandbox from idling */
	if (fd < 0)
		return rung_err_wrap(err, "proc attach");
	struct rung_buf b = {0};
	rung_proto_proc_encode(&q, &b);
	int r = rung_frame_write_buf(fd, q.type, &b, err);
	rung_buf_release(&b);
	uint64_t next = 0;
	bool exited = false;
	int cancel = req->watch_fd ? req->cancel_fd : -1;
	while (r == 0) {
		struct pollfd p[3] = {{fd, POLLIN, 0},
				      {req->in_fd, POLLIN, 0},
				      {cancel, POLLRDHUP, 0}};
		if (poll(p, 3, -1) < 0) {
			r = errno == EINTR ? 0 : rung_err_sys(err, errno, "poll");
			continue;
		}
		if (p[2].revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) {
			r = rung_err_set(err, ECANCELED, "the caller went away");
			break;
		}
		if (p[0].revents && (r = attach_frame(fd, req, &next, err)) != 0) {
			exited = r == 1;
			break;
		}
		if (p[1].revents && (r = attach_input(fd, req, err)) != 0)
			break; /* 1: detached */
	}
	rt_sandbox_touch(s);
	if (r < 0)
		return rung_err_wrap(err, "proc attach %.16s", q.handle);
	return exited ? 1 : 0; /* 1: the process exited (a RESULT came); 0: detached */
}

int rung_session_start(struct rung_sandbox *s, const char *shell, const char *const *env,
		       const char *cwd, char *handle, struct rung_err *err)
{
	if (shell && !*shell)
		return rung_err_set(err, EINVAL, "shell: empty");
	const char *argv[] = {shell, NULL};
	struct rung_proc_req req = {.argv = argv, .env = env, .cwd = cwd};
	struct rt_sandbox *sb = rt_sandbox_inner(s);
	char xcwd[4096];
	cleanup_strv char **xenv = NULL;
	cleanup_strv char **ienv = rt_sandbox_image_env(s);
	int r = rt_exec_env(req.env, req.cwd, &sb->meta.spec, (const char *const *)ienv, &xenv,
			    xcwd, sizeof(xcwd), err);
	if (r < 0)
		return r;
	struct rung_proto_proc q = {
		.type = RUNG_MSG_PROC_START,
		/* no argv: the agent picks /bin/bash if the sandbox has it, else /bin/sh */
		.x = {.argv = shell ? (char **)argv : NULL, .env = xenv, .cwd = xcwd},
		.session = true,
		.buffer = 1u << 20,
	};
	return start_call(s, &q, "session start", handle, err);
}

/* Output of a run, kept up to max per stream. */
struct run_out {
	struct rung_exec_res *res;
	size_t cap[2];
	uint64_t max;
};

static int run_collect(void *ud, enum rung_stream st, uint64_t off, const void *d, size_t n)
{
	struct run_out *o = ud;
	(void)off;
	int i = st == RUNG_STDOUT ? 0 : 1;
	char **buf = i ? &o->res->errout : &o->res->out;
	size_t *len = i ? &o->res->err_len : &o->res->out_len;
	if (*len + n > o->max) {
		o->res->truncated = true;
		n = *len < o->max ? (size_t)(o->max - *len) : 0;
	}
	if (!n)
		return 0;
	if (*len + n + 1 > o->cap[i]) {
		size_t nc = o->cap[i] ? o->cap[i] : 4096;
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			return -1;
		*buf = nb;
		o->cap[i] = nc;
	}
	memcpy(*buf + *len, d, n);
	*len += n;
	(*buf)[*len] = 0;
	return 0;
}

int rung_session_run(struct rung_sandbox *s, const char *handle, const char *command,
		     uint32_t timeout_ms, struct rung_exec_res *res, struct rung_err *err)
{
	memset(res, 0, sizeof(*res));
	if (!command)
		return rung_err_set(err, EINVAL, "command: required");
	if (strlen(command) > 65536)
		return rung_err_set(err, E2BIG, "command: longer than 65536 bytes");
	const struct rung_spec *spec = &rt_sandbox_inner(s)->meta.spec;
	uint32_t tmo = timeout_ms ? timeout_ms : spec->limits.exec_timeout_s * 1000;
	struct rung_proto_proc q = {.type = RUNG_MSG_SESSION_RUN, .timeout_ms = tmo,
				    .data = (const uint8_t *)command,
				    .data_len = (uint32_t)strlen(command)};
	snprintf(q.handle, sizeof(q.handle), "%s", handle ? handle : "");
	struct call c;
	/* the run's timeout, then the interrupt, the kill and the broken shell's graces */
	int r = call_begin(&c, s, &q, budget(tmo), rt_sandbox_cancel_fd(s), err);
	if (r < 0)
		return rung_err_wrap(err, "session run");
	struct run_out o = {.res = res, .max = spec->limits.output_bytes};
	uint64_t next = 0;
	for (;;) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&c.io, &f, err)) < 0)
			break;
		if (f.type == RUNG_MSG_STDOUT || f.type == RUNG_MSG_STDERR) {
			r = chunk_frame(&f, run_collect, &o, &next, err);
			rung_frame_release(&f);
			if (r < 0)
				break;
			continue;
		}
		struct rung_proto_exit ex;
		if ((r = expect(&f, RUNG_MSG_EXIT, err)) == 0 &&
		    (r = rung_proto_exit_decode(f.payload, f.len, &ex, err)) == 0) {
			res->exit_code = (int)ex.exit_code;
			res->signal = (int)ex.signal;
			res->timed_out = ex.flags & RUNG_EXIT_TIMED_OUT;
			res->duration_us = ex.duration_us;
		}
		rung_frame_release(&f);
		break;
	}
	call_end(&c);
	rt_sandbox_touch(s);
	if (r == 0 && ((!res->out && !(res->out = calloc(1, 1))) ||
		       (!res->errout && !(res->errout = calloc(1, 1)))))
		r = rung_err_set(err, ENOMEM, "out of memory");
	if (r < 0) {
		rung_exec_res_release(res);
		return rung_err_wrap(err, "session run %.16s", q.handle);
	}
	return 0;
}

int rt_procs_live(const struct rt_store *st, const char *id)
{
	char sock[4096];
	struct rung_err err = {0};
	rt_store_path(st, id, "agent.sock", sock, sizeof(sock));
	int fd = rt_agent_connect(sock, &err);
	if (fd < 0)
		return fd;
	struct rt_agent_io io;
	int r = rt_agent_io_init(&io, fd, 5000, -1, &err);
	if (r == 0)
		r = rt_agent_io_queue(&io, RUNG_MSG_PROC_LIST, NULL, &err);
	int live = 0;
	while (r == 0) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&io, &f, &err)) < 0)
			break;
		struct rung_proto_proc_info in;
		if (f.type != RUNG_MSG_PROC_INFO) {
			r = f.type == RUNG_MSG_RESULT ? 1 : -EPROTO;
		} else if (rung_proto_proc_info_decode(f.payload, f.len, &in, &err) == 0) {
			live += !in.exited;
			rung_proto_proc_info_release(&in);
		}
		rung_frame_release(&f);
	}
	rt_agent_io_release(&io);
	close(fd);
	return r < 0 ? r : live;
}
