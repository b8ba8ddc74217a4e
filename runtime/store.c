/* runtime/store.c: the on-disk store: one directory per sandbox, flock locks, atomic metadata. */
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "runtime/rt-internal.h"

int rt_store_open(const char *root, struct rt_store *st, struct rung_err *err)
{
	memset(st, 0, sizeof(*st));
	st->root_fd = -1;
	if (!root || root[0] != '/')
		return rung_err_set(err, EINVAL, "state dir '%s' must be an absolute path",
				    root ? root : "");
	int r = rung_mkdir_p(root, 0711, err);
	if (r < 0)
		return rung_err_wrap(err, "state dir");
	/* Sandboxes run as unprivileged host uids that must traverse (not list) the store. */
	struct stat sb;
	if (stat(root, &sb) == 0 && (sb.st_mode & 0011) != 0011 && sb.st_uid == geteuid() &&
	    chmod(root, (sb.st_mode & 07777) | 0011) < 0)
		return rung_err_sys(err, errno, "make state dir %s traversable", root);
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", root);
	if (mkdir(p, 0711) < 0 && errno != EEXIST)
		return rung_err_sys(err, errno, "mkdir %s", p);
	st->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (st->root_fd < 0)
		return rung_err_sys(err, errno, "open state dir %s", root);
	st->root = strdup(root);
	if (!st->root) {
		rt_store_close(st);
		return rung_err_set(err, ENOMEM, "out of memory");
	}
	return 0;
}

void rt_store_close(struct rt_store *st)
{
	if (!st)
		return;
	if (st->root_fd >= 0)
		close(st->root_fd);
	st->root_fd = -1;
	free(st->root);
	st->root = NULL;
}

int rt_store_path(const struct rt_store *st, const char *id, const char *name, char *buf,
		  size_t len)
{
	int n = name ? snprintf(buf, len, "%s/sandboxes/%s/%s", st->root, id, name)
		     : snprintf(buf, len, "%s/sandboxes/%s", st->root, id);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int lock_file(const char *path, bool create, bool nonblock, struct rung_err *err)
{
	/* Without create, a missing lock file means the sandbox is gone (or going): never
	 * re-create it inside a directory that a disposer is removing. */
	int fd = open(path, O_RDWR | (create ? O_CREAT : 0) | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT && !create)
		return rung_err_set(err, ENOENT, "no such sandbox (%s is gone)", path);
	if (fd < 0)
		return rung_err_sys(err, errno, "open lock %s", path);
	while (flock(fd, LOCK_EX | (nonblock ? LOCK_NB : 0)) < 0) {
		if (errno == EINTR)
			continue;
		int e = errno;
		close(fd);
		return rung_err_sys(err, e, "lock %s", path);
	}
	return fd;
}

int rt_store_lock_global(const struct rt_store *st, struct rung_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/lock", st->root);
	return lock_file(p, true, false, err);
}

int rt_store_lock_sandbox(const struct rt_store *st, const char *id, bool create, bool nonblock,
			  struct rung_err *err)
{
	char dir[4096], p[4096];
	rt_store_path(st, id, NULL, dir, sizeof(dir));
	if (create) {
		if (mkdir(dir, 0711) < 0 && errno != EEXIST)
			return rung_err_sys(err, errno, "mkdir %s", dir);
	} else if (access(dir, F_OK) < 0) {
		return rung_err_set(err, ENOENT, "no sandbox %s", id);
	}
	rt_store_path(st, id, "lock", p, sizeof(p));
	int fd = lock_file(p, create, nonblock, err);
	if (fd < 0)
		return fd;
	/* A disposer may have removed the directory while we waited: re-check. */
	struct stat a, b;
	if (fstat(fd, &a) < 0 || stat(p, &b) < 0 || a.st_ino != b.st_ino) {
		close(fd);
		if (!create)
			return rung_err_set(err, ENOENT, "no sandbox %s", id);
		return rt_store_lock_sandbox(st, id, create, nonblock, err);
	}
	return fd;
}

int rt_store_meta_read(const struct rt_store *st, const char *id, struct rt_meta *m,
		       struct rung_err *err)
{
	char p[4096];
	cleanup_free char *txt = NULL;
	size_t len;
	if (!rt_id_valid(id))
		return rung_err_set(err, ENOENT, "no sandbox '%.80s'", id);
	rt_store_path(st, id, "meta.json", p, sizeof(p));
	int r = rung_file_load(AT_FDCWD, p, 1 << 20, &txt, &len, err);
	if (r == -ENOENT)
		return rung_err_set(err, ENOENT, "no sandbox %s", id);
	if (r < 0)
		return r;
	return rt_meta_from_json(txt, len, m, err);
}

int rt_store_meta_write(const struct rt_store *st, const struct rt_meta *m, struct rung_err *err)
{
	cleanup_free char *txt = NULL;
	char p[4096];
	int r = rt_meta_to_json(m, &txt, err);
	if (r < 0)
		return r;
	rt_store_path(st, m->id, "meta.json", p, sizeof(p));
	return rung_write_file_atomic(AT_FDCWD, p, txt, strlen(txt), 0600, err);
}

int rt_store_ids(const struct rt_store *st, char ***ids, struct rung_err *err)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/sandboxes", st->root);
	cleanup_dir DIR *d = opendir(p);
	if (!d)
		return rung_err_sys(err, errno, "open %s", p);
	size_t n = 0;
	char **v = calloc(1, sizeof(char *));
	struct dirent *de;
	while (v && (de = readdir(d))) {
		if (!rt_id_valid(de->d_name))
			continue;
		char **nv = realloc(v, (n + 2) * sizeof(char *));
		if (!nv)
			break;
		v = nv;
		v[n] = strdup(de->d_name);
		if (!v[n])
			break;
		v[++n] = NULL;
	}
	if (!v)
		return rung_err_set(err, ENOMEM, "out of memory");
	*ids = v;
	return (int)n;
}

