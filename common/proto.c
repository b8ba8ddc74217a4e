#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"
#include "common/util.h"

static void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static void put_be32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (24 - 8 * i));
}
static uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}
static uint32_t get_be32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

void rung_frame_release(struct rung_frame *f)
{
	if (f) {
		free(f->payload);
		f->payload = NULL;
		f->len = 0;
	}
}

void rung_buf_release(struct rung_buf *b)
{
	if (b) {
		free(b->data);
		memset(b, 0, sizeof(*b));
	}
}

static uint8_t *buf_grow(struct rung_buf *b, size_t need)
{
	if (b->oom)
		return NULL;
	if (b->len + need > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + need)
			cap *= 2;
		uint8_t *nd = realloc(b->data, cap);
		if (!nd) {
			b->oom = true;
			return NULL;
		}
		b->data = nd;
		b->cap = cap;
	}
	uint8_t *p = b->data + b->len;
	b->len += need;
	return p;
}

void rung_buf_append(struct rung_buf *b, const void *v, size_t len)
{
	if (!len) /* nothing to grow: an empty buffer's data is NULL, no base for an offset */
		return;
	uint8_t *p = buf_grow(b, len);
	if (p)
		memcpy(p, v, len);
}

void rung_buf_put_bytes(struct rung_buf *b, uint16_t tag, const void *v, size_t len)
{
	if (len > RUNG_FRAME_MAX) {
		b->oom = true;
		return;
	}
	uint8_t *p = buf_grow(b, 6 + len);
	if (!p)
		return;
	put_be16(p, tag);
	put_be32(p + 2, (uint32_t)len);
	if (len)
		memcpy(p + 6, v, len);
}

void rung_buf_put_str(struct rung_buf *b, uint16_t tag, const char *s)
{
	rung_buf_put_bytes(b, tag, s, strlen(s));
}

void rung_buf_put_u64(struct rung_buf *b, uint16_t tag, uint64_t v)
{
	uint8_t x[8];
	for (int i = 0; i < 8; i++)
		x[i] = (uint8_t)(v >> (56 - 8 * i));
	rung_buf_put_bytes(b, tag, x, 8);
}

int rung_frame_hdr_decode(const uint8_t hdr[RUNG_FRAME_HDR], uint8_t *type, uint32_t *len,
			  struct rung_err *err)
{
	if (get_be16(hdr) != RUNG_PROTO_MAGIC)
		return rung_err_set(err, EPROTO, "bad frame magic 0x%04x", get_be16(hdr));
	if (hdr[2] != RUNG_PROTO_VERSION)
		return rung_err_set(err, EPROTONOSUPPORT,
				    "the peer speaks agent protocol v%u, this side v%u", hdr[2],
				    RUNG_PROTO_VERSION);
	uint32_t l = get_be32(hdr + 4);
	if (l > RUNG_FRAME_MAX)
		return rung_err_set(err, EMSGSIZE, "frame of %u bytes exceeds the %u-byte limit", l,
				    RUNG_FRAME_MAX);
	*type = hdr[3];
	*len = l;
	return 0;
}

uint8_t rung_frame_hdr_version(const uint8_t hdr[RUNG_FRAME_HDR])
{
	return hdr[2];
}

void rung_frame_hdr_encode(uint8_t hdr[RUNG_FRAME_HDR], uint8_t type, uint32_t len)
{
	put_be16(hdr, RUNG_PROTO_MAGIC);
	hdr[2] = RUNG_PROTO_VERSION;
	hdr[3] = type;
	put_be32(hdr + 4, len);
}

/* Read exactly len bytes before the deadline. *got counts bytes read so far. */
static int read_deadline(int fd, uint8_t *buf, size_t len, uint64_t deadline_ms, size_t *got)
{
	while (*got < len) {
		if (deadline_ms) {
			uint64_t now = rung_now_ms();
			if (now >= deadline_ms)
				return -ETIMEDOUT;
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			int t = (int)((deadline_ms - now) > 60000 ? 60000 : deadline_ms - now);
			int r = poll(&pfd, 1, t);
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r <= 0)
				continue;
		}
		ssize_t n = read(fd, buf + *got, len - *got);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		*got += (size_t)n;
	}
	return 0;
}

