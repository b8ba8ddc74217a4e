/*
 * common/proto-fs.c: the v2 frames of file operations (FS_* requests, FS_ENTRY answers;
 * docs/files.md). Decoded as hostile input: each type takes only its own fields, paths are
 * bounded and NUL-free, integers are range-checked.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/proto.h"

#define FS_PATH_MAX 4095

static bool fs_type_valid(uint8_t t) { return t >= RUNG_MSG_FS_LIST && t <= RUNG_MSG_FS_MOVE; }

int rung_proto_fs_encode(const struct rung_proto_fs *x, struct rung_buf *b)
{
	if (x->path)
		rung_buf_put_str(b, RUNG_TAG_PATH, x->path);
	if (x->type == RUNG_MSG_FS_MOVE && x->target)
		rung_buf_put_str(b, RUNG_TAG_TARGET, x->target);
	if (x->type == RUNG_MSG_FS_MKDIR)
		rung_buf_put_u64(b, RUNG_TAG_MODE, x->mode);
	if (x->flags)
		rung_buf_put_u64(b, RUNG_TAG_FLAGS, x->flags);
	return b->oom ? -ENOMEM : 0;
}

void rung_proto_fs_release(struct rung_proto_fs *x)
{
	if (!x)
		return;
	free(x->path);
	free(x->target);
	memset(x, 0, sizeof(*x));
}

static int path_field(const uint8_t *v, uint32_t l, char **out, const char *what,
		      struct rung_err *err)
{
	if (*out)
		return rung_err_set(err, EPROTO, "%s given twice", what);
	if (l == 0 || l > FS_PATH_MAX)
		return rung_err_set(err, EINVAL, "%s: empty or longer than %d bytes", what,
				    FS_PATH_MAX);
	return rung_tlv_str(v, l, out, err);
}

static int fs_field(struct rung_proto_fs *x, uint16_t tag, const uint8_t *v, uint32_t l,
		    struct rung_err *err)
{
	uint64_t u;
	int r;
	switch (tag) {
	case RUNG_TAG_PATH:
		return path_field(v, l, &x->path, "path", err);
	case RUNG_TAG_TARGET:
		if (x->type != RUNG_MSG_FS_MOVE)
			break;
		return path_field(v, l, &x->target, "target", err);
	case RUNG_TAG_MODE:
		if (x->type != RUNG_MSG_FS_MKDIR)
			break;
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			return r;
		if (u & ~07777ull)
			return rung_err_set(err, EINVAL, "mode %llo out of range",
					    (unsigned long long)u);
		x->mode = (uint32_t)u;
		return 0;
	case RUNG_TAG_FLAGS:
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			return r;
		if (u & ~(uint64_t)RUNG_FS_RECURSIVE)
			return rung_err_set(err, EINVAL, "unknown flags %#llx",
					    (unsigned long long)u);
		x->flags = (uint32_t)u;
		return 0;
	default:
		break;
	}
	return rung_err_set(err, EPROTO, "field %u not allowed in request %u", tag, x->type);
}

int rung_proto_fs_decode(uint8_t type, const uint8_t *p, uint32_t len, struct rung_proto_fs *x,
			 struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	if (!fs_type_valid(type))
		return rung_err_set(err, EPROTO, "not a file-operation request: %u", type);
	x->type = type;
	x->mode = 0755;
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if ((r = fs_field(x, tag, v, l, err)) < 0)
			break;
	if (r == 0 && !x->path)
		r = rung_err_set(err, EINVAL, "path: required");
	if (r == 0 && type == RUNG_MSG_FS_MOVE && !x->target)
		r = rung_err_set(err, EINVAL, "target: required to move");
	if (r < 0)
		rung_proto_fs_release(x);
	return r < 0 ? r : 0;
}

void rung_proto_fs_entry_encode(const struct rung_proto_fs_entry *x, struct rung_buf *b)
{
	rung_buf_put_str(b, RUNG_TAG_NAME, x->name ? x->name : "");
	if (x->target)
		rung_buf_put_str(b, RUNG_TAG_TARGET, x->target);
	rung_buf_put_u64(b, RUNG_TAG_FS_KIND, x->kind);
	rung_buf_put_u64(b, RUNG_TAG_MODE, x->mode);
	rung_buf_put_u64(b, RUNG_TAG_UID, x->uid);
	rung_buf_put_u64(b, RUNG_TAG_GID, x->gid);
	rung_buf_put_u64(b, RUNG_TAG_SIZE, x->size);
	rung_buf_put_u64(b, RUNG_TAG_MTIME_NS, x->mtime_ns);
}

void rung_proto_fs_entry_release(struct rung_proto_fs_entry *x)
{
	if (!x)
		return;
	free(x->name);
	free(x->target);
	memset(x, 0, sizeof(*x));
}

static int entry_u32(const uint8_t *v, uint32_t l, uint64_t max, uint32_t *out,
		     struct rung_err *err)
{
	uint64_t u;
	int r = rung_tlv_u64(v, l, &u, err);
	if (r < 0)
		return r;
	if (u > max)
		return rung_err_set(err, EPROTO, "entry field out of range");
	*out = (uint32_t)u;
	return 0;
}

static int entry_field(struct rung_proto_fs_entry *x, uint16_t tag, const uint8_t *v, uint32_t l,
		       struct rung_err *err)
{
	switch (tag) {
	case RUNG_TAG_NAME:
		if (x->name)
			return rung_err_set(err, EPROTO, "entry name given twice");
		if (l > FS_PATH_MAX)
			return rung_err_set(err, EPROTO, "entry name too long");
		return rung_tlv_str(v, l, &x->name, err);
	case RUNG_TAG_TARGET:
		if (x->target)
			return rung_err_set(err, EPROTO, "entry target given twice");
		if (l > FS_PATH_MAX)
			return rung_err_set(err, EPROTO, "entry target too long");
		return rung_tlv_str(v, l, &x->target, err);
	case RUNG_TAG_FS_KIND:
		return entry_u32(v, l, RUNG_FS_BLOCK, &x->kind, err);
	case RUNG_TAG_MODE:
		return entry_u32(v, l, 07777, &x->mode, err);
	case RUNG_TAG_UID:
		return entry_u32(v, l, UINT32_MAX, &x->uid, err);
	case RUNG_TAG_GID:
		return entry_u32(v, l, UINT32_MAX, &x->gid, err);
	case RUNG_TAG_SIZE:
		return rung_tlv_u64(v, l, &x->size, err);
	case RUNG_TAG_MTIME_NS:
		return rung_tlv_u64(v, l, &x->mtime_ns, err);
	default:
		return rung_err_set(err, EPROTO, "field %u not allowed in an entry", tag);
	}
}

int rung_proto_fs_entry_decode(const uint8_t *p, uint32_t len, struct rung_proto_fs_entry *x,
			       struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if ((r = entry_field(x, tag, v, l, err)) < 0)
			break;
	if (r == 0 && !x->name)
		r = rung_err_set(err, EPROTO, "entry without a name");
	if (r == 0 && x->target && x->kind != RUNG_FS_SYMLINK)
		r = rung_err_set(err, EPROTO, "a link target on an entry that is no symlink");
	if (r < 0)
		rung_proto_fs_entry_release(x);
	return r < 0 ? r : 0;
}