int rt_store_alloc_uid(const struct rt_store *st, const char *id, uint32_t *base,
		       struct rung_err *err)
{
	cleanup_strv char **ids = NULL;
	int n = rt_store_ids(st, &ids, err);
	if (n < 0)
		return n;
	cleanup_free unsigned char *used = calloc(RT_UID_SLOTS, 1);
	if (!used)
		return rung_err_set(err, ENOMEM, "out of memory");
	for (int i = 0; i < n; i++) {
		if (!strcmp(ids[i], id))
			continue;
		char p[4096];
		rt_store_path(st, ids[i], "uid", p, sizeof(p));
		cleanup_free char *txt = NULL;
		uint64_t v;
		if (rung_file_load(AT_FDCWD, p, 64, &txt, NULL, NULL) == 0 &&
		    rung_parse_u64(txt, &v) == 0 && v >= RT_UID_BASE0 &&
		    (v - RT_UID_BASE0) / RT_UID_RANGE < RT_UID_SLOTS)
			used[(v - RT_UID_BASE0) / RT_UID_RANGE] = 1;
	}
	for (uint32_t s = 0; s < RT_UID_SLOTS; s++) {
		if (used[s])
			continue;
		*base = RT_UID_BASE0 + s * RT_UID_RANGE;
		char p[4096], txt[32];
		rt_store_path(st, id, "uid", p, sizeof(p));
		int len = snprintf(txt, sizeof(txt), "%u", *base);
		return rung_write_file_replace(AT_FDCWD, p, txt, (size_t)len, 0600, err);
	}
	return rung_err_set(err, ENOSPC, "all %d sandbox uid ranges are in use", RT_UID_SLOTS);
}

void rt_store_touch_activity(const struct rt_store *st, const char *id)
{
	char p[4096];
	rt_store_path(st, id, "activity", p, sizeof(p));
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		futimens(fd, NULL);
		close(fd);
	}
}

uint64_t rt_store_activity_ms(const struct rt_store *st, const char *id)
{
	char p[4096];
	struct stat s;
	rt_store_path(st, id, "activity", p, sizeof(p));
	if (stat(p, &s) < 0)
		return 0;
	return (uint64_t)s.st_mtim.tv_sec * 1000 + (uint64_t)s.st_mtim.tv_nsec / 1000000;
}