int rung_frame_read(int fd, struct rung_frame *f, uint64_t deadline_ms, struct rung_err *err)
{
	uint8_t hdr[RUNG_FRAME_HDR];
	size_t got = 0;
	memset(f, 0, sizeof(*f));
	int r = read_deadline(fd, hdr, sizeof(hdr), deadline_ms, &got);
	if (r == -EPIPE)
		return got ? rung_err_set(err, EPROTO, "truncated frame header (%zu of %d bytes)",
					  got, RUNG_FRAME_HDR)
			   : rung_err_set(err, ECONNRESET, "peer closed the connection");
	if (r == -ETIMEDOUT)
		return rung_err_set(err, ETIMEDOUT, "timed out waiting for a frame");
	if (r < 0)
		return rung_err_sys(err, -r, "read frame");
	uint8_t type;
	uint32_t len;
	if ((r = rung_frame_hdr_decode(hdr, &type, &len, err)) < 0) {
		f->version = hdr[2];
		return r;
	}
	uint8_t *payload = NULL;
	if (len) {
		payload = malloc(len + 1);
		if (!payload)
			return rung_err_set(err, ENOMEM, "out of memory for a %u-byte frame", len);
		got = 0;
		r = read_deadline(fd, payload, len, deadline_ms, &got);
		if (r < 0) {
			free(payload);
			if (r == -EPIPE)
				return rung_err_set(err, EPROTO,
						    "truncated frame: %zu of %u payload bytes", got, len);
			if (r == -ETIMEDOUT)
				return rung_err_set(err, ETIMEDOUT, "timed out inside a frame");
			return rung_err_sys(err, -r, "read frame payload");
		}
		payload[len] = 0;
	}
	f->type = type;
	f->version = RUNG_PROTO_VERSION;
	f->len = len;
	f->payload = payload;
	return 0;
}

int rung_frame_write(int fd, uint8_t type, const void *payload, size_t len, struct rung_err *err)
{
	if (len > RUNG_FRAME_MAX)
		return rung_err_set(err, EMSGSIZE, "frame of %zu bytes exceeds the limit", len);
	uint8_t hdr[RUNG_FRAME_HDR];
	rung_frame_hdr_encode(hdr, type, (uint32_t)len);
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
	size_t total = sizeof(hdr) + len, done = 0;
	int idx = 0;
	bool sock = true;
	while (done < total) {
		/* A socket whose peer is gone fails with EPIPE, never raises SIGPIPE: a VMM that
		 * drops a boot-time probe must not kill the supervisor writing it, nor an agent
		 * that died the library's caller. Pipes (ENOTSOCK) get writev. */
		struct msghdr mh = {.msg_iov = iov + idx, .msg_iovlen = (size_t)(2 - idx)};
		ssize_t n = sock ? sendmsg(fd, &mh, MSG_NOSIGNAL) : writev(fd, iov + idx, 2 - idx);
		if (n < 0 && sock && errno == ENOTSOCK) {
			sock = false;
			continue;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return rung_err_sys(err, errno, "write frame");
		}
		done += (size_t)n;
		while (idx < 2 && (size_t)n >= iov[idx].iov_len) {
			n -= (ssize_t)iov[idx].iov_len;
			idx++;
		}
		if (idx < 2) {
			iov[idx].iov_base = (char *)iov[idx].iov_base + n;
			iov[idx].iov_len -= (size_t)n;
		}
	}
	return 0;
}

int rung_frame_write_buf(int fd, uint8_t type, const struct rung_buf *b, struct rung_err *err)
{
	if (b->oom)
		return rung_err_set(err, ENOMEM, "frame payload too large or out of memory");
	return rung_frame_write(fd, type, b->data, b->len, err);
}

void rung_tlv_init(struct rung_tlv_iter *it, const uint8_t *payload, uint32_t len)
{
	it->p = payload;
	it->end = payload ? payload + len : NULL;
}

