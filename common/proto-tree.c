/*
 * common/proto-tree.c: the frames of a tree copy (TREE_PUT, TREE_GET, TREE_ENTRY; `rung cp`,
 * docs/files.md "Copying trees", docs/protocol.md). Both sides decode each other's entries as
 * hostile with the same rules: a canonical relative name (no "", "." or ".." component, no
 * leading or doubled '/', bounded), a kind of file, dir or symlink only, a size only on a file,
 * a symlink target that is relative and stays inside the tree. Refusals are -EPERM naming the
 * entry.
 */
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"

static const char *kind_name(uint32_t k)
{
	static const char *const names[] = {"other", "file",   "dir",  "symlink",
					    "fifo",  "socket", "char", "block"};
	return k < sizeof(names) / sizeof(names[0]) ? names[k] : "other";
}

int rung_tree_name_check(const char *name, struct rung_err *err)
{
	size_t len = strlen(name);
	if (len > RUNG_TREE_NAME_MAX)
		return rung_err_set(err, ENAMETOOLONG, "entry '%.64s...': name longer than %d bytes",
				    name, RUNG_TREE_NAME_MAX);
	if (name[0] == '/')
		return rung_err_set(err, EPERM, "entry '%s': absolute paths are refused", name);
	int depth = 0;
	for (const char *p = name; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && !strncmp(p, "..", 2))
			return rung_err_set(err, EPERM, "entry '%s': '..' is refused", name);
		if (n == 0 || (n == 1 && p[0] == '.') || (e && !e[1]))
			return rung_err_set(err, EPERM, "entry '%s': not a plain relative name",
					    name);
		if (n > 255)
			return rung_err_set(err, ENAMETOOLONG, "entry '%s': a component is longer "
					    "than 255 bytes", name);
		if (++depth > RUNG_TREE_DEPTH_MAX)
			return rung_err_set(err, ELOOP, "entry '%s': deeper than %d", name,
					    RUNG_TREE_DEPTH_MAX);
		p += n + (e ? 1 : 0);
	}
	return 0;
}

bool rung_tree_link_inside(const char *rel, const char *target)
{
	if (!target[0] || target[0] == '/')
		return false;
	int depth = 0;
	bool named = false;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	for (const char *p = target; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && !strncmp(p, "..", 2)) {
			if (named || --depth < 0)
				return false;
		} else if (n && !(n == 1 && p[0] == '.')) {
			named = true;
		}
		p += n + (e ? 1 : 0);
	}
	return true;
}

void rung_proto_tree_entry_encode(const struct rung_proto_tree_entry *x, struct rung_buf *b)
{
	rung_buf_put_str(b, RUNG_TAG_NAME, x->name ? x->name : "");
	rung_buf_put_u64(b, RUNG_TAG_FS_KIND, x->kind);
	rung_buf_put_u64(b, RUNG_TAG_MODE, x->mode);
	rung_buf_put_u64(b, RUNG_TAG_MTIME_NS, x->mtime_ns);
	if (x->kind == RUNG_FS_FILE)
		rung_buf_put_u64(b, RUNG_TAG_SIZE, x->size);
	if (x->target)
		rung_buf_put_str(b, RUNG_TAG_TARGET, x->target);
}

void rung_proto_tree_entry_release(struct rung_proto_tree_entry *x)
{
	if (!x)
		return;
	free(x->name);
	free(x->target);
	memset(x, 0, sizeof(*x));
}

static int str_once(const uint8_t *v, uint32_t l, char **out, const char *what,
		    struct rung_err *err)
{
	if (*out)
		return rung_err_set(err, EPROTO, "entry: %s given twice", what);
	if (l > RUNG_TREE_NAME_MAX)
		return rung_err_set(err, ENAMETOOLONG, "entry: %s longer than %d bytes", what,
				    RUNG_TREE_NAME_MAX);
	return rung_tlv_str(v, l, out, err);
}

static int entry_field(struct rung_proto_tree_entry *x, uint16_t tag, const uint8_t *v,
		       uint32_t l, unsigned *seen, struct rung_err *err)
{
	uint64_t u;
	int r;
	unsigned bit = tag == RUNG_TAG_FS_KIND ? 1 : tag == RUNG_TAG_MODE ? 2
						 : tag == RUNG_TAG_MTIME_NS ? 4
						 : tag == RUNG_TAG_SIZE ? 8 : 0;
	if (bit && (*seen & bit))
		return rung_err_set(err, EPROTO, "entry: field %u given twice", tag);
	*seen |= bit;
	switch (tag) {
	case RUNG_TAG_NAME:
		return str_once(v, l, &x->name, "name", err);
	case RUNG_TAG_TARGET:
		return str_once(v, l, &x->target, "target", err);
	case RUNG_TAG_FS_KIND:
	case RUNG_TAG_MODE:
		if ((r = rung_tlv_u64(v, l, &u, err)) < 0)
			return r;
		if (u > (tag == RUNG_TAG_MODE ? 07777u : 255u))
			return rung_err_set(err, EPROTO, "entry: field %u out of range", tag);
		*(tag == RUNG_TAG_MODE ? &x->mode : &x->kind) = (uint32_t)u;
		return 0;
	case RUNG_TAG_MTIME_NS:
		return rung_tlv_u64(v, l, &x->mtime_ns, err);
	case RUNG_TAG_SIZE:
		return rung_tlv_u64(v, l, &x->size, err);
	default:
		return rung_err_set(err, EPROTO, "field %u not allowed in a tree entry", tag);
	}
}

