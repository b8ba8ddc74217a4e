/*
 * common/proto-proc.c: the v2 frames of background processes, terminals and shell sessions
 * (PROC_* and SESSION_RUN requests, PROC_INFO answers). Decoded as hostile input: every type
 * takes only its own fields, integers are range-checked, handles are 16 lowercase hex.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/proto.h"

bool rung_proto_handle_valid(const char *h)
{
	size_t n = 0;
	for (; h && h[n]; n++)
		if (!((h[n] >= '0' && h[n] <= '9') || (h[n] >= 'a' && h[n] <= 'f')))
			return false;
	return n == RUNG_PROTO_HANDLE_LEN;
}

int rung_proto_proc_encode(const struct rung_proto_proc *p, struct rung_buf *b)
{
	if (p->type == RUNG_MSG_PROC_START) {
		struct rung_proto_exec x = p->x;
		for (char **a = x.argv; a && *a; a++)
			rung_buf_put_str(b, RUNG_TAG_ARGV, *a);
		for (char **e = x.env; e && *e; e++)
			rung_buf_put_str(b, RUNG_TAG_ENV, *e);
		if (x.cwd)
			rung_buf_put_str(b, RUNG_TAG_CWD, x.cwd);
		if (x.seccomp)
			rung_buf_put_bytes(b, RUNG_TAG_SECCOMP, x.seccomp, x.seccomp_len);
		if (p->name)
			rung_buf_put_str(b, RUNG_TAG_NAME, p->name);
		rung_buf_put_u64(b, RUNG_TAG_PTY, p->pty);
		rung_buf_put_u64(b, RUNG_TAG_SESSION, p->session);
		rung_buf_put_u64(b, RUNG_TAG_BUFFER, p->buffer);
	}
	if (p->handle[0])
		rung_buf_put_str(b, RUNG_TAG_HANDLE, p->handle);
	if (p->type == RUNG_MSG_PROC_START || p->type == RUNG_MSG_PROC_RESIZE) {
		rung_buf_put_u64(b, RUNG_TAG_ROWS, p->rows);
		rung_buf_put_u64(b, RUNG_TAG_COLS, p->cols);
	}
	if (p->type == RUNG_MSG_PROC_LOGS || p->type == RUNG_MSG_PROC_ATTACH) {
		rung_buf_put_u64(b, RUNG_TAG_OFFSET, p->since);
		rung_buf_put_u64(b, RUNG_TAG_FOLLOW, p->follow);
	}
	if (p->type == RUNG_MSG_PROC_STDIN || p->type == RUNG_MSG_SESSION_RUN)
		rung_buf_put_bytes(b, RUNG_TAG_DATA, p->data, p->data_len);
	if (p->type == RUNG_MSG_PROC_STDIN)
		rung_buf_put_u64(b, RUNG_TAG_EOF, p->eof);
	if (p->type == RUNG_MSG_PROC_SIGNAL)
		rung_buf_put_u64(b, RUNG_TAG_SIGNAL, p->sig);
	if (p->type == RUNG_MSG_PROC_WAIT || p->type == RUNG_MSG_SESSION_RUN)
		rung_buf_put_u64(b, RUNG_TAG_TIMEOUT_MS, p->timeout_ms);
	return b->oom ? -ENOMEM : 0;
}

void rung_proto_proc_release(struct rung_proto_proc *x)
{
	if (!x)
		return;
	rung_proto_exec_release(&x->x);
	free(x->name);
	memset(x, 0, sizeof(*x));
}

/* Which fields each request type takes. */
static bool field_allowed(uint8_t type, uint16_t tag)
{
	switch (tag) {
	case RUNG_TAG_ARGV:
	case RUNG_TAG_ENV:
	case RUNG_TAG_CWD:
	case RUNG_TAG_SECCOMP:
	case RUNG_TAG_NAME:
	case RUNG_TAG_PTY:
	case RUNG_TAG_SESSION:
	case RUNG_TAG_BUFFER:
		return type == RUNG_MSG_PROC_START;
	case RUNG_TAG_HANDLE:
		return type != RUNG_MSG_PROC_START;
	case RUNG_TAG_ROWS:
	case RUNG_TAG_COLS:
		return type == RUNG_MSG_PROC_START || type == RUNG_MSG_PROC_RESIZE;
	case RUNG_TAG_OFFSET:
	case RUNG_TAG_FOLLOW:
		return type == RUNG_MSG_PROC_LOGS || type == RUNG_MSG_PROC_ATTACH;
	case RUNG_TAG_DATA:
		return type == RUNG_MSG_PROC_STDIN || type == RUNG_MSG_SESSION_RUN;
	case RUNG_TAG_EOF:
		return type == RUNG_MSG_PROC_STDIN;
	case RUNG_TAG_SIGNAL:
		return type == RUNG_MSG_PROC_SIGNAL;
	case RUNG_TAG_TIMEOUT_MS:
		return type == RUNG_MSG_PROC_WAIT || type == RUNG_MSG_SESSION_RUN;
	}
	return false;
}