int rung_tlv_next(struct rung_tlv_iter *it, uint16_t *tag, const uint8_t **val, uint32_t *len,
		  struct rung_err *err)
{
	if (!it->p || it->p == it->end)
		return 0;
	size_t left = (size_t)(it->end - it->p);
	if (left < 6)
		return rung_err_set(err, EPROTO, "truncated field header (%zu bytes left)", left);
	uint16_t t = get_be16(it->p);
	uint32_t l = get_be32(it->p + 2);
	if (l > left - 6)
		return rung_err_set(err, EPROTO, "field %u claims %u bytes, %zu left", t, l, left - 6);
	*tag = t;
	*len = l;
	*val = it->p + 6;
	it->p += 6 + l;
	return 1;
}

int rung_tlv_u64(const uint8_t *val, uint32_t len, uint64_t *out, struct rung_err *err)
{
	if (len != 8)
		return rung_err_set(err, EPROTO, "integer field of %u bytes (want 8)", len);
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = (v << 8) | val[i];
	*out = v;
	return 0;
}

int rung_tlv_str(const uint8_t *val, uint32_t len, char **out, struct rung_err *err)
{
	if (len > RUNG_PROTO_MAX_STR)
		return rung_err_set(err, EPROTO, "string field of %u bytes exceeds %u", len,
				    RUNG_PROTO_MAX_STR);
	if (memchr(val, 0, len))
		return rung_err_set(err, EPROTO, "string field holds a NUL byte");
	char *s = malloc(len + 1);
	if (!s)
		return rung_err_set(err, ENOMEM, "out of memory");
	memcpy(s, val, len);
	s[len] = 0;
	*out = s;
	return 0;
}

static int strv_push(char ***v, size_t *n, char *s, struct rung_err *err)
{
	if (*n >= RUNG_PROTO_MAX_ARGS) {
		free(s);
		return rung_err_set(err, E2BIG, "more than %d argv/env entries", RUNG_PROTO_MAX_ARGS);
	}
	char **nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!nv) {
		free(s);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	nv[(*n)++] = s;
	nv[*n] = NULL;
	*v = nv;
	return 0;
}

int rung_proto_exec_encode(const struct rung_proto_exec *x, struct rung_buf *b)
{
	for (char **a = x->argv; a && *a; a++)
		rung_buf_put_str(b, RUNG_TAG_ARGV, *a);
	for (char **e = x->env; e && *e; e++)
		rung_buf_put_str(b, RUNG_TAG_ENV, *e);
	if (x->cwd)
		rung_buf_put_str(b, RUNG_TAG_CWD, x->cwd);
	rung_buf_put_u64(b, RUNG_TAG_TIMEOUT_MS, x->timeout_ms);
	rung_buf_put_u64(b, RUNG_TAG_MAX_OUTPUT, x->max_output);
	rung_buf_put_u64(b, RUNG_TAG_STDIN, x->has_stdin);
	if (x->callbacks)
		rung_buf_put_u64(b, RUNG_TAG_CALLBACKS, x->callbacks);
	if (x->seccomp)
		rung_buf_put_bytes(b, RUNG_TAG_SECCOMP, x->seccomp, x->seccomp_len);
	if (x->keep)
		rung_buf_put_u64(b, RUNG_TAG_KEEP, 1);
	if (x->last)
		rung_buf_put_u64(b, RUNG_TAG_LAST, 1);
	return b->oom ? -ENOMEM : 0;
}

/* A filter's bytes: whole instructions, at least one, at most the kernel's maximum. (The
 * kernel checks the program itself when the agent loads it.) */
static int seccomp_field(struct rung_proto_exec *x, const uint8_t *v, uint32_t l,
			 struct rung_err *err)
{
	if (x->seccomp)
		return rung_err_set(err, EPROTO, "duplicate seccomp field");
	if (l == 0 || l % 8 || l / 8 > RUNG_PROTO_SECCOMP_MAX)
		return rung_err_set(err, EINVAL, "seccomp: %u bytes is not a filter of 1..%d "
				    "8-byte instructions", l, RUNG_PROTO_SECCOMP_MAX);
	if (!(x->seccomp = malloc(l)))
		return rung_err_set(err, ENOMEM, "out of memory");
	memcpy(x->seccomp, v, l);
	x->seccomp_len = l;
	return 0;
}

