/*
 * runtime/fs.c: the host side of file operations (rung_fs_* of rung.h; docs/files.md). Each
 * call resolves its path against the work dir, checks the grant (writes need write_file),
 * resumes a suspended sandbox (rt_sandbox_agent_for) and speaks one FS_* request. What the
 * agent answers is validated: entries are bounded in number and decoded as hostile.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime/agent-io.h"
#include "runtime/rt-internal.h"

#define FS_TIMEOUT_MS 120000u

_Static_assert((int)RUNG_FSK_BLOCK == (int)RUNG_FS_BLOCK &&
		   (int)RUNG_FSK_SYMLINK == (int)RUNG_FS_SYMLINK,
	       "fs kinds");

const char *rung_fs_kind_name(unsigned kind)
{
	static const char *const names[] = {"other", "file",   "dir",  "symlink",
					    "fifo",  "socket", "char", "block"};
	return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "other";
}

const char *rung_errno_code(int e)
{
	switch (e < 0 ? -e : e) {
	case ENOENT:
		return "not_found";
	case ENOTDIR:
		return "not_a_directory";
	case EISDIR:
		return "is_a_directory";
	case EACCES:
	case EPERM:
	case EROFS:
		return "permission_denied";
	case EEXIST:
		return "exists";
	case ENOTEMPTY:
		return "not_empty";
	case ELOOP:
		return "symlink_loop";
	case EXDEV:
		return "cross_device";
	case EBUSY:
		return "busy";
	case ENOSPC:
	case EDQUOT:
		return "no_space";
	case EFBIG:
		return "too_large";
	case EINVAL:
	case ENAMETOOLONG:
		return "invalid";
	default:
		return "error";
	}
}

int rung_errno_from_code(const char *code)
{
	static const int errs[] = {ENOENT, ENOTDIR, EISDIR, EACCES, EEXIST, ENOTEMPTY, ELOOP,
				   EXDEV,  EBUSY,   ENOSPC, EFBIG,  EINVAL};
	for (size_t i = 0; code && i < sizeof(errs) / sizeof(errs[0]); i++)
		if (!strcmp(code, rung_errno_code(errs[i])))
			return errs[i];
	return 0;
}

void rung_fs_entry_release(struct rung_fs_entry *e)
{
	if (!e)
		return;
	free(e->name);
	free(e->target);
	memset(e, 0, sizeof(*e));
}

void rung_fs_entries_free(struct rung_fs_entry *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		rung_fs_entry_release(&v[i]);
	free(v);
}

struct answer {
	struct rung_fs_entry *v;
	size_t n, cap, max;
};

static int take_entry(struct answer *a, const struct rung_frame *f, struct rung_err *err)
{
	if (a->n >= a->max)
		return rung_err_set(err, EPROTO, "the agent sent more than %zu entries", a->max);
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 32;
		struct rung_fs_entry *nv = realloc(a->v, nc * sizeof(*nv));
		if (!nv)
			return rung_err_set(err, ENOMEM, "out of memory");
		a->v = nv;
		a->cap = nc;
	}
	struct rung_proto_fs_entry e;
	int r = rung_proto_fs_entry_decode(f->payload, f->len, &e, err);
	if (r < 0)
		return r;
	if (a->max > 1 &&
	    (!e.name[0] || strchr(e.name, '/') || !strcmp(e.name, ".") || !strcmp(e.name, ".."))) {
		rung_proto_fs_entry_release(&e);
		return rung_err_set(err, EPROTO, "the agent sent a malformed entry name");
	}
	a->v[a->n++] = (struct rung_fs_entry){.name = e.name,
					      .target = e.target,
					      .kind = e.kind,
					      .mode = e.mode,
					      .uid = e.uid,
					      .gid = e.gid,
					      .size = e.size,
					      .mtime_ns = e.mtime_ns};
	return 0;
}

/* One FS_* request; entries (FS_ENTRY frames, at most max) into *a when a is non-NULL. */
static int fs_call(struct rung_sandbox *s, struct rung_proto_fs *q, struct answer *a,
		   struct rung_err *err)
{
	char p[4096], t[4096];
	int r = rt_sandbox_path(s, q->path, p, sizeof(p), err);
	if (r < 0)
		return r;
	if (q->target && (r = rt_sandbox_path(s, q->target, t, sizeof(t), err)) < 0)
		return rung_err_wrap(err, "destination");
	q->path = p;
	if (q->target)
		q->target = t;
	bool write = q->type != RUNG_MSG_FS_LIST && q->type != RUNG_MSG_FS_STAT;
	cleanup_close int busy = -1;
	cleanup_close int fd =
	    rt_sandbox_agent_for(s, write ? RT_OP_WRITE_FILE : RT_OP__COUNT, &busy, err);
	if (fd < 0)
		return fd;
	struct rung_buf b = {0};
	struct rt_agent_io io;
	if (rung_proto_fs_encode(q, &b) < 0) {
		rung_buf_release(&b);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	r = rt_agent_io_init(&io, fd, FS_TIMEOUT_MS, rt_sandbox_cancel_fd(s), err);
	if (r < 0) {
		rung_buf_release(&b);
		return r;
	}
	r = rt_agent_io_queue(&io, q->type, &b, err);
	rung_buf_release(&b);
	while (r == 0) {
		struct rung_frame f;
		if ((r = rt_agent_io_next(&io, &f, err)) < 0)
			break;
		if (f.type == RUNG_MSG_FS_ENTRY && a)
			r = take_entry(a, &f, err);
		else if (f.type == RUNG_MSG_ERROR)
			r = rung_proto_error_decode(f.payload, f.len, err) < 0
				? -(err->code ? err->code : EIO)
				: rung_err_set(err, EIO, "the agent failed");
		else if (f.type == RUNG_MSG_RESULT)
			r = 1;
		else
			r = rung_err_set(err, EPROTO, "unexpected frame type %u from the agent",
					 f.type);
		rung_frame_release(&f);
	}
	rt_agent_io_release(&io);
	rt_store_touch_activity(&rt_sandbox_inner(s)->router->store, rt_sandbox_inner(s)->meta.id,
				false);
	return r < 0 ? r : 0;
}

int rung_fs_list(struct rung_sandbox *s, const char *path, struct rung_fs_entry **out, size_t *n,
		 struct rung_err *err)
{
	*out = NULL;
	*n = 0;
	struct rung_proto_fs q = {.type = RUNG_MSG_FS_LIST, .path = (char *)path};
	struct answer a = {.max = RUNG_FS_LIST_MAX};
	int r = fs_call(s, &q, &a, err);
	if (r < 0) {
		rung_fs_entries_free(a.v, a.n);
		return r;
	}
	*out = a.v ? a.v : calloc(1, sizeof(**out));
	*n = a.n;
	return 0;
}

int rung_fs_stat(struct rung_sandbox *s, const char *path, struct rung_fs_entry *out,
		 struct rung_err *err)
{
	memset(out, 0, sizeof(*out));
	struct rung_proto_fs q = {.type = RUNG_MSG_FS_STAT, .path = (char *)path};
	struct answer a = {.max = 1};
	int r = fs_call(s, &q, &a, err);
	if (r == 0 && a.n != 1)
		r = rung_err_set(err, EPROTO, "the agent answered stat without an entry");
	if (r == 0)
		*out = a.v[0];
	else
		rung_fs_entries_free(a.v, a.n), a.n = 0;
	free(r == 0 ? a.v : NULL);
	return r;
}

int rung_fs_remove(struct rung_sandbox *s, const char *path, bool recursive, struct rung_err *err)
{
	struct rung_proto_fs q = {.type = RUNG_MSG_FS_REMOVE,
				  .path = (char *)path,
				  .flags = recursive ? RUNG_FS_RECURSIVE : 0};
	return fs_call(s, &q, NULL, err);
}

int rung_fs_mkdir(struct rung_sandbox *s, const char *path, unsigned mode, bool parents,
		  struct rung_err *err)
{
	if (mode & ~07777u)
		return rung_err_set(err, EINVAL, "mode: %o out of range", mode);
	struct rung_proto_fs q = {.type = RUNG_MSG_FS_MKDIR,
				  .path = (char *)path,
				  .mode = mode ? mode : 0755,
				  .flags = parents ? RUNG_FS_RECURSIVE : 0};
	return fs_call(s, &q, NULL, err);
}

int rung_fs_move(struct rung_sandbox *s, const char *src, const char *dst, struct rung_err *err)
{
	if (!dst || !*dst)
		return rung_err_set(err, EINVAL, "destination: required");
	struct rung_proto_fs q = {
	    .type = RUNG_MSG_FS_MOVE, .path = (char *)src, .target = (char *)dst};
	return fs_call(s, &q, NULL, err);
}
