/*
 * runtime/client.c: the host side of the agent protocol, one piece of code for all three rungs.
 * Everything the agent sends is untrusted: frames are validated, output is bounded, and every
 * operation has one absolute deadline over non-blocking, interleaved I/O (agent-io.c): an
 * agent that stops reading, stays silent or trickles frames cannot hold a host thread past it.
 */
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "runtime/agent-io.h"
#include "runtime/callbacks.h"
#include "runtime/rt-internal.h"

#define GRACE_MS 5000 /* past the exec timeout, how long the host waits for the agent */
#define CHUNK 65536

int rt_agent_connect(const char *sock_path, struct rung_err *err)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(sock_path) >= sizeof(a.sun_path))
		return rung_err_set(err, ENAMETOOLONG, "agent socket path too long: %s", sock_path);
	strcpy(a.sun_path, sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rung_err_sys(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "connect to the sandbox agent (%s)", sock_path);
	}
	return fd;
}

int rt_agent_ping(int fd, unsigned timeout_ms, struct rung_err *err)
{
	struct rt_agent_io io;
	struct rung_frame f;
	int r = rt_agent_io_init(&io, fd, timeout_ms, -1, err);
	if (r == 0)
		r = rt_agent_io_queue(&io, RUNG_MSG_PING, NULL, err);
	if (r == 0)
		r = rt_agent_io_next(&io, &f, err);
	rt_agent_io_release(&io);
	if (r < 0)
		return rung_err_wrap(err, "agent ping");
	uint8_t t = f.type;
	rung_frame_release(&f);
	return t == RUNG_MSG_PONG ? 0 : rung_err_set(err, EPROTO, "agent answered ping with %u", t);
}

static int append_out(char **buf, size_t *len, size_t *cap, const void *d, size_t n, uint64_t max,
		      bool *trunc)
{
	if (*len + n > max) {
		*trunc = true;
		n = *len < max ? (size_t)(max - *len) : 0;
	}
	if (!n)
		return 0;
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 4096;
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			return -ENOMEM;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, d, n);
	*len += n;
	(*buf)[*len] = 0;
	return 0;
}

int rt_exec_env(const char *const *req_env, const char *req_cwd, const struct rung_spec *spec,
		const char *const *image_env, char ***env_out, char *cwd, size_t cwd_len,
		struct rung_err *err)
{
	/* env: the request's, then the spec's, then the image's, then the defaults; each KEY
	 * once, the first wins. (Duplicates would make the winner depend on the program: libc
	 * lookups take the first match, a shell importing its environment the last.) */
	const char *wd = spec->work_dir ? spec->work_dir : RT_DEFAULT_WORK_DIR;
	char home[300];
	snprintf(home, sizeof(home), "HOME=%s", wd);
	const char *const defaults[] = {
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", home,
		"LANG=C.UTF-8", NULL};
	const char *const *lists[4] = {req_env, (const char *const *)spec->env, image_env,
				       defaults};
	size_t n = 0, i = 0;
	for (int l = 0; l < 4; l++)
		for (const char *const *e = lists[l]; e && *e; e++)
			n++;
	char **env = calloc(n + 1, sizeof(char *));
	if (!env)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (int l = 0; l < 4; l++)
		for (const char *const *e = lists[l]; e && *e; e++) {
			const char *eq = strchr(*e, '=');
			size_t klen = eq ? (size_t)(eq - *e) + 1 : strlen(*e);
			bool dup = false;
			for (size_t j = 0; j < i && !dup; j++)
				dup = !strncmp(env[j], *e, klen);
			if (!dup && !(env[i++] = strdup(*e))) {
				rung_strvfreep(&env);
				return rung_err_set(err, ENOMEM, "out of memory");
			}
		}
	env[i] = NULL;
	/* A relative cwd is relative to the work dir, as write_file/read_file paths are. */
	const char *xcwd = req_cwd ? req_cwd : wd;
	int cl = xcwd[0] != '/' ? snprintf(cwd, cwd_len, "%s/%s", wd, xcwd)
				: snprintf(cwd, cwd_len, "%s", xcwd);
	if (cl < 0 || (size_t)cl >= cwd_len) {
		rung_strvfreep(&env);
		return rung_err_set(err, ENAMETOOLONG, "cwd: too long");
	}
	*env_out = env;
	return 0;
}