void rung_proto_exec_release(struct rung_proto_exec *x)
{
	if (!x)
		return;
	rung_strvfreep(&x->argv);
	rung_strvfreep(&x->env);
	free(x->cwd);
	free(x->seccomp);
	memset(x, 0, sizeof(*x));
}

int rung_proto_exec_decode(const uint8_t *p, uint32_t len, struct rung_proto_exec *x,
			   struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	size_t argc = 0, envc = 0;
	int r;
	memset(x, 0, sizeof(*x));
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		char *s = NULL;
		uint64_t u = 0;
		switch (tag) {
		case RUNG_TAG_ARGV:
		case RUNG_TAG_ENV:
			if ((r = rung_tlv_str(v, l, &s, err)) < 0)
				goto fail;
			if (tag == RUNG_TAG_ENV && (!strchr(s, '=') || s[0] == '=')) {
				free(s);
				r = rung_err_set(err, EINVAL, "env entry is not KEY=VALUE");
				goto fail;
			}
			r = tag == RUNG_TAG_ARGV ? strv_push(&x->argv, &argc, s, err)
						 : strv_push(&x->env, &envc, s, err);
			if (r < 0)
				goto fail;
			break;
		case RUNG_TAG_CWD:
			if (x->cwd) {
				r = rung_err_set(err, EPROTO, "duplicate cwd field");
				goto fail;
			}
			if ((r = rung_tlv_str(v, l, &x->cwd, err)) < 0)
				goto fail;
			break;
		case RUNG_TAG_TIMEOUT_MS:
		case RUNG_TAG_MAX_OUTPUT:
		case RUNG_TAG_STDIN:
		case RUNG_TAG_CALLBACKS:
		case RUNG_TAG_KEEP:
		case RUNG_TAG_LAST:
			if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
				goto fail;
			if (tag == RUNG_TAG_TIMEOUT_MS)
				x->timeout_ms = u;
			else if (tag == RUNG_TAG_MAX_OUTPUT)
				x->max_output = u;
			else if (tag == RUNG_TAG_STDIN)
				x->has_stdin = u != 0;
			else if (tag == RUNG_TAG_KEEP)
				x->keep = u != 0;
			else if (tag == RUNG_TAG_LAST)
				x->last = u != 0;
			else
				x->callbacks = u;
			break;
		case RUNG_TAG_SECCOMP:
			if ((r = seccomp_field(x, v, l, err)) < 0)
				goto fail;
			break;
		default:
			r = rung_err_set(err, EPROTO, "unknown exec field %u", tag);
			goto fail;
		}
	}
	if (r < 0)
		goto fail;
	if (argc == 0) {
		r = rung_err_set(err, EINVAL, "exec request has an empty argv");
		goto fail;
	}
	if (x->argv[0][0] == '\0') {
		r = rung_err_set(err, EINVAL, "exec request has an empty argv[0]");
		goto fail;
	}
	return 0;
fail:
	rung_proto_exec_release(x);
	return r;
}

void rung_proto_exit_encode(const struct rung_proto_exit *x, struct rung_buf *b)
{
	rung_buf_put_u64(b, RUNG_TAG_EXIT_CODE, (uint64_t)x->exit_code);
	rung_buf_put_u64(b, RUNG_TAG_SIGNAL, x->signal);
	rung_buf_put_u64(b, RUNG_TAG_FLAGS, x->flags);
	rung_buf_put_u64(b, RUNG_TAG_DURATION_US, x->duration_us);
}