static int proc_u64(struct rung_proto_proc *x, uint16_t tag, uint64_t u, struct rung_err *err)
{
	switch (tag) {
	case RUNG_TAG_PTY:
		x->pty = u != 0;
		break;
	case RUNG_TAG_SESSION:
		x->session = u != 0;
		break;
	case RUNG_TAG_FOLLOW:
		x->follow = u != 0;
		break;
	case RUNG_TAG_EOF:
		x->eof = u != 0;
		break;
	case RUNG_TAG_ROWS:
	case RUNG_TAG_COLS:
		if (u > RUNG_PROTO_TTY_MAX || (u == 0 && x->type == RUNG_MSG_PROC_RESIZE))
			return rung_err_set(err, EINVAL, "%s %llu out of range (1..%d)",
					    tag == RUNG_TAG_ROWS ? "rows" : "cols",
					    (unsigned long long)u, RUNG_PROTO_TTY_MAX);
		*(tag == RUNG_TAG_ROWS ? &x->rows : &x->cols) = u;
		break;
	case RUNG_TAG_BUFFER:
		if (u > RUNG_PROTO_BUFFER_MAX)
			return rung_err_set(err, EINVAL, "buffer: %llu bytes exceeds %llu",
					    (unsigned long long)u, RUNG_PROTO_BUFFER_MAX);
		x->buffer = u;
		break;
	case RUNG_TAG_OFFSET:
		x->since = u;
		break;
	case RUNG_TAG_SIGNAL:
		if (u < 1 || u > 64)
			return rung_err_set(err, EINVAL, "signal %llu out of range (1..64)",
					    (unsigned long long)u);
		x->sig = u;
		break;
	case RUNG_TAG_TIMEOUT_MS:
		x->timeout_ms = u;
		break;
	}
	return 0;
}

/* One field of x; exec fields are collected raw into ex for the exec decoder. */
static int proc_field(struct rung_proto_proc *x, uint16_t tag, const uint8_t *v, uint32_t l,
		      struct rung_buf *ex, struct rung_err *err)
{
	if (!field_allowed(x->type, tag))
		return rung_err_set(err, EPROTO, "field %u not allowed in a frame of type %u", tag,
				    x->type);
	if (tag == RUNG_TAG_ARGV || tag == RUNG_TAG_ENV || tag == RUNG_TAG_CWD ||
	    tag == RUNG_TAG_SECCOMP) {
		rung_buf_put_bytes(ex, tag, v, l);
		return 0;
	}
	if (tag == RUNG_TAG_DATA) {
		x->data = v;
		x->data_len = l;
		return 0;
	}
	if (tag == RUNG_TAG_HANDLE || tag == RUNG_TAG_NAME) {
		char *s = NULL;
		int r = rung_tlv_str(v, l, &s, err);
		if (r < 0)
			return r;
		if (tag == RUNG_TAG_NAME) {
			free(x->name);
			x->name = s;
			if (strlen(s) > RUNG_PROTO_NAME_MAX)
				return rung_err_set(err, EINVAL, "name: longer than %d bytes",
						    RUNG_PROTO_NAME_MAX);
			return 0;
		}
		bool ok = rung_proto_handle_valid(s);
		if (ok)
			memcpy(x->handle, s, RUNG_PROTO_HANDLE_LEN + 1);
		free(s);
		return ok ? 0 : rung_err_set(err, ENOENT, "handle: not %d lowercase hex characters",
					     RUNG_PROTO_HANDLE_LEN);
	}
	uint64_t u;
	int r = rung_tlv_u64(v, l, &u, err);
	return r < 0 ? r : proc_u64(x, tag, u, err);
}