int rt_exec_seccomp_check(const void *bpf, size_t len, struct rung_err *err)
{
	if (!bpf && !len)
		return 0;
	if (!bpf || !len || len % 8 || len / 8 > RUNG_PROTO_SECCOMP_MAX)
		return rung_err_set(err, EINVAL, "seccomp_bpf: %zu bytes is not a filter of 1..%d "
				    "8-byte instructions", len, RUNG_PROTO_SECCOMP_MAX);
	return 0;
}

/* The EXEC request's payload into b. last: the sandbox ends with it (rt_agent_exec_frame). */
static int exec_payload(const struct rung_exec_req *req, const struct rung_spec *spec,
			const char *const *image_env, uint32_t timeout_ms, uint64_t max_out,
			uint64_t cb_max, bool keep, bool last, struct rung_buf *b,
			struct rung_err *err)
{
	char cwd[4096];
	cleanup_strv char **env = NULL;
	int r = rt_exec_seccomp_check(req->seccomp_bpf, req->seccomp_bpf_len, err);
	if (r < 0 ||
	    (r = rt_exec_env(req->env, req->cwd, spec, image_env, &env, cwd, sizeof(cwd), err)) < 0)
		return r;
	struct rung_proto_exec x = {
		.argv = (char **)req->argv,
		.env = env,
		.cwd = cwd,
		.timeout_ms = timeout_ms,
		.max_output = max_out,
		.has_stdin = req->stdin_data != NULL,
		.callbacks = cb_max,
		.seccomp = (uint8_t *)req->seccomp_bpf,
		.seccomp_len = (uint32_t)req->seccomp_bpf_len,
		.keep = keep,
		.last = last,
	};
	return rung_proto_exec_encode(&x, b) < 0 ? rung_err_set(err, ENOMEM, "out of memory") : 0;
}

/* What every exec checks first, and its timeout and output limit (the request's, else the
 * spec's). */
static int exec_limits(const struct rung_exec_req *req, const struct rung_spec *spec,
		       uint32_t *timeout_ms, uint64_t *max_out, struct rung_err *err)
{
	if (!req->argv || !req->argv[0] || !req->argv[0][0])
		return rung_err_set(err, EINVAL, "argv: at least one non-empty element required");
	if (req->stdin_len > RUNG_PROTO_STDIN_MAX) /* the agent would drop the rest */
		return rung_err_set(err, EFBIG, "stdin: %zu bytes exceeds the %u-byte limit",
				    req->stdin_len, RUNG_PROTO_STDIN_MAX);
	*timeout_ms = req->timeout_ms ? req->timeout_ms : spec->limits.exec_timeout_s * 1000;
	*max_out = req->max_output ? req->max_output : spec->limits.output_bytes;
	return 0;
}

int rt_agent_exec_frame(const struct rung_exec_req *req, const struct rung_spec *spec,
			const char *const *image_env, struct rung_buf *frame, struct rung_err *err)
{
	uint32_t timeout_ms;
	uint64_t max_out;
	struct rung_buf b = {0};
	if (req->n_callbacks)
		return rung_err_set(err, EINVAL, "an exec with callbacks cannot go ahead");
	int r = exec_limits(req, spec, &timeout_ms, &max_out, err);
	if (r == 0)
		r = exec_payload(req, spec, image_env, timeout_ms, max_out, 0, false, true, &b, err);
	if (r == 0 && b.len > RUNG_FRAME_MAX)
		r = rung_err_set(err, EMSGSIZE, "exec request: %zu bytes", b.len);
	if (r == 0) {
		uint8_t hdr[RUNG_FRAME_HDR];
		rung_frame_hdr_encode(hdr, RUNG_MSG_EXEC, (uint32_t)b.len);
		rung_buf_append(frame, hdr, sizeof(hdr));
		rung_buf_append(frame, b.data, b.len);
		if (frame->oom)
			r = rung_err_set(err, ENOMEM, "out of memory");
	}
	rung_buf_release(&b);
	return r;
}

/* Data sent in FRAME_TYPE frames of CHUNK bytes, then one END frame (none: 0). */
struct data_src {
	const char *p;
	size_t len, off;
	uint8_t type, end_type;
};