int rung_proto_exit_decode(const uint8_t *p, uint32_t len, struct rung_proto_exit *x,
			   struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	bool have_code = false;
	memset(x, 0, sizeof(*x));
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		uint64_t u = 0;
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			return rung_err_wrap(err, "exit field %u", tag);
		switch (tag) {
		case RUNG_TAG_EXIT_CODE:
			x->exit_code = (int64_t)u;
			if (x->exit_code < -1 || x->exit_code > 255)
				return rung_err_set(err, EPROTO, "exit code %lld out of range",
						    (long long)x->exit_code);
			have_code = true;
			break;
		case RUNG_TAG_SIGNAL:
			if (u > 64)
				return rung_err_set(err, EPROTO, "signal %llu out of range",
						    (unsigned long long)u);
			x->signal = (uint32_t)u;
			break;
		case RUNG_TAG_FLAGS:
			if (u & ~0xfull)
				return rung_err_set(err, EPROTO, "unknown exit flags 0x%llx",
						    (unsigned long long)u);
			x->flags = (uint32_t)u;
			break;
		case RUNG_TAG_DURATION_US:
			x->duration_us = u;
			break;
		default:
			return rung_err_set(err, EPROTO, "unknown exit field %u", tag);
		}
	}
	if (r < 0)
		return r;
	if (!have_code)
		return rung_err_set(err, EPROTO, "exit frame without an exit code");
	return 0;
}

void rung_proto_file_release(struct rung_proto_file *x)
{
	if (x) {
		free(x->path);
		x->path = NULL;
	}
}

int rung_proto_file_decode(const uint8_t *p, uint32_t len, struct rung_proto_file *x,
			   struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	memset(x, 0, sizeof(*x));
	x->mode = 0644;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		uint64_t u = 0;
		if (tag == RUNG_TAG_PATH) {
			if (x->path) {
				r = rung_err_set(err, EPROTO, "duplicate path field");
				break;
			}
			if ((r = rung_tlv_str(v, l, &x->path, err)) < 0)
				break;
			continue;
		}
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			break;
		if (tag == RUNG_TAG_MODE) {
			if (u & ~07777ull) {
				r = rung_err_set(err, EINVAL, "file mode %llo out of range",
						 (unsigned long long)u);
				break;
			}
			x->mode = (uint32_t)u;
		} else if (tag == RUNG_TAG_SIZE) {
			x->size = u;
		} else {
			r = rung_err_set(err, EPROTO, "unknown file field %u", tag);
			break;
		}
	}
	if (r == 0 && (!x->path || !x->path[0]))
		r = rung_err_set(err, EINVAL, "file request without a path");
	if (r < 0) {
		rung_proto_file_release(x);
		return r;
	}
	return 0;
}

int rung_proto_error_send(int fd, const struct rung_err *e)
{
	return rung_proto_error_send_version(fd, RUNG_PROTO_VERSION, e);
}

int rung_proto_error_send_version(int fd, uint8_t version, const struct rung_err *e)
{
	struct rung_buf b = {0};
	rung_buf_put_u64(&b, RUNG_TAG_ERRNO, (uint64_t)(e->code > 0 ? e->code : EIO));
	rung_buf_put_str(&b, RUNG_TAG_MESSAGE, e->msg);
	int r;
	if (b.oom) {
		r = -ENOMEM;
	} else {
		/* ERROR has the same type and fields in every version so far (v1, v2) */
		uint8_t frame[RUNG_FRAME_HDR];
		rung_frame_hdr_encode(frame, RUNG_MSG_ERROR, (uint32_t)b.len);
		frame[2] = version;
		struct iovec iov[2] = {{frame, sizeof(frame)}, {b.data, b.len}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n < 0 && errno == ENOTSOCK)
			n = writev(fd, iov, 2);
		r = n == (ssize_t)(sizeof(frame) + b.len) ? 0 : -EIO;
	}
	rung_buf_release(&b);
	return r;
}

int rung_proto_error_decode(const uint8_t *p, uint32_t len, struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	uint64_t code = EIO;
	char msg[200] = "unknown error";
	struct rung_err tmp = {0};
	rung_tlv_init(&it, p, len);
	while (rung_tlv_next(&it, &tag, &v, &l, &tmp) > 0) {
		if (tag == RUNG_TAG_ERRNO && l == 8)
			rung_tlv_u64(v, l, &code, &tmp);
		else if (tag == RUNG_TAG_MESSAGE) {
			size_t n = l < sizeof(msg) - 1 ? l : sizeof(msg) - 1;
			memcpy(msg, v, n);
			msg[n] = 0;
			for (size_t i = 0; i < n; i++) /* hostile text: printable only */
				if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
					msg[i] = '?';
		}
	}
	if (code == 0 || code > 4095)
		code = EIO;
	return rung_err_set(err, (int)code, "%s", msg);
}