static bool has_tag(const struct rung_buf *b, uint16_t want)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	rung_tlv_init(&it, b->data, (uint32_t)b->len);
	while (rung_tlv_next(&it, &tag, &v, &l, NULL) > 0)
		if (tag == want)
			return true;
	return false;
}

int rung_proto_proc_decode(uint8_t type, const uint8_t *p, uint32_t len,
			   struct rung_proto_proc *x, struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	x->type = type;
	if (type < RUNG_MSG_PROC_START || type > RUNG_MSG_SESSION_RUN || type == RUNG_MSG_PROC_INFO)
		return rung_err_set(err, EPROTO, "frame type %u is not a process request", type);
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	struct rung_buf ex = {0};
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if ((r = proc_field(x, tag, v, l, &ex, err)) < 0)
			break;
	if (r == 0 && ex.oom)
		r = rung_err_set(err, ENOMEM, "out of memory");
	if (r == 0 && type == RUNG_MSG_PROC_START && x->session && !has_tag(&ex, RUNG_TAG_ARGV)) {
		/* a session without argv: the default shell */
		struct rung_buf sh = {0};
		rung_buf_put_str(&sh, RUNG_TAG_ARGV, "/bin/sh");
		rung_buf_append(&sh, ex.data, ex.len);
		rung_buf_release(&ex);
		ex = sh;
		x->default_shell = true;
	}
	if (r == 0 && type == RUNG_MSG_PROC_START)
		r = rung_proto_exec_decode(ex.data, (uint32_t)ex.len, &x->x, err);
	else if (r == 0 && !x->handle[0])
		r = rung_err_set(err, EINVAL, "handle: required");
	else if (r == 0 && type == RUNG_MSG_PROC_RESIZE && (!x->rows || !x->cols))
		r = rung_err_set(err, EINVAL, "resize: rows and cols required (1..%d)",
				 RUNG_PROTO_TTY_MAX);
	else if (r == 0 && type == RUNG_MSG_PROC_SIGNAL && !x->sig)
		r = rung_err_set(err, EINVAL, "signal: required (1..64)");
	rung_buf_release(&ex);
	if (r < 0)
		rung_proto_proc_release(x);
	return r < 0 ? r : 0;
}

void rung_proto_proc_info_encode(const struct rung_proto_proc_info *x, struct rung_buf *b)
{
	rung_buf_put_str(b, RUNG_TAG_HANDLE, x->handle);
	if (x->name)
		rung_buf_put_str(b, RUNG_TAG_NAME, x->name);
	for (char **a = x->argv; a && *a; a++)
		rung_buf_put_str(b, RUNG_TAG_ARGV, *a);
	rung_buf_put_u64(b, RUNG_TAG_PTY, x->pty);
	rung_buf_put_u64(b, RUNG_TAG_SESSION, x->session);
	rung_buf_put_u64(b, RUNG_TAG_STATE, x->exited);
	rung_buf_put_u64(b, RUNG_TAG_EXIT_CODE, (uint64_t)x->exit_code);
	rung_buf_put_u64(b, RUNG_TAG_SIGNAL, x->signal);
	rung_buf_put_u64(b, RUNG_TAG_PID, x->pid);
	rung_buf_put_u64(b, RUNG_TAG_STARTED_MS, x->started_ms);
	rung_buf_put_u64(b, RUNG_TAG_END_OFFSET, x->end_offset);
	rung_buf_put_u64(b, RUNG_TAG_DROPPED_OUT, x->dropped_out);
	rung_buf_put_u64(b, RUNG_TAG_DROPPED_ERR, x->dropped_err);
}