static int data_refill(void *ud, struct rung_buf *out, struct rung_err *err)
{
	(void)err;
	struct data_src *d = ud;
	uint8_t hdr[RUNG_FRAME_HDR];
	/* A few chunks per refill: fewer wake-ups, still bounded memory. */
	for (int i = 0; i < 4 && d->off < d->len; i++) {
		size_t c = d->len - d->off > CHUNK ? CHUNK : d->len - d->off;
		struct rung_buf b = {0};
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, d->p + d->off, c);
		if (b.oom) {
			rung_buf_release(&b);
			out->oom = true;
			return -ENOMEM;
		}
		rung_frame_hdr_encode(hdr, d->type, (uint32_t)b.len);
		rung_buf_append(out, hdr, sizeof(hdr));
		rung_buf_append(out, b.data, b.len);
		rung_buf_release(&b);
		d->off += c;
	}
	if (d->off < d->len)
		return 1;
	if (d->end_type) {
		rung_frame_hdr_encode(hdr, d->end_type, 0);
		rung_buf_append(out, hdr, sizeof(hdr));
	}
	return 0;
}

/* A STDOUT or STDERR frame: to the caller's callback, and collected up to max_out. */
struct out_sink {
	const struct rung_exec_req *req;
	struct rung_exec_res *res;
	size_t cap_o, cap_e;
	uint64_t max_out;
	bool collect;
};

static int output_frame(struct out_sink *o, const struct rung_frame *f, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	struct rung_exec_res *res = o->res;
	enum rung_stream s = f->type == RUNG_MSG_STDOUT ? RUNG_STDOUT : RUNG_STDERR;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		if (tag != RUNG_TAG_DATA)
			continue;
		if (o->req->on_output && o->req->on_output(o->req->ud, s, v, l) < 0) {
			/* The caller gave up: closing the connection makes the agent kill
			 * everything the exec started. */
			r = rung_err_set(err, ECANCELED, "output consumer cancelled");
			break;
		}
		if (!o->collect)
			continue;
		int ar = s == RUNG_STDOUT ? append_out(&res->out, &res->out_len, &o->cap_o, v, l,
						       o->max_out, &res->truncated)
					  : append_out(&res->errout, &res->err_len, &o->cap_e, v, l,
						       o->max_out, &res->truncated);
		if (ar < 0)
			r = rung_err_set(err, ENOMEM, "out of memory");
	}
	return r;
}

/* The frame after the output: EXIT fills res; ERROR or anything else is the exec's error. */
static int exec_end(const struct rung_frame *f, struct rung_exec_res *res, struct rung_err *err)
{
	if (f->type == RUNG_MSG_ERROR) {
		rung_proto_error_decode(f->payload, f->len, err);
		return rung_err_wrap(err, "exec");
	}
	if (f->type != RUNG_MSG_EXIT)
		return rung_err_set(err, EPROTO, "exec: unexpected frame type %u from agent",
				    f->type);
	struct rung_proto_exit ex;
	if (rung_proto_exit_decode(f->payload, f->len, &ex, err) < 0)
		return rung_err_wrap(err, "exec");
	res->exit_code = (int)ex.exit_code;
	res->signal = (int)ex.signal;
	res->timed_out = ex.flags & RUNG_EXIT_TIMED_OUT;
	res->truncated |= (ex.flags & (RUNG_EXIT_TRUNC_STDOUT | RUNG_EXIT_TRUNC_STDERR)) != 0;
	res->oom = ex.flags & RUNG_EXIT_OOM;
	res->duration_us = ex.duration_us;
	if (!res->out)
		res->out = calloc(1, 1);
	if (!res->errout)
		res->errout = calloc(1, 1);
	return 0;
}

/* Answer lines to the agent, in CALLBACK_ANSWER frames; releases ans. */
static int queue_answers(struct rt_agent_io *io, struct rung_buf *ans, struct rung_err *err)
{
	int r = ans->oom ? rung_err_set(err, ENOMEM, "out of memory") : 0;
	for (size_t off = 0; r == 0 && off < ans->len; off += CHUNK) {
		struct rung_buf b = {0};
		size_t n = ans->len - off < CHUNK ? ans->len - off : CHUNK;
		rung_buf_put_bytes(&b, RUNG_TAG_DATA, ans->data + off, n);
		r = rt_agent_io_queue(io, RUNG_MSG_CALLBACK_ANSWER, &b, err);
		rung_buf_release(&b);
	}
	rung_buf_release(ans);
	return r;
}

/* The callback engine's answers go out; its next call deadline wakes the loop. */
static int cb_flush(struct rt_agent_io *io, struct rt_cb *cb, struct rung_err *err)
{
	struct rung_buf ans = {0};
	io->wake_at = rt_cb_poll(cb, &ans);
	return queue_answers(io, &ans, err);
}