/* The rules on a decoded entry (its fields present and each in range). */
static int entry_check(const struct rung_proto_tree_entry *x, unsigned seen,
		       struct rung_err *err)
{
	if (!x->name || !(seen & 1))
		return rung_err_set(err, EPROTO, "tree entry without a name or kind");
	const char *n = x->name;
	int r;
	if (n[0] && (r = rung_tree_name_check(n, err)) < 0)
		return r;
	if (x->kind != RUNG_FS_FILE && x->kind != RUNG_FS_DIR && x->kind != RUNG_FS_SYMLINK)
		return rung_err_set(err, EPERM, "entry '%s': a %s is refused (only files, "
				    "directories and symlinks)", n, kind_name(x->kind));
	if (!n[0] && x->kind != RUNG_FS_DIR)
		return rung_err_set(err, EPERM, "entry '': only the root directory has no name");
	if (x->kind != RUNG_FS_FILE && (seen & 8))
		return rung_err_set(err, EPROTO, "entry '%s': a size on a %s", n,
				    kind_name(x->kind));
	if (x->kind == RUNG_FS_FILE && !(seen & 8))
		return rung_err_set(err, EPROTO, "entry '%s': a file without a size", n);
	if ((x->kind == RUNG_FS_SYMLINK) != (x->target != NULL))
		return rung_err_set(err, EPROTO, "entry '%s': a link target %s", n,
				    x->target ? "on an entry that is no symlink" : "missing");
	if (x->target && !rung_tree_link_inside(n, x->target))
		return rung_err_set(err, EPERM, "entry '%s': symlink to '%s' points out of the "
				    "tree", n, x->target);
	return 0;
}

int rung_proto_tree_entry_decode(const uint8_t *p, uint32_t len,
				 struct rung_proto_tree_entry *x, struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	unsigned seen = 0;
	int r;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0)
		if ((r = entry_field(x, tag, v, l, &seen, err)) < 0)
			break;
	if (r == 0)
		r = entry_check(x, seen, err);
	if (r < 0)
		rung_proto_tree_entry_release(x);
	return r < 0 ? r : 0;
}

int rung_proto_tree_req_encode(uint8_t type, const struct rung_proto_tree_req *x,
			       struct rung_buf *b)
{
	rung_buf_put_str(b, RUNG_TAG_PATH, x->path ? x->path : "");
	if (type == RUNG_MSG_TREE_GET && x->max_bytes)
		rung_buf_put_u64(b, RUNG_TAG_MAX_BYTES, x->max_bytes);
	return b->oom ? -ENOMEM : 0;
}

int rung_proto_tree_req_decode(uint8_t type, const uint8_t *p, uint32_t len,
			       struct rung_proto_tree_req *x, struct rung_err *err)
{
	memset(x, 0, sizeof(*x));
	if (type != RUNG_MSG_TREE_PUT && type != RUNG_MSG_TREE_GET)
		return rung_err_set(err, EPROTO, "not a tree request: %u", type);
	struct rung_tlv_iter it;
	uint16_t tag;
	const uint8_t *v;
	uint32_t l;
	int r;
	bool max_seen = false;
	rung_tlv_init(&it, p, len);
	while ((r = rung_tlv_next(&it, &tag, &v, &l, err)) > 0) {
		if (tag == RUNG_TAG_PATH) {
			if (x->path)
				r = rung_err_set(err, EPROTO, "path given twice");
			else if (l == 0 || l > RUNG_TREE_NAME_MAX)
				r = rung_err_set(err, EINVAL, "path: empty or longer than %d bytes",
						 RUNG_TREE_NAME_MAX);
			else
				r = rung_tlv_str(v, l, &x->path, err);
		} else if (tag == RUNG_TAG_MAX_BYTES && type == RUNG_MSG_TREE_GET && !max_seen) {
			max_seen = true;
			r = rung_tlv_u64(v, l, &x->max_bytes, err);
		} else {
			r = rung_err_set(err, EPROTO, "field %u not allowed in request %u", tag,
					 type);
		}
		if (r < 0)
			break;
	}
	if (r == 0 && !x->path)
		r = rung_err_set(err, EINVAL, "path: required");
	if (r < 0) {
		free(x->path);
		x->path = NULL;
	}
	return r < 0 ? r : 0;
}

void rung_proto_tree_req_release(struct rung_proto_tree_req *x)
{
	if (x) {
		free(x->path);
		x->path = NULL;
	}
}