void rung_proto_proc_info_release(struct rung_proto_proc_info *x)
{
	if (!x)
		return;
	free(x->name);
	rung_strvfreep(&x->argv);
	memset(x, 0, sizeof(*x));
}

static int info_argv(struct rung_proto_proc_info *x, size_t *argc, char *s, struct rung_err *err)
{
	if (*argc >= RUNG_PROTO_MAX_ARGS) {
		free(s);
		return rung_err_set(err, E2BIG, "more than %d argv entries", RUNG_PROTO_MAX_ARGS);
	}
	char **nv = realloc(x->argv, (*argc + 2) * sizeof(char *));
	if (!nv) {
		free(s);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	nv[(*argc)++] = s;
	nv[*argc] = NULL;
	x->argv = nv;
	return 0;
}

static int info_u64(struct rung_proto_proc_info *x, uint16_t tag, uint64_t u, struct rung_err *err)
{
	switch (tag) {
	case RUNG_TAG_PTY: x->pty = u != 0; break;
	case RUNG_TAG_SESSION: x->session = u != 0; break;
	case RUNG_TAG_STATE: x->exited = u != 0; break;
	case RUNG_TAG_EXIT_CODE:
		x->exit_code = (int64_t)u;
		if (x->exit_code < -1 || x->exit_code > 255)
			return rung_err_set(err, EPROTO, "exit code %lld out of range",
					    (long long)x->exit_code);
		break;
	case RUNG_TAG_SIGNAL:
		if (u > 64)
			return rung_err_set(err, EPROTO, "signal %llu out of range",
					    (unsigned long long)u);
		x->signal = (uint32_t)u;
		break;
	case RUNG_TAG_PID:
		if (u > 0x7fffffff)
			return rung_err_set(err, EPROTO, "pid %llu out of range",
					    (unsigned long long)u);
		x->pid = u;
		break;
	case RUNG_TAG_STARTED_MS: x->started_ms = u; break;
	case RUNG_TAG_END_OFFSET: x->end_offset = u; break;
	case RUNG_TAG_DROPPED_OUT: x->dropped_out = u; break;
	case RUNG_TAG_DROPPED_ERR: x->dropped_err = u; break;
	default:
		return rung_err_set(err, EPROTO, "unknown process info field %u", tag);
	}
	return 0;
}

int rung_proto_proc_info_decode(const uint8_t *p, uint32_t len, struct rung_proto_proc_info *x,
				struct rung_err *err)
{
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	size_t argc = 0;
	int r;
	memset(x, 0, sizeof(*x));
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		char *s = NULL;
		if (tag == RUNG_TAG_HANDLE || tag == RUNG_TAG_NAME || tag == RUNG_TAG_ARGV) {
			if ((r = rung_tlv_str(v, l, &s, err)) < 0)
				break;
			if (tag == RUNG_TAG_ARGV) {
				if ((r = info_argv(x, &argc, s, err)) < 0)
					break;
			} else if (tag == RUNG_TAG_NAME) {
				free(x->name);
				x->name = s;
				if (strlen(s) > RUNG_PROTO_NAME_MAX) {
					r = rung_err_set(err, EPROTO, "process name too long");
					break;
				}
			} else {
				bool ok = rung_proto_handle_valid(s);
				if (ok)
					memcpy(x->handle, s, sizeof(x->handle));
				free(s);
				if (!ok) {
					r = rung_err_set(err, EPROTO, "malformed process handle");
					break;
				}
			}
			continue;
		}
		uint64_t u;
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0 || (r = info_u64(x, tag, u, err)) < 0)
			break;
	}
	if (r == 0 && !x->handle[0])
		r = rung_err_set(err, EPROTO, "process info without a handle");
	if (r < 0) {
		rung_proto_proc_info_release(x);
		return r;
	}
	if (!x->argv && !(x->argv = calloc(1, sizeof(char *)))) {
		rung_proto_proc_info_release(x);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}