/* A CALLBACK frame: the command's bytes to the engine (ignored when it has none). */
static int cb_frame(struct rt_agent_io *io, struct rt_cb *cb, const struct rung_frame *f,
		    struct rung_err *err)
{
	if (!cb)
		return 0;
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	struct rung_buf ans = {0};
	int r;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if (tag == RUNG_TAG_DATA)
			rt_cb_input(cb, v, l, &ans);
	if (r < 0) {
		rung_buf_release(&ans);
		return r;
	}
	r = queue_answers(io, &ans, err);
	return r < 0 ? r : cb_flush(io, cb, err);
}

int rt_agent_exec(int fd, const struct rung_exec_req *req, const struct rung_spec *spec,
		  const char *const *image_env, bool sent, bool *keep, struct rung_exec_res *res,
		  struct rung_err *err)
{
	struct rt_cb *cb = NULL;
	memset(res, 0, sizeof(*res));
	if (req->n_callbacks && rt_cb_new(req, &cb, err) < 0)
		return rung_err_wrap(err, "exec");
	int r = rt_agent_exec_cb(fd, req, spec, image_env, sent, cb, keep, res, err);
	rt_cb_free(cb);
	return r;
}

int rt_agent_exec_cb(int fd, const struct rung_exec_req *req, const struct rung_spec *spec,
		     const char *const *image_env, bool sent, struct rt_cb *cb, bool *keep,
		     struct rung_exec_res *res, struct rung_err *err)
{
	memset(res, 0, sizeof(*res));
	bool ask = keep && *keep && !cb && !req->stdin_data && !sent;
	if (keep)
		*keep = false;
	uint32_t timeout_ms;
	uint64_t max_out;
	int r = exec_limits(req, spec, &timeout_ms, &max_out, err);
	if (r < 0)
		return r;
	/* One deadline for the whole exec, stdin included: the command's timeout plus a grace
	 * for the agent to report. The caller hanging up cancels it in every phase. */
	struct rt_agent_io io;
	r = rt_agent_io_init(&io, fd, timeout_ms + GRACE_MS, req->watch_fd ? req->cancel_fd : -1,
			     err);
	io.wake_fd = cb ? rt_cb_wake_fd(cb) : -1;
	struct data_src in = {.p = req->stdin_data,
			      .len = req->stdin_len,
			      .type = RUNG_MSG_STDIN,
			      .end_type = RUNG_MSG_STDIN_EOF};
	if (r == 0 && !sent) { /* sent: rt_agent_exec_frame's went ahead */
		struct rung_buf b = {0};
		if ((r = exec_payload(req, spec, image_env, timeout_ms, max_out,
				      cb ? rt_cb_max_bytes(cb) : 0, ask, false, &b, err)) == 0)
			r = rt_agent_io_queue(&io, RUNG_MSG_EXEC, &b, err);
		rung_buf_release(&b);
	}
	if (r == 0 && req->stdin_data) {
		io.refill = data_refill;
		io.ud = &in;
		io.refill_done = false;
	}
	if (r < 0) {
		rt_agent_io_release(&io);
		return rung_err_wrap(err, "exec");
	}
	struct out_sink o = {.req = req, .res = res, .max_out = max_out,
			     .collect = !(req->on_output && req->no_collect)};
	for (;;) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&io, &f, err)) == 1 && (r = cb_flush(&io, cb, err)) == 0)
			continue; /* a call finished or passed its deadline */
		if (r < 0) {
			rt_agent_io_release(&io);
			rung_exec_res_release(res);
			return rung_err_wrap(err, "exec");
		}
		if (f.type == RUNG_MSG_STDOUT || f.type == RUNG_MSG_STDERR ||
		    f.type == RUNG_MSG_CALLBACK) {
			r = f.type == RUNG_MSG_CALLBACK ? cb_frame(&io, cb, &f, err)
							: output_frame(&o, &f, err);
			rung_frame_release(&f);
			if (r < 0) {
				rt_agent_io_release(&io);
				rung_exec_res_release(res);
				return rung_err_wrap(err, "exec output");
			}
			continue;
		}
		bool all_sent = io.out_off >= io.out.len;
		rt_agent_io_release(&io);
		r = exec_end(&f, res, err);
		rung_frame_release(&f);
		if (r < 0)
			rung_exec_res_release(res);
		else if (ask && all_sent) /* EXIT, and nothing of ours left unsent behind it */
			*keep = true;
		return r;
	}
}

void rung_exec_res_release(struct rung_exec_res *res)
{
	if (!res)
		return;
	free(res->out);
	free(res->errout);
	res->out = res->errout = NULL;
	res->out_len = res->err_len = 0;
}

static int file_req(struct rt_agent_io *io, uint8_t type, const char *path, unsigned mode,
		    uint64_t size, struct rung_err *err)
{
	struct rung_buf b = {0};
	rung_buf_put_str(&b, RUNG_TAG_PATH, path);
	rung_buf_put_u64(&b, RUNG_TAG_MODE, mode);
	rung_buf_put_u64(&b, RUNG_TAG_SIZE, size);
	int r = rt_agent_io_queue(io, type, &b, err);
	rung_buf_release(&b);
	return r;
}

unsigned rt_agent_file_timeout_ms(uint64_t size)
{
	/* A minute, plus a second per 16 MiB (1 GiB, the largest file: 2 min 4 s). */
	return 60000u + (unsigned)(size >> 24) * 1000u;
}

/* RESULT (its size) or ERROR. */
static int file_result(const struct rung_frame *f, uint64_t *size, struct rung_err *err)
{
	int r;
	if (f->type == RUNG_MSG_ERROR)
		return rung_proto_error_decode(f->payload, f->len, err);
	if (f->type != RUNG_MSG_RESULT)
		return rung_err_set(err, EPROTO, "unexpected frame type %u from agent", f->type);
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	rung_tlv_init(&it, f->payload, f->len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if (tag == RUNG_TAG_SIZE && (r = rung_tlv_u64(v, l, size, err)) < 0)
			break;
	return r;
}

int rt_agent_write_file(int fd, const char *path, const void *data, size_t len, unsigned mode,
			unsigned timeout_ms, int cancel_fd, struct rung_err *err)
{
	struct rt_agent_io io;
	struct data_src src = {.p = data,
			       .len = len,
			       .type = RUNG_MSG_FILE_DATA,
			       .end_type = RUNG_MSG_FILE_END};
	int r = rt_agent_io_init(&io, fd, timeout_ms, cancel_fd, err);
	if (r == 0 && (r = file_req(&io, RUNG_MSG_WRITE_FILE, path, mode, len, err)) == 0) {
		io.refill = data_refill;
		io.ud = &src;
		io.refill_done = false;
	}
	uint64_t got = 0;
	struct rung_frame f;
	if (r == 0 && (r = rt_agent_io_next(&io, &f, err)) == 0) {
		/* An answer before all data went out is an ERROR (or a broken agent). */
		r = file_result(&f, &got, err);
		rung_frame_release(&f);
		if (r == 0 && (!io.refill_done || io.out_off < io.out.len))
			r = rung_err_set(err, EPROTO,
					 "the agent answered before all data was sent");
	}
	rt_agent_io_release(&io);
	if (r < 0)
		return rung_err_wrap(err, "write_file %s", path);
	if (got != len)
		return rung_err_set(err, EIO, "write_file %s: agent stored %llu of %zu bytes", path,
				    (unsigned long long)got, len);
	return 0;
}

int rt_agent_read_file(int fd, const char *path, size_t max, char **data, size_t *len,
		       unsigned timeout_ms, int cancel_fd, struct rung_err *err)
{
	struct rt_agent_io io;
	int r = rt_agent_io_init(&io, fd, timeout_ms, cancel_fd, err);
	if (r == 0)
		r = file_req(&io, RUNG_MSG_READ_FILE, path, 0, max, err);
	char *buf = NULL;
	size_t n = 0, cap = 0;
	bool trunc = false;
	while (r == 0) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&io, &f, err)) < 0)
			break;
		if (f.type == RUNG_MSG_FILE_DATA) {
			struct rung_tlv_iter it;
			uint16_t tag;
			const uint8_t *v;
			uint32_t l;
			rung_tlv_init(&it, f.payload, f.len);
			while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
				if (tag == RUNG_TAG_DATA &&
				    append_out(&buf, &n, &cap, v, l, max, &trunc) < 0)
					r = rung_err_set(err, ENOMEM, "out of memory");
			rung_frame_release(&f);
			if (r == 0 && trunc)
				r = rung_err_set(err, EFBIG, "agent sent more than %zu bytes", max);
			continue;
		}
		uint64_t size = 0;
		r = file_result(&f, &size, err);
		rung_frame_release(&f);
		break;
	}
	rt_agent_io_release(&io);
	if (r < 0) {
		free(buf);
		return rung_err_wrap(err, "read_file %s", path);
	}
	if (!buf)
		buf = calloc(1, 1);
	*data = buf;
	*len = n;
	return 0;
}
